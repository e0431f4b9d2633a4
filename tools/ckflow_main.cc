// ckflow: look into TensorFlow checkpoints.
//
//   ckflow inspect PATH [--values] [--json]   tensors: dtype, shape, size
//   ckflow tree PATH [--json]                 the object graph as a tree
//   ckflow dot PATH                           the object graph as Graphviz DOT
//   ckflow verify PATH                        read everything, check every CRC
//   ckflow fsck DIR [--checksums] [--repair]  a checkpoint directory's health
//   ckflow diff A B                           keys, dtypes, shapes, values
//   ckflow bench restore|save [--size 1GiB]   checkpoint GB/s beside raw I/O
//   ckflow bench restore --cold               the same from a dropped page cache
//
// PATH is a checkpoint prefix, its .index file, or a directory (its
// `checkpoint` state file's newest checkpoint).

#include <CLI/CLI.hpp>
#include <vector>

#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"ckflow: look into TensorFlow checkpoints"};
  app.require_subcommand(1);
  std::vector<ckflow::tools::Command> commands = {
      ckflow::tools::AddInspectCommand(app), ckflow::tools::AddTreeCommand(app),
      ckflow::tools::AddDotCommand(app),     ckflow::tools::AddVerifyCommand(app),
      ckflow::tools::AddDiffCommand(app),    ckflow::tools::AddBenchCommand(app),
      ckflow::tools::AddFsckCommand(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : ckflow::tools::kExitError;
  }
  for (const ckflow::tools::Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return ckflow::tools::kExitError;
}
