#!/usr/bin/env python3
"""Tests of bench/report.py, the writer of bench/README.md and of
RELIABILITY.md's figures, on the small sample of one run's results in
bench/testdata/results (a real run's files, trimmed by `report.py sample`) and on results
it makes itself. No benchmark runs here.

  python3 bench/report_test.py
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SAMPLE = os.path.join(HERE, "testdata", "results")
sys.path.insert(0, HERE)
import report  # noqa: E402

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


# Topics whose benchmarks are newer than the sample: the sample of the next
# full run (`report.py sample`) holds them, and they leave this set.
NOT_YET_IN_SAMPLE = set()


def titles():
    empty = report.Results(os.devnull)
    return [topic(empty).title for topic in report.TOPICS]


def write_page(results_dir, out_dir):
    out = os.path.join(out_dir, "README.md")
    subprocess.run([sys.executable, os.path.join(HERE, "report.py"), "page", results_dir, "--out",
                    out], check=True, capture_output=True)
    with open(out) as f:
        return f.read()


def sections(text):
    """## title -> the section's text."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


class PageTest(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="report_test_")
        self.addCleanup(shutil.rmtree, self.out)

    def test_the_sample_fills_every_topic_with_a_table_and_its_command(self):
        found = sections(write_page(SAMPLE, self.out))
        for title in titles():
            self.assertIn(title, found)
            if title in NOT_YET_IN_SAMPLE:
                continue
            body = found[title]
            self.assertRegex(body, r"\n\|.*\|\n\|---", f"{title}: no table")
            self.assertRegex(body, r"\d", f"{title}: no figure")
            self.assertIn("```", body, f"{title}: no command")
            self.assertNotIn(": not run", body.split("```")[1], f"{title}: a part not run")

    def test_the_sample_measured_ckflow_beside_its_peers(self):
        found = sections(write_page(SAMPLE, self.out))
        for title in ("Restore", "Save"):
            ckflow = next(line for line in found[title].splitlines()
                          if line.startswith("| **ckflow**"))
            self.assertNotIn(report.NOT_RUN, ckflow, title)
            self.assertRegex(found[title], r"TensorFlow 2\.\d+.*GB/s · ckflow \*\*[\d.,]+×\*\*")
            self.assertRegex(found[title], r"PyTorch 2\.\d+.*GB/s · ckflow \*\*[\d.,]+×\*\*")

    def test_the_machine_is_described_from_the_run(self):
        machine = sections(write_page(SAMPLE, self.out))["The machine"]
        with open(os.path.join(SAMPLE, "machine.json")) as f:
            recorded = json.load(f)
        self.assertIn(recorded["cpu"], machine)
        self.assertIn(recorded["kernel"], machine)
        self.assertIn(recorded["date"], machine)

    def test_missing_results_read_not_run_in_every_topic(self):
        empty = os.path.join(self.out, "empty")
        os.mkdir(empty)
        found = sections(write_page(empty, self.out))
        for title in titles():
            self.assertIn(title, found)
            self.assertIn(report.NOT_RUN, found[title], title)
            self.assertNotRegex(found[title], r"\d+(\.\d+)? (GB/s|ms|µs|s)\b", title)

    def test_a_failed_benchmark_is_shown_failed_and_its_figures_not_run(self):
        results = os.path.join(self.out, "results")
        shutil.copytree(SAMPLE, results)
        os.remove(os.path.join(results, "session_bench.json"))
        subprocess.run([sys.executable, os.path.join(HERE, "report.py"), "run", results,
                        "session_bench", "--", "sh", "-c", "exit 3"], check=True,
                       capture_output=True)
        found = sections(write_page(results, self.out))
        self.assertIn("failed: exit 3", found["Session overhead"])
        self.assertIn("| `session_bench` |", found["The run"])
        ckflow_cells = [line for line in found["Session overhead"].splitlines()
                        if line.startswith("| chain")]
        self.assertIn(report.NOT_RUN, ckflow_cells[0])

    def cold_results(self, small_warm_s, exit_code=0):
        """The sample with a cold_restore run: large beats its ceiling,
        small is slower than its ceiling, warm in `small_warm_s`."""
        results = os.path.join(self.out, "results")
        shutil.copytree(SAMPLE, results)
        ceilings = {"seq1": 0.030, "seq2": 0.028, "direct1": 0.040, "direct2": 0.035}
        data = {"repeat": 3, "cold": True, "cases": [
            {"name": "large", "count": 64, "bytes": GIB,
             "ckflow": {"seconds": 1.0}, "ckflow_warm": {"seconds": 0.8},
             **{k: {"seconds": 1.2} for k in ceilings}},
            {"name": "small", "count": 20000, "bytes": 20000 * KIB,
             "ckflow": {"seconds": 0.15, "first_touched_bytes": 60 * MIB},
             "ckflow_warm": {"seconds": small_warm_s},
             **{k: {"seconds": v} for k, v in ceilings.items()}}]}
        with open(os.path.join(results, "cold_restore.json"), "w") as f:
            json.dump(data, f)
        subprocess.run([sys.executable, os.path.join(HERE, "report.py"), "run", results,
                        "cold_restore", "--", "sh", "-c", f"exit {exit_code}"], check=True,
                       capture_output=True)
        return sections(write_page(results, self.out))["Restore from a cold cache"]

    def test_the_cold_topic_says_when_the_device_is_not_what_stands_in_the_way(self):
        cold = self.cold_results(small_warm_s=0.12)
        self.assertIn("1 GiB (64 × 16 MiB): ckflow cold at **1.20×** the fastest cold ceiling "
                      "(target ≥ 0.9×: met)", cold)
        self.assertIn("20,000 × 1 KiB: ckflow cold at **0.187×** the fastest cold ceiling "
                      "(target ≥ 0.9×: not met)", cold)
        self.assertIn("the same restore takes 0.120 s, 4.29× the cold ceiling's 0.0280 s", cold)
        self.assertIn("the cold reads add 30.0 ms", cold)
        self.assertIn("the restore first touches 60.0 MiB (3.07× the values' 19.5 MiB)", cold)

    def test_the_cold_topic_blames_nothing_when_warm_is_within_the_ceiling(self):
        cold = self.cold_results(small_warm_s=0.02)
        self.assertIn("(target ≥ 0.9×: not met)", cold)
        self.assertNotIn("What stands in the way", cold)

    def test_the_cold_topic_says_why_it_was_not_measured(self):
        cold = self.cold_results(small_warm_s=0.12, exit_code=3)
        self.assertIn("Not measured: the page cache could not be dropped", cold)
        self.assertIn("failed: exit 3", cold)

    def test_a_recorded_run_keeps_its_environment_and_command(self):
        results = os.path.join(self.out, "results")
        code = report.run(results, "echo", ["CKFLOW_X=1", "sh", "-c", "test \"$CKFLOW_X\" = 1"])
        self.assertEqual(code, 0)
        with open(os.path.join(results, "runs.jsonl")) as f:
            record = json.loads(f.readline())
        self.assertEqual(record["env"], {"CKFLOW_X": "1"})
        self.assertEqual(report.command_of(record), "CKFLOW_X=1 sh -c 'test \"$CKFLOW_X\" = 1'")

    def test_the_restore_on_huge_pages_is_set_against_the_same_restore_without(self):
        small = {"count": 20000, "raw_s": 0.010, "ckflow_s": 0.025, "restore_phase_s": 0.016}
        huge = {"count": 20000, "raw_s": 0.010, "ckflow_s": 0.020, "ratio": 0.5,
                "restore_phase_s": 0.012}
        self.assertEqual(
            report.huge_pages(small, huge),
            "With glibc's heap on huge pages (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, a setting "
            "of the program, not of ckflow) the same restore of 20,000 takes 1.00 µs per "
            "variable against 1.25 µs (0.800×), 0.500× its ceiling; `Restore`, which walks the "
            "objects, 0.600 µs against 0.800 µs (0.750×).")
        self.assertEqual(report.huge_pages(small, dict(huge, count=200000)), "")
        self.assertEqual(report.huge_pages(small, None), "")
        self.assertNotIn("`Restore`", report.huge_pages({"count": 20000, "ckflow_s": 0.025}, huge))

    def test_a_model_with_adams_slots_is_set_against_the_same_model_without(self):
        restore = {"count": 20000, "ckflow_s": 0.020}
        save = {"count": 20000, "ckflow_s": 0.016}
        adam_restore = {"count": 60000, "model_count": 20000, "ckflow_s": 0.075, "ratio": 0.4}
        adam_save = {"count": 60000, "model_count": 20000, "ckflow_s": 0.058, "ratio": 0.6}
        self.assertEqual(
            report.with_adam(restore, save, adam_restore, adam_save),
            "A model trained by Adam checkpoints its slots m and v beside each variable: with "
            "20,000 variables and their slots, 60,000 variables in all (`--optimizer adam`), "
            "restoring takes 1.25 µs per variable against 1.00 µs (1.25×), 0.400× its ceiling, "
            "and saving takes 0.967 µs per variable against 0.800 µs (1.21×), 0.600× its "
            "ceiling.")
        # One side only; another model size; nothing measured.
        self.assertEqual(
            report.with_adam(restore, save, adam_restore, None),
            "A model trained by Adam checkpoints its slots m and v beside each variable: with "
            "20,000 variables and their slots, 60,000 variables in all (`--optimizer adam`), "
            "restoring takes 1.25 µs per variable against 1.00 µs (1.25×), 0.400× its ceiling.")
        self.assertEqual(
            report.with_adam(dict(restore, count=200000), save, adam_restore, None), "")
        self.assertEqual(report.with_adam(restore, save, None, None), "")

    def test_an_unmet_warm_restore_says_what_each_phase_takes_of_its_budget(self):
        # 0.5 µs of ceiling per variable: 0.625 µs at 0.8×; the reads take
        # 0.4 µs of it, matching 0.6 µs against the 0.225 µs left.
        small = {"count": 20000, "raw_s": 0.010, "ckflow_s": 0.020,
                 "restore_phase_s": 0.012, "initialize_phase_s": 0.008}
        self.assertEqual(
            report.restore_budget(small),
            "What stands in the way of 0.80× at 20,000 variables: it allows 0.625 µs per "
            "variable (the ceiling's 0.500 µs over 0.80). Running the restore ops "
            "(`InitializeOrRestore`: each value read, checksummed and copied into its variable) "
            "takes 0.400 µs of it, 0.640×; that leaves 0.225 µs for matching the checkpoint to "
            "the objects (`Restore`: the index parsed, the object graph read and walked, the "
            "restore ops planned), which takes 0.600 µs, 2.67× as much.")
        # The reads alone over the budget; the target met; phases missing.
        slow_reads = dict(small, initialize_phase_s=0.014)
        self.assertIn("that leaves nothing for matching the checkpoint to the objects "
                      "(`Restore`), which takes 0.600 µs.", report.restore_budget(slow_reads))
        self.assertEqual(report.restore_budget(dict(small, ckflow_s=0.012)), "")
        self.assertEqual(report.restore_budget(dict(small, restore_phase_s=None)), "")
        self.assertEqual(report.restore_budget(None), "")

    def test_a_restores_phases_are_set_beside_each_other_at_two_sizes(self):
        small = {"count": 20000, "restore_phase_s": 0.012, "restore_phase_page_faults": 150,
                 "initialize_phase_s": 0.010, "initialize_phase_page_faults": 0}
        large = {"count": 200000, "restore_phase_s": 0.18, "restore_phase_page_faults": 28000,
                 "initialize_phase_s": 0.11, "initialize_phase_page_faults": 70}
        self.assertEqual(
            report.restore_phases(small, large),
            "Per variable at 200,000 against 20,000: `Restore` (the index, object matching, "
            "restore ops) 0.900 µs against 0.600 µs, 1.50×, with 28,000 page faults a restore "
            "against 150; `InitializeOrRestore` (running them: the reads) 0.550 µs against "
            "0.500 µs, 1.10×, with 70 page faults a restore against 0.")
        # Faults unknown: the times alone. A run without the phases: nothing.
        del small["restore_phase_page_faults"]
        self.assertIn("0.900 µs against 0.600 µs, 1.50×; `InitializeOrRestore`",
                      report.restore_phases(small, large))
        del large["initialize_phase_s"]
        self.assertEqual(report.restore_phases(small, large), "")
        self.assertEqual(report.restore_phases(None, large), "")

    def test_a_deep_model_is_set_against_the_same_variables_in_one_module(self):
        record = gbench_median("DeepModel/vars:20000/layers:2000/manual_time", 131.0,
                               deep_save_us_per_variable=4.84, deep_vs_flat_save=1.24,
                               deep_restore_us_per_variable=1.69, deep_vs_flat_restore=1.10)
        self.assertEqual(
            report.deep_model(record),
            "A program's first save of 20,000 variables in 2,000 modules of 10, as a deep network "
            "holds them, takes 4.84 µs per variable, 1.24× the same variables in one module, and "
            "its first restore into a new program 1.69 µs, 1.10× (`checkpoint_bench`, "
            "`DeepModel`; both include the object walk, the plan and the ops built on first use).")
        self.assertEqual(report.deep_model(None), "")
        self.assertEqual(report.deep_model({"name": "DeepModel/vars:20000/layers:2000"}), "")


def gbench_median(name, real_time, time_unit="ms", **counters):
    """A Google Benchmark median aggregate, as --benchmark_report_aggregates_only writes it."""
    return {"name": f"{name}/real_time_median", "run_name": f"{name}/real_time",
            "run_type": "aggregate", "aggregate_name": "median", "real_time": real_time,
            "time_unit": time_unit, **counters}


RECSYS_LOG = """table: 2097152 rows x 128 floats (1024 MiB) in 8 parts
no checkpoint: initialized at step 0
validation loss 0.693147
trained to step 1000, saved /dev/shm/ckflow-recsys/ckpt-1000
step time p50 {p50} ms, p99 {p99} ms over 1000 steps
peak resident memory {peak} MiB (the table: 1024 MiB)
validation loss 0.512345
"""


class SequenceTopicsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="report_test_")
        self.addCleanup(shutil.rmtree, self.dir)

    def test_the_recsys_log_gives_its_step_times_memory_and_losses(self):
        figures = report.recsys_log(RECSYS_LOG.format(p50="10.10", p99="14.00", peak="2600"))
        self.assertEqual(figures, {"p50_ms": 10.1, "p99_ms": 14.0, "steps": 1000,
                                   "peak_mib": 2600.0, "table_mib": 1024.0,
                                   "first_loss": 0.693147, "last_loss": 0.512345})
        self.assertEqual(set(report.recsys_log("").values()), {None})

    def test_the_topics_compare_ckflow_with_its_peers_ceilings_and_targets(self):
        benchmarks = [
            gbench_median("BM_TransformerTrainStep/threads:1", 100, tokens_per_s=40960),
            gbench_median("BM_TransformerTrainStep/threads:2", 60, tokens_per_s=68267),
            gbench_median("BM_BatchMatMul/threads:1", 1, gflops=20.0),
            gbench_median("BM_BatchMatMulAsGemm/threads:1", 1, gflops=40.0),
            gbench_median("BM_SparseAdagrad/threads:1", 4, rows_per_s=4e6),
            gbench_median("BM_SparseAdagradHandLoop", 3, rows_per_s=5e6),
            gbench_median("BM_PartitionedTableSave", 500, bytes_per_second=2.0e9),
            gbench_median("BM_PartitionedTableRawWrite", 450, bytes_per_second=2.2e9),
            gbench_median("BM_PartitionedTableRestore/parts:8", 350, bytes_per_second=3.0e9),
            gbench_median("BM_PartitionedTableRawRead", 250, bytes_per_second=4.0e9),
        ]
        with open(os.path.join(self.dir, "sequence_bench.json"), "w") as f:
            json.dump({"benchmarks": benchmarks}, f)
        peers = {"tensorflow": "2.21.0", "torch": "2.13.0+cpu", "results": {
            "tf_graph": {"1": {"train_ms": 185.6}, "2": {"train_ms": 120.0}},
            "torch": {"1": {"train_ms": 189.2}},
            "tf_sparse_adagrad": {"1": {"rows_per_s": 709464.0}}}}
        with open(os.path.join(self.dir, "sequence_peers.json"), "w") as f:
            json.dump(peers, f)
        for name, p50, p99 in (("saves", "10.10", "14.00"), ("nosaves", "10.00", "12.00")):
            with open(os.path.join(self.dir, f"recsys_{name}.log"), "w") as f:
                f.write(RECSYS_LOG.format(p50=p50, p99=p99, peak="2600"))
        found = sections(write_page(self.dir, self.dir))
        sequence = found["Character transformer and sparse updates"]
        self.assertIn("| **ckflow** (`Session::Run`) | 100 ms (40,960 tokens/s) | "
                      "60.0 ms (68,267 tokens/s) |", sequence)
        self.assertIn("| TensorFlow 2.21.0 graph (`tf.compat.v1.Session`) | "
                      "186 ms · ckflow **1.86×** | 120 ms · ckflow **2.00×** |", sequence)
        self.assertIn("| PyTorch 2.13.0+cpu (eager) | 189 ms · ckflow **1.89×** | not run |",
                      sequence)
        self.assertRegex(sequence, r"`BatchMatMulV2` .* \| 1 \| 20.0 GFLOP/s \| 40.0 GFLOP/s "
                                   r"\| 0.500× \|")
        self.assertIn("| hand-written C++ loop over the rows, 1 thread, same binary | "
                      "5.00 M rows/s · ckflow **0.800×** | 5.00 M rows/s |", sequence)
        self.assertRegex(sequence, r"TensorFlow 2.21.0 `ResourceSparseApplyAdagrad` .* \| "
                                   r"0.709 M rows/s · ckflow \*\*5.64×\*\* \| not run \|")
        recsys = found["A 1 GiB partitioned embedding table"]
        self.assertIn("| save: `Checkpoint::Write`, 8 parts | 2.00 GB/s | raw `pwrite`, 2 threads: "
                      "2.20 GB/s | 0.909× (met) |", recsys)
        self.assertIn("| restore into 8 parts | 3.00 GB/s | raw `pread` + CRC32C: 4.00 GB/s | "
                      "0.750× (**not met**) |", recsys)
        self.assertIn("| restore into 3 parts | not run |", recsys)
        self.assertIn("| step time p50 | 10.1 ms | 10.0 ms | 1.01× | within 2%: met |", recsys)
        self.assertIn("| step time p99 | 14.0 ms | 12.0 ms | 1.17× | ≤ 1.5×: met |", recsys)
        self.assertIn("2,600 MiB (2.54× the table's 1,024 MiB)", recsys)
        self.assertIn("≤ 1.1× the table: with saves **not met**", recsys)
        self.assertIn("| validation loss, first → last | 0.693 → 0.512 | 0.693 → 0.512 |",
                      recsys)
        self.assertIn("the loop's median step by +1.0% (target within 2%: met)", recsys)
        self.assertIn("held 2.54× the table (target ≤ 1.1×: not met)", recsys)
        self.assertIn("Against the table and its accumulator together, the run without saves "
                      "holds 1.27× and the run with saves 1.27×.", recsys)
        # Met: no sentence on what stands in its way.
        self.assertNotIn("What stands in the way", recsys)

    def test_an_unmet_median_is_set_beside_the_time_a_save_takes(self):
        nosaves = report.recsys_log(RECSYS_LOG.format(p50="10.00", p99="12.00", peak="2100"))
        # 2 GiB (the table and its accumulator) at 2.0 GB/s: 1.07 s, beside
        # 100 steps of 10 ms; half the steps free needs 2.15 GB in 500 ms.
        said = " ".join(report.recsys_save_arithmetic(2.0, nosaves, 2.0, 2.2))
        self.assertIn("100 steps last 1,000 ms; a save writes the table and its accumulator, "
                      "2.15 GB, which at this run's `Checkpoint::Write` rate (2.00 GB/s, the "
                      "machine to itself) takes 1,074 ms, 1.07× the time between two saves.",
                      said)
        self.assertIn("So the saves run back to back", said)
        self.assertIn("each save written within 50 steps: 4.29 GB/s, 1.95× this machine's raw "
                      "`pwrite`.", said)
        # A save shorter than the time between two: not back to back.
        short = " ".join(report.recsys_save_arithmetic(2.0, nosaves, 4.0, 2.2))
        self.assertIn("takes 537 ms, 0.537× the time between two saves.", short)
        self.assertNotIn("back to back", short)
        self.assertEqual(report.recsys_save_arithmetic(1.01, nosaves, 2.0, 2.2), [])
        self.assertEqual(report.recsys_save_arithmetic(2.0, nosaves, None, 2.2), [])


class ReliabilityTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="report_test_")
        self.addCleanup(shutil.rmtree, self.dir)

    def test_figures_come_from_the_campaign_output(self):
        with open(os.path.join(self.dir, "reliability_test.log"), "w") as f:
            f.write("[ figures  ] crash points sync: 33 steps, 66 kills, 7 after the commit\n"
                    "[ figures  ] crash points durable: 41 steps, 82 kills, 9 after the commit\n"
                    "[ figures  ] sync: 33 steps, 99 faults injected, 70 failed saves "
                    "(commit at step 30)\n"
                    "[ figures  ] random kills: 200 runs, 199 killed, 1151 saves committed, seed "
                    "5: lost 0, corrupt 0, regressed 0; debris up to 1280 bytes between saves, "
                    "0 after the next save\n"
                    "[ figures  ] read 24 checkpoints while they were saved (2 swept first)\n"
                    "[  PASSED  ] 12 tests.\n")
        soak = {"mode": "sync", "cycles": 10000, "start": {"rss_kib": 10400, "fds": 10, "files": 7},
                "end": {"rss_kib": 10428, "fds": 10, "files": 7}, "flat": True}
        with open(os.path.join(self.dir, "soak_sync.json"), "w") as f:
            json.dump(soak, f)
        page = os.path.join(self.dir, "RELIABILITY.md")
        with open(page, "w") as f:
            f.write(f"# R\n\nkept\n\n{report.FIGURES_BEGIN}\nold figures\n{report.FIGURES_END}\n"
                    "\nkept too\n")
        report.reliability(self.dir, page)
        with open(page) as f:
            text = f.read()
        self.assertNotIn("old figures", text)
        self.assertIn("kept\n", text)
        self.assertIn("kept too", text)
        self.assertIn("74 steps, 148 kills (sync 33, durable 41 steps); 16 after the commit", text)
        self.assertIn("99 faults (sync 99), 70 failed saves", text)
        self.assertIn("200 runs, 199 killed, 1,151 saves committed", text)
        self.assertIn("lost 0, corrupt 0, regressed 0", text)
        self.assertIn("RSS 10,400 → 10,428 KiB, descriptors 10 → 10, files 7 → 7", text)
        self.assertIn("12 tests passed, 0 failed", text)
        self.assertIn("24 checkpoints read while they were saved (2 swept first)", text)
        self.assertRegex(text, r"soak, async \| not run")

    def test_every_test_reliability_md_names_exists(self):
        with open(os.path.join(ROOT, "RELIABILITY.md")) as f:
            page = f.read()
        sources = ""
        for path in glob.glob(os.path.join(ROOT, "tests", "**", "*.cc"), recursive=True):
            with open(path, errors="replace") as f:
                sources += f.read()
        # `Suite.Name`, `Prefix/Suite.Name/*`, `Suite.*`, `Suite.Name...` (a prefix).
        names = re.findall(r"`(?:\w+/)?([A-Z]\w*)\.(\*|[A-Z]\w*)(?:/[\w*,]+|\.\.\.)?`", page)
        self.assertGreater(len(names), 10)
        for suite, name in names:
            if name == "*":
                self.assertRegex(sources, rf"TEST(_F|_P)?\({suite},", f"{suite}.*")
            else:
                self.assertRegex(sources, rf"TEST(_F|_P)?\({suite}, {name}\w*\)",
                                 f"{suite}.{name}")


class FuzzTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="report_test_")
        self.addCleanup(shutil.rmtree, self.dir)

    def test_figures_come_from_the_recorded_runs(self):
        log = os.path.join(self.dir, "checkpoint.log")
        with open(log, "w") as f:
            f.write("#19\tINITED cov: 15656 ft: 32456 corp: 16/93Kb exec/s: 0 rss: 93Mb\n"
                    "#65536\tpulse  cov: 18001 ft: 50123 corp: 700/3Mb lim: 32768 exec/s: 900 "
                    "rss: 400Mb\n"
                    "#1234567\tDONE   cov: 18765 ft: 61234 corp: 1200/8398Kb lim: 32768 "
                    "exec/s: 1028 rss: 487Mb\n"
                    "Done 1234567 runs in 1201 second(s)\n"
                    "stat::number_of_executed_units: 1234567\n"
                    "stat::average_exec_per_sec:     1028\n"
                    "stat::new_units_added:          634\n"
                    "stat::slowest_unit_time_sec:    0\n"
                    "stat::peak_rss_mb:              487\n")
        findings = os.path.join(self.dir, "findings")
        os.mkdir(findings)
        open(os.path.join(findings, "checkpoint-crash-abc"), "w").close()
        open(os.path.join(findings, "state-crash-def"), "w").close()
        open(os.path.join(findings, "checkpoint-slow-unit-123"), "w").close()  # not a finding
        results = os.path.join(self.dir, "results")
        report.fuzz_record(results, "checkpoint", log, 1200, findings, "-entropic=0",
                           "quarantine_size_mb=4")
        page = os.path.join(self.dir, "RELIABILITY.md")
        with open(page, "w") as f:
            f.write(f"# R\n\nkept\n\n{report.FUZZ_BEGIN}\nold figures\n{report.FUZZ_END}\n"
                    "\nkept too\n")
        report.fuzz(results, page)
        with open(page) as f:
            text = f.read()
        self.assertNotIn("old figures", text)
        self.assertIn("kept\n", text)
        self.assertIn("kept too", text)
        self.assertIn("| `checkpoint_fuzzer -entropic=0` | 1,200 | 1,234,567 | 1,028 | "
                      "18,765 / 61,234 | 1,200 | 487 MB | `checkpoint-crash-abc` |", text)
        self.assertIn("`ASAN_OPTIONS=quarantine_size_mb=4`", text)
        self.assertRegex(text, r"`state_fuzzer` \| not run")
        self.assertRegex(text, r"`roundtrip_fuzzer` \| not run")


if __name__ == "__main__":
    unittest.main()
