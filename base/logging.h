// Warnings and information ckflow reports without failing (a checkpoint
// status dropped with unmatched values, a deprecated checkpoint kind).
//
// Messages go to a sink: stderr by default; a program replaces it with
// SetLogSink (to route into its own logging, or to capture in a test).
//
// Thread safety: Log and SetLogSink may be called from any thread.

#ifndef CKFLOW_BASE_LOGGING_H_
#define CKFLOW_BASE_LOGGING_H_

#include <functional>
#include <string_view>

namespace ckflow {

enum class LogSeverity { kInfo, kWarning, kError };

using LogSink = std::function<void(LogSeverity, std::string_view message)>;

// Installs `sink` (nullptr restores the stderr sink); returns the old one.
LogSink SetLogSink(LogSink sink);
void Log(LogSeverity severity, std::string_view message);

}  // namespace ckflow

#endif  // CKFLOW_BASE_LOGGING_H_
