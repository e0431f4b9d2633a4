// A small JSON writer for the benchmarks' results files: `ckflow bench
// --json`, fresh_restore, group_bench and checkpoint_soak each write one
// object that bench/report.py reads to build bench/README.md. Objects and
// arrays are built by value, fields in the order they were set; numbers that
// are not finite are written as null. Not thread-safe: one builder per
// thread. Not installed: a measuring tool of this project's.

#ifndef CKFLOW_WORKLOADS_JSON_WRITER_H_
#define CKFLOW_WORKLOADS_JSON_WRITER_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ckflow::workloads {

class JsonArray;

class JsonObject {
 public:
  JsonObject& Set(std::string_view key, double value) { return Raw(key, Number(value)); }
  JsonObject& Set(std::string_view key, int64_t value) { return Raw(key, std::to_string(value)); }
  JsonObject& Set(std::string_view key, int value) { return Set(key, static_cast<int64_t>(value)); }
  JsonObject& Set(std::string_view key, bool value) { return Raw(key, value ? "true" : "false"); }
  JsonObject& Set(std::string_view key, std::string_view value) { return Raw(key, Quote(value)); }
  JsonObject& Set(std::string_view key, const char* value) {
    return Set(key, std::string_view(value));
  }
  JsonObject& Set(std::string_view key, const JsonObject& value) { return Raw(key, value.Dump()); }
  inline JsonObject& Set(std::string_view key, const JsonArray& value);

  std::string Dump() const {
    std::string out = "{";
    for (size_t i = 0; i < fields_.size(); ++i) {
      out += (i ? ", " : "") + Quote(fields_[i].first) + ": " + fields_[i].second;
    }
    return out + "}";
  }

  // Writes the object and a newline to `path`; false if it cannot.
  bool WriteTo(const std::string& path) const {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) return false;
    const std::string text = Dump() + "\n";
    const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    return std::fclose(f) == 0 && written;
  }

  static std::string Number(double value) {
    if (!std::isfinite(value)) return "null";
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", value);
    return buf;
  }

  static std::string Quote(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
        out += buf;
      } else {
        out += c;
      }
    }
    return out + "\"";
  }

 private:
  JsonObject& Raw(std::string_view key, std::string value) {
    fields_.emplace_back(std::string(key), std::move(value));
    return *this;
  }

  std::vector<std::pair<std::string, std::string>> fields_;
};

class JsonArray {
 public:
  JsonArray& Add(const JsonObject& value) {
    items_.push_back(value.Dump());
    return *this;
  }
  JsonArray& Add(double value) {
    items_.push_back(JsonObject::Number(value));
    return *this;
  }
  std::string Dump() const {
    std::string out = "[";
    for (size_t i = 0; i < items_.size(); ++i) out += (i ? ", " : "") + items_[i];
    return out + "]";
  }

 private:
  std::vector<std::string> items_;
};

JsonObject& JsonObject::Set(std::string_view key, const JsonArray& value) {
  return Raw(key, value.Dump());
}

}  // namespace ckflow::workloads

#endif  // CKFLOW_WORKLOADS_JSON_WRITER_H_
