"""docs/guide.md's TensorFlow code, run as written: its ```python block
restores the checkpoint that examples/regress (the program the guide
describes) wrote, so the guide's account of restoring in TensorFlow cannot
drift."""

import os
import re
import subprocess
import sys

from conftest import BUILD

GUIDE = os.path.join(os.path.dirname(__file__), "..", "docs", "guide.md")


def python_blocks():
    with open(GUIDE, encoding="utf-8") as f:
        return re.findall(r"```python\n(.*?)\n```", f.read(), flags=re.S)


def test_guide_restores_the_regress_example_in_tensorflow(tmp_path):
    blocks = python_blocks()
    assert len(blocks) == 1, "the guide has one TensorFlow block"
    regress = os.path.join(BUILD, "examples", "regress")
    subprocess.run(
        [regress, "--dir", "runs/regress", "--steps", "300", "--save-every", "100"],
        cwd=tmp_path, check=True, capture_output=True,
    )
    script = tmp_path / "guide_block.py"
    script.write_text(blocks[0])
    run = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    # The block prints the restored step and a prediction of the trained
    # model: the step is the example's last, the prediction a number.
    match = re.search(r"^step (\d+) prediction (\S+)$", run.stdout, flags=re.M)
    assert match, run.stdout
    assert int(match.group(1)) == 300
    assert abs(float(match.group(2))) < 1e3
