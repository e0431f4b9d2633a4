#!/usr/bin/env python3
"""ckflow checkpoint restore/save beside PyTorch's torch.load/torch.save.

For each case (64 float32 tensors of 256 MiB and 1 GiB in all, 4 GiB with
--large, and 20,000 tensors of 1 KiB) it measures, on the same machine and
in the same temporary directory:

  ckflow  `ckflow bench restore|save` (tools/bench_command.cc): Restore +
          InitializeOrRestore into a session's existing variables, and
          Checkpoint::Write; each beside its raw pread+CRC32C / pwrite
          baseline, which the tool measures in the same run.
  PyTorch torch.save of a {name: tensor} dict; torch.load (fresh tensors);
          torch.load + copy_ into existing tensors, which is what restoring
          a state dict into a live model costs and what ckflow's restore
          does.
  libtorch the same three in C++ (bench/torch_baseline.cc: OutputArchive /
          InputArchive, tensors named v0..vN-1), when BUILD/bench/torch_baseline
          was built (it needs libtorch-dev); otherwise its columns are left out.

Reads are warm (the file was just written, so it is in the page cache):
both sides measure the CPU side of checkpoint I/O, not the disk. Every
figure is the median of --repeat runs, in GB/s of tensor payload (1e9
bytes per second). It prints one Markdown table and draws
bench/restore_save.png (matplotlib, Agg backend).

  python3 bench/side_by_side.py [--ckflow build/release/tools/ckflow] [--large]

Only the standard library, torch and matplotlib are used.
"""

import argparse
import gc
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import torch
except ImportError:
    # A pyenv or venv python3 first on PATH does not see Debian's
    # python3-torch; the system interpreter does.
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath(
        "/usr/bin/python3"
    ):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("side_by_side.py: needs torch (apt-get install python3-torch)")

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import matplotlib.ticker  # noqa: E402

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30

# The lines `ckflow bench` prints last (see tools/bench_command.cc):
#   ckflow     7.032 GB/s    0.1527 s  Restore + InitializeOrRestore
#   raw        7.031 GB/s    0.1527 s  pread + CRC32C, 2 threads
#   ckflow/raw = 1.00x  (> 1: ckflow is faster)
CKFLOW_RE = re.compile(r"^ckflow\s+([0-9.]+) GB/s", re.M)
RAW_RE = re.compile(r"^raw\s+([0-9.]+) GB/s", re.M)
RATIO_RE = re.compile(r"^ckflow/raw = ([0-9.]+)x", re.M)
# The lines torch_baseline prints last (see bench/torch_baseline.cc):
#   libtorch save: 1.052 GB/s
#   libtorch load: 7.003 GB/s
#   libtorch load+copy_: 5.901 GB/s
LIBTORCH_RE = {
    key: re.compile(rf"^libtorch {re.escape(name)}: ([0-9.]+) GB/s", re.M)
    for key, name in (("save", "save"), ("load", "load"), ("load_copy", "load+copy_"))
}


class Case:
    def __init__(self, count, tensor_bytes):
        self.count = count
        self.tensor_bytes = tensor_bytes
        self.bytes = count * tensor_bytes

    def label(self):
        return f"{self.count:,} x {human(self.tensor_bytes)}"

    def total(self):
        return human(self.bytes, units=(("GiB", GIB), ("MiB", MIB)))


def human(n, units=(("GiB", GIB), ("MiB", MIB), ("KiB", KIB))):
    for unit, size in units:
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n / 1e6:.1f} MB"


def gbps(nbytes, seconds):
    return nbytes / seconds / 1e9


def remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def measure_torch(case, directory, repeat):
    """Returns {'load', 'load_copy', 'save'} -> GB/s (medians)."""
    numel = case.tensor_bytes // 4
    state = {f"v{i}": torch.full((numel,), float(i)) for i in range(case.count)}
    path = os.path.join(directory, "torch.pt")

    # Each save writes a new file, as `ckflow bench save` does: the previous
    # one is removed outside the timing.
    save_s = []
    for _ in range(repeat):
        remove(path)
        start = time.perf_counter()
        torch.save(state, path)
        save_s.append(time.perf_counter() - start)
    del state
    gc.collect()

    # The live model's tensors: touched, holding other values than the file.
    existing = {f"v{i}": torch.full((numel,), -1.0) for i in range(case.count)}
    # Interleaved, so that both see the allocator in the same state (a
    # second load reuses the memory the first freed).
    load_s, copy_s = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        loaded = torch.load(path)
        load_s.append(time.perf_counter() - start)
        del loaded
        gc.collect()

        start = time.perf_counter()
        loaded = torch.load(path)
        with torch.no_grad():
            for name, value in loaded.items():
                existing[name].copy_(value)
        copy_s.append(time.perf_counter() - start)
        del loaded
        gc.collect()
    last = case.count - 1
    if existing[f"v{last}"][numel - 1].item() != float(last):
        sys.exit(f"side_by_side.py: torch.load + copy_ did not restore v{last}")
    del existing
    gc.collect()
    remove(path)

    median = statistics.median
    return {
        "load": gbps(case.bytes, median(load_s)),
        "load_copy": gbps(case.bytes, median(copy_s)),
        "save": gbps(case.bytes, median(save_s)),
    }


def run_ckflow(ckflow, mode, case, directory, repeat):
    """Returns (ckflow GB/s, raw GB/s) parsed from `ckflow bench MODE`."""
    cmd = [
        ckflow,
        "bench",
        mode,
        "--size",
        str(case.bytes),
        "--count",
        str(case.count),
        "--repeat",
        str(repeat),
        "--dir",
        directory,
    ]
    # stderr is not a terminal here, so the tool draws no progress bar.
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        sys.exit(
            f"side_by_side.py: {' '.join(cmd)} exited {result.returncode}:\n"
            f"{result.stdout}{result.stderr}"
        )
    found = [r.search(result.stdout) for r in (CKFLOW_RE, RAW_RE, RATIO_RE)]
    if not all(found):
        sys.exit(
            f"side_by_side.py: cannot parse the output of {' '.join(cmd)} "
            f"(out of sync with tools/bench_command.cc?):\n{result.stdout}"
        )
    return float(found[0].group(1)), float(found[1].group(1))


def run_libtorch(binary, case, directory, repeat, threads):
    """Returns {'load', 'load_copy', 'save'} -> GB/s parsed from torch_baseline."""
    cmd = [
        binary,
        "--count",
        str(case.count),
        "--size",
        str(case.bytes),
        "--repeat",
        str(repeat),
        "--dir",
        directory,
    ]
    if threads:
        cmd += ["--threads", str(threads)]
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        sys.exit(
            f"side_by_side.py: {' '.join(cmd)} exited {result.returncode}:\n"
            f"{result.stdout}{result.stderr}"
        )
    found = {key: r.search(result.stdout) for key, r in LIBTORCH_RE.items()}
    if not all(found.values()):
        sys.exit(
            f"side_by_side.py: cannot parse the output of {' '.join(cmd)} "
            f"(out of sync with bench/torch_baseline.cc?):\n{result.stdout}"
        )
    return {key: float(m.group(1)) for key, m in found.items()}


def print_table(rows, libtorch):
    # (header, cell) in column order; the libtorch columns only when it ran.
    columns = [
        ("size", lambda case, r: f"{case.label()} ({case.total()})"),
        ("ckflow restore", lambda case, r: f"{r['ckflow_restore']:.2f}"),
        ("raw read", lambda case, r: f"{r['raw_read']:.2f}"),
        ("torch.load", lambda case, r: f"{r['torch_load']:.2f}"),
        ("torch.load+copy_", lambda case, r: f"{r['torch_load_copy']:.2f}"),
    ]
    if libtorch:
        columns += [
            ("libtorch load", lambda case, r: f"{r['libtorch_load']:.2f}"),
            ("libtorch load+copy_", lambda case, r: f"{r['libtorch_load_copy']:.2f}"),
        ]
    columns += [
        ("ckflow save", lambda case, r: f"{r['ckflow_save']:.2f}"),
        ("raw write", lambda case, r: f"{r['raw_write']:.2f}"),
        ("torch.save", lambda case, r: f"{r['torch_save']:.2f}"),
    ]
    if libtorch:
        columns.append(("libtorch save", lambda case, r: f"{r['libtorch_save']:.2f}"))
    columns += [
        ("ckflow/torch.load", lambda case, r: f"{r['ckflow_restore'] / r['torch_load']:.2f}x"),
        ("ckflow/load+copy_",
         lambda case, r: f"{r['ckflow_restore'] / r['torch_load_copy']:.2f}x"),
        ("ckflow/torch.save", lambda case, r: f"{r['ckflow_save'] / r['torch_save']:.2f}x"),
    ]
    if libtorch:
        columns.append(("ckflow/libtorch load+copy_",
                        lambda case, r: f"{r['ckflow_restore'] / r['libtorch_load_copy']:.2f}x"))
    print("| " + " | ".join(header for header, _ in columns) + " |")
    print("|" + "|".join("---" for _ in columns) + "|")
    for case, r in rows:
        print("| " + " | ".join(cell(case, r) for _, cell in columns) + " |")
    print("(GB/s of tensor payload, median of the runs; ratios > 1: ckflow is faster)")


def plot(rows, png, libtorch):
    # Sizes are categories (the small case differs in shape, not just size),
    # ordered by total bytes.
    rows = sorted(rows, key=lambda row: row[0].bytes)
    labels = [f"{case.label()}\n({case.total()})" for case, _ in rows]
    x = list(range(len(rows)))
    fig, (restore, save) = plt.subplots(1, 2, figsize=(12, 4.8), sharey=False)
    series = {
        restore: [
            ("ckflow Restore + InitializeOrRestore", "ckflow_restore", "C0", "-"),
            ("raw pread + CRC32C (2 threads)", "raw_read", "C7", "--"),
            ("torch.load", "torch_load", "C1", ":"),
            ("torch.load + copy_", "torch_load_copy", "C3", "-"),
        ] + ([("libtorch load + copy_ (C++)", "libtorch_load_copy", "C2", "-.")]
             if libtorch else []),
        save: [
            ("ckflow Checkpoint::Write", "ckflow_save", "C0", "-"),
            ("raw pwrite (2 threads; a file each or one file, the faster)", "raw_write", "C7", "--"),
            ("torch.save", "torch_save", "C3", "-"),
        ],
    }
    for ax, title in ((restore, "restore (warm page cache)"), (save, "save (no fsync)")):
        for name, key, color, style in series[ax]:
            ax.plot(x, [r[key] for _, r in rows], marker="o", color=color, linestyle=style,
                    label=name)
        ax.set_title(title)
        ax.set_xticks(x)
        ax.set_xticklabels(labels, fontsize=8)
        # Log scale: the 1 KiB case is two orders of magnitude below the rest.
        ax.set_yscale("log")
        ax.set_ylabel("GB/s (log scale)")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"ckflow vs PyTorch {torch.__version__} checkpoints, float32 tensors")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckflow", help="the ckflow binary (default: BUILD/tools/ckflow)")
    parser.add_argument("--build", default="build/release",
                        help="build directory holding tools/ckflow (run.sh passes it)")
    parser.add_argument("--large", action="store_true", help="also 4 GiB (needs ~16 GiB RAM)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (median)")
    parser.add_argument("--dir", help="where files are written (default: a new temp dir)")
    parser.add_argument("--torch-threads", type=int, default=0,
                        help="torch.set_num_threads and torch_baseline --threads "
                        "(default: PyTorch's own)")
    parser.add_argument("--torch-baseline",
                        help="the C++ libtorch baseline (default: BUILD/bench/torch_baseline; "
                        "its columns are left out when absent)")
    parser.add_argument("--png", default=os.path.join(here, "restore_save.png"))
    args = parser.parse_args()

    ckflow = args.ckflow or os.path.join(args.build, "tools", "ckflow")
    if not os.access(ckflow, os.X_OK):
        sys.exit(f"side_by_side.py: no ckflow binary at {ckflow} (build it, or pass --ckflow)")
    if args.repeat < 1:
        sys.exit("side_by_side.py: --repeat must be at least 1")
    libtorch = args.torch_baseline or os.path.join(args.build, "bench", "torch_baseline")
    if not os.access(libtorch, os.X_OK):
        if args.torch_baseline:
            sys.exit(f"side_by_side.py: no torch_baseline binary at {libtorch}")
        print(f"libtorch columns skipped: no {libtorch} (built only where libtorch-dev "
              "is installed, without sanitizers)", flush=True)
        libtorch = None

    cases = [Case(20000, KIB), Case(64, 256 * MIB // 64), Case(64, GIB // 64)]
    if args.large:
        cases.append(Case(64, 4 * GIB // 64))

    # PyTorch as a user gets it by default. Forcing every CPU is not fairer:
    # on a busy 2-vCPU machine, OpenMP's barrier made copy_ of 64 x 4 MiB
    # 20x slower with 2 threads (0.5 s) than with its default of 1 (0.025 s).
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    threads = torch.get_num_threads()
    print(f"PyTorch {torch.__version__} ({threads} thread{'' if threads == 1 else 's'}), "
          f"{os.cpu_count()} CPUs, ckflow: {ckflow}, "
          f"{'libtorch: ' + libtorch + ', ' if libtorch else ''}median of {args.repeat} runs",
          flush=True)
    directory = tempfile.mkdtemp(prefix="ckflow-side-by-side-", dir=args.dir)
    rows = []
    try:
        for case in cases:
            print(f"  {case.label()} ({case.total()}) ...", file=sys.stderr, flush=True)
            t = measure_torch(case, directory, args.repeat)
            lt = {}
            if libtorch:
                lt = run_libtorch(libtorch, case, directory, args.repeat, args.torch_threads)
            restore, raw_read = run_ckflow(ckflow, "restore", case, directory, args.repeat)
            save, raw_write = run_ckflow(ckflow, "save", case, directory, args.repeat)
            rows.append((case, {
                "ckflow_restore": restore,
                "raw_read": raw_read,
                "torch_load": t["load"],
                "torch_load_copy": t["load_copy"],
                "ckflow_save": save,
                "raw_write": raw_write,
                "torch_save": t["save"],
                **{f"libtorch_{key}": value for key, value in lt.items()},
            }))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print_table(rows, libtorch)
    plot(rows, args.png, libtorch)
    print(f"plot: {args.png}")


if __name__ == "__main__":
    main()
