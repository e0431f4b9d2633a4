#include "graph/trackable.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ckflow {
namespace {

class Obj : public Trackable {
 public:
  std::string TypeName() const override { return "Obj"; }
  using Trackable::TrackReplacing;  // as Sequential renumbers its edges
};

std::string ChildNames(const Trackable& t) {
  std::string out;
  for (const auto& [name, child] : t.Children()) out += name + ",";
  return out;
}

class RecordingRestore : public DeferredRestore {
 public:
  RecordingRestore(int64_t uid, std::vector<int64_t>* log) : uid_(uid), log_(log) {}
  int64_t restore_uid() const override { return uid_; }
  void Restore(const std::shared_ptr<Trackable>&) override { log_->push_back(uid_); }

 private:
  int64_t uid_;
  std::vector<int64_t>* log_;
};

TEST(Trackable, ChildrenKeepFirstRegistrationOrderAndReplaceInPlace) {
  auto root = std::make_shared<Obj>();
  auto a = root->Track("a", std::make_shared<Obj>());
  root->Track("b", std::make_shared<Obj>());
  auto a2 = std::make_shared<Obj>();
  root->TrackReplacing("a", a2);
  EXPECT_EQ(ChildNames(*root), "a,b,");
  EXPECT_EQ(root->LookupChild("a"), a2);
  EXPECT_NE(root->LookupChild("a"), a);
  EXPECT_EQ(root->LookupChild("missing"), nullptr);
  EXPECT_TRUE(root->tracking_status().ok()) << root->tracking_status();
}

// TensorFlow's _track_trackable raises ValueError ("... a Trackable with this
// name is already declared as a dependency. Names must be unique") for a
// second object under a taken name, and accepts the same object again.
TEST(Trackable, ASecondObjectUnderATakenNameIsRefusedNamingTheName) {
  auto root = std::make_shared<Obj>();
  auto a = root->Track("a", std::make_shared<Obj>());
  root->Track("a", a);  // the same object: fine
  EXPECT_TRUE(root->tracking_status().ok()) << root->tracking_status();
  root->Track("a", std::make_shared<Obj>());
  root->TrackReference("a", std::make_shared<Obj>());  // a later error keeps the first
  EXPECT_EQ(root->LookupChild("a"), a);                // the first stays
  EXPECT_EQ(ChildNames(*root), "a,");
  const Status& s = root->tracking_status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(),
            "Obj: Track('a', Obj): a Trackable with this name is already declared as a "
            "dependency (Obj); names must be unique");
}

TEST(Trackable, ANullChildIsRefusedNotACrash) {
  auto root = std::make_shared<Obj>();
  root->Track("gone", std::shared_ptr<Obj>());
  EXPECT_EQ(root->tracking_status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ChildNames(*root), "");
}

// An expired reference no longer holds its name.
TEST(Trackable, AnExpiredReferenceFreesItsName) {
  auto root = std::make_shared<Obj>();
  root->TrackReference("weak", std::make_shared<Obj>());  // expires at once
  auto b = root->Track("weak", std::make_shared<Obj>());
  EXPECT_EQ(root->LookupChild("weak"), b);
  EXPECT_TRUE(root->tracking_status().ok()) << root->tracking_status();
}

// A restore passes each checkpointed edge's position as a hint; the name
// decides, whatever the hint says.
TEST(Trackable, LookupChildByPositionFallsBackToTheName) {
  auto root = std::make_shared<Obj>();
  auto a = root->Track("a", std::make_shared<Obj>());
  auto b = root->Track("b", std::make_shared<Obj>());
  EXPECT_EQ(root->LookupChild("b", 1), b);  // where it is
  EXPECT_EQ(root->LookupChild("b", 0), b);  // "a" is there
  EXPECT_EQ(root->LookupChild("a", 7), a);  // past the end
  EXPECT_EQ(root->LookupChild("c", 1), nullptr);
  auto b2 = std::make_shared<Obj>();
  root->TrackReplacing("b", b2);  // replaced in place
  EXPECT_EQ(root->LookupChild("b", 1), b2);
  {
    auto gone = std::make_shared<Obj>();
    root->TrackReference("weak", gone);
    EXPECT_EQ(root->LookupChild("weak", 2), gone);
  }
  EXPECT_EQ(root->LookupChild("weak", 2), nullptr);  // expired reference
  EXPECT_EQ(root->LookupChild("weak"), nullptr);
}

// ForEachChild reaches the objects Children() lists, even where a subclass
// reorders them, in tracking order and without an expired reference, and
// says which it owns.
class Reversed : public Obj {
 public:
  std::vector<std::pair<std::string, std::shared_ptr<Trackable>>> Children() const override {
    auto children = Trackable::Children();
    std::reverse(children.begin(), children.end());
    return children;
  }
};

TEST(Trackable, ForEachChildReachesWhatChildrenLists) {
  auto root = std::make_shared<Reversed>();
  auto a = root->Track("a", std::make_shared<Obj>());
  auto kept = std::make_shared<Obj>();
  root->TrackReference("kept", kept);
  {
    auto gone = std::make_shared<Obj>();
    root->TrackReference("gone", gone);
  }
  auto b = root->Track("b", std::make_shared<Obj>());
  std::vector<const Trackable*> visited;
  std::vector<bool> owned;
  root->ForEachChild([&](const std::shared_ptr<Trackable>& child, bool is_owned) {
    visited.push_back(child.get());
    owned.push_back(is_owned);
  });
  EXPECT_EQ(visited, (std::vector<const Trackable*>{a.get(), kept.get(), b.get()}));
  EXPECT_EQ(owned, (std::vector<bool>{true, false, true}));
  std::vector<const Trackable*> listed;
  for (const auto& [name, child] : root->Children()) listed.push_back(child.get());
  EXPECT_EQ(listed, (std::vector<const Trackable*>{b.get(), kept.get(), a.get()}));
}

TEST(Trackable, DeferredRestoresRunOnTrackNewestFirstAndOnce) {
  auto root = std::make_shared<Obj>();
  std::vector<int64_t> log;
  root->AddDeferredRestore("late", std::make_shared<RecordingRestore>(1, &log));
  root->AddDeferredRestore("late", std::make_shared<RecordingRestore>(3, &log));
  root->AddDeferredRestore("other", std::make_shared<RecordingRestore>(2, &log));
  root->Track("late", std::make_shared<Obj>());
  EXPECT_EQ(log, (std::vector<int64_t>{3, 1}));
  root->TrackReplacing("late", std::make_shared<Obj>());  // already handed over
  EXPECT_EQ(log.size(), 2u);
  EXPECT_TRUE(root->HasDeferredRestores());  // "other" still waits
}

TEST(Trackable, ReferencesCloseCyclesWithoutOwning) {
  std::weak_ptr<Obj> weak_root;
  {
    auto root = std::make_shared<Obj>();
    auto child = root->Track("child", std::make_shared<Obj>());
    child->TrackReference("parent", root);
    EXPECT_EQ(child->LookupChild("parent"), root);
    weak_root = root;
  }
  EXPECT_TRUE(weak_root.expired());  // no leak through the cycle
}

class FakeOptimizer : public SlotOwner {
 public:
  std::vector<std::string> SlotNames() const override { return {"m"}; }
  std::shared_ptr<Trackable> GetSlot(const Trackable& v, std::string_view name) const override {
    auto it = slots_.find({std::string(name), &v});
    return it == slots_.end() ? nullptr : it->second;
  }
  void MakeSlot(const Trackable& v, const std::string& name) {
    auto slot = std::make_shared<Obj>();
    slots_[{name, &v}] = slot;
    OnSlotCreated(v, name, slot);
  }

 private:
  std::map<std::pair<std::string, const Trackable*>, std::shared_ptr<Trackable>> slots_;
};

TEST(SlotOwner, SlotRestoreWaitsForCreationOrRunsAtOnce) {
  auto opt = std::make_shared<FakeOptimizer>();
  auto v1 = std::make_shared<Obj>();
  auto v2 = std::make_shared<Obj>();
  std::vector<int64_t> log;
  opt->CreateOrRestoreSlot(v1, "m", std::make_shared<RecordingRestore>(7, &log));
  EXPECT_TRUE(log.empty());
  opt->MakeSlot(*v2, "m");  // another variable's slot: not ours
  EXPECT_TRUE(log.empty());
  opt->MakeSlot(*v1, "m");
  EXPECT_EQ(log, (std::vector<int64_t>{7}));
  opt->CreateOrRestoreSlot(v2, "m", std::make_shared<RecordingRestore>(8, &log));
  EXPECT_EQ(log, (std::vector<int64_t>{7, 8}));  // existed already: at once
}

}  // namespace
}  // namespace ckflow
