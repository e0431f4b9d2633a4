#!/usr/bin/env python3
"""train_bench's MLP training step in PyTorch and TensorFlow, ms per step.

The model of bench/train_bench.cc: 784-256-256-10, ReLU, softmax
cross-entropy (the mean over the batch), batch 128 fed every step, Adam
(learning rate 0.001), Glorot-uniform weights and zero biases. Each peer
runs on 1 thread and on every core, each (peer, threads) in a process of its
own, since both frameworks fix their thread pools when they start:

  torch        PyTorch eager: addmm, relu, cross_entropy, torch.optim.Adam
  tf_graph     TensorFlow 1.x style: placeholders and AdamOptimizer.minimize
               in a tf.compat.v1.Session (what ckflow's graphs mirror)
  tf_function  TensorFlow 2: a tf.function of GradientTape and Adam's fused
               kernel (ResourceApplyAdam, as AdamOptimizer runs it)
  tf_eager     the same step without tf.function

Each step's time is the median over blocks of steps after a warm-up. Run
with the bench venv's python (./run.sh bench does):

  build/venv-bench/bin/python bench/train_step_peers.py --json results.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

BATCH, INPUT, HIDDEN, CLASSES = 128, 784, 256, 10
SIZES = [INPUT, HIDDEN, HIDDEN, CLASSES]
PEERS = ["torch", "tf_graph", "tf_function", "tf_eager"]


def batch():
    import numpy as np

    rng = np.random.default_rng(7)
    x = rng.random((BATCH, INPUT), dtype=np.float32)
    y = np.zeros((BATCH, CLASSES), dtype=np.float32)
    y[np.arange(BATCH), np.arange(BATCH) % CLASSES] = 1
    return x, y


def glorot(rng, fan_in, fan_out):
    limit = (6.0 / (fan_in + fan_out)) ** 0.5
    return rng.uniform(-limit, limit, (fan_in, fan_out)).astype("float32")


def run_child(script, peer, threads, seconds):
    """The JSON object `script --child PEER --threads N --seconds S` prints
    last, run in a process of its own (both frameworks fix their thread
    pools when they start); None, with the reason on stderr, if it fails."""
    cmd = [sys.executable, os.path.abspath(script), "--child", peer, "--threads", str(threads),
           "--seconds", str(seconds)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"{os.path.basename(script)}: {peer} on {threads} threads failed:\n{done.stderr}",
              file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def time_steps(step, seconds):
    """Median ms per step over blocks of steps, after a warm-up."""
    for _ in range(20):
        step()
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < seconds / 5 or n < 5:
        step()
        n += 1
    blocks = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            step()
        blocks.append((time.perf_counter() - start) / n * 1e3)
    return statistics.median(blocks)


def torch_step(threads, seconds):
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)
    x, y = (torch.from_numpy(a) for a in batch())
    labels = y.argmax(1)
    rng = np.random.default_rng(3)
    params = []
    for fan_in, fan_out in zip(SIZES, SIZES[1:]):
        params.append(torch.from_numpy(glorot(rng, fan_in, fan_out)).requires_grad_())
        params.append(torch.zeros(fan_out, requires_grad=True))
    optimizer = torch.optim.Adam(params, lr=0.001, eps=1e-8)

    def step():
        optimizer.zero_grad()
        h = x
        for layer in range(3):
            h = torch.addmm(params[2 * layer + 1], h, params[2 * layer])
            if layer < 2:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, labels)
        loss.backward()
        optimizer.step()
        return loss.item()

    return time_steps(step, seconds), torch.__version__


def tf_graph_step(threads, seconds):
    import numpy as np
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    xv, yv = batch()
    rng = np.random.default_rng(3)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [BATCH, INPUT])
        y = tf.compat.v1.placeholder(tf.float32, [BATCH, CLASSES])
        h = x
        for layer, (fan_in, fan_out) in enumerate(zip(SIZES, SIZES[1:])):
            w = tf.Variable(glorot(rng, fan_in, fan_out))
            b = tf.Variable(tf.zeros([fan_out]))
            h = tf.nn.bias_add(tf.matmul(h, w), b)
            if layer < 2:
                h = tf.nn.relu(h)
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=h))
        train = tf.compat.v1.train.AdamOptimizer(0.001, epsilon=1e-8).minimize(loss)
        init = tf.compat.v1.global_variables_initializer()
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                      inter_op_parallelism_threads=threads)
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        session.run(init)
        feed = {x: xv, y: yv}
        ms = time_steps(lambda: session.run([train, loss], feed), seconds)
    return ms, tf.__version__


def tf_eager_step(threads, seconds, function):
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    xv, yv = batch()
    rng = np.random.default_rng(3)
    params = []
    for fan_in, fan_out in zip(SIZES, SIZES[1:]):
        params.append(tf.Variable(glorot(rng, fan_in, fan_out)))
        params.append(tf.Variable(tf.zeros([fan_out])))
    slots = [(tf.Variable(tf.zeros_like(p)), tf.Variable(tf.zeros_like(p))) for p in params]
    beta1, beta2, lr, eps = 0.9, 0.999, 0.001, 1e-8
    powers = [tf.Variable(beta1), tf.Variable(beta2)]

    def step(x, y):
        with tf.GradientTape() as tape:
            h = x
            for layer in range(3):
                h = tf.nn.bias_add(tf.matmul(h, params[2 * layer]), params[2 * layer + 1])
                if layer < 2:
                    h = tf.nn.relu(h)
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=h))
        grads = tape.gradient(loss, params)
        for p, (m, v), g in zip(params, slots, grads):
            tf.raw_ops.ResourceApplyAdam(var=p.handle, m=m.handle, v=v.handle,
                                         beta1_power=powers[0], beta2_power=powers[1], lr=lr,
                                         beta1=beta1, beta2=beta2, epsilon=eps, grad=g)
        powers[0].assign(powers[0] * beta1)
        powers[1].assign(powers[1] * beta2)
        return loss

    if function:
        step = tf.function(step)
    x, y = tf.constant(xv), tf.constant(yv)
    return time_steps(lambda: step(x, y).numpy(), seconds), tf.__version__


def child(peer, threads, seconds):
    if peer == "torch":
        return torch_step(threads, seconds)
    if peer == "tf_graph":
        return tf_graph_step(threads, seconds)
    return tf_eager_step(threads, seconds, function=peer == "tf_function")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the times here, for bench/report.py")
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per case")
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.child:
        ms, version = child(args.child, args.threads, args.seconds)
        print(json.dumps({"ms": ms, "version": version}))
        return
    cores = os.cpu_count()
    steps, versions = {}, {}
    for peer in args.peers.split(","):
        for key, threads in (("1", 1), ("all", cores)):
            result = run_child(__file__, peer, threads, args.seconds)
            if result is None:
                continue
            steps.setdefault(peer, {})[key] = {"ms": result["ms"], "threads": threads}
            versions["torch" if peer == "torch" else "tensorflow"] = result["version"]
            print(f"{peer}, {threads} thread{'s' if threads > 1 else ''}: "
                  f"{result['ms']:.3f} ms per step", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**versions, "cores": cores, "steps": steps}, f, indent=1)
    if not steps:
        sys.exit("train_step_peers.py: no peer ran")


if __name__ == "__main__":
    main()
