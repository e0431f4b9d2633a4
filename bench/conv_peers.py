"""TensorFlow's and PyTorch's convolutions on conv_bench's shapes: the peers
of bench/conv_bench.cc.

    build/venv-bench/bin/python bench/conv_peers.py --json build/release/conv_peers.json

For each framework and thread count (1 and 2; each in its own process, since
TensorFlow fixes its thread pools once) it times Conv2D's forward pass and
the gradients of its input and of its filter, on float32 NHWC tensors for
TensorFlow (its tf.raw_ops under tf.function) and NCHW for PyTorch (aten's
convolution and convolution_backward, one gradient at a time), and reports
milliseconds per call (the median of --repeats timings of a loop of at least
--min-time seconds) and GFLOP/s (2 * multiply-adds / time), as JSON:
{"shapes": {...}, "results": [{"framework", "threads", "shape", "pass",
"ms", "GFLOPs"}, ...]}."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# name: (batch, rows, cols, depth, window, out_depth, padding), as conv_bench.cc.
SHAPES = {
    "res56": (32, 56, 56, 64, 3, 64, "SAME"),
    "res28": (32, 28, 28, 128, 3, 128, "SAME"),
    "res7": (32, 7, 7, 512, 1, 512, "SAME"),
    "cnn1": (64, 28, 28, 1, 3, 32, "VALID"),
    "cnn2": (64, 13, 13, 32, 3, 64, "VALID"),
}
PASSES = ("forward", "input", "filter")


def out_size(shape):
    batch, rows, cols, depth, window, out_depth, padding = shape
    if padding == "SAME":
        return rows, cols
    return rows - window + 1, cols - window + 1


def flops(shape):
    batch, rows, cols, depth, window, out_depth, _ = shape
    out_rows, out_cols = out_size(shape)
    return 2.0 * batch * out_rows * out_cols * window * window * depth * out_depth


def time_call(fn, min_time, repeats):
    fn()  # warm up (tracing, allocation, oneDNN primitives)
    times = []
    for _ in range(repeats):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        times.append(elapsed / n)
    return statistics.median(times)


def tensorflow_calls(shape, threads):
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    batch, rows, cols, depth, window, out_depth, padding = shape
    out_rows, out_cols = out_size(shape)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.uniform(-1, 1, (batch, rows, cols, depth)).astype("float32"))
    f = tf.constant(rng.uniform(-1, 1, (window, window, depth, out_depth)).astype("float32"))
    dy = tf.constant(rng.uniform(-1, 1, (batch, out_rows, out_cols, out_depth)).astype("float32"))
    attrs = dict(strides=[1, 1, 1, 1], padding=padding)
    forward = tf.function(lambda: tf.raw_ops.Conv2D(input=x, filter=f, **attrs))
    grad_input = tf.function(
        lambda: tf.raw_ops.Conv2DBackpropInput(input_sizes=tf.shape(x), filter=f,
                                               out_backprop=dy, **attrs))
    grad_filter = tf.function(
        lambda: tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=tf.shape(f),
                                                out_backprop=dy, **attrs))
    return {p: (lambda fn=fn: fn().numpy()) for p, fn in
            zip(PASSES, (forward, grad_input, grad_filter))}


def torch_calls(shape, threads):
    import torch

    torch.set_num_threads(threads)
    batch, rows, cols, depth, window, out_depth, padding = shape
    out_rows, out_cols = out_size(shape)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(batch, depth, rows, cols, generator=g) * 2 - 1
    w = torch.rand(out_depth, depth, window, window, generator=g) * 2 - 1
    dy = torch.rand(batch, out_depth, out_rows, out_cols, generator=g) * 2 - 1
    pad = [window // 2] * 2 if padding == "SAME" else [0, 0]
    args = ([1, 1], pad, [1, 1], False, [0, 0], 1)

    def backward(mask):
        return torch.ops.aten.convolution_backward(dy, x, w, None, *args, mask)

    return {
        "forward": lambda: torch.ops.aten.convolution(x, w, None, *args),
        "input": lambda: backward([True, False, False]),
        "filter": lambda: backward([False, True, False]),
    }


def run_one(framework, threads, min_time, repeats):
    results = []
    for name, shape in SHAPES.items():
        calls = (tensorflow_calls if framework == "tensorflow" else torch_calls)(shape, threads)
        for p in PASSES:
            seconds = time_call(calls[p], min_time, repeats)
            results.append({"framework": framework, "threads": threads, "shape": name, "pass": p,
                            "ms": seconds * 1e3, "GFLOPs": flops(shape) / seconds * 1e-9})
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here (default: stdout)")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument("--frameworks", default="tensorflow,torch")
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds per timing")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", nargs=2, metavar=("FRAMEWORK", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        framework, threads = args.child[0], int(args.child[1])
        json.dump(run_one(framework, threads, args.min_time, args.repeats), sys.stdout)
        return
    results = []
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    for framework in args.frameworks.split(","):
        for threads in map(int, args.threads.split(",")):
            out = subprocess.run(
                [sys.executable, __file__, "--child", framework, str(threads),
                 "--min-time", str(args.min_time), "--repeats", str(args.repeats)],
                check=True, capture_output=True, text=True, env=env).stdout
            results += json.loads(out)
    report = {"shapes": {k: list(v) for k, v in SHAPES.items()}, "results": results}
    text = json.dumps(report, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
