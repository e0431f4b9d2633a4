// ResourceMgr: state that lives in a Session across runs (variables).
//
// Two sessions over one graph have two ResourceMgrs, so they are independent.
// Resources are found by name (a variable's shared name) and shared by
// shared_ptr, so a kernel that holds one keeps it alive.
//
// Thread safety: all methods may be called concurrently.

#ifndef CKFLOW_BASE_RESOURCE_H_
#define CKFLOW_BASE_RESOURCE_H_

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "base/tensor.h"

namespace ckflow {

class ResourceMgr {
 public:
  // The resource named `name`, created by `create` if there is none yet.
  // InvalidArgument if one exists with another type.
  template <typename T>
  StatusOr<std::shared_ptr<T>> LookupOrCreate(const std::string& name,
                                              const std::function<std::shared_ptr<T>()>& create)
      CKFLOW_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return LookupOrCreateLocked<T>(name, create);
  }

  // LookupOrCreate of every one of `names` under one lock (a restore of
  // thousands of variables would otherwise take it thousands of times);
  // create(i) makes the resource for names[i].
  template <typename T>
  StatusOr<std::vector<std::shared_ptr<T>>> LookupOrCreateAll(
      const std::vector<std::string>& names,
      const std::function<std::shared_ptr<T>(size_t)>& create) CKFLOW_EXCLUDES(mu_) {
    std::vector<std::shared_ptr<T>> found;
    found.reserve(names.size());
    MutexLock lock(&mu_);
    for (size_t i = 0; i < names.size(); ++i) {
      StatusOr<std::shared_ptr<T>> one =
          LookupOrCreateLocked<T>(names[i], [&] { return create(i); });
      if (!one.ok()) return one.status();
      found.push_back(*std::move(one));
    }
    return found;
  }

  // Room for `count` more resources than exist now. Creating thousands at
  // once (a restore into a fresh session) would otherwise grow the table
  // each time it doubles, re-placing every resource under the lock.
  // It is a hint: beyond 2^20 more (32 MiB of slots), the table grows as
  // resources arrive.
  void Reserve(size_t count) CKFLOW_EXCLUDES(mu_) {
    count = std::min<size_t>(count, size_t{1} << 20);
    MutexLock lock(&mu_);
    if (entries_.size() + count > CapacityLocked()) Rehash(entries_.size() + count);
  }

  size_t size() const CKFLOW_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return entries_.size();
  }

  // How many resources the table holds before it next grows.
  size_t capacity() const CKFLOW_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return CapacityLocked();
  }

  // NotFound if absent.
  template <typename T>
  StatusOr<std::shared_ptr<T>> Lookup(const std::string& name) const CKFLOW_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    const Entry* entry = slots_.empty() ? nullptr : slots_[FindSlot(name, Hash(name))].entry;
    if (entry == nullptr) return NotFoundError("resource '", name, "' does not exist");
    auto typed = std::dynamic_pointer_cast<T>(entry->resource);
    if (!typed) return InvalidArgumentError("resource '", name, "' exists with another type");
    return typed;
  }

  // In the order the resources were created.
  std::vector<std::string> ListNames() const CKFLOW_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    std::vector<std::string> names;
    names.reserve(entries_.size());
    for (const Entry& e : entries_) names.push_back(e.name);
    return names;
  }

 private:
  struct Entry {
    std::string name;
    std::shared_ptr<ResourceBase> resource;
  };
  // The table is open-addressed (linear probing, at most half full), each
  // slot holding its name's hash beside the entry. A lookup then costs one
  // cold cache line, the slot, unless the hashes match; a node-based
  // std::unordered_map costs three or four (bucket, predecessor node, chain),
  // which was 11% of a restore of 200,000 variables into a fresh session
  // (perf), where every name misses and is created.
  struct Slot {
    size_t hash = 0;
    Entry* entry = nullptr;  // nullptr: empty
  };

  static size_t Hash(std::string_view name) { return std::hash<std::string_view>{}(name); }
  size_t CapacityLocked() const CKFLOW_REQUIRES(mu_) { return slots_.size() / 2; }

  // The index of the slot holding `name`, or of the empty slot where it
  // belongs. REQUIRES: slots_ not empty.
  size_t FindSlot(std::string_view name, size_t hash) const CKFLOW_REQUIRES(mu_) {
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      const Slot& slot = slots_[i];
      if (slot.entry == nullptr || (slot.hash == hash && slot.entry->name == name)) return i;
    }
  }

  // Room for `count` resources: a power-of-two table at most half full.
  // REQUIRES: count >= entries_.size().
  void Rehash(size_t count) CKFLOW_REQUIRES(mu_) {
    size_t n = 16;
    while (n / 2 < count) n *= 2;
    std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(n));
    for (const Slot& slot : old) {
      if (slot.entry != nullptr) slots_[FindSlot(slot.entry->name, slot.hash)] = slot;
    }
  }

  template <typename T, typename Create>
  StatusOr<std::shared_ptr<T>> LookupOrCreateLocked(const std::string& name, const Create& create)
      CKFLOW_REQUIRES(mu_) {
    const size_t hash = Hash(name);
    size_t i = slots_.empty() ? 0 : FindSlot(name, hash);
    if (slots_.empty() || slots_[i].entry == nullptr) {
      if (entries_.size() + 1 > CapacityLocked()) {
        Rehash(std::max<size_t>(entries_.size() + 1, 2 * CapacityLocked()));
        i = FindSlot(name, hash);
      }
      Entry& entry = entries_.emplace_back(Entry{name, create()});
      slots_[i] = Slot{hash, &entry};
    }
    auto typed = std::dynamic_pointer_cast<T>(slots_[i].entry->resource);
    if (!typed) return InvalidArgumentError("resource '", name, "' exists with another type");
    return typed;
  }

  mutable Mutex mu_;
  std::deque<Entry> entries_ CKFLOW_GUARDED_BY(mu_);  // a deque, so entries never move
  std::vector<Slot> slots_ CKFLOW_GUARDED_BY(mu_);
};

}  // namespace ckflow

#endif  // CKFLOW_BASE_RESOURCE_H_
