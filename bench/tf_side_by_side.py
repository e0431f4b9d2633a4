#!/usr/bin/env python3
"""ckflow checkpoint restore/save beside TensorFlow 2.21's and PyTorch 2.13's, same machine, same run.

For 64 float32 variables of 16 MiB (1 GiB) and 20,000 of 1 KiB it measures:

  ckflow      `ckflow bench restore|save` (tools/bench_command.cc): Restore +
              InitializeOrRestore into a session's existing variables, and
              Checkpoint::Write.
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

Only the restore and save calls are timed; importing TensorFlow, building the
graph and the variables, and the first save (which builds its ops) are
reported separately, as a user pays them too. Reads are warm (the file was
just written). Figures are medians of --repeat runs, in GB/s of variable
payload. Run with the interop venv's python (./run.sh bench does):

  build/venv-bench/bin/python bench/tf_side_by_side.py --ckflow build/release/tools/ckflow

With --json PATH it also writes the rates for bench/plot_peers.py, which draws
bench/peers.png.
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
CKFLOW_RE = re.compile(r"^ckflow\s+([0-9.]+) GB/s", re.M)


def gbps(nbytes, seconds):
    return nbytes / seconds / 1e9


def ckflow_bench(ckflow, mode, count, size, directory, repeat):
    cmd = [ckflow, "bench", mode, "--size", str(count * size), "--count", str(count),
           "--repeat", str(repeat), "--dir", directory]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    found = CKFLOW_RE.search(out)
    if not found:
        sys.exit(f"tf_side_by_side.py: cannot parse {' '.join(cmd)}:\n{out}")
    return float(found.group(1))


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckflow", default="build/release/tools/ckflow")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="also write every rate (GB/s) here, for bench/plot_peers.py")
    args = parser.parse_args()
    cases = [(64, 16 * MIB), (20000, KIB)]
    print(f"TensorFlow {tf.__version__}; import tensorflow: {IMPORT_SECONDS:.2f} s; "
          f"PyTorch {torch.__version__} ({torch.get_num_threads()} threads); import torch: "
          f"{TORCH_IMPORT_SECONDS:.2f} s; {os.cpu_count()} cores; medians of {args.repeat}")
    print()
    print("| variables | ckflow restore | TF graph restore (run; +build) | TF eager restore "
          "| ckflow save | TF graph save | TF eager write | restore ckflow/TF graph, /eager "
          "| save ckflow/TF graph, /eager |")
    print("|---|---|---|---|---|---|---|---|---|")
    details, torch_rows, rates = [], [], []
    for count, size in cases:
        nbytes = count * size
        with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as directory:
            ck_restore = ckflow_bench(args.ckflow, "restore", count, size, directory, args.repeat)
            ck_save = ckflow_bench(args.ckflow, "save", count, size, directory, args.repeat)
            graph = graph_mode(count, size, directory, args.repeat)
            eager = eager_mode(count, size, directory, args.repeat)
            pt = torch_mode(count, size, directory, args.repeat)
        g_restore = gbps(nbytes, graph["restore_build"] + graph["restore_run"])
        g_run = gbps(nbytes, graph["restore_run"])
        e_restore = gbps(nbytes, eager["restore"])
        g_save = gbps(nbytes, graph["save"])
        e_save = gbps(nbytes, eager["save"])
        label = f"{count:,} x {size // MIB} MiB" if size >= MIB else f"{count:,} x {size // KIB} KiB"
        print(f"| {label} | {ck_restore:.2f} GB/s | {g_run:.2f} ({g_restore:.2f}) GB/s "
              f"| {e_restore:.2f} GB/s | {ck_save:.2f} GB/s | {g_save:.2f} GB/s "
              f"| {e_save:.2f} GB/s | {ck_restore / g_restore:.1f}x, {ck_restore / e_restore:.1f}x "
              f"| {ck_save / g_save:.1f}x, {ck_save / e_save:.1f}x |")
        pt_rates = {key: gbps(nbytes, pt[key])
                    for key in ("load", "load_copy", "dcp_load", "save", "dcp_save")}
        rates.append({
            "label": label,
            "restore": {"ckflow": ck_restore, "TF graph": g_restore, "TF eager": e_restore,
                        "torch.load": pt_rates["load"], "torch.load + copy_": pt_rates["load_copy"],
                        "DCP load": pt_rates["dcp_load"]},
            "save": {"ckflow": ck_save, "TF graph": g_save, "TF eager": e_save,
                     "torch.save": pt_rates["save"], "DCP save": pt_rates["dcp_save"]},
        })
        torch_rows.append(
            f"| {label} | {ck_restore:.2f} GB/s | {pt_rates['load']:.2f} GB/s "
            f"| {pt_rates['load_copy']:.2f} GB/s | {pt_rates['dcp_load']:.2f} GB/s "
            f"| {ck_save:.2f} GB/s | {pt_rates['save']:.2f} GB/s | {pt_rates['dcp_save']:.2f} GB/s "
            f"| {ck_restore / pt_rates['load']:.1f}x, {ck_restore / pt_rates['load_copy']:.1f}x, "
            f"{ck_restore / pt_rates['dcp_load']:.1f}x "
            f"| {ck_save / pt_rates['save']:.1f}x, {ck_save / pt_rates['dcp_save']:.1f}x |")
        details.append(
            f"{label}: TF graph: build {graph['build']:.2f} s, first save {graph['first_save']:.2f} s, "
            f"restore() {graph['restore_build']:.3f} s + run_restore_ops {graph['restore_run']:.3f} s; "
            f"TF eager: variables {eager['build']:.2f} s, first write {eager['first_save']:.2f} s"
        )
    print()
    print("| variables | ckflow restore | torch.load | torch.load + copy_ | DCP load (in place) "
          "| ckflow save | torch.save | DCP save | restore ckflow/torch.load, /load + copy_, /DCP "
          "| save ckflow/torch.save, /DCP |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in torch_rows:
        print(row)
    print()
    for line in details:
        print(line)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"tensorflow": tf.__version__, "torch": torch.__version__,
                       "repeat": args.repeat, "cases": rates}, out, indent=1)


if __name__ == "__main__":
    main()
