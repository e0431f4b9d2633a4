// ckflow tree and ckflow dot: the object graph of an object-based checkpoint.

#include <iostream>

#include "bundle/object_tree.h"
#include "tools/commands.h"

namespace ckflow::tools {
namespace {

int RunRender(std::string_view command, const std::string& path, ObjectGraphFormat format) {
  StatusOr<std::unique_ptr<BundleReader>> reader = OpenCheckpoint(path);
  if (!reader.ok()) return ReportError(command, reader.status());
  StatusOr<std::string> text = RenderObjectGraph(**reader, format);
  if (!text.ok()) return ReportError(command, text.status());
  std::cout << *text;
  return 0;
}

struct TreeOptions {
  std::string path;
  bool json = false;
};

}  // namespace

Command AddTreeCommand(CLI::App& app) {
  auto options = std::make_shared<TreeOptions>();
  CLI::App* sub = app.add_subcommand(
      "tree",
      "Print the object graph as a tree of edge names, with each value's key, dtype, shape");
  sub->add_option("path", options->path, "checkpoint prefix, .index file or directory")->required();
  sub->add_flag("--json", options->json, "print JSON instead");
  return {sub, [options] {
            return RunRender("tree", options->path,
                             options->json ? ObjectGraphFormat::kJson : ObjectGraphFormat::kTree);
          }};
}

Command AddDotCommand(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "dot", "Print the object graph as Graphviz DOT (ckflow dot P | dot -Tsvg > graph.svg)");
  sub->add_option("path", *path, "checkpoint prefix, .index file or directory")->required();
  return {sub, [path] { return RunRender("dot", *path, ObjectGraphFormat::kDot); }};
}

}  // namespace ckflow::tools
