// ResourceMgr: state that lives in a Session across runs (variables).
//
// Two sessions over one graph have two ResourceMgrs, so they are independent.
// Resources are found by name (a variable's shared name) and shared by
// shared_ptr, so a kernel that holds one keeps it alive.
//
// Thread safety: all methods may be called concurrently.

#ifndef CKFLOW_RUNTIME_RESOURCE_H_
#define CKFLOW_RUNTIME_RESOURCE_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace ckflow {

class ResourceMgr {
 public:
  // The resource named `name`, created by `create` if there is none yet.
  // InvalidArgument if one exists with another type.
  template <typename T>
  StatusOr<std::shared_ptr<T>> LookupOrCreate(const std::string& name,
                                              const std::function<std::shared_ptr<T>()>& create) {
    std::lock_guard<std::mutex> lock(mu_);
    return LookupOrCreateLocked<T>(name, create);
  }

  // LookupOrCreate of every one of `names` under one lock (a restore of
  // thousands of variables would otherwise take it thousands of times);
  // create(i) makes the resource for names[i].
  template <typename T>
  StatusOr<std::vector<std::shared_ptr<T>>> LookupOrCreateAll(
      const std::vector<std::string>& names,
      const std::function<std::shared_ptr<T>(size_t)>& create) {
    std::vector<std::shared_ptr<T>> found;
    found.reserve(names.size());
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < names.size(); ++i) {
      StatusOr<std::shared_ptr<T>> one =
          LookupOrCreateLocked<T>(names[i], [&] { return create(i); });
      if (!one.ok()) return one.status();
      found.push_back(*std::move(one));
    }
    return found;
  }

  // Room for `count` more resources than exist now. Creating thousands at
  // once (a restore into a fresh session) would otherwise rehash the table
  // each time it doubles, and a rehash visits every resource (cold, under
  // the lock): a restore of 200,000 variables spent 50-60 of ~500 ms there.
  void Reserve(size_t count) {
    std::lock_guard<std::mutex> lock(mu_);
    resources_.reserve(resources_.size() + count);
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return resources_.size();
  }

  // How many resources the table holds before it next grows.
  size_t capacity() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<size_t>(static_cast<float>(resources_.bucket_count()) *
                               resources_.max_load_factor());
  }

  // NotFound if absent.
  template <typename T>
  StatusOr<std::shared_ptr<T>> Lookup(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = resources_.find(name);
    if (it == resources_.end()) return NotFoundError("resource '", name, "' does not exist");
    auto typed = std::dynamic_pointer_cast<T>(it->second);
    if (!typed) return InvalidArgumentError("resource '", name, "' exists with another type");
    return typed;
  }

  std::vector<std::string> ListNames() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> names;
    for (const auto& [name, r] : resources_) names.push_back(name);
    return names;
  }

 private:
  // REQUIRES: mu_ held.
  template <typename T, typename Create>
  StatusOr<std::shared_ptr<T>> LookupOrCreateLocked(const std::string& name, const Create& create) {
    auto [it, inserted] = resources_.try_emplace(name);
    if (inserted) it->second = create();
    auto typed = std::dynamic_pointer_cast<T>(it->second);
    if (!typed) return InvalidArgumentError("resource '", name, "' exists with another type");
    return typed;
  }

  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<ResourceBase>> resources_;  // guarded by mu_
};

}  // namespace ckflow

#endif  // CKFLOW_RUNTIME_RESOURCE_H_
