#!/usr/bin/env python3
"""ckflow checkpoint restore/save beside TensorFlow 2.21's and PyTorch 2.13's, same machine, same run.

For 20,000 float32 variables of 1 KiB, 64 of 4 MiB (256 MiB) and 64 of 16 MiB
(1 GiB) it measures:

  ckflow      `ckflow bench restore|save --json` (tools/bench_command.cc):
              Restore + InitializeOrRestore into a session's existing
              variables, and Checkpoint::Write, each beside its raw ceiling
              (pread + CRC32C, pwrite) measured in the same run.
  TF graph    tf.compat.v1.train.Checkpoint in a tf.compat.v1.Session:
              restore = checkpoint.restore(path) (builds the restore ops) +
              status.run_restore_ops(session); save = checkpoint.save(prefix,
              session=...) after a first save that built the save ops.
  TF eager    tf.train.Checkpoint: restore(path) into existing variables,
              write(prefix).
  PyTorch     torch 2.13 from pip, a {name: tensor} state dict:
              torch.save / torch.load(weights_only=True) (fresh tensors) and
              torch.load + copy_ into the existing tensors (what a restore
              into a live model is); torch.distributed.checkpoint save/load
              in one process (no process group: DCP's single-process mode),
              which loads in place.
  libtorch    C++ libtorch's save, load and load + copy_ (bench/torch_baseline.cc),
              when --torch-baseline names a built binary (it needs
              libtorch-dev); otherwise recorded as not run.

Only the restore and save calls are timed; importing TensorFlow, building the
graph and the variables, and the first save (which builds its ops) are
reported separately, as a user pays them too. Reads are warm (the file was
just written). Figures are medians of --repeat runs. It prints GB/s of
variable payload and, with --json PATH, writes every time in seconds for
bench/report.py. Run with the bench venv's python (./run.sh bench does):

  build/venv-bench/bin/python bench/tf_side_by_side.py --ckflow build/release/tools/ckflow \
      --torch-baseline build/release/bench/torch_baseline --json results.json
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

_start = time.perf_counter()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

IMPORT_SECONDS = time.perf_counter() - _start
_start = time.perf_counter()
import torch  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402

TORCH_IMPORT_SECONDS = time.perf_counter() - _start
# DCP says once per call that it runs in one process, which is the point here.
warnings.filterwarnings("ignore", message="torch.distributed is disabled")

KIB, MIB = 1 << 10, 1 << 20
# The lines torch_baseline prints last (bench/torch_baseline.cc):
#   libtorch save: 1.052 GB/s
LIBTORCH_RE = {
    key: re.compile(rf"^libtorch {re.escape(name)}: ([0-9.]+) GB/s", re.M)
    for key, name in (("save", "save"), ("load", "load"), ("load_copy", "load+copy_"))
}


def gbps(nbytes, seconds):
    return nbytes / seconds / 1e9


def ckflow_bench(ckflow, mode, count, size, directory, repeat):
    """The `ckflow bench MODE --json` object: ckflow_s, raw_s, ..."""
    path = os.path.join(directory, f"ckflow_{mode}.json")
    cmd = [ckflow, "bench", mode, "--size", str(count * size), "--count", str(count),
           "--repeat", str(repeat), "--dir", directory, "--json", path]
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    with open(path) as f:
        result = json.load(f)
    os.remove(path)
    return result


def libtorch_bench(binary, count, size, directory, repeat):
    """Seconds of libtorch's save, load and load + copy_ (torch_baseline)."""
    cmd = [binary, "--count", str(count), "--size", str(count * size), "--repeat", str(repeat),
           "--dir", directory]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    found = {key: r.search(out) for key, r in LIBTORCH_RE.items()}
    if not all(found.values()):
        sys.exit(f"tf_side_by_side.py: cannot parse {' '.join(cmd)} "
                 f"(out of sync with bench/torch_baseline.cc?):\n{out}")
    return {key: count * size / (float(m.group(1)) * 1e9) for key, m in found.items()}


def make_module(count, numel):
    module = tf.Module()
    module.vars = [tf.Variable(tf.fill([numel], float(i)), name=f"v{i}") for i in range(count)]
    return module


def graph_mode(count, size, directory, repeat):
    numel = size // 4
    timings = {}
    with tf.Graph().as_default():
        start = time.perf_counter()
        module = make_module(count, numel)
        checkpoint = tf.compat.v1.train.Checkpoint(model=module)
        init = tf.compat.v1.global_variables_initializer()
        timings["build"] = time.perf_counter() - start
        with tf.compat.v1.Session() as session:
            session.run(init)
            prefix = os.path.join(directory, "tf_graph")
            start = time.perf_counter()
            path = checkpoint.save(prefix, session=session)
            timings["first_save"] = time.perf_counter() - start
            saves = []
            for _ in range(repeat):
                start = time.perf_counter()
                path = checkpoint.save(prefix, session=session)
                saves.append(time.perf_counter() - start)
            session.run(module.vars[-1].assign(tf.zeros([numel])))
            builds, runs = [], []
            for _ in range(repeat):
                start = time.perf_counter()
                status = checkpoint.restore(path)
                middle = time.perf_counter()
                status.run_restore_ops(session)
                runs.append(time.perf_counter() - middle)
                builds.append(middle - start)
            if session.run(module.vars[-1][numel - 1]) != count - 1:
                sys.exit("tf_side_by_side.py: graph-mode restore did not restore the values")
    timings["save"] = statistics.median(saves)
    timings["restore_build"] = statistics.median(builds)
    timings["restore_run"] = statistics.median(runs)
    return timings


def eager_mode(count, size, directory, repeat):
    numel = size // 4
    timings = {}
    start = time.perf_counter()
    module = make_module(count, numel)
    checkpoint = tf.train.Checkpoint(model=module)
    timings["build"] = time.perf_counter() - start
    prefix = os.path.join(directory, "tf_eager")
    saves = []
    for _ in range(repeat + 1):  # the first write traces its functions
        start = time.perf_counter()
        path = checkpoint.write(prefix)
        saves.append(time.perf_counter() - start)
    timings["first_save"], saves = saves[0], saves[1:]
    module.vars[-1].assign(tf.zeros([numel]))
    restores = []
    for _ in range(repeat):
        start = time.perf_counter()
        checkpoint.read(path).assert_consumed()
        restores.append(time.perf_counter() - start)
    if module.vars[-1].numpy()[-1] != count - 1:
        sys.exit("tf_side_by_side.py: eager restore did not restore the values")
    timings["save"] = statistics.median(saves)
    timings["restore"] = statistics.median(restores)
    return timings


def timed(repeat, call):
    """Median seconds of `repeat` calls, and the last call's result."""
    seconds, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def torch_mode(count, size, directory, repeat):
    numel = size // 4
    timings = {}
    start = time.perf_counter()
    state = {f"v{i}": torch.full((numel,), float(i)) for i in range(count)}
    timings["build"] = time.perf_counter() - start
    path = os.path.join(directory, "torch.pt")
    timings["save"], _ = timed(repeat, lambda: torch.save(state, path))
    timings["load"], _ = timed(repeat, lambda: torch.load(path, weights_only=True))

    def load_and_copy():
        loaded = torch.load(path, weights_only=True)
        with torch.no_grad():
            for name, tensor in state.items():
                tensor.copy_(loaded[name])

    last = f"v{count - 1}"
    state[last].zero_()
    timings["load_copy"], _ = timed(repeat, load_and_copy)
    if state[last][-1].item() != count - 1:
        sys.exit("tf_side_by_side.py: torch.load + copy_ did not restore the values")
    dcp_dir = os.path.join(directory, "torch_dcp")
    timings["dcp_save"], _ = timed(repeat, lambda: dcp.save(state, checkpoint_id=dcp_dir))
    state[last].zero_()
    timings["dcp_load"], _ = timed(repeat, lambda: dcp.load(state, checkpoint_id=dcp_dir))
    if state[last][-1].item() != count - 1:
        sys.exit("tf_side_by_side.py: torch.distributed.checkpoint.load did not restore the values")
    return timings


def label_of(count, size):
    unit = f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"
    return f"{count:,} x {unit}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckflow", default="build/release/tools/ckflow")
    parser.add_argument("--torch-baseline",
                        help="bench/torch_baseline built with libtorch (default: none, its "
                        "figures recorded as not run)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="also write every time (seconds) here, for bench/report.py")
    args = parser.parse_args()
    libtorch = args.torch_baseline
    if libtorch and not os.access(libtorch, os.X_OK):
        print(f"libtorch skipped: no {libtorch}", flush=True)
        libtorch = None
    cases = [(20000, KIB), (64, 4 * MIB), (64, 16 * MIB)]
    print(f"TensorFlow {tf.__version__}; import tensorflow: {IMPORT_SECONDS:.2f} s; "
          f"PyTorch {torch.__version__} ({torch.get_num_threads()} threads); import torch: "
          f"{TORCH_IMPORT_SECONDS:.2f} s; {os.cpu_count()} cores; medians of {args.repeat}; "
          "GB/s of variable payload", flush=True)
    results = []
    for count, size in cases:
        nbytes = count * size
        label = label_of(count, size)
        with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as directory:
            restore = ckflow_bench(args.ckflow, "restore", count, size, directory, args.repeat)
            save = ckflow_bench(args.ckflow, "save", count, size, directory, args.repeat)
            graph = graph_mode(count, size, directory, args.repeat)
            eager = eager_mode(count, size, directory, args.repeat)
            pt = torch_mode(count, size, directory, args.repeat)
            lt = libtorch_bench(libtorch, count, size, directory, args.repeat) if libtorch else None
        result = {
            "label": label, "count": count, "tensor_bytes": size, "bytes": nbytes,
            "ckflow": {"restore_s": restore["ckflow_s"], "raw_read_s": restore["raw_s"],
                       "raw_read_what": restore["raw_what"], "save_s": save["ckflow_s"],
                       "raw_write_s": save["raw_s"], "raw_write_what": save["raw_what"],
                       "restore": restore, "save": save},
            "tf_graph": graph, "tf_eager": eager, "torch": pt, "libtorch": lt,
        }
        results.append(result)
        rate = lambda seconds: f"{gbps(nbytes, seconds):.3g}"  # noqa: E731
        print(f"{label}: restore ckflow {rate(restore['ckflow_s'])}, raw {rate(restore['raw_s'])}, "
              f"TF graph {rate(graph['restore_build'] + graph['restore_run'])}, "
              f"TF eager {rate(eager['restore'])}, torch.load {rate(pt['load'])}, "
              f"torch.load + copy_ {rate(pt['load_copy'])}, DCP {rate(pt['dcp_load'])}"
              + (f", libtorch load + copy_ {rate(lt['load_copy'])}" if lt else ""), flush=True)
        print(f"{label}: save ckflow {rate(save['ckflow_s'])}, raw {rate(save['raw_s'])}, "
              f"TF graph {rate(graph['save'])}, TF eager {rate(eager['save'])}, "
              f"torch.save {rate(pt['save'])}, DCP {rate(pt['dcp_save'])}"
              + (f", libtorch {rate(lt['save'])}" if lt else ""), flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"tensorflow": tf.__version__, "torch": torch.__version__,
                       "torch_threads": torch.get_num_threads(),
                       "import_tensorflow_s": IMPORT_SECONDS, "import_torch_s": TORCH_IMPORT_SECONDS,
                       "repeat": args.repeat, "cases": results}, out, indent=1)


if __name__ == "__main__":
    main()
