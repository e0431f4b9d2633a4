// ckflow diff: what differs between two checkpoints.

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>

#include "bundle/bundle_format.h"
#include "tools/commands.h"

namespace ckflow::tools {
namespace {

std::string Describe(const BundleEntry& e) {
  return StoredDataTypeName(e.dtype) + e.shape.ToString();
}

// How the values of two tensors of equal dtype and shape differ.
struct ValueDiff {
  int64_t differing = 0;
  double max_abs = 0;  // numeric types only
};

ValueDiff CompareValues(const Tensor& a, const Tensor& b) {
  ValueDiff d;
  const int64_t n = a.NumElements();
  if (a.dtype() == DT_STRING) {
    auto x = a.flat<std::string>(), y = b.flat<std::string>();
    for (int64_t i = 0; i < n; ++i) d.differing += x[i] != y[i];
    return d;
  }
  const size_t size = DataTypeSize(a.dtype());
  const auto* x = static_cast<const char*>(a.raw_data());
  const auto* y = static_cast<const char*>(b.raw_data());
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(x + i * size, y + i * size, size) == 0) continue;
    if (a.dtype() == DT_COMPLEX64 || a.dtype() == DT_COMPLEX128) {
      const auto [ur, ui] = a.ComplexElement(i);
      const auto [vr, vi] = b.ComplexElement(i);
      if ((ur == vr || (std::isnan(ur) && std::isnan(vr))) &&
          (ui == vi || (std::isnan(ui) && std::isnan(vi)))) {
        continue;
      }
      ++d.differing;
      const double diff = std::hypot(ur - vr, ui - vi);
      d.max_abs = std::isnan(diff) ? NAN : std::max(d.max_abs, diff);
      continue;
    }
    const double u = a.ElementAsDouble(i), v = b.ElementAsDouble(i);
    if (std::isnan(u) && std::isnan(v)) continue;
    ++d.differing;
    const double diff = std::fabs(u - v);
    d.max_abs = std::isnan(diff) ? NAN : std::max(d.max_abs, diff);
  }
  return d;
}

bool Readable(const BundleEntry& e) {
  return !e.is_sliced() && IsSupportedDataType(static_cast<DataType>(e.dtype)) &&
         e.dtype != DT_RESOURCE;
}

int RunDiff(const std::string& path_a, const std::string& path_b) {
  StatusOr<std::unique_ptr<BundleReader>> a = OpenCheckpoint(path_a);
  if (!a.ok()) return ReportError("diff", a.status());
  StatusOr<std::unique_ptr<BundleReader>> b = OpenCheckpoint(path_b);
  if (!b.ok()) return ReportError("diff", b.status());
  const auto& ea = (*a)->entries();
  const auto& eb = (*b)->entries();
  std::ostringstream out;
  int only_a = 0, only_b = 0, changed = 0, differ = 0, same = 0;
  size_t i = 0, j = 0;
  while (i < ea.size() || j < eb.size()) {
    if (j == eb.size() || (i < ea.size() && ea[i].key < eb[j].key)) {
      out << "- " << ea[i].key << "  " << Describe(ea[i]) << "  (only in A)\n";
      ++only_a;
      ++i;
      continue;
    }
    if (i == ea.size() || eb[j].key < ea[i].key) {
      out << "+ " << eb[j].key << "  " << Describe(eb[j]) << "  (only in B)\n";
      ++only_b;
      ++j;
      continue;
    }
    const BundleEntry& x = ea[i++];
    const BundleEntry& y = eb[j++];
    if (x.dtype != y.dtype || !(x.shape == y.shape)) {
      out << "~ " << x.key << "  " << Describe(x) << " -> " << Describe(y) << "\n";
      ++changed;
      continue;
    }
    if (!Readable(x)) {
      // Compare what can be compared: the stored bytes.
      StatusOr<std::string> bx = (*a)->ReadRaw(x), by = (*b)->ReadRaw(y);
      if (!bx.ok()) return ReportError("diff", bx.status());
      if (!by.ok()) return ReportError("diff", by.status());
      if (*bx == *by) {
        ++same;
      } else {
        out << "! " << x.key << "  " << Describe(x) << "  stored bytes differ\n";
        ++differ;
      }
      continue;
    }
    StatusOr<Tensor> tx = (*a)->Lookup(x.key), ty = (*b)->Lookup(y.key);
    if (!tx.ok()) return ReportError("diff", tx.status());
    if (!ty.ok()) return ReportError("diff", ty.status());
    const ValueDiff d = CompareValues(*tx, *ty);
    if (d.differing == 0) {
      ++same;
      continue;
    }
    ++differ;
    out << "! " << x.key << "  " << Describe(x) << "  " << d.differing << " of "
        << tx->NumElements() << " values differ";
    if (x.dtype != DT_STRING) {
      char buf[48];
      std::snprintf(buf, sizeof(buf), ", max abs difference %.7g", d.max_abs);
      out << buf;
    }
    out << "\n";
  }
  out << only_a << " only in A, " << only_b << " only in B, " << changed
      << " with another dtype or shape, " << differ << " with other values, " << same
      << " identical\n";
  std::cout << out.str();
  return only_a + only_b + changed + differ == 0 ? 0 : kExitBad;
}

struct DiffOptions {
  std::string a, b;
};

}  // namespace

Command AddDiffCommand(CLI::App& app) {
  auto options = std::make_shared<DiffOptions>();
  CLI::App* sub = app.add_subcommand(
      "diff", "Compare two checkpoints: keys, dtypes, shapes, values; exit 1 if they differ");
  sub->add_option("a", options->a, "first checkpoint")->required();
  sub->add_option("b", options->b, "second checkpoint")->required();
  return {sub, [options] { return RunDiff(options->a, options->b); }};
}

}  // namespace ckflow::tools
