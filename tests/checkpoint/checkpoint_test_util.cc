#include "tests/checkpoint/checkpoint_test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <set>

#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "bundle/protos/trackable_object_graph.pb.h"
#include "ops/array_ops.h"
#include "tests/bundle/bundle_test_util.h"

namespace ckflow::testing {

std::unique_ptr<Session> NewSession(const Scope& scope) {
  StatusOr<std::unique_ptr<Session>> session = Session::Create(scope.graph());
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? std::move(session).value() : nullptr;
}

std::shared_ptr<Variable> CountingVariable(const Scope& scope, const std::string& name,
                                           const TensorShape& shape, float start,
                                           VariableOptions options) {
  Tensor init(DT_FLOAT, shape);
  auto values = init.flat<float>();
  for (size_t i = 0; i < values.size(); ++i) values[i] = start + static_cast<float>(i);
  auto v = Variable::Create(scope, name, ops::Const(scope, init), options);
  EXPECT_TRUE(v != nullptr) << scope.status();
  return v;
}

Tensor ValueOf(Session& session, const Variable& variable) {
  StatusOr<std::vector<Tensor>> out = session.Run({}, {variable.value()});
  EXPECT_TRUE(out.ok()) << variable.name() << ": " << out.status();
  return out.ok() ? (*out)[0] : Tensor();
}

void SetValue(Session& session, const Variable& variable, const Tensor& value) {
  Scope scope = Scope::ForGraph(variable.handle().node()->graph()).value();
  Output assign = variable.Assign(scope, ops::Const(scope, value));
  RunOrFail(session, {assign});
}

void RunOrFail(Session& session, const std::vector<Output>& targets) {
  StatusOr<std::vector<Tensor>> out = session.Run({}, {}, targets);
  EXPECT_TRUE(out.ok()) << out.status();
}

std::map<std::string, std::string> FilesOf(const std::string& prefix) {
  std::map<std::string, std::string> files;
  const std::string dir(Dirname(prefix));
  const std::string stem(Basename(prefix));
  for (const std::string& name : ListDir(dir)) {
    if (name.rfind(stem + ".", 0) == 0) {
      files[name.substr(stem.size())] = ReadFileOrDie(dir + "/" + name);
    }
  }
  return files;
}

std::vector<std::string> MirrorOptimizer::SlotNames() const {
  std::set<std::string> names;
  for (const PendingSlot& p : pending) names.insert(p.slot_name);
  return {names.begin(), names.end()};
}

std::shared_ptr<Trackable> MirrorOptimizer::GetSlot(const Trackable& variable,
                                                    std::string_view slot_name) const {
  auto it = slots_.find({&variable, std::string(slot_name)});
  return it == slots_.end() ? nullptr : it->second;
}

void MirrorOptimizer::CreateSlots(const Scope& scope) {
  for (const PendingSlot& p : pending) {
    if (GetSlot(*p.variable, p.slot_name)) continue;
    Tensor zeros(p.dtype, p.shape);
    if (p.dtype != DT_STRING) std::memset(zeros.raw_data(), 0, zeros.TotalBytes());
    auto slot = Variable::Create(scope, p.variable->name() + "/" + p.slot_name,
                                 ops::Const(scope, zeros), {.trainable = false});
    ASSERT_TRUE(slot != nullptr) << scope.status();
    slots_[{p.variable.get(), p.slot_name}] = slot;
    slot_by_key[p.key] = slot;
    OnSlotCreated(*p.variable, p.slot_name, slot);
  }
}

namespace {

std::shared_ptr<Variable> MirrorVariable(const Scope& scope, const BundleReader& reader,
                                         const std::string& key, const std::string& name) {
  const BundleEntry* entry = reader.FindEntry(key);
  DataType dtype = entry ? static_cast<DataType>(entry->dtype) : DT_FLOAT;
  TensorShape shape = entry ? entry->shape : TensorShape();
  Tensor zeros(dtype, shape);
  if (dtype != DT_STRING) std::memset(zeros.raw_data(), 0, zeros.TotalBytes());
  return Variable::Create(scope, name, ops::Const(scope, zeros));
}

}  // namespace

StatusOr<Mirror> MirrorCheckpoint(const Scope& scope, const std::string& prefix) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  CKFLOW_ASSIGN_OR_RETURN(Tensor serialized, reader->Lookup(kObjectGraphKey));
  tensorflow::TrackableObjectGraph proto;
  if (!proto.ParseFromString(serialized.flat<std::string>()[0])) {
    return DataLossError("object graph does not parse");
  }
  const int n = proto.nodes_size();
  std::set<int> slot_nodes;
  for (const auto& node : proto.nodes()) {
    for (const auto& s : node.slot_variables()) slot_nodes.insert(s.slot_variable_node_id());
  }
  Mirror mirror;
  std::vector<std::shared_ptr<Trackable>> objects(n);
  // Objects first (BFS so the first path names each one), edges second.
  std::deque<int> queue{0};
  std::vector<bool> seen(n, false);
  seen[0] = true;
  std::vector<std::pair<int, std::string>> owner_edge(n, {-1, ""});
  int counter = 0;
  while (!queue.empty()) {
    int id = queue.front();
    queue.pop_front();
    const auto& node = proto.nodes(id);
    if (node.slot_variables_size() > 0) {
      auto opt = std::make_shared<MirrorOptimizer>();
      mirror.optimizers.push_back(opt);
      objects[id] = opt;
    } else if (node.attributes_size() == 1 && node.attributes(0).name() == "VARIABLE_VALUE") {
      const std::string& key = node.attributes(0).checkpoint_key();
      auto v = MirrorVariable(scope, *reader, key, "mirror_" + std::to_string(counter++));
      if (v == nullptr) return scope.status();
      mirror.variable_by_key[key] = v;
      objects[id] = v;
    } else {
      objects[id] = std::make_shared<Module>();
    }
    for (const auto& child : node.children()) {
      if (!seen[child.node_id()]) {
        seen[child.node_id()] = true;
        owner_edge[child.node_id()] = {id, child.local_name()};
        queue.push_back(child.node_id());
      }
    }
  }
  for (int id = 0; id < n; ++id) {
    if (!objects[id]) continue;
    for (const auto& child : proto.nodes(id).children()) {
      // The edge that first reached a node owns it; later edges (shared
      // nodes, cycles back up) are references.
      if (owner_edge[child.node_id()] == std::make_pair(id, child.local_name())) {
        objects[id]->Track(child.local_name(), objects[child.node_id()]);
      } else {
        objects[id]->TrackReference(child.local_name(), objects[child.node_id()]);
      }
    }
  }
  for (int id = 0; id < n; ++id) {
    auto* opt = dynamic_cast<MirrorOptimizer*>(objects[id].get());
    if (opt == nullptr) continue;
    for (const auto& s : proto.nodes(id).slot_variables()) {
      auto var = std::dynamic_pointer_cast<Variable>(objects[s.original_variable_node_id()]);
      if (!var) continue;
      const auto& slot_node = proto.nodes(s.slot_variable_node_id());
      const BundleEntry* entry = slot_node.attributes_size()
                                     ? reader->FindEntry(slot_node.attributes(0).checkpoint_key())
                                     : nullptr;
      if (entry == nullptr) continue;
      opt->pending.push_back({var, s.slot_name(), static_cast<DataType>(entry->dtype), entry->shape,
                              slot_node.attributes(0).checkpoint_key()});
    }
  }
  mirror.root = objects[0];
  return mirror;
}

}  // namespace ckflow::testing
