#include "bundle/object_tree.h"

#include <algorithm>
#include <deque>
#include <sstream>
#include <vector>

#include "bundle/bundle_format.h"
#include "bundle/checkpoint_object_graph_internal.h"
#include "bundle/json_internal.h"

namespace ckflow {
namespace {

using StoredGraph = internal::StoredObjectGraph;
using StoredNode = internal::StoredObjectGraph::Node;

constexpr std::string_view kVariableValue = "VARIABLE_VALUE";
constexpr int kMaxIndent = 40;

// Where each node is shown: under the first edge a BFS from the root meets
// (children first, then slot variables of the optimizers in BFS order).
struct Placement {
  int parent = -1;  // -1: the root, or a node no edge reaches
  int item = -1;    // index among the parent's children, then slots
  bool slot = false;
  bool reached = false;
};

struct Graph {
  std::unique_ptr<const StoredGraph> stored;  // never null
  std::vector<Placement> placement;
  std::vector<int> unreached;  // shown at the end, as extra roots
};

int NumItems(const StoredNode node) { return node.children_size() + node.slot_variables_size(); }

// Item i of a node: a child edge or a slot variable. Returns the target.
int ItemTarget(const StoredNode node, int i) {
  if (i < node.children_size()) return node.children(i).node_id();
  return node.slot_variables(i - node.children_size()).slot_variable_node_id();
}

StatusOr<Graph> LoadGraph(const BundleReader& reader) {
  if (!reader.Contains(kObjectGraphKey)) {
    return NotFoundError(IndexFilename(reader.prefix()), ": no ", kObjectGraphKey,
                         " (a name-based checkpoint has no object graph)");
  }
  Graph g;
  CKFLOW_ASSIGN_OR_RETURN(g.stored, internal::ParseCheckpointObjectGraph(reader));
  const int n = g.stored->nodes_size();
  g.placement.resize(n);
  if (n == 0) return g;
  std::vector<int> order;
  std::deque<int> queue = {0};
  g.placement[0].reached = true;
  while (!queue.empty()) {
    const int u = queue.front();
    queue.pop_front();
    order.push_back(u);
    const StoredNode node = g.stored->nodes(u);
    for (int i = 0; i < node.children_size(); ++i) {
      Placement& p = g.placement[node.children(i).node_id()];
      if (p.reached) continue;
      p = {u, i, false, true};
      queue.push_back(node.children(i).node_id());
    }
  }
  for (int u : order) {
    const StoredNode node = g.stored->nodes(u);
    for (int j = 0; j < node.slot_variables_size(); ++j) {
      const auto& s = node.slot_variables(j);
      Placement& p = g.placement[s.slot_variable_node_id()];
      if (p.reached) continue;
      p = {u, node.children_size() + j, true, true};
    }
  }
  for (int u = 0; u < n; ++u) {
    if (!g.placement[u].reached) g.unreached.push_back(u);
  }
  return g;
}

}  // namespace

StatusOr<CheckpointObjectGraph> ReadCheckpointObjectGraph(const BundleReader& reader) {
  CKFLOW_ASSIGN_OR_RETURN(Graph g, LoadGraph(reader));
  const int n = g.stored->nodes_size();
  CheckpointObjectGraph out;
  out.nodes.resize(n);
  for (int u = 0; u < n; ++u) {
    const StoredNode node = g.stored->nodes(u);
    CheckpointObjectGraph::Node& o = out.nodes[u];
    for (const auto& c : node.children())
      o.children.push_back({std::string(c.local_name()), c.node_id()});
    for (const auto& a : node.attributes()) {
      o.attributes.push_back(
          {std::string(a.name()), std::string(a.full_name()), std::string(a.checkpoint_key())});
    }
    for (const auto& sv : node.slot_variables()) {
      o.slot_variables.push_back({sv.original_variable_node_id(), sv.slot_variable_node_id(),
                                  std::string(sv.slot_name())});
    }
  }
  // Named breadth first along the placements (iteratively: a checkpoint
  // from elsewhere may be a chain a million nodes deep), then the slots.
  if (n == 0) return out;
  out.nodes[0].path = "(root)";
  std::vector<int> order = {0};
  for (size_t i = 0; i < order.size(); ++i) {
    const int u = order[i];
    const StoredNode node = g.stored->nodes(u);
    for (int k = 0; k < node.children_size(); ++k) {
      const int v = node.children(k).node_id();
      const Placement& p = g.placement[v];
      if (v == 0 || p.slot || p.parent != u || p.item != k) continue;
      out.nodes[v].path = out.nodes[u].path + "." + std::string(node.children(k).local_name());
      order.push_back(v);
    }
  }
  auto name_of = [&](int u) {
    return out.nodes[u].path.empty() ? "(node " + std::to_string(u) + ")" : out.nodes[u].path;
  };
  for (int u : order) {
    const StoredNode node = g.stored->nodes(u);
    for (int j = 0; j < node.slot_variables_size(); ++j) {
      const auto& sv = node.slot_variables(j);
      const Placement& p = g.placement[sv.slot_variable_node_id()];
      if (!p.slot || p.parent != u || p.item != node.children_size() + j) continue;
      out.nodes[sv.slot_variable_node_id()].path = out.nodes[u].path + "'s state '" +
                                                   std::string(sv.slot_name()) + "' for " +
                                                   name_of(sv.original_variable_node_id());
    }
  }
  for (int u : g.unreached) out.nodes[u].path = "(unreachable node " + std::to_string(u) + ")";
  return out;
}

namespace {

// One line of the tree: a node shown in place, or an edge to a node shown
// elsewhere.
struct Row {
  int depth = 0;
  int node = 0;
  int parent = -1;
  int item = -1;  // which of the parent's items leads here; -1 for a root
  bool reference = false;
};

// Pre-order walk with an explicit stack: graphs from files may be deep.
std::vector<Row> Walk(const Graph& g) {
  std::vector<Row> rows;
  struct Frame {
    int node;
    int depth;
    int next = 0;
  };
  std::vector<int> roots;
  if (g.stored->nodes_size() > 0) roots.push_back(0);
  roots.insert(roots.end(), g.unreached.begin(), g.unreached.end());
  for (int root : roots) {
    rows.push_back({0, root, -1, -1, false});
    std::vector<Frame> stack = {{root, 0}};
    while (!stack.empty()) {
      Frame& f = stack.back();
      const StoredNode node = g.stored->nodes(f.node);
      if (f.next == NumItems(node)) {
        stack.pop_back();
        continue;
      }
      const int i = f.next++;
      const int target = ItemTarget(node, i);
      const Placement& p = g.placement[target];
      const bool here = p.reached && p.parent == f.node && p.item == i;
      rows.push_back({f.depth + 1, target, f.node, i, !here});
      if (here) stack.push_back({target, f.depth + 1});
    }
  }
  return rows;
}

std::string DescribeEntry(const BundleEntry* e) {
  if (e == nullptr) return "(not in checkpoint)";
  return StoredDataTypeName(e->dtype) + e->shape.ToString();
}

// The key path of a node (edge names from the root, escaped, joined by '/';
// a slot's is "<variable>/.OPTIMIZER_SLOT/<optimizer>/<slot>"), computed on
// demand: storing every node's full path would be quadratic in a deep
// (crafted) graph. Paths deeper than `budget` edges keep their last edges
// behind ".../".
std::string PathOf(const Graph& g, int node, int budget = 64) {
  std::vector<std::string> parts;
  int v = node;
  for (; v > 0 && budget > 0; --budget) {
    const Placement& p = g.placement[v];
    if (!p.reached) {
      parts.push_back("(node " + std::to_string(v) + ")");
      v = 0;
      break;
    }
    const StoredNode parent = g.stored->nodes(p.parent);
    if (p.slot) {
      const auto& s = parent.slot_variables(p.item - parent.children_size());
      parts.push_back(PathOf(g, s.original_variable_node_id(), budget / 2) + "/.OPTIMIZER_SLOT/" +
                      PathOf(g, p.parent, budget / 2) + "/" + EscapeLocalName(s.slot_name()));
      v = 0;
      break;
    }
    parts.push_back(EscapeLocalName(parent.children(p.item).local_name()));
    v = p.parent;
  }
  std::string path = v > 0 ? "..." : "";
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (!path.empty()) path += "/";
    path += *it;
  }
  return path;
}

std::string PathOrRoot(const Graph& g, int node) { return node == 0 ? "(root)" : PathOf(g, node); }

class Renderer {
 public:
  Renderer(const BundleReader& reader, const Graph& g) : reader_(reader), g_(g) {
    for (int u = 0; u < g.stored->nodes_size(); ++u) {
      for (const auto& a : g.stored->nodes(u).attributes()) {
        ++values_;
        if (!reader.Contains(a.checkpoint_key())) ++missing_;
      }
    }
  }

  std::string Tree() const {
    std::ostringstream out;
    for (const Row& row : Walk(g_)) {
      // Deeper levels are numbered instead of indented further, so a deep
      // (crafted) graph cannot make the output quadratic.
      std::string indent(2 * std::min(row.depth, kMaxIndent), ' ');
      if (row.depth > kMaxIndent) indent += "(depth " + std::to_string(row.depth) + ") ";
      out << indent << Label(row);
      if (row.reference) {
        out << " -> " << PathOrRoot(g_, row.node) << "\n";
        continue;
      }
      const StoredNode node = g_.stored->nodes(row.node);
      if (node.has_registered_saver()) {
        out << "  (registered saver '" << node.registered_saver().name() << "')";
      }
      const bool inline_value =
          node.attributes_size() == 1 && node.attributes(0).name() == kVariableValue;
      if (inline_value) {
        const auto& a = node.attributes(0);
        out << "  " << DescribeEntry(reader_.FindEntry(a.checkpoint_key())) << "  "
            << a.checkpoint_key();
      }
      out << "\n";
      if (inline_value) continue;
      for (const auto& a : node.attributes()) {
        out << indent << "  .ATTRIBUTES/" << a.name() << "  "
            << DescribeEntry(reader_.FindEntry(a.checkpoint_key())) << "  " << a.checkpoint_key()
            << "\n";
      }
    }
    out << Summary() << "\n";
    return out.str();
  }

  std::string Json() const {
    std::ostringstream out;
    out << "{\"objects\":" << g_.stored->nodes_size() << ",\"values\":" << values_
        << ",\"missing_values\":" << missing_ << ",\"roots\":[";
    // Rows come in pre-order with depths: close open objects as depth falls.
    int open = -1;      // depth of the innermost open object
    bool fresh = true;  // the current list has no element yet
    for (const Row& row : Walk(g_)) {
      while (open >= row.depth) {
        out << "]}";
        --open;
        fresh = false;
      }
      out << (fresh ? "{" : ",{");
      fresh = false;
      if (row.parent >= 0) {
        const StoredNode parent = g_.stored->nodes(row.parent);
        if (row.item < parent.children_size()) {
          out << "\"edge\":" << internal::JsonQuote(parent.children(row.item).local_name()) << ",";
        } else {
          const auto& s = parent.slot_variables(row.item - parent.children_size());
          out << "\"slot\":" << internal::JsonQuote(s.slot_name()) << ",\"variable\":"
              << internal::JsonQuote(PathOrRoot(g_, s.original_variable_node_id()))
              << ",\"variable_node\":" << s.original_variable_node_id() << ",";
        }
      }
      out << "\"node\":" << row.node;
      if (row.reference) {
        out << ",\"ref\":" << internal::JsonQuote(PathOrRoot(g_, row.node)) << "}";
        continue;
      }
      out << ",\"path\":" << internal::JsonQuote(PathOf(g_, row.node));
      const StoredNode node = g_.stored->nodes(row.node);
      if (node.has_registered_saver()) {
        out << ",\"registered_saver\":" << internal::JsonQuote(node.registered_saver().name());
      }
      out << ",\"attributes\":[";
      for (int i = 0; i < node.attributes_size(); ++i) {
        const auto& a = node.attributes(i);
        const BundleEntry* e = reader_.FindEntry(a.checkpoint_key());
        out << (i ? "," : "") << "{\"name\":" << internal::JsonQuote(a.name())
            << ",\"checkpoint_key\":" << internal::JsonQuote(a.checkpoint_key())
            << ",\"full_name\":" << internal::JsonQuote(a.full_name());
        if (e == nullptr) {
          out << ",\"missing\":true}";
          continue;
        }
        out << ",\"dtype\":" << internal::JsonQuote(StoredDataTypeName(e->dtype)) << ",\"shape\":[";
        for (int d = 0; d < e->shape.rank(); ++d) out << (d ? "," : "") << e->shape.dim(d);
        out << "]}";
      }
      out << "],\"children\":[";
      open = row.depth;
      fresh = true;
    }
    while (open >= 0) {
      out << "]}";
      --open;
    }
    out << "]}\n";
    return out.str();
  }

  std::string Dot() const {
    std::ostringstream out;
    out << "digraph checkpoint {\n"
        << "  rankdir=LR;\n"
        << "  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
        << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
    for (int u = 0; u < g_.stored->nodes_size(); ++u) {
      const StoredNode node = g_.stored->nodes(u);
      std::string label = u == 0 ? "(root)" : NodeName(u);
      std::string style;
      for (const auto& a : node.attributes()) {
        const BundleEntry* e = reader_.FindEntry(a.checkpoint_key());
        label += '\n';
        if (a.name() != kVariableValue) label += std::string(a.name()) + ": ";
        label += DescribeEntry(e);
        style = e ? ", shape=ellipse, style=filled, fillcolor=\"#dbe9f6\""
                  : ", shape=ellipse, style=dashed";
      }
      out << "  n" << u << " [label=" << DotQuote(label) << style << "];\n";
    }
    for (int u = 0; u < g_.stored->nodes_size(); ++u) {
      const StoredNode node = g_.stored->nodes(u);
      for (int i = 0; i < node.children_size(); ++i) {
        const int v = node.children(i).node_id();
        const Placement& p = g_.placement[v];
        const bool tree_edge = p.parent == u && p.item == i;
        out << "  n" << u << " -> n" << v << " [label=" << DotQuote(node.children(i).local_name())
            << (tree_edge ? "" : ", style=dashed") << "];\n";
      }
      for (const auto& s : node.slot_variables()) {
        out << "  n" << u << " -> n" << s.slot_variable_node_id()
            << " [label=" << DotQuote("slot " + std::string(s.slot_name()))
            << ", color=blue, fontcolor=blue];\n"
            << "  n" << s.slot_variable_node_id() << " -> n" << s.original_variable_node_id()
            << " [style=dotted, color=blue, arrowhead=none];\n";
      }
    }
    out << "}\n";
    return out.str();
  }

 private:
  std::string Label(const Row& row) const {
    if (row.parent < 0)
      return row.node == 0 ? "(root)" : "(unreachable node " + std::to_string(row.node) + ")";
    const StoredNode parent = g_.stored->nodes(row.parent);
    if (row.item < parent.children_size())
      return std::string(parent.children(row.item).local_name());
    const auto& s = parent.slot_variables(row.item - parent.children_size());
    return "slot '" + std::string(s.slot_name()) + "' for " +
           PathOrRoot(g_, s.original_variable_node_id());
  }

  // The name a node is shown under in DOT: its placing edge or slot.
  std::string NodeName(int u) const {
    const Placement& p = g_.placement[u];
    if (!p.reached) return "node " + std::to_string(u);
    return Label({0, u, p.parent, p.item, false});
  }

  std::string Summary() const {
    std::string s = std::to_string(g_.stored->nodes_size()) + " objects, " +
                    std::to_string(values_) + (values_ == 1 ? " value" : " values");
    if (missing_ > 0) s += " (" + std::to_string(missing_) + " not in the checkpoint)";
    return s;
  }

  static std::string DotQuote(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    return out + "\"";
  }

  const BundleReader& reader_;
  const Graph& g_;
  int values_ = 0;
  int missing_ = 0;
};

}  // namespace

StatusOr<std::string> RenderObjectGraph(const BundleReader& reader, ObjectGraphFormat format) {
  CKFLOW_ASSIGN_OR_RETURN(Graph g, LoadGraph(reader));
  Renderer r(reader, g);
  switch (format) {
    case ObjectGraphFormat::kTree:
      return r.Tree();
    case ObjectGraphFormat::kJson:
      return r.Json();
    case ObjectGraphFormat::kDot:
      return r.Dot();
  }
  return InvalidArgumentError("unknown object graph format");
}

}  // namespace ckflow
