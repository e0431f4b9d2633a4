// The subcommands of the `ckflow` command-line tool, and what they share.
//
// Each Add*Command adds one subcommand to the CLI11 app and returns how to
// run it once the command line is parsed. A new subcommand (e.g. `bench`) is
// one more Add function in its own file and one line in ckflow_main.cc.
//
// Exit codes: 0 success; 1 the checkpoint is bad or differs (verify, diff,
// fsck); 2 a usage or file-system error.

#ifndef CKFLOW_TOOLS_COMMANDS_H_
#define CKFLOW_TOOLS_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/tensor.h"
#include "bundle/bundle_reader.h"

namespace ckflow::tools {

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command AddInspectCommand(CLI::App& app);
Command AddTreeCommand(CLI::App& app);
Command AddDotCommand(CLI::App& app);
Command AddVerifyCommand(CLI::App& app);
Command AddDiffCommand(CLI::App& app);
Command AddBenchCommand(CLI::App& app);
Command AddFsckCommand(CLI::App& app);

inline constexpr int kExitBad = 1;
inline constexpr int kExitError = 2;
// A measurement this machine does not permit (`bench restore --cold` where
// the page cache cannot be dropped): nothing wrong with the command.
inline constexpr int kExitNotPermitted = 3;

// Opens what `path` names: a prefix, a .index or data file, or a directory
// (its `checkpoint` state file's newest checkpoint).
StatusOr<std::unique_ptr<BundleReader>> OpenCheckpoint(const std::string& path);

// Prints "ckflow <command>: <status>" to stderr and returns kExitError.
int ReportError(std::string_view command, const Status& status);

// Element i of a numeric, bool or string tensor as text: "%.7g" for
// floating types, integers in full, true/false, strings Python-repr'd and
// cut after `max_string` bytes.
std::string FormatElement(const Tensor& t, int64_t i, size_t max_string = 40);

// "1.6 MB", "24 B".
std::string HumanBytes(uint64_t bytes);

}  // namespace ckflow::tools

#endif  // CKFLOW_TOOLS_COMMANDS_H_
