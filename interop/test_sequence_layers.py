"""TensorFlow 2.21 and tf_keras as the judges of ckflow's sequence layers
(ops/sequence_layers.h): Embedding, LayerNormalization, Dense on a rank-3
input, MultiHeadAttention (self, causal, cross), and BatchNormalization on
a rank-3 input (inference, and a training call with its updates). ckflow builds each
layer, runs it and saves its weights (interop/layers_side.cc); tf_keras'
layer of the same settings restores that file with assert_consumed (so the
names, shapes and object graph are Keras'), holds the same variable names,
and computes the same output on the same input."""

import zlib

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

import values

LAYERS = {
    "embedding": lambda: keras.layers.Embedding(50, 8),
    "layer_norm": lambda: keras.layers.LayerNormalization(),
    "dense3": lambda: keras.layers.Dense(6),
    "mha": lambda: keras.layers.MultiHeadAttention(4, 8),
    "mha_causal": lambda: keras.layers.MultiHeadAttention(4, 8),
    "mha_cross": lambda: keras.layers.MultiHeadAttention(2, 8, value_dim=5),
    # On [batch, steps, features]: Keras' non-fused path.
    "batch_norm": lambda: keras.layers.BatchNormalization(),
    "batch_norm_train": lambda: keras.layers.BatchNormalization(),
}


def inputs_for(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if name == "embedding":
        return {"x": rng.integers(0, 50, size=(3, 7)).astype(np.int32)}
    if name == "mha_cross":
        return {"x": rng.normal(size=(2, 4, 16)).astype(np.float32),
                "value": rng.normal(size=(2, 6, 12)).astype(np.float32)}
    return {"x": rng.normal(size=(2, 7, 16)).astype(np.float32)}


def keras_call(name, layer, inputs):
    x = tf.constant(inputs["x"])
    if name.startswith("mha"):
        value = tf.constant(inputs.get("value", inputs["x"]))
        return layer(x, value, use_causal_mask=name == "mha_causal")
    if name.endswith("_train"):
        return layer(x, training=True)
    return layer(x)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_keras_restores_the_layer_and_computes_its_output(tmp_path, ckflow, name):
    inputs = inputs_for(name)
    values.write(tmp_path / "in", inputs)
    ckflow.layers("--layer", name, "--in", tmp_path / "in", "--out", tmp_path / "out",
                  "--weights", tmp_path / "weights")
    got = {key: values.as_array(entry) for key, entry in values.read(tmp_path / "out").items()}

    keras.backend.clear_session()  # Keras' default names, not "dense_1"
    layer = LAYERS[name]()
    keras_call(name, layer, inputs)  # builds the variables
    tf.train.Checkpoint(layer).read(str(tmp_path / "weights")).assert_consumed()
    # The same variables under the same names, holding what ckflow saved.
    assert sorted(v.name.removesuffix(":0") for v in layer.weights) == sorted(
        k for k in got if k != "y")
    for v in layer.weights:
        np.testing.assert_array_equal(v.numpy(), got[v.name.removesuffix(":0")], err_msg=v.name)
    want = keras_call(name, layer, inputs).numpy()
    assert got["y"].shape == want.shape
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-5)


def test_batch_norm_training_updates_the_moving_statistics_as_keras(tmp_path, ckflow):
    """A fresh Keras layer with ckflow's gamma and beta and Keras' initial
    moving statistics: one training call gives ckflow's output and moving
    statistics (the biased variance, as Keras' non-fused path averages)."""
    name = "batch_norm_train"
    inputs = inputs_for(name)
    values.write(tmp_path / "in", inputs)
    ckflow.layers("--layer", name, "--in", tmp_path / "in", "--out", tmp_path / "out",
                  "--weights", tmp_path / "weights")
    got = {key: values.as_array(entry) for key, entry in values.read(tmp_path / "out").items()}
    keras.backend.clear_session()
    layer = LAYERS[name]()
    layer(tf.constant(inputs["x"]))  # builds; an inference call updates nothing
    layer.gamma.assign(got["batch_normalization/gamma"])
    layer.beta.assign(got["batch_normalization/beta"])
    want = layer(tf.constant(inputs["x"]), training=True).numpy()
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-5)
    for v in (layer.moving_mean, layer.moving_variance):
        key = v.name.removesuffix(":0")
        np.testing.assert_allclose(got[key], v.numpy(), rtol=1e-6, atol=1e-7, err_msg=key)
