// JSON output helpers for the renderers (object_tree.cc, the ckflow CLI).
//
// Thread safety: pure function.

#ifndef CKFLOW_BUNDLE_JSON_INTERNAL_H_
#define CKFLOW_BUNDLE_JSON_INTERNAL_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace ckflow::internal {

// The length of the valid UTF-8 sequence at s[i], or 0 if there is none.
inline size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t min;
  if (b < 0x80) return 1;
  if ((b & 0xe0) == 0xc0) {
    n = 2, min = 0x80;
  } else if ((b & 0xf0) == 0xe0) {
    n = 3, min = 0x800;
  } else if ((b & 0xf8) == 0xf0) {
    n = 4, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  uint32_t cp = b & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

inline bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// `s` as a JSON string literal, quotes included. Control characters are
// \u-escaped; so is each byte that is not part of valid UTF-8 (as the code
// point of the same number), so the output is always valid JSON.
inline std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  char buf[8];
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    const size_t n = Utf8SequenceLength(s, i);
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (n == 0 || static_cast<unsigned char>(c) < 0x20) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

inline std::string Base64(std::string_view s) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((s.size() + 2) / 3 * 4);
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(s[i]) << 16;
    if (i + 1 < s.size()) v |= static_cast<unsigned char>(s[i + 1]) << 8;
    if (i + 2 < s.size()) v |= static_cast<unsigned char>(s[i + 2]);
    out += kDigits[(v >> 18) & 63];
    out += kDigits[(v >> 12) & 63];
    out += i + 1 < s.size() ? kDigits[(v >> 6) & 63] : '=';
    out += i + 2 < s.size() ? kDigits[v & 63] : '=';
  }
  return out;
}

}  // namespace ckflow::internal

#endif  // CKFLOW_BUNDLE_JSON_INTERNAL_H_
