#!/usr/bin/env python3
"""SIGTERM at a random moment during a training example; the next run resumes.

    preempted_test.py --dir DIR [--ranks N] -- COMMAND...

COMMAND is examples/regress, or `mpirun -np N distributed_train` with
--ranks N. DIR is emptied. Round 1 trains with no periodic save, round 2
resumes and saves every few steps (asynchronously in regress); each gets
SIGTERM (one rank, chosen at random, under mpirun) a random time after it
says its PreemptionHandler is installed, and must exit with 42 and leave the
newest checkpoint at the step it reached, named ckpt-<step>. Each next run
must restore exactly that checkpoint at exactly that step: nothing lost.
Round 3 runs a few steps to the end.

The random delay is the moment of the signal, not a wait for anything: the
only thing waited for is the line saying the handler is installed.
"""

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

EXIT_CODE = 42  # PreemptionOptions::exit_code's default, TensorFlow's
LONG = ["--steps", "100000000"]


def fail(message, out="", err=""):
    sys.exit(f"FAIL: {message}\n--- stdout\n{out}\n--- stderr\n{err}")


def state_latest(directory):
    """The newest checkpoint the state file names (its model_checkpoint_path)."""
    with open(os.path.join(directory, "checkpoint")) as f:
        match = re.search(r'model_checkpoint_path: "([^"]*)"', f.read())
    return os.path.basename(match.group(1)) if match else None


def run_to_completion(command):
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        fail(f"{command} exited {done.returncode}", done.stdout, done.stderr)
    return done.stdout


def preempt(command, ranks, rng):
    """Starts `command`, sends SIGTERM once it is ready; returns its output."""
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
        out = []
        pids = []
        # Ready: every rank has said it has the handler (regress: one line).
        while len(pids) < ranks:
            line = proc.stdout.readline()
            if not line:
                proc.wait()
                err.seek(0)
                fail(f"{command} ended before it was ready ({proc.returncode})", "".join(out),
                     err.read())
            out.append(line)
            match = re.match(r"(?:rank \d+ \(pid (\d+)\): )?on SIGTERM:", line)
            if match:
                pids.append(int(match.group(1)) if match.group(1) else proc.pid)
        target = rng.choice(pids)
        time.sleep(rng.uniform(0.0, 1.5))  # the random moment (see above)
        os.kill(target, signal.SIGTERM)
        rest, _ = proc.communicate(timeout=600)
        out.append(rest)
        err.seek(0)
        return proc.returncode, "".join(out), err.read(), target


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"seed {args.seed} (--seed to repeat)")
    shutil.rmtree(args.dir, ignore_errors=True)
    base = args.command + ["--dir", args.dir]

    expected = None  # the step the last preemption saved
    for round_args in (["--save-every", "100000000"], ["--save-every", "7"]):
        rc, out, err, target = preempt(base + LONG + round_args, args.ranks, rng)
        # mpirun exits with the code of the first rank that failed.
        if rc != EXIT_CODE:
            fail(f"exit code {rc}, not {EXIT_CODE}", out, err)
        if expected is None:
            if not re.search(r"no checkpoint[:,] initialized at step 0", out):
                fail("the first run did not start afresh", out, err)
        elif not re.search(rf"restored \S*/ckpt-{expected} at step {expected}\n", out):
            fail(f"did not resume at step {expected}", out, err)
        # Under mpirun the ranks exit together, and rank 0's line may be cut
        # off by the job's end: the state file says what was saved.
        latest = state_latest(args.dir)
        match = re.fullmatch(r"ckpt-(\d+)", latest or "")
        if not match:
            fail(f"the newest checkpoint is {latest!r}, not ckpt-<step>", out, err)
        step = int(match.group(1))
        said = re.search(r"preempted \(signal (\d+)\): saved (\S+) at step (\d+), exiting with (\d+)",
                         out)
        if args.ranks == 1 and not said:
            fail("no line saying what the preemption saved", out, err)
        if said and (said.group(2) != os.path.join(args.dir, latest) or int(said.group(3)) != step
                     or int(said.group(4)) != EXIT_CODE or int(said.group(1)) != signal.SIGTERM):
            fail(f"the line {said.group(0)!r} does not match the state file's {latest}", out, err)
        if expected is not None and step <= expected:
            fail(f"saved step {step} is not past the resumed step {expected}", out, err)
        print(f"SIGTERM to pid {target}: saved {latest}, exit {rc}")
        expected = step

    out = run_to_completion(base + ["--steps", "5", "--save-every", "100"])
    if not re.search(rf"restored \S*/ckpt-{expected} at step {expected}\n", out):
        fail(f"the last run did not resume at step {expected}", out)
    print(f"resumed at step {expected}")


if __name__ == "__main__":
    main()
