#include <cmath>
#include <cstdio>
#include <iostream>

#include "bundle/checkpoint_state.h"
#include "tools/commands.h"

namespace ckflow::tools {

StatusOr<std::unique_ptr<BundleReader>> OpenCheckpoint(const std::string& path) {
  CKFLOW_ASSIGN_OR_RETURN(std::string prefix, ResolveCheckpointPath(path));
  return BundleReader::Open(prefix);
}

int ReportError(std::string_view command, const Status& status) {
  std::cerr << "ckflow " << command << ": " << status << "\n";
  return kExitError;
}

namespace {

// Python's repr of a bytes object: how a TensorFlow user sees a string value.
std::string ReprBytes(std::string_view s, size_t max) {
  std::string out = "b'";
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "'";
  if (s.size() > max) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace

std::string FormatElement(const Tensor& t, int64_t i, size_t max_string) {
  char buf[64];
  switch (t.dtype()) {
    case DT_STRING:
      return ReprBytes(t.flat<std::string>()[i], max_string);
    case DT_BOOL:
      return t.flat<bool>()[i] ? "True" : "False";
    case DT_INT64:
      return std::to_string(t.flat<int64_t>()[i]);
    case DT_UINT64:
      return std::to_string(t.flat<uint64_t>()[i]);
    case DT_COMPLEX64:
    case DT_COMPLEX128: {  // as Python prints them: (1+2j)
      const auto [re, im] = t.ComplexElement(i);
      std::snprintf(buf, sizeof(buf), t.dtype() == DT_COMPLEX64 ? "(%.7g%+.7gj)" : "(%.17g%+.17gj)",
                    re, im);
      return buf;
    }
    default:
      break;
  }
  const double v = t.ElementAsDouble(i);
  if (IsFloatingType(t.dtype())) {
    std::snprintf(buf, sizeof(buf), "%.7g", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  }
  return buf;
}

std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1000 && unit < 4) {
    v /= 1000;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[unit]);
  }
  return buf;
}

}  // namespace ckflow::tools
