#include "base/logging.h"

#include <cstdio>
#include <mutex>
#include <string>

namespace ckflow {
namespace {

std::mutex& SinkMutex() {
  static std::mutex mu;
  return mu;
}

LogSink& CurrentSink() {
  static LogSink sink;  // empty = stderr
  return sink;
}

const char* SeverityName(LogSeverity s) {
  switch (s) {
    case LogSeverity::kInfo:
      return "I";
    case LogSeverity::kWarning:
      return "W";
    case LogSeverity::kError:
      return "E";
  }
  return "?";
}

}  // namespace

LogSink SetLogSink(LogSink sink) {
  std::lock_guard<std::mutex> lock(SinkMutex());
  LogSink old = std::move(CurrentSink());
  CurrentSink() = std::move(sink);
  return old;
}

void Log(LogSeverity severity, std::string_view message) {
  std::lock_guard<std::mutex> lock(SinkMutex());
  if (CurrentSink()) {
    CurrentSink()(severity, message);
    return;
  }
  std::string line =
      std::string("ckflow ") + SeverityName(severity) + " " + std::string(message) + "\n";
  std::fputs(line.c_str(), stderr);
}

}  // namespace ckflow
