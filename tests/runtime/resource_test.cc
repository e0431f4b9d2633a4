// ResourceMgr: lookups by name, one at a time and in batches.
#include "runtime/resource.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

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
  EXPECT_EQ(all.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(all.status().message().find("'x'"), std::string::npos) << all.status();
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
}

}  // namespace
}  // namespace ckflow
