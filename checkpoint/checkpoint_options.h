// How a Checkpoint saves, restores and touches files: SaveOptions,
// CheckpointOptions and RestoreOptions (TensorFlow's tf.train.CheckpointOptions
// and the arguments of save and restore).

#ifndef CKFLOW_CHECKPOINT_CHECKPOINT_OPTIONS_H_
#define CKFLOW_CHECKPOINT_CHECKPOINT_OPTIONS_H_

#include <functional>
#include <memory>
#include <string>

#include "base/cast.h"
#include "base/file_system.h"
#include "base/status.h"
#include "checkpoint/group.h"

namespace ckflow {

class BundleReader;

struct SaveOptions {
  // fsync the data files, the index and the directory before returning (and
  // before the state file names the new checkpoint).
  bool durable = false;
  // Return as soon as the values are copied into host buffers (reused from
  // save to save); write, checksum and sync them on a background thread
  // while the training loop goes on. A large variable the loop updates by
  // rows (16 MiB or more; an embedding table, its optimizer's slots) is not
  // copied: the write reads it a block at a time, and until it has, the
  // loop's row updates copy each block they change aside first, so the
  // checkpoint holds the values of the moment Save returned. The state file
  // (and a CheckpointManager's bookkeeping) is updated only once the files
  // are complete, so a crash mid-write leaves the previous checkpoint as the
  // latest. The next Save or Write waits for this one first and returns its
  // error, if it failed, without saving; Checkpoint::Sync waits explicitly.
  // The session must outlive the write: call Sync before destroying it.
  bool async = false;
  // For an async save: called once, on the background thread, when the
  // save has finished -- files written, state file and manager bookkeeping
  // done -- with the checkpoint's path and the status Sync will return (OK,
  // or the error; the save then did not happen). Must not call back into
  // the Checkpoint or its manager (they wait for this thread).
  std::function<void(const std::string& path, const Status& status)> on_done;
  // How many data files each task's values are spread over (TensorFlow
  // writes one file per task: the devices of one job/replica/task share
  // it, their values saved by the task's CPU:0). Linux lets
  // one writer at a time copy into a file (buffered writes take the file's
  // inode lock), so a save written on two threads into one file goes little
  // faster than on one; into two files it goes nearly twice as fast. The
  // values are dealt by size so the files come out about equal; a value is
  // never split, and no file is left empty. 0 (the default): one file per
  // thread of the session's pool, for saves of at least 32 MiB per file.
  // 1: one file per task, as TensorFlow writes. Readers of the format
  // (TensorFlow's among them) read any number of data files.
  int files_per_device = 0;
  // Write only what changed since this Checkpoint's previous save, and still
  // make an ordinary, complete checkpoint. A variable that no kernel has
  // written since then (each write moves a version counter; no bytes are
  // hashed) is not written again: a data file holding only such values is
  // hard-linked from the previous checkpoint (copied where the file system
  // has no links), and the new index lists it as any other. So TensorFlow
  // restores the checkpoint without knowing, and deleting an older one
  // (max_to_keep) never breaks a newer one: a link is a name, not a
  // reference. The second save learns which values change; if they share
  // files with values that do not, it saves in full once with the two
  // apart, and each save after writes only the files that changed. A value
  // no variable's version vouches for (one an op computes when the save
  // reads it) and the object graph count as changed; a restore writes
  // what it restores, so the first save after one is full. Falls back
  // to a full save, with a log line saying why, when the previous
  // checkpoint is gone or was rewritten, when the model's structure or the
  // layout changed, or when saving over the previous checkpoint's own name.
  // Not for a member of a group.
  bool incremental = false;
};

// As TensorFlow's tf.train.CheckpointOptions: how a Checkpoint does I/O.
struct CheckpointOptions {
  // The file layer of every save, restore and state-file access, handed to
  // the kernels the Checkpoint runs; null: FileSystem::Default(). Must
  // outlive the Checkpoint and its statuses.
  FileSystem* file_system = nullptr;
  // Save and restore as one member of a group of processes (group.h), also
  // through a CheckpointManager.
  GroupOptions group;
};

// Options of Checkpoint::Restore (TensorFlow's tf.train.CheckpointOptions
// for a restore).
struct RestoreOptions {
  // Leaves optimizer slot variables alone (TensorFlow's
  // experimental_skip_slot_variables): none is restored, InitializeOrRestore
  // initializes them, and the assertions expect neither the checkpoint's
  // slots nor the program's to match. For fine-tuning with a fresh
  // optimizer state.
  bool skip_slot_variables = false;

  // What a restore may do with a value saved in another dtype than its
  // variable's (base/cast.h). kNone, the default, is TensorFlow's rule: a
  // mismatch is InvalidArgument naming the key and both dtypes. kWidening
  // converts only where every value survives exactly (a bfloat16 or float16
  // checkpoint into float32 variables); kAny converts between any numbers,
  // rounding and saturating. The conversion happens as the bytes are read
  // and checksummed, not as a second pass; the checkpoint is not changed.
  // Deferred restores (variables created later) convert under the same rule.
  CastRule cast = CastRule::kNone;

  // The checkpoint already open (BundleReader::Open of the same prefix):
  // Restore then neither reads nor parses its index again. For a program
  // that restores one checkpoint into several models, or inspects it and
  // then restores it. InvalidArgument if it was opened for another prefix.
  std::shared_ptr<const BundleReader> reader;
};

}  // namespace ckflow

#endif  // CKFLOW_CHECKPOINT_CHECKPOINT_OPTIONS_H_
