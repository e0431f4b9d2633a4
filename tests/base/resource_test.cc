// ResourceMgr: lookups by name, one at a time and in batches.
#include "base/resource.h"

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace ckflow {
namespace {

struct Counter : ResourceBase {
  explicit Counter(int v) : value(v) {}
  int value;
};
struct Other : ResourceBase {};

TEST(ResourceMgrTest, LookupOrCreateAllFindsExistingAndCreatesTheRestOnce) {
  ResourceMgr resources;
  ASSERT_TRUE(
      resources.LookupOrCreate<Counter>("b", [] { return std::make_shared<Counter>(7); }).ok());
  int created = 0;
  auto make = [&](size_t i) {
    ++created;
    return std::make_shared<Counter>(static_cast<int>(i));
  };
  StatusOr<std::vector<std::shared_ptr<Counter>>> all =
      resources.LookupOrCreateAll<Counter>({"a", "b", "c", "a"}, make);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0]->value, 0);
  EXPECT_EQ((*all)[1]->value, 7);  // existed
  EXPECT_EQ((*all)[2]->value, 2);
  EXPECT_EQ((*all)[3], (*all)[0]);  // the same name twice is one resource
  EXPECT_EQ(created, 2);
  EXPECT_EQ(resources.Lookup<Counter>("c").value(), (*all)[2]);
}

TEST(ResourceMgrTest, LookupOrCreateAllRefusesAResourceOfAnotherType) {
  ResourceMgr resources;
  ASSERT_TRUE(resources.LookupOrCreate<Other>("x", [] { return std::make_shared<Other>(); }).ok());
  StatusOr<std::vector<std::shared_ptr<Counter>>> all = resources.LookupOrCreateAll<Counter>(
      {"a", "x"}, [](size_t) { return std::make_shared<Counter>(0); });
  EXPECT_THAT(all.status(), testing::StatusIs(StatusCode::kInvalidArgument, "'x'"));
}

TEST(ResourceMgrTest, ReserveMakesRoomForThatManyMoreWithoutGrowingAgain) {
  ResourceMgr resources;
  auto make = [](size_t i) { return std::make_shared<Counter>(static_cast<int>(i)); };
  std::vector<std::string> first = {"a", "b", "c"};
  ASSERT_TRUE(resources.LookupOrCreateAll<Counter>(first, make).ok());
  resources.Reserve(5000);
  const size_t reserved = resources.capacity();
  EXPECT_GE(reserved, 5003u);
  EXPECT_EQ(resources.size(), 3u);
  EXPECT_EQ(resources.Lookup<Counter>("b").value()->value, 1);  // kept through the rehash

  std::vector<std::string> names;
  for (int i = 0; i < 5000; ++i) names.push_back("v" + std::to_string(i));
  ASSERT_TRUE(resources.LookupOrCreateAll<Counter>(names, make).ok());
  EXPECT_EQ(resources.size(), 5003u);
  EXPECT_EQ(resources.capacity(), reserved);  // created without growing the table

  // An absurd count is a hint the table does not follow into exhaustion.
  resources.Reserve(std::numeric_limits<size_t>::max());
  EXPECT_GE(resources.capacity(), size_t{1} << 20);
  EXPECT_EQ(resources.Lookup<Counter>("v4999").value()->value, 4999);
}

TEST(ResourceMgrTest, ManyResourcesStayFindableAsTheTableGrows) {
  ResourceMgr resources;
  constexpr int kCount = 20000;  // many doublings, long probe runs
  for (int i = 0; i < kCount; ++i) {
    // Names that share long prefixes and differ only at the end, as
    // variables' shared names do.
    const std::string name = "model/layer/" + std::to_string(i);
    ASSERT_TRUE(
        resources.LookupOrCreate<Counter>(name, [i] { return std::make_shared<Counter>(i); }).ok());
  }
  EXPECT_EQ(resources.size(), static_cast<size_t>(kCount));
  EXPECT_GE(resources.capacity(), static_cast<size_t>(kCount));
  for (int i = 0; i < kCount; ++i) {
    StatusOr<std::shared_ptr<Counter>> found =
        resources.Lookup<Counter>("model/layer/" + std::to_string(i));
    ASSERT_TRUE(found.ok()) << found.status();
    ASSERT_EQ((*found)->value, i);
  }
  StatusOr<std::shared_ptr<Counter>> absent = resources.Lookup<Counter>("model/layer/20000");
  EXPECT_THAT(absent.status(), testing::StatusIs(StatusCode::kNotFound, "'model/layer/20000'"));
  // Looking up an existing name creates nothing.
  ASSERT_TRUE(
      resources
          .LookupOrCreate<Counter>("model/layer/7", [] { return std::make_shared<Counter>(-1); })
          .ok());
  EXPECT_EQ(resources.Lookup<Counter>("model/layer/7").value()->value, 7);
  EXPECT_EQ(resources.size(), static_cast<size_t>(kCount));
}

TEST(ResourceMgrTest, AnEmptyTableFindsNothingAndListsInCreationOrder) {
  ResourceMgr resources;
  EXPECT_EQ(resources.Lookup<Counter>("").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(resources.ListNames().empty());
  for (const char* name : {"zeta", "alpha", "", "mid"}) {
    ASSERT_TRUE(
        resources.LookupOrCreate<Counter>(name, [] { return std::make_shared<Counter>(0); }).ok());
  }
  EXPECT_EQ(resources.ListNames(), (std::vector<std::string>{"zeta", "alpha", "", "mid"}));
  EXPECT_TRUE(resources.Lookup<Counter>("").ok());  // the empty name is a name like any other
}

}  // namespace
}  // namespace ckflow
