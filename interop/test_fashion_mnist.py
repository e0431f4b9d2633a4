"""TensorFlow 2.21 judges the Fashion-MNIST example (examples/fashion_mnist.cc):
the same CNN as a tf_keras Sequential (interop/tf_cnn_side.py) against
ckflow's (interop/cnn_side.cc and the example itself).

  - The same numbers: from ckflow's initial weights, on the same batches,
    the loss and every variable (moving statistics and Adam's slots
    included) follow TensorFlow's float64 run of the model step by step, at
    least as closely as TensorFlow's float32 run does.
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


# (1) From the same weights, on the same batches, the same training steps.
# TensorFlow's float32 run is not the judge of "the same numbers": its fused
# batch norm and oneDNN convolutions round differently from any other
# float32 code, and this network magnifies rounding (batch norm's backprop
# subtracts two nearly equal means; Adam turns a gradient of noise into a
# step of +-lr). TensorFlow's own float32 run is 7e-3 (SGD) and 2e-2 (Adam)
# away from its float64 run after one step, and 2e-2 (L2) after 50, whether
# batch norm is fused or not. The judge is the float64 run of the same
# model: ckflow's float32 must follow it at least as closely as
# TensorFlow's float32 does, and (where rounding has not yet grown, after
# the first SGD step) within 1e-4 of every variable.
#
# The convolutions' biases feed batch norm, which subtracts each channel's
# mean, so their exact gradient is 0: in float32 they move by rounding
# alone (by +-lr a step under Adam), in float64 they stay near 1e-15. They
# are checked apart.
CONV_BIASES = ("model/layer_with_weights-0/bias/", "model/layer_with_weights-2/bias/")


def trajectories(tmp_path, ckflow, train_set, steps, optimizer, dtypes):
    """ckflow's and TensorFlow's (one per dtype) variables after each step,
    as {key: float64 array}, from ckflow's initial weights, dropout off (its
    masks come from different generators; the layer stays, so the keys are
    the example's)."""
    ck = ckflow.cnn("train", "--data", tf_cnn_side.DATA, "--initial", tmp_path / "initial",
                    "--steps", steps, "--trajectory", tmp_path / "ck", "--batch", BATCH,
                    "--seed", SEED, "--dropout", 0, "--optimizer", optimizer)
    assert ck["steps"] == str(steps), ck
    order = list(tf_cnn_side.batches(len(train_set[1]), BATCH, SEED, 1))[:steps]
    indices = values.as_array(values.read(str(tmp_path / "ck.indices"))["indices"])
    np.testing.assert_array_equal(indices, order[0])  # the same shuffle

    def as_arrays(dump):
        return {k: values.as_array(v).astype(np.float64) for k, v in dump.items()}

    ours = [as_arrays(values.read(str(tmp_path / f"ck.{step + 1}"))) for step in range(steps)]
    theirs = {}
    for dtype in dtypes:
        run = tf_cnn_side.train_graph(str(tmp_path / "initial"), *train_set, order, steps, BATCH,
                                      optimizer=optimizer, dtype=dtype, trajectory=True)
        theirs[dtype] = [as_arrays(dump) for dump in run["trajectory"]]
        assert sorted(theirs[dtype][0]) == sorted(ours[0]), set(theirs[dtype][0]) ^ set(ours[0])
    return ours, theirs


def judged(keys):
    return [k for k in keys if not k.startswith(CONV_BIASES)]


def relative(a, b):
    """Per key, the largest difference relative to b's largest magnitude."""
    return {k: float(np.max(np.abs(a[k] - b[k]))) / (float(np.max(np.abs(b[k]))) or 1.0)
            for k in judged(b)}


def distance(a, b):
    """|a - b| / |b| over all judged values at once (L2)."""
    keys = judged(b)
    diff = sum(float(np.sum((a[k] - b[k]) ** 2)) for k in keys)
    return (diff / sum(float(np.sum(b[k] ** 2)) for k in keys)) ** 0.5


def test_fifty_adam_steps_follow_tensorflow_float64(tmp_path, ckflow, train_set):
    steps = 50
    ours, theirs = trajectories(tmp_path, ckflow, train_set, steps, "adam",
                                ["float32", "float64"])
    exact, tf32 = theirs["float64"], theirs["float32"]
    for step in range(steps):
        ck_gap, tf_gap = distance(ours[step], exact[step]), distance(tf32[step], exact[step])
        assert ck_gap <= tf_gap, (step + 1, ck_gap, tf_gap)
    # One step: every value (the slots and moving statistics included)
    # within 1e-3 of float64, where TensorFlow's float32 is 2e-2 away.
    worst = relative(ours[0], exact[0])
    assert max(worst.values()) < 1e-3, {k: v for k, v in worst.items() if v >= 1e-3}
    assert ours[-1]["loss"] < ours[0]["loss"]  # ckflow trained


def test_sgd_steps_match_tensorflow_float64(tmp_path, ckflow, train_set):
    # After one step every value is within 1e-4 of float64. Later steps
    # may grow the rounding past that on some machines (seen: 2e-4 at step
    # 2 and 2e-3 at step 5 on one CI machine, under 1e-4 on another), and
    # are held, as the Adam test holds them, to TensorFlow's own float32.
    steps = 5
    ours, theirs = trajectories(tmp_path, ckflow, train_set, steps, "sgd",
                                ["float32", "float64"])
    exact, tf32 = theirs["float64"], theirs["float32"]
    worst = relative(ours[0], exact[0])
    assert max(worst.values()) < 1e-4, {k: v for k, v in worst.items() if v >= 1e-4}
    for step in range(steps):
        ck_gap, tf_gap = distance(ours[step], exact[step]), distance(tf32[step], exact[step])
        assert ck_gap <= tf_gap, (step + 1, ck_gap, tf_gap)
        for key in ours[step]:
            if key.startswith(CONV_BIASES):  # 0 but for rounding
                assert np.max(np.abs(ours[step][key])) < 1e-4, (step + 1, key)


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
