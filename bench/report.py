#!/usr/bin/env python3
"""Writes bench/README.md and its plots from the results of one `./run.sh bench` run.

Every benchmark of the run writes what it measured into one results
directory (build/release/bench-results by default): Google Benchmark's JSON
for bench/*_bench, `ckflow bench --json`, bench/tf_side_by_side.py,
bench/train_step_peers.py, fresh_restore, group_bench and checkpoint_soak
their own JSON. This script is the only writer of the page: each topic is a
function below that turns those files into one table (and a plot where one
helps), so every figure on the page comes from the run and none is typed by
hand. A figure whose benchmark was not run, or failed, reads "not run".

  report.py machine DIR --build BUILD    record the machine (first step of the run)
  report.py run DIR NAME -- CMD ...      run one benchmark, recording its command, time and exit
  report.py page DIR [--out README.md]   write the page (and its PNGs beside it)
  report.py reliability DIR [--out RELIABILITY.md]
                                         rewrite the figures section of RELIABILITY.md from
                                         the reliability campaign's output in DIR
  report.py fuzz-record DIR TARGET LOG --seconds S --findings FDIR [--flags F]
                                         [--asan-options O]
                                         record one libFuzzer run (./run.sh fuzz does) as
                                         DIR/fuzz_TARGET.json
  report.py fuzz DIR [--out RELIABILITY.md]
                                         rewrite the fuzzing figures of RELIABILITY.md from
                                         DIR/fuzz_*.json
  report.py sample DIR OUT               a trimmed copy of DIR's results for the tests
                                         (bench/testdata/results is one)

Adding a topic: write a function `topic_<name>(results) -> Section` and add
it to TOPICS. Standard library only; matplotlib for the plots when present.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
NOT_RUN = "not run"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# ----------------------------------------------------------------- results


class Results:
    """The files of one results directory, each read once; None when absent."""

    def __init__(self, directory):
        self.dir = directory
        self._cache = {}
        self.runs = {}
        path = os.path.join(directory, "runs.jsonl")
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    if line.strip():
                        record = json.loads(line)
                        self.runs[record["name"]] = record  # the last run of a name counts

    def json(self, name):
        if name not in self._cache:
            path = os.path.join(self.dir, name + ".json")
            try:
                with open(path) as f:
                    self._cache[name] = json.load(f)
            except (OSError, ValueError):
                self._cache[name] = None
        return self._cache[name]

    def gbench(self, name):
        """run name -> entry of a Google Benchmark JSON file: the median
        aggregate where the run repeated, else the one run."""
        data = self.json(name)
        if not data:
            return {}
        out = {}
        for e in data.get("benchmarks", []):
            if e.get("error_occurred"):
                continue
            # Names without the suffixes of how they were timed:
            # "BM_TrainStep/threads:1/manual_time" -> "BM_TrainStep/threads:1".
            run = re.sub(r"/(manual_time|real_time|iterations:\d+)", "", e.get("run_name", e["name"]))
            if e.get("run_type") == "aggregate":
                if e.get("aggregate_name") == "median":
                    out[run] = e
            elif run not in out:
                out[run] = e
        return out

    def ok(self, name):
        run = self.runs.get(name)
        return run is not None and run.get("exit") == 0


def seconds_of(entry):
    """A Google Benchmark entry's real time in seconds."""
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[entry.get("time_unit", "ns")]
    return entry["real_time"] * scale


def get(d, *keys):
    """d[k0][k1]... or None where any is missing."""
    for k in keys:
        if d is None:
            return None
        d = d.get(k) if isinstance(d, dict) else None
    return d


# -------------------------------------------------------------- formatting


def num(x, digits=3):
    """3 significant digits, thousands separated: 0.0123, 1.23, 12.3, 1,234."""
    if x is None:
        return NOT_RUN
    if x == 0:
        return "0"
    magnitude = abs(x)
    if magnitude >= 10 ** digits:
        return f"{x:,.0f}"
    decimals = max(0, digits - 1 - int(f"{magnitude:e}".split("e")[1]))
    return f"{x:,.{decimals}f}"


def whole(x):
    """A count (Google Benchmark stores counters as floats): 44, 1,234."""
    return NOT_RUN if x is None else f"{round(x):,}"


def times(x):
    return NOT_RUN if x is None else f"{num(x)}×"


def percent(x):
    return NOT_RUN if x is None else f"{x * 100:+.1f}%"


def with_unit(x, unit):
    return NOT_RUN if x is None else f"{num(x)} {unit}"


def duration(ms_value):
    """Milliseconds as µs below 1 ms, else ms."""
    if ms_value is None:
        return NOT_RUN
    return f"{num(ms_value * 1e3)} µs" if ms_value < 1 else f"{num(ms_value)} ms"


def text_of(x, template):
    """template with {} replaced by num(x), or "not run"."""
    return NOT_RUN if x is None else template.format(num(x))


def divide(a, b):
    return None if a is None or b is None or b == 0 else a / b


class Cell:
    """A figure and, where there is one, ckflow's speed relative to it
    (> 1: ckflow is faster)."""

    def __init__(self, value, unit, ckflow_speed=None, note=""):
        self.value, self.unit, self.speed, self.note = value, unit, ckflow_speed, note

    def __str__(self):
        if self.value is None:
            return NOT_RUN
        text = with_unit(self.value, self.unit) + self.note
        if self.speed is not None:
            text += f" · ckflow **{num(self.speed)}×**"
        return text


def table(headers, rows):
    def cells(row):
        # A | inside a cell (a regex in a code span) would split it.
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |"

    lines = [cells(headers), "|" + "|".join("---" for _ in headers) + "|"]
    lines += [cells(row) for row in rows]
    return "\n".join(lines)


class Section:
    def __init__(self, title, intro, body, runs, plot=None, after=""):
        self.title = title
        self.intro = intro  # what is measured and how to read it
        self.body = body  # the table(s), Markdown
        self.runs = runs  # names in runs.jsonl: the commands shown
        self.plot = plot  # (file name, draw function) or None
        self.after = after  # what the figures mean, computed from them


def human_bytes(n):
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n:,} B"


def case_label(count, tensor_bytes):
    total = count * tensor_bytes
    if count >= 1000:
        return f"{count:,} × {human_bytes(tensor_bytes)}"
    return f"{human_bytes(total)} ({count} × {human_bytes(tensor_bytes)})"


# ------------------------------------------------------------------- plots


def plot_name(label):
    """A table row's label as a legend entry: no Markdown, no version, no
    "into existing variables" detail."""
    name = re.sub(r"[`*]", "", label)
    name = re.sub(r" \d+\.\d+[\w.+]*", "", name)
    return re.sub(r",? \(?(into existing|in place|fresh tensors|same threads|same binary|"
                  r"2 threads|a file each)\b.*$", "", name).replace("(", "").replace(")", "").rstrip(",: ")


def bar_plot(path, title, groups, series, ylabel, log=True):
    """groups: x labels; series: [(name, [value or None per group])]."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    series = [(name, values) for name, values in series if any(v for v in values)]
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(groups) + 2) + 3.5, 4.2))
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [v or 0 for v in values], width, label=name)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# ------------------------------------------------------------------ topics
#
# Each topic reads the results it needs and returns a Section; a figure
# that is missing is None and prints as "not run".


def peer_cases(r, small):
    cases = get(r.json("peers"), "cases") or []
    return [c for c in cases if (c["count"] >= 1000) == small]


def peer_version(r, which):
    """" 2.21.0": the version of TensorFlow or PyTorch the run measured."""
    v = get(r.json("peers"), which) or get(r.json("train_peers"), which)
    return f" {v}" if v else ""


def peer_rows(r, direction):
    """Rows (label, seconds getter, note) of ckflow, its ceiling and the
    peers for restore or save."""
    tf, pt = peer_version(r, "tensorflow"), peer_version(r, "torch")
    if direction == "restore":
        return [
            ("**ckflow** `Restore` + `InitializeOrRestore` into existing variables",
             lambda c: get(c, "ckflow", "restore_s")),
            ("ceiling: raw `pread` + CRC32C, 2 threads", lambda c: get(c, "ckflow", "raw_read_s")),
            (f"TensorFlow{tf} graph: `restore()` + `run_restore_ops`",
             lambda c: add(get(c, "tf_graph", "restore_build"), get(c, "tf_graph", "restore_run"))),
            (f"TensorFlow{tf} eager: `Checkpoint.read`", lambda c: get(c, "tf_eager", "restore")),
            (f"PyTorch{pt}: `torch.load` (fresh tensors)", lambda c: get(c, "torch", "load")),
            (f"PyTorch{pt}: `torch.load` + `copy_` into existing tensors",
             lambda c: get(c, "torch", "load_copy")),
            (f"PyTorch{pt}: `torch.distributed.checkpoint.load` (in place)",
             lambda c: get(c, "torch", "dcp_load")),
            ("libtorch (C++): load + `copy_`", lambda c: get(c, "libtorch", "load_copy")),
        ]
    return [
        ("**ckflow** `Checkpoint::Write`", lambda c: get(c, "ckflow", "save_s")),
        ("ceiling: raw `pwrite`, 2 threads (a file each or one file, the faster)",
         lambda c: get(c, "ckflow", "raw_write_s")),
        (f"TensorFlow{tf} graph: `checkpoint.save`", lambda c: get(c, "tf_graph", "save")),
        (f"TensorFlow{tf} eager: `Checkpoint.write`", lambda c: get(c, "tf_eager", "save")),
        (f"PyTorch{pt}: `torch.save`", lambda c: get(c, "torch", "save")),
        (f"PyTorch{pt}: `torch.distributed.checkpoint.save`",
         lambda c: get(c, "torch", "dcp_save")),
        ("libtorch (C++): save", lambda c: get(c, "libtorch", "save")),
    ]


def add(a, b):
    return None if a is None or b is None else a + b


def throughput_section(r, direction, title, intro, after_fn=None, extra_rows=()):
    cases = peer_cases(r, small=False)
    rows_spec = peer_rows(r, direction)
    groups = [case_label(c["count"], c["tensor_bytes"]) for c in cases] or ["256 MiB", "1 GiB"]
    rows, series = [], []
    for label, seconds in rows_spec:
        cells, values = [], []
        for c in cases:
            s, ck = seconds(c), rows_spec[0][1](c)
            rate = divide(c["bytes"] / 1e9, s)
            values.append(rate)
            speed = None if label.startswith("**ckflow**") else divide(s, ck)
            cells.append(Cell(rate, "GB/s", speed))
        rows.append([label] + (cells or [NOT_RUN] * len(groups)))
        series.append((plot_name(label), values))
    for row in extra_rows:
        rows.append(row)
    png = f"{direction}.png"

    def draw(path):
        return bar_plot(path, f"{direction}: GB/s of variable payload (higher is faster)", groups,
                        series, "GB/s (log scale)")

    after = after_fn(cases) if after_fn and cases else ""
    return Section(title, intro, table(["", *groups], rows), ["peers"],
                   (png, draw) if cases else None, after)


def topic_restore(r):
    intro = (
        "A restore into a model's existing variables, from a warm page cache, every CRC32C "
        "checked: ckflow's `Checkpoint::Restore` + `InitializeOrRestore` against the machine's "
        "ceiling (raw `pread` of the same value bytes into touched buffers, plus CRC32C, measured "
        "in the same `ckflow bench restore` run) and against TensorFlow's and PyTorch's own "
        "restores of the same float32 variables. Only the restore calls are timed: importing "
        "the framework and building the model are not. Medians of the runs; "
        "\"ckflow N×\" is the other's time over ckflow's (> 1: ckflow is faster).")

    def after(cases):
        c = cases[-1]
        ck, raw = get(c, "ckflow", "restore_s"), get(c, "ckflow", "raw_read_s")
        if ck is None or raw is None:
            return ""
        return (f"At {case_label(c['count'], c['tensor_bytes'])} ckflow restores at "
                f"{num(raw / ck)}× the raw ceiling's speed: it reads each tensor in pieces on "
                "both threads and checksums each piece while it is still in cache, where the "
                "ceiling reads a whole tensor and checksums it afterwards, from memory.")

    return throughput_section(r, "restore", "Restore", intro, after)


def topic_cast(r):
    intro = (
        "`RestoreOptions::cast` converts a value saved in another dtype as its bytes are read "
        "and checksummed, with no second pass: a bfloat16 checkpoint restored into the float32 "
        "variables of the same program (`CastRule::kWidening`) against the float32 checkpoint "
        "of the same variables, the two restores alternating in each iteration, warm, every "
        "CRC32C checked (`checkpoint_bench`, `RestoreCast`). GB/s are of the float32 values "
        "restored; the ratio is the same-dtype restore's time over the converting one's (> 1: "
        "the converting restore is faster).")
    g = r.gbench("checkpoint_bench")
    rows = []
    for key, label in (("RestoreCast/MiB:1024/vars:64/threads:2", "1 GiB (64 × 16 MiB)"),
                       ("RestoreCast/MiB:256/vars:64/threads:2", "256 MiB (64 × 4 MiB)")):
        c = g.get(key)
        if c is None and rows:
            continue
        rows.append([label, with_unit(get(c, "GB/s"), "GB/s"),
                     with_unit(get(c, "same_dtype_GB/s"), "GB/s"), times(get(c, "ratio"))])
    return Section("Restore with a dtype conversion", intro,
                   table(["", "bfloat16 → float32", "float32 → float32", "ratio"], rows),
                   ["checkpoint_bench"])


def topic_incremental(r):
    intro = (
        "Fine-tuning a frozen 1 GiB base (64 × 16 MiB float32) with a 16 MiB head that changes "
        "before every save, as a training loop that saves every 100 steps does, through a "
        "`CheckpointManager` keeping 5 with `SaveOptions::incremental`: it writes the files of "
        "changed values and hard-links the base's from the previous checkpoint "
        "(`checkpoint_bench`, `SaveIncremental`, after the first two saves, which are full). "
        "The ceiling, measured in every iteration, is the same file work done raw: the head's "
        "16 MiB written into a new file with `pwrite` (and `fsync` in the durable row) and, as "
        "the manager's retention deletes the oldest checkpoint, the oldest of 5 such files "
        "removed; the write alone is shown too. The full saves are a manager over the same "
        "model without the option. Bytes are what a save wrote through the file layer; disk is "
        "what the 5 kept checkpoints take, a linked file counted once. The ratio is the "
        "ceiling's time over the incremental save's (target ≥ 0.67: at most 1.5× the raw "
        "work).")
    g = r.gbench("checkpoint_bench")
    rows = []
    for durable, what in ((0, "to the page cache"), (1, "durable")):
        e = g.get(f"SaveIncremental/MiB:1024/head_MiB:16/threads:2/durable:{durable}")
        rows.append([what, duration(get(e, "incremental_ms")),
                     f"{duration(get(e, 'raw_ms'))} (the write alone: "
                     f"{duration(get(e, 'raw_write_ms'))})",
                     times(get(e, "ratio")), duration(get(e, "full_ms")),
                     f"{with_unit(get(e, 'written_MiB_per_save'), 'MiB')} "
                     f"(full: {with_unit(get(e, 'full_written_MiB_per_save'), 'MiB')})",
                     f"{with_unit(get(e, 'disk_5_kept_MiB'), 'MiB')} "
                     f"(full: {with_unit(get(e, 'full_disk_5_kept_MiB'), 'MiB')})"])
    return Section("Incremental saves", intro,
                   table(["1 GiB base + 16 MiB head", "incremental save", "raw, same run",
                          "ratio", "full save", "written per save", "disk, 5 kept"], rows),
                   ["checkpoint_bench"])


def topic_save(r):
    intro = (
        "A save of the same variables to the page cache (no fsync): ckflow's `Checkpoint::Write` "
        "(a large save writes one data file per thread) against raw `pwrite` of the same bytes "
        "measured in the same `ckflow bench save` run, and TensorFlow's and PyTorch's saves. "
        "Each save writes new files. The durable rows (data, index and directory fsynced) come "
        "from `checkpoint_bench`, each beside raw `pwrite` + `fsync` in the same iteration.")
    g = r.gbench("checkpoint_bench")
    durable = g.get("Save/MiB:1024/vars:64/threads:2/durable:1")
    cases = peer_cases(r, small=False)
    extra = []
    if cases:
        ck_s = seconds_of(durable) if durable else None
        raw_rate = get(durable, "raw_pwrite_fsync_GB/s")
        ck_rate = divide(GIB / 1e9, ck_s)
        columns = [c["bytes"] == GIB for c in cases]
        extra.append(["**ckflow** `Checkpoint::Write`, durable"] +
                     [Cell(ck_rate, "GB/s") if one else NOT_RUN for one in columns])
        extra.append(["ceiling: raw `pwrite` + `fsync`, 2 threads"] +
                     [Cell(raw_rate, "GB/s", get(durable, "ratio")) if one else NOT_RUN
                      for one in columns])
    section = throughput_section(r, "save", "Save", intro, extra_rows=extra)
    section.runs = ["peers", "checkpoint_bench"]
    return section


def topic_small(r):
    intro = (
        "Many small variables cost by their number, not their bytes: 20,000 float32 variables "
        "of 1 KiB each (and a restore and a save of 200,000), in µs per variable (lower is "
        "faster). The "
        "ceilings are the machine's own cost per value with no format at all: a `pread` + CRC32C "
        "per value, and `pwrite` of the same bytes. The fresh-graph rows restore into a new "
        "graph with the CPU caches evicted first, so object matching and restore-op creation are "
        "in the time (`checkpoint_bench`, `RestoreSmall`).")
    cases = peer_cases(r, small=True)
    c = cases[0] if cases else None
    save200, restore200 = r.json("save_200k"), r.json("restore_200k")

    def label_200k(what, result):
        n = get(result, "count")
        return f"{what}, {n:,} × 1 KiB" if n else f"{what}, 200,000 × 1 KiB"

    small_label = case_label(c["count"], c["tensor_bytes"]) if c else "20,000 × 1 KiB"
    headers = ["", "restore, " + small_label, label_200k("restore", restore200),
               "save, " + small_label, label_200k("save", save200)]
    restore_rows = peer_rows(r, "restore")
    save_rows = peer_rows(r, "save")
    # Pair restore and save rows by who they are.
    pairs = [
        ("**ckflow**", 0, 0), ("ceiling (raw, 2 threads)", 1, 1), ("TensorFlow graph", 2, 2),
        ("TensorFlow eager", 3, 3), ("PyTorch `torch.load` / `torch.save`", 4, 4),
        ("PyTorch `torch.load` + `copy_`", 5, None), ("PyTorch DCP", 6, 5), ("libtorch (C++)", 7, 6),
    ]
    tf, pt = peer_version(r, "tensorflow"), peer_version(r, "torch")
    rows, series = [], []

    def per_var(seconds):
        return None if seconds is None or c is None else seconds / c["count"] * 1e6

    for label, ri, si in pairs:
        label = label.replace("TensorFlow", f"TensorFlow{tf}").replace("PyTorch", f"PyTorch{pt}")
        restore_s = restore_rows[ri][1](c) if c else None
        save_s = save_rows[si][1](c) if c and si is not None else None
        ck_restore, ck_save = (restore_rows[0][1](c), save_rows[0][1](c)) if c else (None, None)
        first = ri == 0
        # The 200,000 columns: ckflow and its ceiling only.
        if ri == 0:
            restore_200k = Cell(per_var_of(restore200, "ckflow_s"), "µs")
            save_200k = Cell(per_var_of(save200, "ckflow_s"), "µs")
        elif ri == 1:
            restore_200k = Cell(per_var_of(restore200, "raw_s"), "µs", get(restore200, "ratio"))
            save_200k = Cell(per_var_of(save200, "raw_s"), "µs", get(save200, "ratio"))
        else:
            restore_200k = save_200k = NOT_RUN
        restore_cell = Cell(per_var(restore_s), "µs", None if first else divide(restore_s, ck_restore))
        save_cell = Cell(per_var(save_s), "µs", None if first else divide(save_s, ck_save))
        rows.append([label, restore_cell, restore_200k, save_cell, save_200k])
        series.append((plot_name(label), [restore_cell.value, save_cell.value]))
    g = r.gbench("checkpoint_bench")
    cold = g.get("RestoreSmall/vars:20000/threads:2/cold:1")
    rows.append(["**ckflow**, fresh graph, cold caches",
                 Cell(get(cold, "us_per_variable"), "µs"), NOT_RUN, NOT_RUN, NOT_RUN])
    rows.append(["ceiling: raw `pread` + CRC32C into new buffers, cold caches",
                 Cell(get(cold, "raw_pread_crc_fresh_us_per_variable"), "µs", get(cold, "ratio")),
                 NOT_RUN, NOT_RUN, NOT_RUN])

    def draw(path):
        return bar_plot(path, "20,000 × 1 KiB: µs per variable (lower is faster)",
                        ["restore", "save"], series, "µs per variable (log scale)")

    after = ""
    if cold:
        after = (f"Of a fresh-graph restore's {num(cold['us_per_variable'])} µs per variable, "
                 f"parsing the index takes {num(cold.get('index_us_per_variable'))} µs and "
                 f"`Restore` (index, object matching, restore-op creation) "
                 f"{num(cold.get('match_us_per_variable'))} µs; the rest runs the restore ops.")
    ck_200k, ck_small = per_var_of(restore200, "ckflow_s"), per_var(restore_rows[0][1](c) if c else None)
    if ck_200k is not None and ck_small:
        after += ((" " if after else "") +
                  f"Restoring {get(restore200, 'count'):,} variables takes {num(ck_200k)} µs per "
                  f"variable, {num(ck_200k / ck_small)}× the per-variable time of "
                  f"{c['count']:,} (target: no worse).")
        phases = restore_phases(get(c, "ckflow", "restore"), restore200)
        if phases:
            after += " " + phases
    budget = restore_budget(get(c, "ckflow", "restore"))
    if budget:
        after += (" " if after else "") + budget
    huge = huge_pages(get(c, "ckflow", "restore"), r.json("restore_20k_hugetlb"))
    if huge:
        after += (" " if after else "") + huge
    adam = with_adam(get(c, "ckflow", "restore"), get(c, "ckflow", "save"),
                     r.json("restore_20k_adam"), r.json("save_20k_adam"))
    if adam:
        after += (" " if after else "") + adam
    n = c["count"] if c else 20000
    deep = deep_model(g.get(f"DeepModel/vars:{n}/layers:{n // 10}"))
    if deep:
        after += (" " if after else "") + deep
    return Section("Many small variables", intro, table(headers, rows),
                   ["peers", "restore_200k", "restore_20k_hugetlb", "restore_20k_adam",
                    "save_200k", "save_20k_adam", "checkpoint_bench"],
                   ("small_variables.png", draw) if c
                   else None, after)


def deep_model(result):
    """A deep model's first save and first restore against a flat one of
    the same variables (`checkpoint_bench`'s DeepModel record, or None)."""
    if not result or result.get("deep_vs_flat_save") is None:
        return ""
    n = re.search(r"vars:(\d+)/layers:(\d+)", result.get("run_name", result.get("name", "")))
    shape = (f"{int(n[1]):,} variables in {int(n[2]):,} modules of {int(n[1]) // int(n[2]):,}"
             if n else "the variables spread over many modules")
    return (f"A program's first save of {shape}, as a deep network holds them, takes "
            f"{num(result['deep_save_us_per_variable'])} µs per variable, "
            f"{times(result['deep_vs_flat_save'])} the same variables in one module, and its "
            f"first restore into a new program {num(result['deep_restore_us_per_variable'])} µs, "
            f"{times(result['deep_vs_flat_restore'])} (`checkpoint_bench`, `DeepModel`; both "
            "include the object walk, the plan and the ops built on first use).")


def restore_phases(small, large):
    """Where the time per variable goes at two sizes: `ckflow bench
    restore`'s two phases (its JSON objects `small` and `large`), each
    beside the other size's, with the page faults each phase took (first
    touches of memory the allocator did not reuse from the last restore)."""
    def phase(result, name):
        seconds, count = get(result, f"{name}_phase_s"), get(result, "count")
        if seconds is None or not count:
            return None, None
        faults = get(result, f"{name}_phase_page_faults")
        return seconds / count * 1e6, faults

    parts = []
    for name, label, does in (("restore", "`Restore`", "the index, object matching, restore ops"),
                              ("initialize", "`InitializeOrRestore`", "running them: the reads")):
        (small_us, small_faults), (large_us, large_faults) = phase(small, name), phase(large, name)
        if small_us is None or large_us is None:
            return ""
        faults = ""
        if small_faults is not None and large_faults is not None:
            faults = (f", with {whole(large_faults)} page faults a restore against "
                      f"{whole(small_faults)}")
        parts.append(f"{label} ({does}) {num(large_us)} µs against {num(small_us)} µs, "
                     f"{times(large_us / small_us)}{faults}")
    return (f"Per variable at {get(large, 'count'):,} against {get(small, 'count'):,}: "
            + "; ".join(parts) + ".")


def huge_pages(small, huge):
    """The warm restore of many small variables again with glibc's heap on
    huge pages (`ckflow bench restore` under GLIBC_TUNABLES=
    glibc.malloc.hugetlb=1: its JSON object `huge`) against the same
    restore without (`small`), phase by phase: matching reads objects spread
    over the heap, a TLB miss as often as a cache miss."""
    def us(result, key):
        return per_var_of(result, key) if result else None

    ck, ck_huge = us(small, "ckflow_s"), us(huge, "ckflow_s")
    match, match_huge = us(small, "restore_phase_s"), us(huge, "restore_phase_s")
    if ck is None or ck_huge is None or get(huge, "count") != get(small, "count"):
        return ""
    phase = ""
    if match is not None and match_huge is not None:
        phase = (f"; `Restore`, which walks the objects, {num(match_huge)} µs against "
                 f"{num(match)} µs ({times(match_huge / match)})")
    return (f"With glibc's heap on huge pages (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, "
            f"a setting of the program, not of ckflow) the same restore of "
            f"{get(huge, 'count'):,} takes {num(ck_huge)} µs per variable against "
            f"{num(ck)} µs ({times(ck_huge / ck)}), {times(get(huge, 'ratio'))} its ceiling"
            f"{phase}.")


def with_adam(restore, save, adam_restore, adam_save):
    """The same model trained by Adam (`ckflow bench restore|save
    --optimizer adam`: JSON objects `adam_restore` and `adam_save`), its
    slots m and v variables of the checkpoint beside each of the model's,
    against the model without an optimizer (`restore`, `save`), per
    variable with the slots counted."""
    parts = []
    for what, plain, adam in (("restoring", restore, adam_restore), ("saving", save, adam_save)):
        us, us_adam = per_var_of(plain, "ckflow_s"), per_var_of(adam, "ckflow_s")
        if us is None or us_adam is None or get(adam, "model_count") != get(plain, "count"):
            continue
        parts.append(f"{what} takes {num(us_adam)} µs per variable against {num(us)} µs "
                     f"({times(us_adam / us)}), {times(get(adam, 'ratio'))} its ceiling")
    if not parts:
        return ""
    adam = adam_restore or adam_save
    return (f"A model trained by Adam checkpoints its slots m and v beside each variable: with "
            f"{get(adam, 'model_count'):,} variables and their slots, {get(adam, 'count'):,} "
            f"variables in all (`--optimizer adam`), " + ", and ".join(parts) + ".")


def restore_budget(small, target=0.8):
    """What stands in the way of a warm restore at `target` × its ceiling
    (`ckflow bench restore`'s JSON object `small`): the time per variable
    the target allows, against what each phase takes of it. "" when the
    target is met or the phases are missing."""
    count = get(small, "count")
    raw, total = get(small, "raw_s"), get(small, "ckflow_s")
    restore, initialize = get(small, "restore_phase_s"), get(small, "initialize_phase_s")
    if not count or None in (raw, total, restore, initialize) or raw / total >= target:
        return ""

    def us(seconds):
        return seconds / count * 1e6

    budget = us(raw) / target
    left = budget - us(initialize)
    said = (f"What stands in the way of {num(target, 2)}× at {count:,} variables: it allows "
            f"{num(budget)} µs per variable (the ceiling's {num(us(raw))} µs over "
            f"{num(target, 2)}). Running the restore ops (`InitializeOrRestore`: each value "
            f"read, checksummed and copied into its variable) takes {num(us(initialize))} µs "
            f"of it, {times(us(initialize) / budget)}")
    if left <= 0:
        return said + ("; that leaves nothing for matching the checkpoint to the objects "
                       f"(`Restore`), which takes {num(us(restore))} µs.")
    return said + (f"; that leaves {num(left)} µs for matching the checkpoint to the objects "
                   f"(`Restore`: the index parsed, the object graph read and walked, the "
                   f"restore ops planned), which takes {num(us(restore))} µs, "
                   f"{times(us(restore) / left)} as much.")


def per_var_of(result, key):
    if result is None or result.get(key) is None:
        return None
    return result[key] / result["count"] * 1e6


def topic_async(r):
    intro = (
        "An async save (`SaveOptions::async`) returns once it has taken a snapshot of the "
        "variables; the write, checksums and fsyncs run on the saver's writer thread. What a "
        "training loop pays is that stall, measured against the same save made synchronously in "
        "the same run, and, in a loop, the step times with a `CheckpointManager` save every 100 "
        "steps against the same loop without saves (`train_bench`, `BM_TrainLoop`: a step's time "
        "includes the save made after it).")
    g = r.gbench("checkpoint_bench")
    rows = []
    for durable, what in ((1, "durable"), (0, "to the page cache")):
        e = g.get(f"SaveAsync/MiB:1024/vars:64/threads:2/durable:{durable}")
        stall = seconds_of(e) if e else None
        ratio = get(e, "stall_vs_sync_save")
        rows.append([f"1 GiB, {what}: the async save's stall", with_unit(ms(stall), "ms"),
                     f"the same save, synchronous: {with_unit(ms(divide(stall, ratio)), 'ms')}",
                     f"stall / sync = **{num(ratio)}**" if ratio is not None else NOT_RUN])
    e = g.get("SaveAsync/MiB:1024/vars:64/threads:2/durable:1")
    rows.append(["1 GiB: the snapshot's copy", with_unit(get(e, "snapshot_GB/s"), "GB/s"),
                 f"`memcpy` into touched buffers: {with_unit(get(e, 'memcpy_GB/s'), 'GB/s')}",
                 times(get(e, "snapshot_vs_memcpy"))])
    small = r.json("save_async_20k")
    rows.append([f"{num(get(small, 'count') or 20000)} × 1 KiB: the async save's stall",
                 with_unit(ms(get(small, "ckflow_s")), "ms"),
                 f"the same save, synchronous: {with_unit(ms(get(small, 'sync_s')), 'ms')}",
                 f"stall / sync = **{num(get(small, 'stall_vs_sync'))}**"
                 if get(small, "stall_vs_sync") is not None else NOT_RUN])
    loops = r.gbench("train_bench")
    for model, name in ((1, "Regress (15 variables)"), (0, "MLP 784-256-256-10")):
        e = loops.get(f"BM_TrainLoop/model:{model}/async:1/every:100")
        rows.append([f"{name} loop, async save every 100 steps: step p50",
                     duration(get(e, "p50_ms")),
                     f"without saves: {duration(get(e, 'base_p50_ms'))}",
                     percent(get(e, "p50_overhead"))])
        rows.append([f"{name} loop: step p99", duration(get(e, "p99_ms")),
                     f"without saves: {duration(get(e, 'base_p99_ms'))}",
                     times(get(e, "p99_ratio"))])
        rows.append([f"{name} loop: the `Save` call (p50)", duration(get(e, "save_p50_ms")),
                     f"time between two saves: {duration(get(e, 'between_saves_ms'))}; "
                     f"an async save's whole write: {duration(get(e, 'write_p50_ms'))}", ""])
    rows.append(["TensorFlow's async checkpoint, PyTorch's `dcp.async_save`", NOT_RUN, "", ""])
    return Section("Async save: the training loop's stall", intro,
                   table(["", "ckflow", "baseline, same run", "ratio"], rows),
                   ["checkpoint_bench", "save_async_20k", "train_bench"])


def ms(seconds):
    return None if seconds is None else seconds * 1e3


def topic_fresh(r):
    intro = (
        "The first restore of a new process: a process that starts, builds its graph and "
        "restores into variables whose pages were never touched (`fresh_restore`: a new process "
        "per run and contender, warm page cache, rotating order). The ceiling maps fresh "
        "anonymous memory and `pread`s + CRC32Cs every value into it; PyTorch's `torch.load` runs "
        "in a fresh interpreter, timed after `import torch`. Peak RSS is each child's.")
    data = r.json("fresh_restore")
    cases = get(data, "cases") or []
    names = {"large": "1 GiB (64 × 16 MiB)", "small": "20,000 × 1 KiB"}
    groups = [names.get(c["name"], c["name"]) for c in cases] or list(names.values())
    who = [("ckflow", "**ckflow** `Restore` → end of `InitializeOrRestore`"),
           ("raw2", "ceiling: `pread` + CRC32C into fresh `mmap`, 2 threads"),
           ("raw1", "the same, 1 thread"),
           ("torch", f"PyTorch{peer_version(r, 'torch')}: `torch.load` in a fresh interpreter")]
    rows = []
    for key, label in who:
        cells = []
        for c in cases:
            s, ck = get(c, key, "seconds"), get(c, "ckflow", "seconds")
            rss = get(c, key, "peak_rss_bytes")
            note = f", peak RSS {num(rss / MIB)} MiB" if rss and rss > 0 else ""
            cells.append(Cell(s, "s", None if key == "ckflow" else divide(s, ck), note))
        rows.append([label] + (cells or [NOT_RUN] * len(groups)))
    rows.append(["TensorFlow: a fresh process's restore"] + [NOT_RUN] * len(groups))
    return Section("Restore in a fresh process", intro, table(["", *groups], rows),
                   ["fresh_restore"])


def topic_cold(r):
    intro = (
        "A restore from a cold page cache, as after a reboot or on a new machine: the "
        "checkpoint on the machine's disk (not tmpfs), the page cache dropped "
        "(`echo 1 > /proc/sys/vm/drop_caches`) before every run, each contender a new process "
        "(`fresh_restore --cold`, rotating order). ckflow builds its graph, then is timed from "
        "`Restore` to the end of `InitializeOrRestore` (every CRC32C checked) into variables "
        "never touched. The ceilings read the same data files in order, 8 MiB per `pread`, "
        "into fresh `mmap`ped memory + CRC32C, through the page cache (its readahead) or with "
        "`O_DIRECT`; ckflow's ratio is to the fastest of them. TensorFlow restores ckflow's "
        "own files in graph mode (`checkpoint.restore` + `run_restore_ops`), PyTorch the same "
        "tensors from its own files, each in a fresh interpreter timed after the imports; "
        "warm rows read the files just before. `ckflow bench restore --cold` measures the "
        "ckflow and ceiling rows of one size as a user would run it.")
    data = r.json("cold_restore")
    run = r.runs.get("cold_restore")
    cases = get(data, "cases") or []
    names = {"large": "1 GiB (64 × 16 MiB)", "small": "20,000 × 1 KiB"}
    groups = [names.get(c["name"], c["name"]) for c in cases] or list(names.values())
    tf, torch = peer_version(r, "tensorflow"), peer_version(r, "torch")
    who = [("ckflow", "**ckflow** cold: `Restore` → end of `InitializeOrRestore`"),
           ("ckflow_warm", "ckflow warm"),
           ("seq1", "ceiling: `pread` 8 MiB blocks + CRC32C, 1 thread"),
           ("seq2", "the same, 2 threads"),
           ("direct1", "the same, `O_DIRECT`, 1 thread"),
           ("direct2", "the same, `O_DIRECT`, 2 threads"),
           ("tf_graph", f"TensorFlow{tf} graph mode cold: `restore()` + `run_restore_ops`"),
           ("tf_graph_warm", f"TensorFlow{tf} graph mode warm"),
           ("torch_mmap", f"PyTorch{torch} cold: `torch.load(mmap=True)` + `copy_` into new "
                          "tensors"),
           ("dcp", f"PyTorch{torch} cold: `torch.distributed.checkpoint.load` into new tensors")]
    baselines = ("seq1", "seq2", "direct1", "direct2")
    rows = []
    for key, label in who:
        cells = []
        for c in cases:
            s, ck = get(c, key, "seconds"), get(c, "ckflow", "seconds")
            rate = f" ({num(c['bytes'] / s / 1e9)} GB/s)" if s else ""
            cells.append(Cell(s, "s", None if key == "ckflow" else divide(s, ck), rate))
        rows.append([label] + (cells or [NOT_RUN] * len(groups)))
    after = []
    if run is not None and run.get("exit") == 3:
        after.append("Not measured: the page cache could not be dropped on this machine "
                     "(it needs root).")
    for c in cases:
        best = min((get(c, k, "seconds") for k in baselines if get(c, k, "seconds")),
                   default=None)
        ck, warm = get(c, "ckflow", "seconds"), get(c, "ckflow_warm", "seconds")
        if best is None or ck is None:
            continue
        ratio = best / ck
        line = (f"{names.get(c['name'], c['name'])}: ckflow cold at **{num(ratio)}×** the "
                f"fastest cold ceiling (target ≥ 0.9×: {'met' if ratio >= 0.9 else 'not met'})")
        if warm:
            line += f"; cold it takes {num(ck / warm)}× its own warm restore"
        line += "."
        if ratio < 0.9 and warm and warm > best / 0.9:
            # Even with every byte in the page cache the restore is slower
            # than the cold ceiling: the device is not what stands in the way.
            line += (f" What stands in the way is not the device: from a warm cache the same "
                     f"restore takes {num(warm)} s, {num(warm / best)}× the cold ceiling's "
                     f"{num(best)} s, so it is bound by its work per variable (the topic "
                     f"\"Many small variables\"), of which the cold reads add "
                     f"{num(max(ck - warm, 0) * 1e3)} ms.")
            touched = get(c, "ckflow", "first_touched_bytes")
            if touched:
                # A new process faults in every page it writes first.
                line += (f" In its new process the restore first touches {num(touched / MIB)} MiB "
                         f"({num(touched / c['bytes'])}× the values' {num(c['bytes'] / MIB)} "
                         f"MiB), a page fault for each page: the values' own pages, and the "
                         f"rest the restore's records (index entries, matched items, restore "
                         f"ops, the variables' records).")
        after.append(line)
    return Section("Restore from a cold cache", intro, table(["", *groups], rows),
                   ["cold_restore"], after="\n".join("- " + a for a in after))


def topic_memory(r):
    intro = (
        "What a save or a restore adds to the process's resident set at its peak (VmHWM, reset "
        "just before the call, minus the resident set before it), from `ckflow bench`'s memory "
        "lines. Files in the run's temporary directory; tmpfs pages are not the process's RSS.")
    peers = peer_cases(r, small=False)
    large = next((c for c in peers if c["bytes"] == GIB), None)
    small = next(iter(peer_cases(r, small=True)), None)
    memory = r.json("memory_async")
    rows = []

    def mib(x):
        return None if x is None or x < 0 else x / MIB

    def mib_text(x):
        return NOT_RUN if mib(x) is None else f"{mib(x):+,.1f} MiB"

    def row(label, added, variables):
        rows.append([label, mib_text(added), with_unit(mib(variables), "MiB")])

    row("1 GiB (64 × 16 MiB), `Write`", get(large, "ckflow", "save", "peak_rss_added_bytes"),
        get(large, "bytes"))
    row("1 GiB, `Restore` + `InitializeOrRestore` into existing variables",
        get(large, "ckflow", "restore", "peak_rss_added_bytes"), get(large, "bytes"))
    row("1 GiB, async `Write` until its files are written (steady state: snapshot buffers reused)",
        get(memory, "async_peak_rss_added_bytes"), get(memory, "bytes"))
    first = get(memory, "memory_saves_rss_after_first_bytes")
    last = get(memory, "memory_saves_rss_after_last_bytes")
    n = get(memory, "memory_saves")
    rows.append([f"1 GiB, {n or 'N'} more async saves: resident set after the first → the last",
                 f"{mib(first):,.1f} → {mib(last):,.1f} MiB" if first and last else NOT_RUN,
                 with_unit(mib(get(memory, "bytes")), "MiB")])
    row("20,000 × 1 KiB, `Write`", get(small, "ckflow", "save", "peak_rss_added_bytes"),
        get(small, "bytes"))
    row("20,000 × 1 KiB, `Restore` + `InitializeOrRestore`",
        get(small, "ckflow", "restore", "peak_rss_added_bytes"), get(small, "bytes"))
    for mode in ("sync", "async"):
        soak = r.json(f"soak_{mode}")
        rss = (f"resident {num(soak['start']['rss_kib'] / 1024)} → "
               f"{num(soak['end']['rss_kib'] / 1024)} MiB; descriptors {soak['start']['fds']} → "
               f"{soak['end']['fds']}, files {soak['start']['files']} → {soak['end']['files']}"
               if soak else NOT_RUN)
        cycles = f"{soak['cycles']:,}" if soak else "10,000"
        rows.append([f"{cycles} {mode} save + restore cycles through `CheckpointManager` "
                     "(max_to_keep 3), 4 small variables (`checkpoint_soak`)", rss, ""])
    rows.append(["TensorFlow, PyTorch", NOT_RUN, ""])
    return Section("Memory", intro,
                   table(["", "peak RSS added over the resident set before the call",
                          "the variables"], rows),
                   ["peers", "memory_async", "soak_sync", "soak_async"])


def topic_train_step(r):
    intro = (
        "One training step of an MLP 784-256-256-10 (ReLU, softmax cross-entropy, batch 128, "
        "Adam), ms per step (lower is faster). ckflow builds it from its layers, loss and "
        "optimizer and runs it with `Session::Run`; the ceiling is the same math written by hand "
        "with Eigen in the same binary (`train_bench`, `BM_TrainStep`, the two timed "
        "alternately), and libtorch's step runs interleaved with ckflow's in the same binary "
        "(`BM_TorchStep`). TensorFlow and PyTorch run the same model, batch and optimizer from "
        "Python (`bench/train_step_peers.py`), limited to the same threads.")
    g = r.gbench("train_bench")
    peers = get(r.json("train_peers"), "steps") or {}
    tf, pt = peer_version(r, "tensorflow"), peer_version(r, "torch")
    columns = [(1, "1 thread"), (0, all_cores(r))]
    rows, series = [], []

    def ckflow_ms(t):
        e = g.get(f"BM_TrainStep/threads:{t}")
        return ms(seconds_of(e)) if e else None

    spec = [
        ("**ckflow** graph step (`Session::Run`)", lambda t: (ckflow_ms(t), None)),
        ("ceiling: hand-written Eigen, same threads",
         lambda t: (get(g.get(f"BM_TrainStep/threads:{t}"), "eigen_ms"),
                    get(g.get(f"BM_TrainStep/threads:{t}"), "speed_vs_eigen"))),
        ("libtorch (C++), same binary",
         lambda t: (get(g.get(f"BM_TorchStep/threads:{t}"), "torch_ms"),
                    get(g.get(f"BM_TorchStep/threads:{t}"), "speed_vs_torch"))),
        (f"PyTorch{pt} (Python, eager)", lambda t: python_peer(peers, "torch", t, ckflow_ms(t))),
        (f"TensorFlow{tf} graph (`tf.compat.v1.Session`)",
         lambda t: python_peer(peers, "tf_graph", t, ckflow_ms(t))),
        (f"TensorFlow{tf} `tf.function`",
         lambda t: python_peer(peers, "tf_function", t, ckflow_ms(t))),
    ]
    for label, f in spec:
        cells = []
        for t, _ in columns:
            value, speed = f(t)
            cells.append(Cell(value, "ms", speed))
        rows.append([label] + cells)
        series.append((plot_name(label), [c.value for c in cells]))

    def draw(path):
        return bar_plot(path, "MLP training step: ms per step (lower is faster)",
                        [c for _, c in columns], series, "ms per step (log scale)")

    return Section("Training step", intro, table(["", *[c for _, c in columns]], rows),
                   ["train_bench", "train_peers"], ("train_step.png", draw) if g else None)


def topic_cnn(r):
    intro = (
        "The Fashion-MNIST example's CNN (`examples/fashion_mnist_model.h`: two blocks of "
        "Conv2D, BatchNormalization, ReLU and MaxPooling2D, then Flatten, Dropout, Dense(128) and "
        "Dense(10); Adam), ms per step (lower is faster): the training step on a batch of 64 and "
        "the inference path on a batch of 256, ckflow's through `Session::Run` with the "
        "session's inter- and intra-op threads both 1, then 2 (`cnn_bench`); TensorFlow the same "
        "tf_keras layers in a TF1 graph run by a `tf.compat.v1.Session` configured with the same "
        "threads, PyTorch eager with `torch.set_num_threads` and `set_num_interop_threads` "
        "(`bench/cnn_peers.py`). Only the step is timed (its batch is made before). The peers "
        "run in processes of their own after ckflow's, on the same machine in the same run; "
        "ckflow's speed is the peer's time over ckflow's (> 1: ckflow is faster). Both sessions "
        "run their graph optimizer's fusions (TensorFlow's grappler remapper; ckflow's "
        "`SessionOptions::remapping`, which runs each convolution with its bias, and at "
        "inference its batch norm, ReLU and max pooling, as one op). Then building "
        "the graph, and the example's checkpoint (model, moving statistics, Adam's slots) saved "
        "and restored, per variable.")
    g = r.gbench("cnn_bench")
    peers = get(r.json("cnn_peers"), "results") or {}
    tf = f" {get(r.json('cnn_peers'), 'tensorflow')}" if get(r.json("cnn_peers"), "tensorflow") else ""
    pt = f" {get(r.json('cnn_peers'), 'torch')}" if get(r.json("cnn_peers"), "torch") else ""
    columns = [("train", 1), ("train", 2), ("inference", 1), ("inference", 2)]
    headers = ["", "train step, 1 thread", "train step, 2 threads", "inference, 1 thread",
               "inference, 2 threads"]

    def ckflow_ms(kind, t):
        name = "BM_CnnTrainStep" if kind == "train" else "BM_CnnInference"
        e = g.get(f"{name}/threads:{t}")
        return ms(seconds_of(e)) if e else None

    def peer_ms(peer, kind, t):
        return get(peers.get(peer, {}).get(str(t)), f"{kind}_ms" if kind == "train" else
                   "inference_ms")

    rows, series = [], []
    for label, f in (("**ckflow** (`Session::Run`)", lambda k, t: (ckflow_ms(k, t), None)),
                     (f"TensorFlow{tf} graph (`tf.compat.v1.Session`)",
                      lambda k, t: (peer_ms("tf_graph", k, t),
                                    divide(peer_ms("tf_graph", k, t), ckflow_ms(k, t)))),
                     (f"PyTorch{pt} (eager)",
                      lambda k, t: (peer_ms("torch", k, t),
                                    divide(peer_ms("torch", k, t), ckflow_ms(k, t))))):
        cells = [Cell(*f(k, t)[:1], "ms", f(k, t)[1]) for k, t in columns]
        rows.append([label] + cells)
        series.append((plot_name(label), [c.value for c in cells]))
    build = g.get("BM_CnnBuildGraph")
    tf_build = get(peers.get("tf_graph", {}).get("1"), "build_s")
    save = g.get("BM_CnnCheckpoint/restore:0")
    restore = g.get("BM_CnnCheckpoint/restore:1")
    extra = table(["", "ckflow", "peer"], [
        [f"building the graph and its session ({whole(get(build, 'nodes'))} nodes)",
         Cell(ms(seconds_of(build)) if build else None, "ms"),
         Cell(tf_build * 1e3 if tf_build is not None else None, "ms",
              divide(tf_build * 1e3 if tf_build is not None else None,
                     ms(seconds_of(build)) if build else None), f" (TensorFlow{tf})")],
        [f"checkpoint save, `Checkpoint::Write` ({whole(get(save, 'variables'))} variables)",
         with_unit(get(save, "us_per_variable"), "µs per variable"), NOT_RUN],
        ["checkpoint restore, `Restore` + `InitializeOrRestore`",
         with_unit(get(restore, "us_per_variable"), "µs per variable"), NOT_RUN],
    ])

    def draw(path):
        return bar_plot(path, "Fashion-MNIST CNN: ms per step (lower is faster)", headers[1:],
                        series, "ms per step (log scale)")

    return Section("Fashion-MNIST CNN", intro, table(headers, rows) + "\n\n" + extra,
                   ["cnn_bench", "cnn_peers"], ("cnn_step.png", draw) if g else None)


def topic_sequence(r):
    intro = (
        "The character transformer of `examples/char_transformer_model.h` at batch 32 × "
        "context 128 (vocabulary 256, d_model 128, 2 pre-norm blocks of causal "
        "MultiHeadAttention with 4 heads of 32 and a GELU MLP of 512, a final "
        "LayerNormalization, Dense to 256 logits; mean sparse softmax cross-entropy over "
        "every position; Adam): one training step, ms per step (lower is faster), ckflow's "
        "through `Session::Run` with the session's inter- and intra-op threads both 1, then 2 "
        "(`sequence_bench`, `BM_TransformerTrainStep`). TensorFlow runs interop's tf_keras "
        "model of the same layers (`interop/test_char_transformer.py`) in a TF1 graph with a "
        "`tf.compat.v1.Session` configured with the same threads, PyTorch the same model in "
        "eager mode (`nn.MultiheadAttention` with a causal mask) with `torch.set_num_threads` "
        "and `set_num_interop_threads` (`bench/sequence_peers.py`, each in a process of its "
        "own, the batch made before timing, the median of 30 steps after 5 of warm-up); "
        "ckflow's speed is the peer's time over ckflow's (> 1: ckflow is faster). Then two of "
        "its kernels in GFLOP/s (2 × multiply-adds / time, higher is faster), each beside one "
        "`MatMul` of the same FLOPs on the same threads (the ceiling: the same work as one "
        "GEMM): `BatchMatMulV2` of the attention scores ([32, 4, 128, 32] × "
        "[32, 4, 128, 32]ᵀ) and the MultiHeadAttention layer's forward pass; the ratio is "
        "ckflow's GFLOP/s over the GEMM's (1: as fast as the GEMM). Last, Adagrad's sparse "
        "update, as an embedding table's optimizer runs it: `ResourceSparseApplyAdagrad` on a "
        "float32 table of 2²⁰ rows × 128 and its accumulator, 16,384 distinct random rows "
        "per call (learning rate 0.01), in rows per second (higher is faster): ckflow's "
        "through `Session::Run`, the same update as a plain single-threaded C++ loop over "
        "the rows in the same binary, and TensorFlow's op in a TF1 graph and session on the "
        "same table and rows; ratios are ckflow's rows per second over the other's (> 1: "
        "ckflow is faster).")
    g = r.gbench("sequence_bench")
    data = r.json("sequence_peers")
    peers = get(data, "results") or {}
    tf = f" {get(data, 'tensorflow')}" if get(data, "tensorflow") else ""
    pt = f" {get(data, 'torch')}" if get(data, "torch") else ""
    threads = [1, 2]
    headers = ["", "1 thread", "2 threads"]

    def ckflow_ms(t):
        e = g.get(f"BM_TransformerTrainStep/threads:{t}")
        return ms(seconds_of(e)) if e else None

    def peer(name, t, key):
        return get(peers.get(name, {}).get(str(t)), key)

    def tokens(t):
        rate = get(g.get(f"BM_TransformerTrainStep/threads:{t}"), "tokens_per_s")
        return f" ({whole(rate)} tokens/s)" if rate is not None else ""

    rows, series = [], []
    for label, f in (("**ckflow** (`Session::Run`)",
                      lambda t: Cell(ckflow_ms(t), "ms", None, tokens(t))),
                     (f"TensorFlow{tf} graph (`tf.compat.v1.Session`)",
                      lambda t: Cell(peer("tf_graph", t, "train_ms"), "ms",
                                     divide(peer("tf_graph", t, "train_ms"), ckflow_ms(t)))),
                     (f"PyTorch{pt} (eager)",
                      lambda t: Cell(peer("torch", t, "train_ms"), "ms",
                                     divide(peer("torch", t, "train_ms"), ckflow_ms(t))))):
        cells = [f(t) for t in threads]
        rows.append([label] + cells)
        series.append((plot_name(label), [c.value for c in cells]))
    step = table(["training step, batch 32 × 128", *headers[1:]], rows)

    kernel_rows = []
    for name, gemm, label in (("BM_BatchMatMul", "BM_BatchMatMulAsGemm",
                               "`BatchMatMulV2` [32, 4, 128, 32] × [32, 4, 128, 32]ᵀ"),
                              ("BM_AttentionLayer", "BM_AttentionAsGemm",
                               "MultiHeadAttention layer, forward")):
        for t in threads:
            mine = get(g.get(f"{name}/threads:{t}"), "gflops")
            ceiling = get(g.get(f"{gemm}/threads:{t}"), "gflops")
            kernel_rows.append([label, t, with_unit(mine, "GFLOP/s"),
                                with_unit(ceiling, "GFLOP/s"), times(divide(mine, ceiling))])
    kernels = table(["kernel", "threads", "ckflow", "`MatMul`, same FLOPs", "ckflow / MatMul"],
                    kernel_rows)

    def million(x):
        return None if x is None else x / 1e6

    def ck_rows(t):
        return get(g.get(f"BM_SparseAdagrad/threads:{t}"), "rows_per_s")

    hand = get(g.get("BM_SparseAdagradHandLoop"), "rows_per_s")
    sparse_rows = [
        ["**ckflow** `ResourceSparseApplyAdagrad` (`Session::Run`)"] +
        [Cell(million(ck_rows(t)), "M rows/s") for t in threads],
        ["hand-written C++ loop over the rows, 1 thread, same binary"] +
        [Cell(million(hand), "M rows/s", divide(ck_rows(t), hand)) for t in threads],
        [f"TensorFlow{tf} `ResourceSparseApplyAdagrad` (`tf.compat.v1.Session`)"] +
        [Cell(million(peer("tf_sparse_adagrad", t, "rows_per_s")), "M rows/s",
              divide(ck_rows(t), peer("tf_sparse_adagrad", t, "rows_per_s"))) for t in threads],
    ]
    sparse = table(["sparse Adagrad, 16,384 of 2²⁰ rows × 128", *headers[1:]], sparse_rows)

    def draw(path):
        return bar_plot(path, "Character transformer: ms per training step (lower is faster)",
                        headers[1:], series, "ms per step (log scale)")

    plotted = any(v is not None for _, values in series for v in values)
    return Section("Character transformer and sparse updates", intro,
                   step + "\n\n" + kernels + "\n\n" + sparse, ["sequence_bench", "sequence_peers"],
                   ("transformer_step.png", draw) if plotted else None)


def recsys_log(text):
    """The figures examples/embedding_recsys prints at its end: step time
    p50 and p99 (ms) and the steps they are over, peak resident memory and
    the table's size (MiB), the first and the last validation loss. Each is
    None where the text does not hold it (an empty text: a run not made)."""
    out = dict.fromkeys(("p50_ms", "p99_ms", "steps", "peak_mib", "table_mib", "first_loss",
                         "last_loss"))
    m = re.search(r"step time p50 ([\d.]+) ms, p99 ([\d.]+) ms over (\d+) steps", text)
    if m:
        out.update(p50_ms=float(m.group(1)), p99_ms=float(m.group(2)), steps=int(m.group(3)))
    m = re.search(r"peak resident memory ([\d.]+) MiB \(the table: ([\d.]+) MiB\)", text)
    if m:
        out.update(peak_mib=float(m.group(1)), table_mib=float(m.group(2)))
    losses = re.findall(r"^validation loss ([\d.]+)$", text, re.M)
    if losses:
        out.update(first_loss=float(losses[0]), last_loss=float(losses[-1]))
    return out


# embedding_recsys' targets: saves every 100 steps cost the loop's median
# step at most 2% and its p99 at most 1.5x; the process at its peak holds at
# most 1.1x the table.
RECSYS_P50_TARGET, RECSYS_P99_TARGET, RECSYS_MEMORY_TARGET = 1.02, 1.5, 1.1


def met(value, limit):
    return NOT_RUN if value is None else ("met" if value <= limit else "**not met**")


def recsys_save_arithmetic(p50, nosaves, save_gbps, raw_gbps):
    """Why a save every 100 steps moves the median step, where it does: the
    sentences that set the time a save takes (from the table's own save
    rate in this run) beside the time between two saves."""
    if p50 is None or p50 <= RECSYS_P50_TARGET:
        return []
    step_ms, table_mib = nosaves["p50_ms"], nosaves["table_mib"]
    if None in (step_ms, table_mib, save_gbps):
        return []
    # A checkpoint holds the table and Adagrad's accumulator, of its size;
    # the dense layers are a few KiB.
    save_gb = 2 * table_mib * (1 << 20) / 1e9
    save_ms = save_gb / save_gbps * 1e3
    between_ms = 100 * step_ms
    # Half the steps free of a save: each save done within 50 steps.
    needed_gbps = save_gb / (50 * step_ms / 1e3)
    out = [f"What stands in the way is the work itself. Without saves, 100 steps last "
           f"{duration(between_ms)}; a save writes the table and its accumulator, "
           f"{num(save_gb)} GB, which at this run's `Checkpoint::Write` rate "
           f"({with_unit(save_gbps, 'GB/s')}, the machine to itself) takes "
           f"{duration(save_ms)}, {times(save_ms / between_ms)} the time between two saves."]
    if save_ms > between_ms:
        out.append("So the saves run back to back, each `Save` waiting for the write before "
                   "it (as TensorFlow's async checkpoint waits), and every step of the loop "
                   "shares the cores and the memory bandwidth with a write.")
    out.append(f"A median within 2% needs half the steps free of a save, so each save "
               f"written within 50 steps: {with_unit(needed_gbps, 'GB/s')}"
               + (f", {times(needed_gbps / raw_gbps)} this machine's raw `pwrite`."
                  if raw_gbps else "."))
    return out


def topic_recsys(r):
    intro = (
        "The embedding table of `examples/embedding_recsys`, 2²¹ rows × 128 float32 (1 GiB) "
        "as a `PartitionedVariable` of 8 parts. First the table alone saved and restored "
        "(`sequence_bench`, page cache, every CRC32C checked), in GB/s of the table's bytes "
        "(higher is faster): `Checkpoint::Write` of the 8 parts beside raw `pwrite` of the "
        "same bytes on 2 threads, and a restore into 8 parts and into 3 (the partitioning "
        "changed: each part's rows read as slices of the saved parts) beside raw `pread` + "
        "CRC32C of the same bytes; the ratio is ckflow's GB/s over the raw figure's (target "
        "≥ 0.8×). Then the example itself, 1,000 training steps (Zipf-distributed ids, "
        "sparse Adagrad on the table, Adam on the dense layers) on 2 threads, once with a "
        "`CheckpointManager` async save every 100 steps and once with only the final save, "
        "each in a process of its own with its checkpoints in `/dev/shm`: the loop's step "
        "times (a step's time includes the save made after it) and the process's peak "
        "resident memory (`getrusage`) beside the table's size, from the lines the example "
        "prints at its end. The ratio is the run with saves over the run without (targets: "
        "p50 within 2%, p99 within 1.5×, peak resident memory ≤ 1.1× the table).")
    g = r.gbench("sequence_bench")

    def gbps(name):
        rate = get(g.get(name), "bytes_per_second")
        return None if rate is None else rate / 1e9

    raw_write, raw_read = gbps("BM_PartitionedTableRawWrite"), gbps("BM_PartitionedTableRawRead")
    io_rows, after = [], []
    for name, label, raw, raw_label in (
            ("BM_PartitionedTableSave", "save: `Checkpoint::Write`, 8 parts", raw_write,
             "raw `pwrite`, 2 threads"),
            ("BM_PartitionedTableRestore/parts:8", "restore into 8 parts", raw_read,
             "raw `pread` + CRC32C"),
            ("BM_PartitionedTableRestore/parts:3", "restore into 3 parts", raw_read,
             "raw `pread` + CRC32C")):
        mine = gbps(name)
        ratio = divide(mine, raw)
        io_rows.append([label, with_unit(mine, "GB/s"),
                        f"{raw_label}: {with_unit(raw, 'GB/s')}",
                        NOT_RUN if ratio is None else
                        f"{times(ratio)} ({'met' if ratio >= 0.8 else '**not met**'})"])
    io = table(["1 GiB table (2²¹ × 128 float32)", "ckflow", "raw, same bytes",
                "ratio (target ≥ 0.8×)"], io_rows)

    saves = recsys_log(read(os.path.join(r.dir, "recsys_saves.log")))
    nosaves = recsys_log(read(os.path.join(r.dir, "recsys_nosaves.log")))
    p50 = divide(saves["p50_ms"], nosaves["p50_ms"])
    p99 = divide(saves["p99_ms"], nosaves["p99_ms"])

    def memory(run):
        peak, size = run["peak_mib"], run["table_mib"]
        if peak is None:
            return NOT_RUN
        return f"{num(peak)} MiB ({times(divide(peak, size))} the table's {num(size)} MiB)"

    def loss(run):
        if run["first_loss"] is None:
            return NOT_RUN
        return f"{num(run['first_loss'])} → {num(run['last_loss'])}"

    def steps(run):
        return f" ({whole(run['steps'])} steps)" if run["steps"] else ""

    memory_saves = divide(saves["peak_mib"], saves["table_mib"])
    memory_nosaves = divide(nosaves["peak_mib"], nosaves["table_mib"])
    loop_rows = [
        ["step time p50", duration(saves["p50_ms"]), duration(nosaves["p50_ms"]), times(p50),
         f"within 2%: {met(p50, RECSYS_P50_TARGET)}"],
        ["step time p99", duration(saves["p99_ms"]), duration(nosaves["p99_ms"]), times(p99),
         f"≤ {RECSYS_P99_TARGET:g}×: {met(p99, RECSYS_P99_TARGET)}"],
        ["peak resident memory", memory(saves), memory(nosaves),
         times(divide(saves["peak_mib"], nosaves["peak_mib"])),
         f"≤ {RECSYS_MEMORY_TARGET:g}× the table: with saves "
         f"{met(memory_saves, RECSYS_MEMORY_TARGET)}, without "
         f"{met(memory_nosaves, RECSYS_MEMORY_TARGET)}"],
        ["validation loss, first → last", loss(saves), loss(nosaves), "", ""],
    ]
    loop = table(["`embedding_recsys`, 2 threads", f"async save every 100 steps{steps(saves)}",
                  f"only the final save{steps(nosaves)}", "with / without", "target"], loop_rows)

    if p50 is not None and p99 is not None:
        after.append(f"Saving every 100 steps moves the loop's median step by "
                     f"{percent(p50 - 1)} (target within 2%: "
                     f"{'met' if p50 <= RECSYS_P50_TARGET else 'not met'}) and its p99 by "
                     f"{times(p99)} (target ≤ 1.5×: "
                     f"{'met' if p99 <= RECSYS_P99_TARGET else 'not met'}).")
        after.extend(recsys_save_arithmetic(p50, nosaves, gbps("BM_PartitionedTableSave"),
                                            raw_write))
    if memory_saves is not None:
        after.append(f"At its peak the process with saves held {times(memory_saves)} the "
                     f"table (target ≤ 1.1×: "
                     f"{'met' if memory_saves <= RECSYS_MEMORY_TARGET else 'not met'}). Adagrad's "
                     "accumulator is a second table of the same size, so the two alone are "
                     "2× the table. An async save copies neither: it reads them a 4 KiB block "
                     "at a time while the loop goes on, and the loop sets aside only the blocks "
                     "it changes before the save has read them; what the run with saves holds "
                     "beyond the run without is those blocks.")
        if memory_nosaves is not None:
            after.append(f"Against the table and its accumulator together, the run without "
                         f"saves holds {times(memory_nosaves / 2)} and the run with saves "
                         f"{times(memory_saves / 2)}.")
    return Section("A 1 GiB partitioned embedding table", intro, io + "\n\n" + loop,
                   ["sequence_bench", "recsys_saves", "recsys_nosaves"],
                   after=" ".join(after))


def all_cores(r):
    cores = get(r.json("machine"), "cores")
    return f"all cores ({cores})" if cores else "all cores"


def python_peer(peers, key, threads, ckflow_ms):
    """(ms per step, ckflow's speed) of a peer run by train_step_peers.py;
    threads 0 means all cores."""
    entry = peers.get(key, {}).get(str(threads if threads else "all"))
    value = get(entry, "ms")
    return value, divide(value, ckflow_ms)


def topic_session(r):
    intro = (
        "What the session adds to the kernels it runs: the same Kernel objects run through "
        "`Session::Run` and called directly in a loop with hand-made contexts, interleaved in one "
        "loop (`session_bench`); `MatMul` also beside the bare Eigen product a user would write, "
        "and Adam over 1,000 variables of 1 KiB beside the same update written by hand.")
    g = r.gbench("session_bench")
    rows = []
    for name, label, nodes in (("BM_SessionChain", "chain of 1,000 tiny `Add`s", 1001),
                               ("BM_SessionIndependent", "1,000 independent tiny `Add`s", 1003)):
        e = g.get(name)
        session_us = seconds_of(e) * 1e6 if e else None
        rows.append([label, with_unit(session_us, "µs"),
                     f"direct kernel loop: {with_unit(get(e, 'direct_us'), 'µs')}",
                     text_of(get(e, "overhead_ns/node"), "{} ns per node")])
    for t, what in ((0, all_cores(r)), (1, "1 thread")):
        e = g.get(f"BM_SessionMatMul/threads:{t}")
        rows.append([f"`MatMul` 1024 × 1024, {what}", with_unit(ms(seconds_of(e)) if e else None,
                                                                 "ms"),
                     f"bare Eigen GEMM, 1 thread: {with_unit(get(e, 'eigen_ms'), 'ms')}",
                     text_of(get(e, "speed_vs_eigen"), "speed {}× Eigen's") + "; " +
                     text_of(get(e, "speed_vs_direct"), "{}× its own kernel's")])
    for t, what in ((0, all_cores(r)), (1, "1 thread")):
        e = g.get(f"BM_SessionAdam/threads:{t}")
        rows.append([f"Adam over 1,000 × 1 KiB, {what}",
                     with_unit(get(e, "session_ns/var"), "ns per variable"),
                     f"hand loop: {with_unit(get(e, 'hand_ns/var'), 'ns per variable')}",
                     text_of(get(e, "x_hand"), "{}× the hand loop's time")])
    rows.append(["TensorFlow's and PyTorch's per-op overhead", NOT_RUN, "", ""])
    return Section("Session overhead", intro,
                   table(["", "ckflow", "baseline, same run", "ratio"], rows), ["session_bench"])


def topic_eager(r):
    intro = (
        "Eager execution runs one op at a time as it is called, with no graph to plan: the MLP "
        "training step executed eagerly against the same step through the session "
        "(`train_bench`, `BM_EagerTrainStep`, interleaved), TensorFlow's eager step against its "
        "graph step (`bench/train_step_peers.py`), and an eager program's restore-on-create of "
        "20,000 × 1 KiB variables (each variable created by its owner after `Restore`, its "
        "initializer skipped) against the graph program creating and restoring the same "
        "(`checkpoint_bench`, `RestoreOnCreate`). Ratios are eager time over graph time "
        "(lower is better).")
    g = r.gbench("train_bench")
    peers = get(r.json("train_peers"), "steps") or {}
    rows = []
    for t, what in ((1, "1 thread"), (0, all_cores(r))):
        e = g.get(f"BM_EagerTrainStep/threads:{t}")
        rows.append([f"**ckflow** MLP step, {what}", with_unit(ms(seconds_of(e)) if e else None,
                                                                "ms"),
                     with_unit(get(e, "graph_ms"), "ms"), times(get(e, "eager_vs_graph"))])
    tf = peer_version(r, "tensorflow")
    for t, what in ((1, "1 thread"), ("all", all_cores(r))):
        eager = get(peers.get("tf_eager", {}).get(str(t)), "ms")
        graph = get(peers.get("tf_graph", {}).get(str(t)), "ms")
        rows.append([f"TensorFlow{tf} MLP step, {what}", with_unit(eager, "ms"),
                     with_unit(graph, "ms"), times(divide(eager, graph))])
    c = r.gbench("checkpoint_bench").get("RestoreOnCreate/vars:20000")
    rows.append(["**ckflow** restore-on-create, 20,000 × 1 KiB",
                 with_unit(get(c, "eager_us_per_variable"), "µs per variable"),
                 with_unit(get(c, "graph_us_per_variable"), "µs per variable"),
                 times(get(c, "eager_vs_graph"))])
    return Section("Eager", intro, table(["", "eager", "graph", "eager / graph"], rows),
                   ["train_bench", "train_peers", "checkpoint_bench"])


def topic_mpi(r):
    intro = (
        "Group saves (`distributed/`): R ranks under `mpirun` save one model as a group (each "
        "writes its part, rank 0 merges the parts' indexes) and restore it (each reads its own), "
        "beside rank 0 alone saving and restoring the same model as a plain checkpoint in the "
        "same run (`group_bench save`, best of 3). All ranks share this one machine, so this "
        "shows the protocol's cost, not a cluster's bandwidth. Then the merge alone against the "
        "number of parts and keys, beside opening and checking the same parts' indexes "
        "(`group_bench merge`).")
    rows, names = [], []
    for name in sorted((n for n in r.runs if n.startswith("group_save_")),
                       key=lambda n: int(n.rsplit("_", 1)[1])):
        names.append(name)
        d = r.json(name)
        ranks = name.rsplit("_", 1)[1]
        if d is None:
            rows.append([ranks, NOT_RUN, NOT_RUN, NOT_RUN, NOT_RUN])
            continue
        rows.append([ranks, f"{num(d['save_s'])} s", times(divide(d["alone_save_s"], d["save_s"])),
                     f"{num(d['restore_s'])} s",
                     times(divide(d["alone_restore_s"], d["restore_s"]))])
    if not rows:
        rows.append([NOT_RUN] * 5)
        names = [f"group_save_{ranks}" for ranks in (1, 2, 4)]
    d = next((r.json(n) for n in names if r.json(n)), None)
    size = f"{d['mib']} MiB in {d['count']} variables" if d else "the model"
    body = table(["ranks", f"group save, {size}", "speed × one process", "group restore",
                  "speed × one process"], rows)
    merge = r.json("group_merge")
    mrows = [[f"{m['parts']:,}", f"{m['keys']:,}", f"{m['bytes_per_key']:,}",
              f"{num(m['merge_s'] * 1e3)} ms", f"{num(m['read_s'] * 1e3)} ms",
              f"{num(m['merge_s'] / m['keys'] * 1e6)} µs"] for m in get(merge, "rows") or []]
    body += "\n\n" + table(["parts", "keys", "bytes per key", "merge", "reading the indexes",
                            "merge per key"], mrows or [[NOT_RUN] * 6])
    return Section("Group saves under MPI", intro, body, names + ["group_merge"],
                   after="The merge renames the parts' data files and never reads their bytes: "
                   "compare the 4-byte and 16 KiB rows at 10,000 keys.")


def topic_isa(r):
    intro = (
        "Eigen's kernels are compiled for the project's instruction set (`CKFLOW_ARCH`: by "
        "default the newest of x86-64-v4 and x86-64-v3 the building machine runs): "
        "`gemm_isa_bench` times the MLP step's six GEMM shapes on one thread as built, "
        "`gemm_isa_bench_baseline` the same source built for plain x86-64 (SSE2) and, where "
        "the project is built for more, `gemm_isa_bench_v3` for x86-64-v3 (AVX2, FMA).")
    fast, base = r.gbench("gemm_isa_bench"), r.gbench("gemm_isa_bench_baseline")
    v3 = r.gbench("gemm_isa_bench_v3")

    def cell(e):
        return f"{num(seconds_of(e) * 1e6)} µs, {num(e['GFLOP/s'] / 1e9)} GFLOP/s" if e else NOT_RUN

    rows = []
    for name, e in fast.items():
        m = re.search(r"m:(\d+)/k:(\d+)/n:(\d+)", name)
        b, b3 = base.get(name), v3.get(name)
        row = [" × ".join(m.groups()) if m else name, cell(b)]
        if v3:
            row.append(cell(b3))
        row += [cell(e), times(divide(seconds_of(b), seconds_of(e)) if b else None)]
        if v3:
            row.append(times(divide(seconds_of(b3), seconds_of(e)) if b3 else None))
        rows.append(row)
    head = (["m × k × n", "x86-64", "x86-64-v3", "as built", "speed-up over x86-64",
             "over x86-64-v3"] if v3 else ["m × k × n", "x86-64", "as built", "speed-up"])
    return Section("Instruction set", intro, table(head, rows or [[NOT_RUN] * len(head)]),
                   ["gemm_isa_bench", "gemm_isa_bench_baseline"] + (["gemm_isa_bench_v3"] if v3 else []))


def topic_conv(r):
    intro = (
        "Conv2D's three passes (`conv_bench`): forward, the gradient of the input "
        "(Conv2DBackpropInput) and of the filter (Conv2DBackpropFilter), on ResNet-like layers "
        "at batch 32 (res56: 56×56×64 3×3 → 64, res28: 28×28×128 3×3 → 128, res7: 7×7×512 "
        "1×1 → 512) and the CNN example's two convolutions at batch 64 (cnn1: 28×28×1 3×3 → 32, "
        "cnn2: 13×13×32 3×3 → 64), in GFLOP/s (2 × multiply-adds / time). Beside each: MatMul "
        "on the same multiply-adds on the same threads (the ceiling: the convolution's work as "
        "one GEMM with no patches to build), and TensorFlow's and PyTorch's convolutions on the "
        "same shapes (`conv_peers.py`: tf.raw_ops under tf.function, NHWC; aten's convolution "
        "and convolution_backward, NCHW).")
    ck = r.gbench("conv_bench")
    peers = {}
    for e in (r.json("conv_peers") or {}).get("results", []):
        peers[(e["framework"], e["threads"], e["shape"], e["pass"])] = e["GFLOPs"]
    rows = []
    for name, e in ck.items():
        m = re.match(r"BM_Conv2D/(\w+)/(\w+)/threads:(\d+)", name)
        if not m:
            continue
        shape, which, threads = m.group(1), m.group(2), int(m.group(3))
        mine = e.get("GFLOPs")

        def peer(framework):
            theirs = peers.get((framework, threads, shape, which))
            return Cell(theirs, "GFLOP/s", divide(mine, theirs))

        rows.append([shape, which, threads, with_unit(mine, "GFLOP/s"),
                     Cell(e.get("gemm_GFLOPs"), "GFLOP/s", e.get("x_gemm")),
                     peer("tensorflow"), peer("torch")])
    return Section("Convolutions", intro,
                   table(["shape", "pass", "threads", "ckflow", "MatMul, same work", "TensorFlow",
                          "PyTorch"], rows or [[NOT_RUN] * 7]),
                   ["conv_bench", "conv_peers"])


TOPICS = [topic_restore, topic_cast, topic_save, topic_incremental, topic_small, topic_async, topic_fresh, topic_cold,
          topic_memory, topic_train_step, topic_cnn, topic_sequence, topic_recsys,
          topic_session, topic_eager, topic_mpi,
          topic_isa, topic_conv]


# ------------------------------------------------------------------ machine


def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


PACKAGES = ["libeigen3-dev", "libtbb-dev", "libprotobuf-dev", "libleveldb-dev", "libisal-dev",
            "libbenchmark-dev", "libtorch-dev", "openmpi-bin"]


def machine(directory, build):
    cpuinfo = read("/proc/cpuinfo")
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", cpuinfo, re.M)
    mem = re.search(r"^MemTotal:\s*(\d+) kB", read("/proc/meminfo"), re.M)
    cache = read(os.path.join(build, "CMakeCache.txt"))

    def cached(key):
        m = re.search(rf"^{key}:[A-Z]+=(.*)$", cache, re.M)
        return m.group(1) if m else ""

    compiler = cached("CMAKE_CXX_COMPILER") or "c++"
    os_release = re.search(r'^PRETTY_NAME="?([^"\n]+)', read("/etc/os-release"), re.M)
    versions = {}
    for p in PACKAGES:
        v = sh("dpkg-query", "-W", "-f=${Version}", p)
        versions[p] = v or None
    record = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": model.group(1) if model else platform.processor(),
        "cores": os.cpu_count(),
        "avx512": bool(flags and "avx512f" in flags.group(1).split()),
        "memory_bytes": int(mem.group(1)) * 1024 if mem else None,
        "kernel": platform.release(),
        "os": os_release.group(1) if os_release else platform.platform(),
        "compiler": sh(compiler, "--version").splitlines()[0] if sh(compiler, "--version") else "",
        "build_type": cached("CMAKE_BUILD_TYPE"),
        "arch": cached("CKFLOW_ARCH"),
        "tmp_fs": sh("stat", "-f", "-c", "%T", os.environ.get("TMPDIR", "/tmp")),
        # The bracketed choice of "always [madvise] never".
        "transparent_hugepages": (re.findall(
            r"\[(\w+)\]", read("/sys/kernel/mm/transparent_hugepage/enabled")) or [None])[0],
        "git": sh("git", "-C", ROOT, "describe", "--always", "--dirty"),
        "packages": versions,
        "loadavg": os.getloadavg()[0],
    }
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "machine.json"), "w") as f:
        json.dump(record, f, indent=1)


def machine_section(r):
    m = r.json("machine") or {}
    p = m.get("packages", {})
    mem = m.get("memory_bytes")

    def pkg(name):
        return p.get(name) or NOT_RUN.replace("run", "installed")

    rows = [
        ["CPU", f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores"
         + (" (AVX-512)" if m.get("avx512") else "")],
        ["memory", f"{mem / GIB:.1f} GiB" if mem else "?"],
        ["system", f"{m.get('os', '?')}, Linux {m.get('kernel', '?')}; temporary files on "
         f"{m.get('tmp_fs', '?')}"
         + (f"; transparent huge pages: {m['transparent_hugepages']}"
            if m.get("transparent_hugepages") else "")],
        ["compiler, build", f"{m.get('compiler', '?')}; {m.get('build_type', '?')}"
         + (f", `-march={m['arch']}`" if m.get("arch") else "")],
        ["libraries", f"Eigen {pkg('libeigen3-dev')}, oneTBB {pkg('libtbb-dev')}, protobuf "
         f"{pkg('libprotobuf-dev')}, LevelDB {pkg('libleveldb-dev')}, ISA-L {pkg('libisal-dev')}, "
         f"Google Benchmark {pkg('libbenchmark-dev')}, Open MPI {pkg('openmpi-bin')}"],
        ["peers", f"TensorFlow{peer_version(r, 'tensorflow') or ' ' + NOT_RUN}, "
         f"PyTorch{peer_version(r, 'torch') or ' ' + NOT_RUN} (from build/venv-bench), "
         f"libtorch {pkg('libtorch-dev')} (Debian)"],
        ["run", f"{m.get('date', '?')}, ckflow {m.get('git', '?')}, load average "
         f"{num(m.get('loadavg'))} at the start"],
    ]
    return table(["", ""], rows)


# --------------------------------------------------------------------- page


def command_of(run):
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in run.get("env", {}).items())
    return (env + " " if env else "") + " ".join(shlex.quote(a) for a in run["argv"])


def render(r, out_dir):
    parts = [
        "# Benchmarks",
        "",
        "What ckflow's checkpoints and training cost on one machine, each figure beside the "
        "machine's own ceiling for the same work (raw `pread` + CRC32C, raw `pwrite`, "
        "hand-written Eigen, the bare GEMM) and beside TensorFlow and PyTorch doing the same. "
        "Everything on this page was measured in one run of `./run.sh bench` (Release build; "
        "\"The run\" at the end says how long each part took), which ends by writing this page "
        "and its plots with "
        "`bench/report.py`; `./run.sh bench --report-only` writes them again from the last "
        "run's results (`build/release/bench-results/`). Do not edit the page by hand: change "
        "`bench/report.py` or a benchmark. A figure that the run did not measure reads "
        "\"not run\". Under each table is the command that measured it.",
        "",
        "## The machine",
        "",
        machine_section(r),
    ]
    for topic in TOPICS:
        s = topic(r)
        parts += ["", f"## {s.title}", "", s.intro, "", s.body]
        if s.after:
            parts += ["", s.after]
        commands = []
        for name in s.runs:
            run = r.runs.get(name)
            if run is None:
                commands.append(f"# {name}: not run")
                continue
            line = command_of(run)
            if run.get("exit") != 0:
                line += f"   # failed: exit {run.get('exit')}"
            commands.append(line)
        parts += ["", "```", *commands, "```"]
        if s.plot:
            png, draw = s.plot
            if draw(os.path.join(out_dir, png)):
                parts += ["", f"![{s.title}]({png})"]
    parts += ["", "## The run", "",
              "How long each part of the run took (wall time, seconds) and the load average "
              "before it; `./run.sh bench` runs them in this order.", ""]
    rows = [[f"`{name}`", f"{num(run.get('seconds'))}",
             "ok" if run.get("exit") == 0 else f"failed (exit {run.get('exit')})",
             num(run.get("loadavg"))] for name, run in r.runs.items()]
    total = sum(run.get("seconds", 0) for run in r.runs.values())
    rows.append(["all", num(total), "", ""])
    parts.append(table(["part", "seconds", "result", "load before"], rows))
    return "\n".join(parts) + "\n"


def page(directory, out):
    r = Results(directory)
    out_dir = os.path.dirname(os.path.abspath(out))
    text = render(r, out_dir)
    with open(out, "w") as f:
        f.write(text)
    print(f"report.py: wrote {out}")


# ---------------------------------------------------------------------- run


def run(directory, name, argv):
    """Runs argv (leading NAME=VALUE words are its environment), appends
    its record to DIR/runs.jsonl and returns its exit code."""
    env = {}
    while argv and re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):
        key, value = argv.pop(0).split("=", 1)
        env[key] = value
    os.makedirs(directory, exist_ok=True)
    load = os.getloadavg()[0]
    print(f"report.py: {name}: {command_of({'env': env, 'argv': argv})}", flush=True)
    start = time.monotonic()
    try:
        code = subprocess.run(argv, env={**os.environ, **env}).returncode
    except OSError as e:
        print(f"report.py: {name}: {e}", file=sys.stderr)
        code = 127
    record = {"name": name, "argv": argv, "env": env, "seconds": time.monotonic() - start,
              "exit": code, "loadavg": load}
    with open(os.path.join(directory, "runs.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")
    if code != 0:
        print(f"report.py: {name} failed (exit {code}); its figures will read \"{NOT_RUN}\"",
              file=sys.stderr, flush=True)
    return code


# -------------------------------------------------------------- reliability

FIGURES_BEGIN = "<!-- figures: written by bench/report.py reliability; do not edit -->"
FIGURES_END = "<!-- end of figures -->"


def reliability(directory, out):
    """Rewrites the figures section of RELIABILITY.md from DIR:
    reliability_test.log (the [ figures  ] lines reliability_test prints),
    soak_sync.json and soak_async.json (checkpoint_soak --json), tsan.log
    (ctest's output of ./run.sh tsan)."""
    r = Results(directory)
    log = read(os.path.join(directory, "reliability_test.log"))
    crash = re.findall(r"crash points (\w+): (\d+) steps, (\d+) kills, (\d+) after the commit", log)
    faults = re.findall(r"\] (\w+): (\d+) steps, (\d+) faults injected, (\d+) failed saves", log)
    kills = re.search(r"random kills: (\d+) runs, (\d+) killed, (\d+) saves committed, seed (\d+): "
                      r"lost (\d+), corrupt (\d+), regressed (\d+); debris up to (\d+) bytes "
                      r"between saves, (\d+) after", log)
    passed = re.search(r"\[  PASSED  \] (\d+) tests?", log)
    failed = re.search(r"\[  FAILED  \] (\d+) tests?", log)
    rows = []
    if crash:
        steps = sum(int(c[1]) for c in crash)
        per = ", ".join(f"{c[0]} {c[1]}" for c in crash)
        rows.append(["crash points (SIGKILL before and after each step of a save)",
                     f"{steps} steps, {sum(int(c[2]) for c in crash)} kills ({per} steps); "
                     f"{sum(int(c[3]) for c in crash)} after the commit point",
                     "every kill: the latest checkpoint restored bit for bit, no debris after "
                     "the next save"])
    else:
        rows.append(["crash points", NOT_RUN, ""])
    if kills:
        k = [int(x) for x in kills.groups()]
        rows.append(["random kills (`timeout -s KILL` at random moments of a save loop)",
                     f"{k[0]} runs, {k[1]} killed, {k[2]:,} saves committed (seed {k[3]}); "
                     f"debris up to {k[7]:,} bytes between saves, {k[8]} after the next save",
                     f"lost {k[4]}, corrupt {k[5]}, regressed {k[6]}"])
    else:
        rows.append(["random kills", NOT_RUN, ""])
    if faults:
        per = ", ".join(f"{f[0]} {f[2]}" for f in faults)
        rows.append(["injected faults (ENOSPC with a short write, EIO, EACCES at every step)",
                     f"{sum(int(f[2]) for f in faults):,} faults ({per}), "
                     f"{sum(int(f[3]) for f in faults):,} failed saves",
                     "every failed save: the previous checkpoint intact, the next save clean"])
    else:
        rows.append(["injected faults", NOT_RUN, ""])
    race = re.search(r"read (\d+) checkpoints while they were saved \((\d+) swept first\)", log)
    rows.append(["`LatestCheckpoint` followed while another process saves and sweeps",
                 f"{race.group(1)} checkpoints read while they were saved ({race.group(2)} swept "
                 "first)" if race else NOT_RUN, "every one read whole" if race else ""])
    for mode in ("sync", "async"):
        s = r.json(f"soak_{mode}")
        if s:
            rows.append([f"soak, {mode} (`CheckpointManager(max_to_keep = 3)`)",
                         f"{s['cycles']:,} save + restore cycles: RSS {s['start']['rss_kib']:,} → "
                         f"{s['end']['rss_kib']:,} KiB, descriptors {s['start']['fds']} → "
                         f"{s['end']['fds']}, files {s['start']['files']} → {s['end']['files']}",
                         "flat" if s.get("flat") else "**grew**"])
        else:
            rows.append([f"soak, {mode}", NOT_RUN, ""])
    tsan = read(os.path.join(directory, "tsan.log"))
    m = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", tsan)
    rows.append(["ThreadSanitizer (`./run.sh tsan`: tests matching "
                 "`Concurren|Parallel|Thread|Session|Async`)",
                 f"{m.group(3)} tests, {m.group(2)} failed" if m else NOT_RUN,
                 "no report" if m and m.group(2) == "0" and "WARNING: ThreadSanitizer" not in tsan
                 else ("" if not m else "**reports**")])
    machine = r.json("machine") or {}
    summary = ""
    if passed or failed:
        summary = (f" `reliability_test`: {passed.group(1) if passed else 0} tests passed, "
                   f"{failed.group(1) if failed else 0} failed.")
    text = "\n".join([
        FIGURES_BEGIN,
        "",
        f"From `./run.sh reliability` of {machine.get('date', '?')} at "
        f"{machine.get('git', '?')} (ASan + UBSan build for `reliability_test`, "
        f"`CKFLOW_RANDOM_KILLS=200`; Release build for the soak; the TSan row from the "
        f"last `./run.sh tsan` whose log was collected).{summary}",
        "",
        table(["campaign", "figure", "outcome"], rows),
        "",
        FIGURES_END,
    ])
    replace_marked(out, FIGURES_BEGIN, FIGURES_END, text)


def replace_marked(out, begin_marker, end_marker, text):
    """Replaces the part of page `out` from begin_marker to end_marker
    (`text` starts and ends with them)."""
    page_text = read(out)
    begin, end = page_text.find(begin_marker), page_text.find(end_marker)
    if begin < 0 or end < 0:
        sys.exit(f"report.py: {out} has no markers ({begin_marker!r} ... {end_marker!r})")
    with open(out, "w") as f:
        f.write(page_text[:begin] + text + page_text[end + len(end_marker):])
    print(f"report.py: wrote the figures of {out}")


# --------------------------------------------------------------------- fuzz

FUZZ_BEGIN = "<!-- fuzz figures: written by bench/report.py fuzz; do not edit -->"
FUZZ_END = "<!-- end of fuzz figures -->"
FUZZ_TARGETS = ["checkpoint", "state", "roundtrip"]


def fuzz_record(directory, target, log_path, seconds, findings_dir, flags, asan_options=""):
    """Writes DIR/fuzz_<target>.json from a libFuzzer run's output (its
    last status line and -print_final_stats=1) and the inputs it saved under
    findings_dir as <target>-crash-..., -leak-, -timeout-, -oom-."""
    log = read(log_path)
    status = re.findall(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/", log, re.M)
    stats = dict(re.findall(r"^stat::(\w+):\s+(\d+)", log, re.M))
    # libFuzzer also saves inputs slower than 10 s as slow-unit-*: on a
    # shared machine that is its load, not a finding (each replays in ms).
    kinds = tuple(f"{target}-{kind}-" for kind in ("crash", "leak", "timeout", "oom"))
    found = sorted(name for name in (os.listdir(findings_dir) if os.path.isdir(findings_dir) else [])
                   if name.startswith(kinds))
    last = status[-1] if status else None
    record = {
        "target": target,
        "seconds": seconds,
        "flags": flags,
        "asan_options": asan_options,
        "executions": int(stats["number_of_executed_units"]) if "number_of_executed_units" in stats
        else None,
        "exec_per_second": int(stats["average_exec_per_sec"]) if "average_exec_per_sec" in stats
        else None,
        "coverage": int(last[1]) if last else None,
        "features": int(last[2]) if last else None,
        "corpus": int(last[3]) if last else None,
        "peak_rss_mb": int(stats["peak_rss_mb"]) if "peak_rss_mb" in stats else None,
        "findings": found,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git": sh("git", "-C", ROOT, "describe", "--always", "--dirty"),
    }
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"fuzz_{target}.json"), "w") as f:
        json.dump(record, f, indent=1)


def fuzz(directory, out):
    """Rewrites the fuzzing figures of RELIABILITY.md from DIR's
    fuzz_<target>.json files (fuzz_record)."""
    r = Results(directory)
    rows = []
    for target in FUZZ_TARGETS:
        f = r.json(f"fuzz_{target}")
        if not f or f.get("executions") is None:
            rows.append([f"`{target}_fuzzer`", NOT_RUN, "", "", "", "", "", ""])
            continue
        found = f.get("findings") or []
        name = f"`{target}_fuzzer {f['flags']}`" if f.get("flags") else f"`{target}_fuzzer`"
        rows.append([name, f"{f['seconds']:,}", f"{f['executions']:,}",
                     f"{f['exec_per_second']:,}", f"{f['coverage']:,} / {f['features']:,}",
                     f"{f['corpus']:,}", f"{f['peak_rss_mb']:,} MB",
                     ", ".join(f"`{n}`" for n in found) if found else "none",
                     ])
    runs = sorted({(f["date"], f["git"]) for f in (r.json(f"fuzz_{t}") for t in FUZZ_TARGETS)
                   if f})
    when = "; ".join(f"{d} at {g}" for d, g in runs) or NOT_RUN
    asan = sorted({f.get("asan_options") for f in (r.json(f"fuzz_{t}") for t in FUZZ_TARGETS)
                   if f and f.get("asan_options")})
    under = f" and `ASAN_OPTIONS={'; '.join(asan)}`" if asan else ""
    text = "\n".join([
        FUZZ_BEGIN,
        "",
        f"From `./run.sh fuzz` of {when} (one process per target, with the flags shown "
        f"beside `-max_len=32768 -rss_limit_mb=3072 -malloc_limit_mb=1024`{under}; exec/s is of a "
        "shared machine: what other work left of its cores).",
        "",
        table(["target", "seconds", "executions", "exec/s", "coverage (edges / features)",
               "corpus", "peak RSS", "findings"], rows),
        "",
        FUZZ_END,
    ])
    replace_marked(out, FUZZ_BEGIN, FUZZ_END, text)


# ------------------------------------------------------------------ sample


def sample(directory, out):
    """Copies DIR's results to OUT, small: Google Benchmark files keep their
    median (or single) entries and no context, ckflow bench objects inside
    peers.json the fields the page reads; runs.jsonl and the recommender's
    logs as they are."""
    os.makedirs(out, exist_ok=True)
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        # runs.jsonl, and the example logs the page reads figures from.
        if name == "runs.jsonl" or (name.startswith("recsys_") and name.endswith(".log")):
            with open(path) as f, open(os.path.join(out, name), "w") as g:
                g.write(f.read())
        if not name.endswith(".json"):
            continue
        with open(path) as f:
            data = json.load(f)
        if isinstance(data, dict) and "benchmarks" in data:
            kept = [{k: v for k, v in e.items() if k in SAMPLE_FIELDS or k not in GBENCH_FIELDS}
                    for e in data["benchmarks"]
                    if e.get("run_type") != "aggregate" or e.get("aggregate_name") == "median"]
            data = {"benchmarks": kept}
        for case in (get(data, "cases") or []) if name == "peers.json" else []:
            for side in ("restore", "save"):
                full = case["ckflow"].get(side) or {}
                case["ckflow"][side] = {k: full[k] for k in (
                    "count", "bytes", "ckflow_s", "raw_s", "peak_rss_added_bytes",
                    "restore_phase_s", "restore_phase_page_faults", "initialize_phase_s",
                    "initialize_phase_page_faults") if k in full}
        with open(os.path.join(out, name), "w") as f:
            json.dump(data, f, separators=(",", ":"))
            f.write("\n")


# Google Benchmark's own fields: the page reads only these of them.
GBENCH_FIELDS = {"name", "run_name", "run_type", "aggregate_name", "real_time", "time_unit",
                 "family_index", "per_family_instance_index", "repetitions", "repetition_index",
                 "threads", "iterations", "cpu_time", "aggregate_unit", "error_occurred",
                 "error_message", "bytes_per_second", "items_per_second", "label"}
SAMPLE_FIELDS = {"name", "run_name", "run_type", "aggregate_name", "real_time", "time_unit"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("machine")
    p.add_argument("dir")
    p.add_argument("--build", default="build/release")
    p = sub.add_parser("run")
    p.add_argument("dir")
    p.add_argument("name")
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p = sub.add_parser("page")
    p.add_argument("dir")
    p.add_argument("--out", default=os.path.join(HERE, "README.md"))
    p = sub.add_parser("reliability")
    p.add_argument("dir")
    p.add_argument("--out", default=os.path.join(ROOT, "RELIABILITY.md"))
    p = sub.add_parser("fuzz-record")
    p.add_argument("dir")
    p.add_argument("target")
    p.add_argument("log")
    p.add_argument("--seconds", type=int, required=True)
    p.add_argument("--findings", required=True)
    p.add_argument("--flags", default="")
    p.add_argument("--asan-options", default="")
    p = sub.add_parser("fuzz")
    p.add_argument("dir")
    p.add_argument("--out", default=os.path.join(ROOT, "RELIABILITY.md"))
    p = sub.add_parser("sample")
    p.add_argument("dir")
    p.add_argument("out")
    args = parser.parse_args()
    if args.command == "machine":
        machine(args.dir, args.build)
    elif args.command == "run":
        argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        if not argv:
            parser.error("run: no command after --")
        run(args.dir, args.name, argv)  # a failed benchmark does not stop the run
    elif args.command == "page":
        page(args.dir, args.out)
    elif args.command == "sample":
        sample(args.dir, args.out)
    elif args.command == "fuzz-record":
        fuzz_record(args.dir, args.target, args.log, args.seconds, args.findings, args.flags,
                    args.asan_options)
    elif args.command == "fuzz":
        fuzz(args.dir, args.out)
    else:
        reliability(args.dir, args.out)


if __name__ == "__main__":
    main()
