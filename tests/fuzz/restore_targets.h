// The structures the checkpoint fuzz target restores each input into, built
// once and reused: building a training program costs about a hundred times
// what restoring into one does, so a target that built one per input spent
// its time building. Each input is restored, by a new Checkpoint::Restore,
// into one of these structures (Pick):
//
//   adam_mlp     Sequential(Dense(3), Dense(1)) trained by Adam (slots m and
//                v, beta powers), a step counter
//   partitioned  a float32[7,3] variable in three parts along axis 0 beside
//                a plain one and an int64 one
//   tree         Modules nested eight deep, names with '/', '.', spaces and
//                non-ASCII, an object shared by two paths, a cycle back to
//                the root, variables of six dtypes (string, empty and rank-6
//                ones among them), twenty children under one node
//
// and, for one input in 32 (by a hash of its bytes, so a replay takes the
// same path), into a fresh eager Adam program restored before any of its
// objects exist: the deferred restores fire as its first training step
// creates the layers and slots.
//
// What one input leaves behind: variables' values (each input restores or
// initializes every one of them); restore ops and session plans for the
// keys it named; deferred restores waiting on children the structure will
// never create, each holding its checkpoint's coordinator. None of these
// changes what a later input does, but all of them grow, so a structure is
// built again after kRestoresPerBuild restores.
//
// Everything goes through an in-memory file system (file_system()), the
// inputs' files included.
//
// Thread safety: none; one per fuzzing thread.

#ifndef CKFLOW_TESTS_FUZZ_RESTORE_TARGETS_H_
#define CKFLOW_TESTS_FUZZ_RESTORE_TARGETS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckflow {
class BundleReader;
}  // namespace ckflow

namespace ckflow::fuzz {

class MemoryFileSystem;

// Whether `status` has a code a reader of foreign files may answer with
// (DataLoss, NotFound, InvalidArgument, ...) and a message. Internal or
// Unknown would mean a bug on our side, OK after bad input a check that is
// missing.
bool IsInputError(const Status& status);

class RestoreTargets {
 public:
  static constexpr int kRestoresPerBuild = 500;

  RestoreTargets();
  ~RestoreTargets();
  RestoreTargets(const RestoreTargets&) = delete;
  RestoreTargets& operator=(const RestoreTargets&) = delete;

  // The structures' names; a structure is named by its place here.
  static std::vector<std::string> Names();

  // The structure for a checkpoint whose root has children named
  // `root_children`: the one with a dependency of such a name (so that a
  // mutant of a structure's own checkpoint goes on restoring into it), else
  // the one `hash` picks.
  static size_t Pick(std::span<const std::string> root_children, uint32_t hash);

  // Restores checkpoint `prefix` (in file_system()) into `structure` (building it if it is not
  // built yet) and checks what the restore reports: errors with a code a
  // reader of foreign files may get, and after a restore that reports
  // success with an object graph equal to the structure's own, every
  // variable holding the bytes its key stores (`reader`, the checkpoint's,
  // if it opens). With `reuse_reader`, the restores take `reader` as
  // RestoreOptions::reader rather than opening the checkpoint again (the
  // open was fuzzed already, and took a tenth of each input's time). With
  // `deferred`, also into the fresh eager program.
  // `report(problem)` is told each problem; the names of the structures
  // that restored in full (every assertion passed; "eager" for the fresh
  // program) are returned.
  std::vector<std::string> Restore(const std::string& prefix,
                                   std::shared_ptr<const BundleReader> reader, bool reuse_reader,
                                   size_t structure, bool deferred,
                                   const std::function<void(std::string)>& report);

  // Builds structure `name`, trains it a step and saves it under `dir`;
  // returns the checkpoint's prefix (seeds that restore in full).
  static StatusOr<std::string> SaveStructure(const std::string& name, const std::string& dir);

  // The file system the structures save and restore through (inputs are
  // written into it).
  MemoryFileSystem& file_system();

  // How many times each structure was built, by Names() order (for tests
  // of the rebuild policy).
  std::vector<int> builds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ckflow::fuzz

#endif  // CKFLOW_TESTS_FUZZ_RESTORE_TARGETS_H_
