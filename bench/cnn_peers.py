#!/usr/bin/env python3
"""The Fashion-MNIST example's CNN in TensorFlow and PyTorch: the peers of
bench/cnn_bench.cc.

The model of examples/fashion_mnist_model.h: Conv2D(32, 3x3) ->
BatchNormalization -> ReLU -> MaxPooling2D -> Conv2D(64, 3x3) ->
BatchNormalization -> ReLU -> MaxPooling2D -> Flatten -> Dropout(0.25) ->
Dense(128, relu) -> Dense(10), sparse softmax cross-entropy, Adam (learning
rate 1e-3), random images in [0, 1] and labels fed every step. Each peer runs
with 1 and 2 threads (intra- and inter-op), each (peer, threads) in a process
of its own, since both frameworks fix their thread pools when they start:

  tf_graph   tf_keras layers in a TF1 graph: placeholders,
             tf.compat.v1.train.AdamOptimizer.minimize with the layer's
             moving-average updates, a tf.compat.v1.Session (what ckflow's
             graphs mirror; NHWC)
  torch      PyTorch eager: nn.Conv2d, nn.BatchNorm2d (eps 1e-3, momentum
             0.01, Keras' 0.99), nn.MaxPool2d, nn.Dropout, nn.Linear,
             F.cross_entropy, torch.optim.Adam (NCHW, PyTorch's layout)

For each: the training step on a batch of 64 and the inference path on a
batch of 256 (ms per step, the median over blocks of steps after a warm-up;
only the step is timed; train_step_peers.py's timing) and, for TensorFlow, the seconds to build the graph
(the model's two calls, minimize, the initializer) and create its session.
Run with the bench venv's python (./run.sh bench does):

  build/venv-bench/bin/python bench/cnn_peers.py --json results.json
"""

import argparse
import json
import os
import sys
import time

from train_step_peers import run_child, time_steps

PEERS = ["tf_graph", "torch"]
THREADS = [1, 2]
TRAIN_BATCH, INFER_BATCH = 64, 256


def data(n):
    import numpy as np

    rng = np.random.default_rng(7)
    x = (rng.integers(0, 256, (n, 28, 28, 1)) / 255).astype(np.float32)
    y = rng.integers(0, 10, n).astype(np.int32)
    return x, y


def tf_graph(threads, seconds):
    import tensorflow as tf
    import tf_keras as keras

    tf.compat.v1.disable_eager_execution()
    start = time.perf_counter()
    graph = tf.Graph()
    with graph.as_default():
        layers = keras.layers
        net = keras.Sequential([
            layers.Conv2D(32, 3), layers.BatchNormalization(), layers.ReLU(),
            layers.MaxPooling2D(), layers.Conv2D(64, 3), layers.BatchNormalization(),
            layers.ReLU(), layers.MaxPooling2D(), layers.Flatten(), layers.Dropout(0.25),
            layers.Dense(128, activation="relu"), layers.Dense(10),
        ])
        images = tf.compat.v1.placeholder(tf.float32, [None, 28, 28, 1])
        labels = tf.compat.v1.placeholder(tf.int32, [None])
        logits = net(images, training=True)
        updates = list(net.updates)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        train = tf.group(tf.compat.v1.train.AdamOptimizer(1e-3).minimize(loss), *updates)
        predictions = tf.argmax(net(images, training=False), axis=1)
        init = tf.compat.v1.global_variables_initializer()
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                      inter_op_parallelism_threads=threads)
    session = tf.compat.v1.Session(graph=graph, config=config)
    build_s = time.perf_counter() - start
    session.run(init)
    x, y = data(TRAIN_BATCH)
    train_feed = {images: x, labels: y}
    infer_feed = {images: data(INFER_BATCH)[0]}
    out = {
        "train_ms": time_steps(lambda: session.run([train, loss], train_feed), seconds),
        "inference_ms": time_steps(lambda: session.run(predictions, infer_feed), seconds),
        "build_s": build_s,
    }
    return out, tf.__version__


def torch_step(threads, seconds):
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)
    torch.manual_seed(3)
    net = nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.BatchNorm2d(32, eps=1e-3, momentum=0.01), nn.ReLU(),
        nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.BatchNorm2d(64, eps=1e-3, momentum=0.01),
        nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.25), nn.Linear(1600, 128),
        nn.ReLU(), nn.Linear(128, 10),
    )
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-8)
    x, y = data(TRAIN_BATCH)
    x = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous()
    y = torch.from_numpy(y).long()
    infer_x = torch.from_numpy(data(INFER_BATCH)[0]).permute(0, 3, 1, 2).contiguous()

    def train():
        net.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    def infer():
        net.eval()
        with torch.no_grad():
            return net(infer_x).argmax(1)

    out = {"train_ms": time_steps(train, seconds), "inference_ms": time_steps(infer, seconds)}
    return out, torch.__version__


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the times here, for bench/report.py")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per case")
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.child:
        fn = tf_graph if args.child == "tf_graph" else torch_step
        out, version = fn(args.threads, args.seconds)
        print(json.dumps({**out, "version": version}))
        return
    results, versions = {}, {}
    for peer in args.peers.split(","):
        for threads in THREADS:
            result = run_child(__file__, peer, threads, args.seconds)
            if result is None:
                continue
            versions["torch" if peer == "torch" else "tensorflow"] = result.pop("version")
            results.setdefault(peer, {})[str(threads)] = result
            print(f"{peer}, {threads} thread{'s' if threads > 1 else ''}: " +
                  ", ".join(f"{k} {v:.3f}" for k, v in result.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**versions, "results": results}, f, indent=1)
    if not results:
        sys.exit("cnn_peers.py: no peer ran")


if __name__ == "__main__":
    main()
