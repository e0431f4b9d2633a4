"""The peers bench/fresh_restore.cc runs, each in a new interpreter.

  fresh_restore_peers.py ACTION PREFIX COUNT ELEMENTS

PREFIX is the checkpoint ckflow wrote for the case (COUNT float32 variables
v0..v<COUNT-1> of ELEMENTS each, variable i holding float(i)); the PyTorch
files live beside it (PREFIX.pt, PREFIX.dcp/). Actions:

  torch_save   writes PREFIX.pt (torch.save) and PREFIX.dcp (DCP save) of the
               same tensors, untimed
  tf_graph     TensorFlow graph mode (tf.compat.v1): builds the model's
               variables, then times checkpoint.restore(PREFIX) (builds the
               restore ops) + status.run_restore_ops(session) of ckflow's own
               files
  torch_load   torch.load(PREFIX.pt, weights_only=True)
  torch_mmap   torch.load(PREFIX.pt, mmap=True, weights_only=True) + copy_
               into tensors allocated beforehand (untouched, as a new model's
               parameters): the copy is what reads the mapped file
  dcp_load     torch.distributed.checkpoint.load into tensors allocated
               beforehand

Only the restore is timed, after the imports and the model are built. Each
prints "seconds S" and "peak_rss BYTES" (workloads/fresh_process.h) and
checks that the last variable holds what the writer gave it.
"""

import os
import resource
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# DCP says once per call that it runs in one process, which is the point here.
warnings.filterwarnings("ignore", message="torch.distributed is disabled")


def report(seconds):
    print("seconds %.6f" % seconds)
    print("peak_rss %d" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024))


def check(value, count, what):
    if value != float(count - 1):
        sys.exit(f"fresh_restore_peers.py: {what}: the last variable holds {value}, "
                 f"expected {count - 1}")


def tf_graph(prefix, count, elements):
    import tensorflow as tf

    with tf.Graph().as_default():
        module = tf.Module()
        # ckflow's keys are model/v<i>/.ATTRIBUTES/VARIABLE_VALUE.
        for i in range(count):
            setattr(module, f"v{i}", tf.Variable(tf.zeros([elements]), name=f"v{i}"))
        checkpoint = tf.compat.v1.train.Checkpoint(model=module)
        with tf.compat.v1.Session() as session:
            start = time.perf_counter()
            status = checkpoint.restore(prefix)
            status.run_restore_ops(session)
            seconds = time.perf_counter() - start
            check(session.run(getattr(module, f"v{count - 1}")[elements - 1]), count, "tf_graph")
    report(seconds)


def empty_state(count, elements):
    import torch

    return {f"v{i}": torch.empty(elements) for i in range(count)}


def main():
    action, prefix, count, elements = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if action == "tf_graph":
        return tf_graph(prefix, count, elements)
    import torch
    import torch.distributed.checkpoint as dcp

    last = f"v{count - 1}"
    if action == "torch_save":
        state = {f"v{i}": torch.full((elements,), float(i)) for i in range(count)}
        torch.save(state, prefix + ".pt")
        dcp.save(state, checkpoint_id=prefix + ".dcp")
        return report(0)
    if action == "torch_load":
        start = time.perf_counter()
        loaded = torch.load(prefix + ".pt", weights_only=True)
        seconds = time.perf_counter() - start
        check(loaded[last][-1].item(), count, action)
        return report(seconds)
    state = empty_state(count, elements)
    if action == "torch_mmap":
        start = time.perf_counter()
        loaded = torch.load(prefix + ".pt", mmap=True, weights_only=True)
        with torch.no_grad():
            for name, tensor in state.items():
                tensor.copy_(loaded[name])
        seconds = time.perf_counter() - start
    elif action == "dcp_load":
        start = time.perf_counter()
        dcp.load(state, checkpoint_id=prefix + ".dcp")
        seconds = time.perf_counter() - start
    else:
        sys.exit(f"fresh_restore_peers.py: unknown action {action}")
    check(state[last][-1].item(), count, action)
    report(seconds)


if __name__ == "__main__":
    main()
