#include "base/logging.h"

#include <cstdio>
#include <string>

#include "base/mutex.h"

namespace ckflow {
namespace {

// Where log lines go: one per process, as a log is.
struct SinkState {
  Mutex mu;
  LogSink sink CKFLOW_GUARDED_BY(mu);  // empty = stderr
};

SinkState& Sink() {
  static SinkState state;
  return state;
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
  SinkState& state = Sink();
  MutexLock lock(&state.mu);
  LogSink old = std::move(state.sink);
  state.sink = std::move(sink);
  return old;
}

void Log(LogSeverity severity, std::string_view message) {
  SinkState& state = Sink();
  MutexLock lock(&state.mu);
  if (state.sink) {
    state.sink(severity, message);
    return;
  }
  std::string line =
      std::string("ckflow ") + SeverityName(severity) + " " + std::string(message) + "\n";
  std::fputs(line.c_str(), stderr);
}

}  // namespace ckflow
