#!/usr/bin/env python3
"""Draws bench/peers.png from the rates bench/tf_side_by_side.py --json wrote.

Restore and save throughput (GB/s of variable payload, log scale) of ckflow
beside TensorFlow (graph and eager) and PyTorch, for each case of that run:
one panel per direction, one group of bars per case. Run with Debian's
python3 and python3-matplotlib (./run.sh bench does):

  python3 bench/plot_peers.py build/release/tf_side_by_side.json bench/peers.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        run = json.load(f)
    cases = run["cases"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, direction in zip(axes, ("restore", "save")):
        peers = list(cases[0][direction])
        width = 0.8 / len(peers)
        for i, peer in enumerate(peers):
            xs = [c + (i - (len(peers) - 1) / 2) * width for c in range(len(cases))]
            ax.bar(xs, [case[direction][peer] for case in cases], width, label=peer)
        ax.set_xticks(range(len(cases)), [case["label"] for case in cases])
        ax.set_yscale("log")
        ax.set_ylabel("GB/s of variable payload")
        ax.set_title(direction)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"ckflow, TensorFlow {run['tensorflow']} and PyTorch {run['torch']}, "
                 f"same machine and run (medians of {run['repeat']})")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
