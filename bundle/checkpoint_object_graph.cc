#include "bundle/bundle_format.h"
#include "bundle/checkpoint_object_graph_internal.h"

namespace ckflow::internal {

StatusOr<ParsedObjectGraph> ParseCheckpointObjectGraph(const BundleReader& reader) {
  const BundleEntry* entry = reader.FindEntry(kObjectGraphKey);
  if (entry == nullptr) return ParsedObjectGraph{};
  CKFLOW_ASSIGN_OR_RETURN(Tensor t, reader.Lookup(kObjectGraphKey));
  if (t.dtype() != DT_STRING || t.NumElements() != 1) {
    return DataLossError(IndexFilename(reader.prefix()), ": ", kObjectGraphKey, " is ",
                         DataTypeName(t.dtype()), t.shape().ToString(), ", not a string scalar");
  }
  ParsedObjectGraph parsed{.arena = std::make_unique<google::protobuf::Arena>()};
  auto* proto =
      google::protobuf::Arena::CreateMessage<tensorflow::TrackableObjectGraph>(parsed.arena.get());
  if (!proto->ParseFromString(t.flat<std::string>()[0])) {
    return DataLossError(DataFilename(reader.prefix(), entry->shard_id, reader.num_shards()), ": ",
                         kObjectGraphKey, " is not a TrackableObjectGraph");
  }
  const int n = proto->nodes_size();
  auto bad = [&](int node, auto&&... what) {
    return DataLossError(IndexFilename(reader.prefix()), ": object graph node ", node, ": ",
                         what...);
  };
  for (int u = 0; u < n; ++u) {
    const auto& node = proto->nodes(u);
    for (const auto& c : node.children()) {
      if (c.node_id() < 0 || c.node_id() >= n) {
        return bad(u, "child '", c.local_name(), "' is node ", c.node_id(), " of ", n);
      }
    }
    for (const auto& s : node.slot_variables()) {
      if (s.slot_variable_node_id() < 0 || s.slot_variable_node_id() >= n ||
          s.original_variable_node_id() < 0 || s.original_variable_node_id() >= n) {
        return bad(u, "slot '", s.slot_name(), "' refers to node ", s.slot_variable_node_id(),
                   " for node ", s.original_variable_node_id(), " of ", n);
      }
    }
  }
  parsed.proto = proto;
  return parsed;
}

}  // namespace ckflow::internal
