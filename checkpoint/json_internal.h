// JSON string quoting for the renderers (object_tree.cc, the ckflow CLI).
//
// Thread safety: pure function.

#ifndef CKFLOW_CHECKPOINT_JSON_INTERNAL_H_
#define CKFLOW_CHECKPOINT_JSON_INTERNAL_H_

#include <cstdio>
#include <string>
#include <string_view>

namespace ckflow::internal {

// `s` as a JSON string literal, quotes included. Bytes >= 0x80 pass through
// (keys are UTF-8 in practice); control characters are \u-escaped.
inline std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_JSON_INTERNAL_H_
