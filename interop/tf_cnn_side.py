"""TensorFlow's half of the Fashion-MNIST checks: the example's CNN
(examples/fashion_mnist_model.h) as a tf_keras Sequential, the data set read
with numpy, the example's shuffle (data/shuffle.h) restated, and the TF1
graph-mode training loop that feeds the same batches."""

import gzip
import os

import numpy as np
import tensorflow as tf
import tf_keras as keras

import tf_side
import values

DATA = "/usr/share/datasets/fashion-mnist"
M64 = (1 << 64) - 1


def model(dropout=0.25, dtype="float32"):
    """The example's model, layer for layer. In float64 (the reference the
    float32 runs are measured against) batch norm is Keras' unfused one, as
    FusedBatchNormV3 has no float64 kernel."""
    layers = keras.layers
    kw = {"dtype": dtype}
    norm = {"fused": False} if dtype == "float64" else {}
    return keras.Sequential([
        layers.Conv2D(32, 3, **kw),
        layers.BatchNormalization(**norm, **kw),
        layers.ReLU(**kw),
        layers.MaxPooling2D(**kw),
        layers.Conv2D(64, 3, **kw),
        layers.BatchNormalization(**norm, **kw),
        layers.ReLU(**kw),
        layers.MaxPooling2D(**kw),
        layers.Flatten(**kw),
        layers.Dropout(dropout, **kw),
        layers.Dense(128, activation="relu", **kw),
        layers.Dense(10, **kw),
    ])


def initial_weights(prefix):
    """The weights of a SaveWeights/save_weights prefix, in Keras' order
    (get_weights), read through a float32 model."""
    net = model()
    net(tf.zeros([1, 28, 28, 1]))
    net.load_weights(prefix).assert_consumed()
    return net.get_weights()


def read_idx(path):
    """An IDX file (gzip'd) as a numpy array of its dims."""
    with gzip.open(path) as f:
        data = f.read()
    assert data[:2] == b"\0\0" and data[2] == 0x08, path
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def load(prefix, directory=DATA):
    """(images float32 [n, 28, 28, 1] scaled by / 255, labels int32 [n])."""
    images = read_idx(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"))
    return (images.astype(np.float32) / np.float32(255)).reshape(-1, 28, 28, 1), labels.astype(
        np.int32)


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def shuffled_indices(n, seed, epoch):
    """data/shuffle.h's ShuffledIndices, step by step."""
    order = list(range(n))
    state = (seed ^ _mix(epoch & M64)) & M64
    for i in range(n - 1, 0, -1):
        state = (state + 0x9E3779B97F4A7C15) & M64
        j = _mix(state) % (i + 1)
        order[i], order[j] = order[j], order[i]
    return np.array(order, dtype=np.int64)


def batches(n, batch, seed, epochs):
    """The example's batches: each epoch's order, `batch` at a time, the last
    partial batch left out."""
    for epoch in range(epochs):
        order = shuffled_indices(n, seed, epoch)
        for step in range(n // batch):
            yield order[step * batch : (step + 1) * batch]


def variables(net, optimizer):
    """{checkpoint key: variable} of a Checkpoint(optimizer=, model=) over
    the Sequential `net`, written out from the object graph Keras saves."""
    out = {}
    weighted = [layer for layer in net.layers if layer.weights]
    for k, layer in enumerate(weighted):
        for var in layer.weights:
            name = var.name.split("/")[-1].split(":")[0]
            tf_side.add_variable(out, f"model/layer_with_weights-{k}/{name}", var, optimizer)
    tf_side.add_non_slot_variables(out, optimizer)
    return out


SGD_LEARNING_RATE = 0.05  # interop/cnn_side.cc's kSgdLearningRate


def train_graph(initial, x, y, order, steps, batch, dropout=0.0, trajectory=False,
                threads=None, optimizer="adam", dtype="float32"):
    """The model in a TF1 graph, its weights loaded from `initial` (a
    SaveWeights/save_weights prefix) or left as Keras initializes them
    (initial=None), trained by tf.compat.v1.train.AdamOptimizer(1e-3) (or
    GradientDescentOptimizer(SGD_LEARNING_RATE) for optimizer="sgd") on
    `steps` batches of `order` (lists of indices into x, y), the moving
    statistics updated in each step (the training call's model.updates,
    run with the step as a TF1 graph must). Returns {"loss": per step,
    "trajectory": per step a dump of every variable and the loss (with
    trajectory=True), "accuracy": f(test_x, test_y) of the inference path,
    "save": f(prefix) running save_weights}. With dtype="float64" the whole
    model runs in float64, the initial weights widened from the file."""
    results = {"loss": [], "trajectory": []}
    config = None
    if threads:
        config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                          inter_op_parallelism_threads=threads)
    widened = None
    if initial is not None and dtype != "float32":
        widened = [value.astype(dtype) for value in initial_weights(initial)]
    graph = tf.Graph()
    with graph.as_default():
        net = model(dropout, dtype)
        images = tf.compat.v1.placeholder(dtype, [None, 28, 28, 1])
        labels = tf.compat.v1.placeholder(tf.int32, [None])
        logits = net(images, training=True)
        updates = list(net.updates)  # the moving statistics' (this call's only)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        if optimizer == "sgd":
            optimizer = tf.compat.v1.train.GradientDescentOptimizer(SGD_LEARNING_RATE)
        else:
            optimizer = tf.compat.v1.train.AdamOptimizer(1e-3)
        train_op = tf.group(optimizer.minimize(loss), *updates)
        predictions = tf.argmax(net(images, training=False), axis=1, output_type=tf.int32)
        session = tf.compat.v1.Session(graph=graph, config=config)
        session.run(tf.compat.v1.global_variables_initializer())
        if widened is not None:
            session.run([var.assign(value) for var, value in zip(net.weights, widened)])
        elif initial is not None:
            with session.as_default():
                net.load_weights(initial).assert_consumed().run_restore_ops(session)
        by_key = variables(net, optimizer)
        for step in range(steps):
            idx = order[step]
            value, _ = session.run([loss, train_op], {images: x[idx].astype(dtype),
                                                      labels: y[idx]})
            results["loss"].append(float(value))
            if trajectory:
                fetched = session.run({k: v.read_value() for k, v in by_key.items()})
                dump = {k: values.entry(by_key[k].dtype.base_dtype, fetched[k]) for k in by_key}
                dump["loss"] = values.entry(tf.as_dtype(dtype), np.array(value, dtype))
                results["trajectory"].append(dump)

    def accuracy(test_x, test_y):
        correct = 0
        for begin in range(0, len(test_x), 1000):
            got = session.run(predictions, {images: test_x[begin : begin + 1000]})
            correct += int(np.sum(got == test_y[begin : begin + 1000]))
        return correct / len(test_x)

    def save(prefix):
        with graph.as_default(), session.as_default():
            net.save_weights(prefix)

    results["accuracy"] = accuracy
    results["save"] = save
    return results
