#!/usr/bin/env python3
"""The character transformer and a sparse Adagrad update in TensorFlow and
PyTorch: the peers of bench/sequence_bench.cc.

The model of examples/char_transformer_model.h at the benchmark's size:
batches of 32 windows of 128 token ids over a vocabulary of 256, d_model
128, 2 pre-norm blocks (LayerNormalization, causal MultiHeadAttention of 4
heads of 32, LayerNormalization, Dense 512 with exact GELU, Dense 128, each
with its residual), a final LayerNormalization and a Dense to 256 logits;
the loss is the mean sparse softmax cross-entropy over all 32 x 128
positions, the optimizer Adam (learning rate 1e-3). Each peer runs with 1
and 2 threads (intra- and inter-op), each (peer, threads) in a process of
its own, since both frameworks fix their thread pools when they start:

  tf_graph           interop/test_char_transformer.py's tf_keras model (the
                     one interop checks ckflow's example against) in a TF1
                     graph: placeholders, tf.compat.v1.train.AdamOptimizer
                     .minimize, a tf.compat.v1.Session (what ckflow's graphs
                     mirror)
  torch              PyTorch eager: nn.Embedding (tokens and positions),
                     nn.LayerNorm (eps 1e-3, Keras'), nn.MultiheadAttention
                     with a causal float mask, nn.Linear, F.gelu,
                     F.cross_entropy, torch.optim.Adam
  tf_sparse_adagrad  TensorFlow's ResourceSparseApplyAdagrad
                     (tf.raw_ops, a TF1 graph and Session) on a float32
                     table of 2^20 rows x 128 and its accumulator, updating
                     16,384 distinct random rows per call (learning rate
                     0.01; the rows and their gradient fixed, constants of
                     the graph; the table starts at 0.01, the accumulator
                     at 0.1, as sequence_bench's): rows per second

The batch (and the sparse update's rows) are made before timing; each
figure is the median of 30 timed steps (calls) after 5 of warm-up. Run with
the bench venv's python (./run.sh bench does):

  build/venv-bench/bin/python bench/sequence_peers.py --json results.json

--quick (1 warm-up step, 3 timed) only checks that every peer runs.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
INTEROP = os.path.join(os.path.dirname(HERE), "interop")

PEERS = ["tf_graph", "torch", "tf_sparse_adagrad"]
THREADS = [1, 2]
BATCH, CONTEXT, VOCAB, D_MODEL, HEADS, BLOCKS, MLP = 32, 128, 256, 128, 4, 2, 512
TABLE_ROWS, TABLE_DIM, UPDATE_ROWS, LEARNING_RATE = 1 << 20, 128, 16384, 0.01


def batch():
    """32 windows of 129 random ids: each position's input and next id."""
    import numpy as np

    rng = np.random.default_rng(0)
    windows = rng.integers(0, VOCAB, (BATCH, CONTEXT + 1)).astype(np.int32)
    return windows[:, :-1], windows[:, 1:].reshape(-1)


def median_ms(step, warmup, steps):
    """The median of `steps` timed calls of step(), after `warmup`, in ms."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def tensorflow(threads):
    """TensorFlow, its pools set to `threads` before anything else runs,
    in graph mode."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    tf.compat.v1.disable_eager_execution()
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                      inter_op_parallelism_threads=threads)
    return tf, config


def tf_graph(threads, warmup, steps):
    tf, config = tensorflow(threads)
    sys.path.insert(0, INTEROP)
    from test_char_transformer import CharTransformer

    graph = tf.Graph()
    with graph.as_default():
        model = CharTransformer(context=CONTEXT, d_model=D_MODEL, blocks=BLOCKS)
        ids = tf.compat.v1.placeholder(tf.int32, [None, CONTEXT])
        labels = tf.compat.v1.placeholder(tf.int32, [None])
        logits = tf.reshape(model(ids), [-1, VOCAB])
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        train = tf.compat.v1.train.AdamOptimizer(1e-3).minimize(loss)
        init = tf.compat.v1.global_variables_initializer()
    session = tf.compat.v1.Session(graph=graph, config=config)
    session.run(init)
    x, y = batch()
    feed = {ids: x, labels: y}
    return {"train_ms": median_ms(lambda: session.run([train, loss], feed), warmup, steps)}, \
        tf.__version__


def torch_step(threads, warmup, steps):
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)
    torch.manual_seed(3)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention_norm = nn.LayerNorm(D_MODEL, eps=1e-3)
            self.attention = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
            self.mlp_norm = nn.LayerNorm(D_MODEL, eps=1e-3)
            self.mlp_in = nn.Linear(D_MODEL, MLP)
            self.mlp_out = nn.Linear(MLP, D_MODEL)

        def forward(self, x, mask):
            h = self.attention_norm(x)
            x = x + self.attention(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp_out(F.gelu(self.mlp_in(self.mlp_norm(x))))

    class CharTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding = nn.Embedding(VOCAB, D_MODEL)
            self.position_embedding = nn.Embedding(CONTEXT, D_MODEL)
            self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
            self.final_norm = nn.LayerNorm(D_MODEL, eps=1e-3)
            self.logits = nn.Linear(D_MODEL, VOCAB)
            self.register_buffer("positions", torch.arange(CONTEXT))
            # The causal mask: -inf above the diagonal, added to the scores.
            self.register_buffer("mask", torch.triu(
                torch.full((CONTEXT, CONTEXT), float("-inf")), diagonal=1))

        def forward(self, ids):
            x = self.token_embedding(ids) + self.position_embedding(self.positions)
            for block in self.blocks:
                x = block(x, self.mask)
            return self.logits(self.final_norm(x))

    net = CharTransformer()
    net.train()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-8)
    x, y = batch()
    x, y = torch.from_numpy(x).long(), torch.from_numpy(y).long()

    def train():
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x).reshape(-1, VOCAB), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    return {"train_ms": median_ms(train, warmup, steps)}, torch.__version__


def tf_sparse_adagrad(threads, warmup, steps):
    import numpy as np

    tf, config = tensorflow(threads)
    rng = np.random.default_rng(1)
    rows = rng.choice(TABLE_ROWS, UPDATE_ROWS, replace=False).astype(np.int64)
    grad = rng.standard_normal((UPDATE_ROWS, TABLE_DIM), dtype=np.float32)
    graph = tf.Graph()
    with graph.as_default():
        table = tf.compat.v1.get_variable(
            "table", [TABLE_ROWS, TABLE_DIM], tf.float32, use_resource=True,
            initializer=tf.compat.v1.constant_initializer(0.01))
        accumulator = tf.compat.v1.get_variable(
            "table_accumulator", [TABLE_ROWS, TABLE_DIM], tf.float32, use_resource=True,
            initializer=tf.compat.v1.constant_initializer(0.1))
        update = tf.raw_ops.ResourceSparseApplyAdagrad(
            var=table.handle, accum=accumulator.handle, lr=tf.constant(LEARNING_RATE),
            grad=tf.constant(grad), indices=tf.constant(rows), use_locking=False)
        init = tf.compat.v1.global_variables_initializer()
    session = tf.compat.v1.Session(graph=graph, config=config)
    session.run(init)
    seconds = median_ms(lambda: session.run(update), warmup, steps) / 1e3
    return {"rows_per_s": UPDATE_ROWS / seconds}, tf.__version__


def run_child(peer, threads, warmup, steps):
    """The JSON object this script prints last as `--child PEER`, run in a
    process of its own; None, with the reason on stderr, if it fails."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", peer, "--child-threads",
           str(threads), "--warmup", str(warmup), "--steps", str(steps)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"sequence_peers.py: {peer} on {threads} threads failed (exit {done.returncode}):\n"
              f"{done.stderr}", file=sys.stderr, flush=True)
        return None
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        print(f"sequence_peers.py: {peer} on {threads} threads printed no result:\n"
              f"{done.stdout}{done.stderr}", file=sys.stderr, flush=True)
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the figures here, for bench/report.py")
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--threads", default=",".join(map(str, THREADS)),
                        help="thread counts, comma separated")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=30, help="timed steps (their median)")
    parser.add_argument("--quick", action="store_true",
                        help="1 warm-up step and 3 timed: a check that the peers run")
    parser.add_argument("--child", choices=PEERS, help=argparse.SUPPRESS)
    parser.add_argument("--child-threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.warmup, args.steps = 1, 3
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.child:
        fn = {"tf_graph": tf_graph, "torch": torch_step,
              "tf_sparse_adagrad": tf_sparse_adagrad}[args.child]
        out, version = fn(args.child_threads, args.warmup, args.steps)
        print(json.dumps({**out, "version": version}))
        return
    results, versions = {}, {}
    for peer in args.peers.split(","):
        if peer not in PEERS:
            parser.error(f"unknown peer {peer!r} (peers: {', '.join(PEERS)})")
        for threads in (int(t) for t in args.threads.split(",")):
            result = run_child(peer, threads, args.warmup, args.steps)
            if result is None:
                continue
            versions["torch" if peer == "torch" else "tensorflow"] = result.pop("version")
            results.setdefault(peer, {})[str(threads)] = result
            print(f"{peer}, {threads} thread{'s' if threads > 1 else ''}: " +
                  ", ".join(f"{k} {v:,.3f}" for k, v in result.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**versions, "results": results}, f, indent=1)
    if not results:
        sys.exit("sequence_peers.py: no peer ran")


if __name__ == "__main__":
    main()
