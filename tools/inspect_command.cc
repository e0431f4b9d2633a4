// ckflow inspect: the table of a checkpoint's tensors.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <set>
#include <sstream>

#include "bundle/bundle_format.h"
#include "bundle/json_internal.h"
#include "tools/commands.h"

namespace ckflow::tools {
namespace {

struct InspectOptions {
  std::string path;
  bool values = false;
  bool json = false;
  int max_values = 8;
};

bool CanHold(const BundleEntry& e) {
  return IsSupportedDataType(static_cast<DataType>(e.dtype)) && e.dtype != DT_RESOURCE;
}

// A number as JSON at full precision for its type; non-finite as a string.
std::string JsonNumber(double v, bool is_double) {
  char buf[40];
  if (!std::isfinite(v)) {
    std::snprintf(buf, sizeof(buf), "%g", v);
    return internal::JsonQuote(buf);
  }
  std::snprintf(buf, sizeof(buf), is_double ? "%.17g" : "%.9g", v);
  return buf;
}

// A value as JSON: numbers at full precision, non-finite ones as strings,
// bools as true/false, complex numbers as [real, imaginary]; UTF-8 strings
// as strings, other bytes (a serialized proto) as {"base64": ...}.
std::string JsonElement(const Tensor& t, int64_t i) {
  if (t.dtype() == DT_STRING) {
    const std::string& s = t.flat<std::string>()[i];
    if (internal::IsValidUtf8(s)) return internal::JsonQuote(s);
    return "{\"base64\":\"" + internal::Base64(s) + "\"}";
  }
  if (t.dtype() == DT_BOOL) return t.flat<bool>()[i] ? "true" : "false";
  if (t.dtype() == DT_INT64) return std::to_string(t.flat<int64_t>()[i]);
  if (t.dtype() == DT_UINT64) return std::to_string(t.flat<uint64_t>()[i]);
  if (t.dtype() == DT_COMPLEX64 || t.dtype() == DT_COMPLEX128) {
    const auto [re, im] = t.ComplexElement(i);
    const bool is_double = t.dtype() == DT_COMPLEX128;
    return "[" + JsonNumber(re, is_double) + "," + JsonNumber(im, is_double) + "]";
  }
  const double v = t.ElementAsDouble(i);
  if (!std::isfinite(v)) return internal::JsonQuote(FormatElement(t, i));
  char buf[40];
  std::snprintf(buf, sizeof(buf), t.dtype() == DT_DOUBLE ? "%.17g" : "%.9g", v);
  return buf;
}

int RunInspect(const InspectOptions& options) {
  StatusOr<std::unique_ptr<BundleReader>> opened = OpenCheckpoint(options.path);
  if (!opened.ok()) return ReportError("inspect", opened.status());
  const BundleReader& reader = **opened;
  // As TensorFlow's list_variables: a sliced tensor is listed once, under
  // its own key, not once more per slice.
  std::set<std::string> slice_keys;
  for (const BundleEntry& e : reader.entries()) {
    for (const TensorSlice& s : e.slices) slice_keys.insert(EncodeTensorNameSlice(e.key, s));
  }
  std::vector<BundleEntry> entries;
  for (const BundleEntry& e : reader.entries()) {
    if (!slice_keys.count(e.key)) entries.push_back(e);
  }
  const auto limit = static_cast<int64_t>(std::max(0, options.max_values));
  std::ostringstream out;
  int exit_code = 0;
  // The values of an entry, or why they cannot be shown.
  auto values_of = [&](const BundleEntry& e) -> StatusOr<Tensor> {
    if (!CanHold(e)) {
      return UnimplementedError("values of ", StoredDataTypeName(e.dtype), " are not shown");
    }
    return reader.Lookup(e.key);
  };

  if (options.json) {
    out << "{\"tensors\":[";
    for (size_t i = 0; i < entries.size(); ++i) {
      const BundleEntry& e = entries[i];
      out << (i ? "," : "") << "\n{\"key\":" << internal::JsonQuote(e.key)
          << ",\"dtype\":" << internal::JsonQuote(StoredDataTypeName(e.dtype)) << ",\"shape\":[";
      for (int d = 0; d < e.shape.rank(); ++d) out << (d ? "," : "") << e.shape.dim(d);
      out << "],\"shard\":" << e.shard_id << ",\"offset\":" << e.offset << ",\"size\":" << e.size;
      if (e.is_sliced()) out << ",\"slices\":" << e.slices.size();
      if (options.values) {
        StatusOr<Tensor> t = values_of(e);
        if (t.ok()) {
          out << ",\"values\":[";
          for (int64_t j = 0; j < std::min(limit, t->NumElements()); ++j) {
            out << (j ? "," : "") << JsonElement(*t, j);
          }
          out << "]";
        } else {
          if (!IsUnimplemented(t.status())) exit_code = kExitBad;
          out << ",\"error\":" << internal::JsonQuote(t.status().ToString());
        }
      }
      out << "}";
    }
    out << "\n]}\n";
    std::cout << out.str();
    return exit_code;
  }

  // Keys last: they are long and of any length.
  size_t dtype_width = 5, shape_width = 5;
  uint64_t total = 0;
  for (const BundleEntry& e : entries) {
    dtype_width = std::max(dtype_width, StoredDataTypeName(e.dtype).size());
    shape_width = std::max(shape_width, e.shape.ToString().size());
    total += static_cast<uint64_t>(e.size);
  }
  char line[64];
  auto pad = [](const std::string& s, size_t width) {
    return s + std::string(width - s.size() + 2, ' ');
  };
  out << pad("DTYPE", dtype_width) << pad("SHAPE", shape_width)
      << "SHARD      OFFSET        SIZE  KEY\n";
  for (const BundleEntry& e : entries) {
    std::snprintf(line, sizeof(line), "%5d %11lld %11lld  ", e.shard_id,
                  static_cast<long long>(e.offset), static_cast<long long>(e.size));
    out << pad(StoredDataTypeName(e.dtype), dtype_width) << pad(e.shape.ToString(), shape_width)
        << line << e.key;
    if (e.is_sliced()) out << "  (" << e.slices.size() << " slices)";
    out << "\n";
    if (!options.values) continue;
    StatusOr<Tensor> t = values_of(e);
    if (!t.ok()) {
      if (!IsUnimplemented(t.status())) exit_code = kExitBad;
      out << "    (" << t.status() << ")\n";
      continue;
    }
    const int64_t n = t->NumElements();
    const int64_t shown = std::min(limit, n);
    out << "    values (first " << shown << " of " << n << "):";
    for (int64_t j = 0; j < shown; ++j) out << (j ? ", " : " ") << FormatElement(*t, j);
    out << "\n";
  }
  out << entries.size() << (entries.size() == 1 ? " tensor, " : " tensors, ") << total
      << " bytes of data (" << HumanBytes(total) << ") in " << reader.num_shards()
      << (reader.num_shards() == 1 ? " shard" : " shards") << "\n";
  std::cout << out.str();
  return exit_code;
}

}  // namespace

Command AddInspectCommand(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* sub = app.add_subcommand("inspect", "List a checkpoint's tensors: dtype, shape, size");
  sub->add_option("path", options->path, "checkpoint prefix, .index file or directory")->required();
  sub->add_flag("--values", options->values, "also print the first values of each tensor");
  sub->add_flag("--json", options->json, "print JSON: {\"tensors\":[{\"key\":...}]}");
  sub->add_option("--max-values", options->max_values, "values shown per tensor (default 8)");
  return {sub, [options] { return RunInspect(*options); }};
}

}  // namespace ckflow::tools
