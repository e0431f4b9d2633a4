// The synthetic model checkpoint speed is measured on: `count` float32
// variables v0..v<count-1> of `elements` each, tracked by one Module under
// "model", a Checkpoint over it and a session. Shared by
// bench/checkpoint_bench.cc and `ckflow bench`, so both time the same
// program.

#ifndef CKFLOW_BENCH_SYNTHETIC_MODEL_H_
#define CKFLOW_BENCH_SYNTHETIC_MODEL_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/raw_io.h"
#include "checkpoint/bundle_format.h"
#include "checkpoint/bundle_reader.h"
#include "checkpoint/checkpoint.h"
#include "ops/array_ops.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace ckflow::bench {

class Module : public Trackable {
 public:
  std::string TypeName() const override { return "Module"; }
};

struct SyntheticModel {
  Scope scope = Scope::NewRootScope();
  std::shared_ptr<Module> model = std::make_shared<Module>();
  std::vector<std::shared_ptr<Variable>> vars;
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Session> session;

  // Variable i holds `first + i` once initialized. With `initialize`, runs
  // the initializers and creates save_counter, as a program that has saved
  // once has it (so a restore from its files can AssertConsumed); without,
  // the variables wait for a restore.
  static StatusOr<std::unique_ptr<SyntheticModel>> Create(int64_t count, int64_t elements,
                                                          float first, bool initialize) {
    auto m = std::make_unique<SyntheticModel>();
    m->vars.reserve(static_cast<size_t>(count));
    Output shape = ops::Const(m->scope, std::vector<int64_t>{elements}, {1});
    for (int64_t i = 0; i < count; ++i) {
      char name[32];  // not "v" + to_string: GCC 12 warns falsely (-Wrestrict)
      std::snprintf(name, sizeof(name), "v%lld", static_cast<long long>(i));
      Output value =
          ops::Fill(m->scope, shape, ops::Const(m->scope, first + static_cast<float>(i)));
      m->vars.push_back(m->model->Track(name, Variable::Create(m->scope, name, value)));
    }
    m->checkpoint =
        std::make_unique<Checkpoint>(m->scope, Checkpoint::Dependencies{{"model", m->model}});
    CKFLOW_ASSIGN_OR_RETURN(m->session, Session::Create(m->scope.graph()));
    if (initialize) {
      CKFLOW_ASSIGN_OR_RETURN(LoadStatus init, m->checkpoint->Restore(std::nullopt));
      CKFLOW_RETURN_IF_ERROR(init.InitializeOrRestore(*m->session));
    }
    return m;
  }
};

// Where a checkpoint of the model holds its variables' values (save_counter
// left out): the pieces and data files the raw read baseline reads.
struct ValueLayout {
  std::vector<Piece> pieces;
  std::vector<std::string> data_files;  // by shard id
};

inline StatusOr<ValueLayout> LayoutOf(const std::string& prefix) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  ValueLayout layout;
  for (const BundleEntry& e : reader->entries()) {
    if (e.key.find("VARIABLE_VALUE") == std::string::npos ||
        e.key.find("save_counter") != std::string::npos) {
      continue;
    }
    layout.pieces.push_back({e.offset, e.size, e.shard_id});
  }
  for (int i = 0; i < reader->num_shards(); ++i) {
    layout.data_files.push_back(DataFilename(prefix, i, reader->num_shards()));
  }
  return layout;
}

}  // namespace ckflow::bench

#endif  // CKFLOW_BENCH_SYNTHETIC_MODEL_H_
