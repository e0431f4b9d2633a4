#include "interop/values_file.h"

#include <cstdint>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "bundle/bundle_format.h"

namespace ckflow::interop {
namespace {

constexpr char kValueSuffix[] = "/.ATTRIBUTES/VARIABLE_VALUE";

}  // namespace

Status WriteValues(const std::string& path, const NamedTensors& values) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return InvalidArgumentError(path, ": cannot create");
  out << "ckflow-values 1\n";
  for (const auto& [key, t] : values) {
    std::string bytes;
    if (t.dtype() == DT_STRING) {
      for (const std::string& s : t.flat<std::string>()) {
        const uint64_t n = s.size();
        bytes.append(reinterpret_cast<const char*>(&n), sizeof(n));
        bytes += s;
      }
    } else {
      bytes.assign(static_cast<const char*>(t.raw_data()), t.TotalBytes());
    }
    out << key << "\n" << static_cast<int>(t.dtype()) << "\n";
    for (int d = 0; d < t.shape().rank(); ++d) out << (d ? " " : "") << t.shape().dim(d);
    out << "\n" << bytes.size() << "\n";
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out << "\n";
  }
  out.close();
  if (!out) return InternalError(path, ": write failed");
  return OkStatus();
}

StatusOr<NamedTensors> ReadValues(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path, ": cannot open");
  std::string line;
  if (!std::getline(in, line) || line != "ckflow-values 1") {
    return InvalidArgumentError(path, ": not a values file");
  }
  NamedTensors values;
  std::string key, dtype_line, dims_line, size_line;
  while (std::getline(in, key)) {
    if (!std::getline(in, dtype_line) || !std::getline(in, dims_line) ||
        !std::getline(in, size_line)) {
      return InvalidArgumentError(path, ": truncated record '", key, "'");
    }
    const auto dtype = static_cast<DataType>(std::stoi(dtype_line));
    std::vector<int64_t> dims;
    std::istringstream dim_stream(dims_line);
    for (int64_t d; dim_stream >> d;) dims.push_back(d);
    const size_t size = std::stoull(size_line);
    std::string bytes(size, '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    if (!in || in.get() != '\n') return InvalidArgumentError(path, ": truncated value '", key, "'");
    Tensor t(dtype, TensorShape(dims));
    if (dtype == DT_STRING) {
      size_t at = 0;
      for (std::string& s : t.flat<std::string>()) {
        uint64_t n = 0;
        if (at + sizeof(n) > size)
          return InvalidArgumentError(path, ": bad strings in '", key, "'");
        std::memcpy(&n, bytes.data() + at, sizeof(n));
        at += sizeof(n);
        if (n > size - at) return InvalidArgumentError(path, ": bad strings in '", key, "'");
        s.assign(bytes.data() + at, n);
        at += n;
      }
    } else {
      if (size != t.TotalBytes()) return InvalidArgumentError(path, ": wrong size of '", key, "'");
      std::memcpy(t.raw_data(), bytes.data(), size);
    }
    values.emplace_back(key, std::move(t));
  }
  return values;
}

std::vector<std::pair<std::string, std::shared_ptr<Variable>>> VariablesByKey(
    const std::shared_ptr<Trackable>& root) {
  std::vector<std::pair<std::string, std::shared_ptr<Variable>>> out;
  std::map<const Trackable*, std::string> seen = {{root.get(), ""}};
  std::deque<std::shared_ptr<Trackable>> queue = {root};
  std::vector<std::pair<std::string, std::shared_ptr<Trackable>>> visited;
  while (!queue.empty()) {
    std::shared_ptr<Trackable> node = queue.front();
    queue.pop_front();
    const std::string& path = seen[node.get()];
    visited.emplace_back(path, node);
    for (const auto& [name, child] : node->Children()) {
      if (child == nullptr || seen.count(child.get())) continue;
      seen[child.get()] = (path.empty() ? "" : path + "/") + EscapeLocalName(name);
      queue.push_back(child);
    }
  }
  for (const auto& [path, node] : visited) {
    if (auto v = std::dynamic_pointer_cast<Variable>(node))
      out.emplace_back(path + kValueSuffix, v);
  }
  for (const auto& [opt_path, node] : visited) {
    auto owner = std::dynamic_pointer_cast<SlotOwner>(node);
    if (owner == nullptr) continue;
    for (const auto& [var_path, var_node] : visited) {
      if (std::dynamic_pointer_cast<Variable>(var_node) == nullptr) continue;
      for (const std::string& slot_name : owner->SlotNames()) {
        auto slot = std::dynamic_pointer_cast<Variable>(owner->GetSlot(*var_node, slot_name));
        if (slot == nullptr) continue;
        out.emplace_back(var_path + "/.OPTIMIZER_SLOT/" + opt_path + "/" +
                             EscapeLocalName(slot_name) + kValueSuffix,
                         slot);
      }
    }
  }
  return out;
}

Status DumpValues(Session& session, const std::shared_ptr<Trackable>& root, const std::string& path,
                  const NamedTensors& extra) {
  auto vars = VariablesByKey(root);
  std::vector<Output> fetches;
  for (const auto& [key, v] : vars) fetches.push_back(v->value());
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> values, session.Run({}, fetches));
  NamedTensors named;
  for (size_t i = 0; i < vars.size(); ++i) named.emplace_back(vars[i].first, values[i]);
  named.insert(named.end(), extra.begin(), extra.end());
  return WriteValues(path, named);
}

}  // namespace ckflow::interop
