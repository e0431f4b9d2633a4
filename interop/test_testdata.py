"""The golden checkpoints of tests/testdata/ are what TensorFlow writes:
interop/make_testdata.py writes them again, in a process of its own (as a
user regenerating them would run it), and every file must equal the
committed one byte for byte.

The one thing TensorFlow does not write the same twice is the wall-clock
time of a CheckpointManager's saves: the `checkpoint` state file's
all_model_checkpoint_timestamps and last_preserved_timestamp (and the same
fields of the manifest, which reports that file as TensorFlow reads it).
Those two files are compared with the timestamps taken out; everything else
in them (paths, order, how many timestamps) must still be equal."""

import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COMMITTED = os.path.join(HERE, "..", "tests", "testdata")
TIMESTAMP_LINE = re.compile(r"^(all_model_checkpoint_timestamps|last_preserved_timestamp): .*$", re.M)


def files_under(root):
    out = set()
    for directory, _, names in os.walk(root):
        for name in names:
            out.add(os.path.relpath(os.path.join(directory, name), root))
    return out


def without_timestamps(path):
    with open(path, "rb") as f:
        data = f.read()
    if os.path.basename(path) == "manifest.json":
        manifest = json.loads(data)
        state = manifest.get("state")
        if state:
            state["all_model_checkpoint_timestamps"] = len(state["all_model_checkpoint_timestamps"])
            state["last_preserved_timestamp"] = state["last_preserved_timestamp"] > 0
        return manifest
    return TIMESTAMP_LINE.sub(r"\1: <time>", data.decode())


def has_timestamps(path):
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return TIMESTAMP_LINE.search(f.read()) is not None


def test_tensorflow_writes_the_committed_golden_files(tmp_path):
    out = tmp_path / "testdata"
    subprocess.run([sys.executable, os.path.join(HERE, "make_testdata.py"), str(out)], check=True,
                   capture_output=True)
    committed = files_under(COMMITTED) - {"README.md"}
    written = files_under(out)
    assert written == committed, (
        f"only written: {sorted(written - committed)}; only committed: {sorted(committed - written)}"
    )
    differ = []
    for name in sorted(written):
        ours, theirs = os.path.join(COMMITTED, name), str(out / name)
        folder_has_clock = has_timestamps(os.path.join(os.path.dirname(ours), "checkpoint"))
        if folder_has_clock and os.path.basename(name) in ("checkpoint", "manifest.json"):
            if without_timestamps(ours) != without_timestamps(theirs):
                differ.append(name)
            continue
        with open(ours, "rb") as a, open(theirs, "rb") as b:
            if a.read() != b.read():
                differ.append(name)
    assert not differ, (
        f"TensorFlow now writes other bytes for {differ}: regenerate tests/testdata with "
        "interop/make_testdata.py (tests/testdata/README.md) and review the change"
    )
