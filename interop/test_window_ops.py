"""TensorFlow 2.21 as the judge of the windowed ops: Conv2D,
DepthwiseConv2dNative, MaxPool and AvgPool, forward and gradients, on random
inputs, against ckflow's (interop/ops_side.cc), within 1e-5 relative in
float32 and 1e-12 in float64.

Each case draws the op's inputs and the gradient dy of its output, computes
y and the inputs' gradients with TensorFlow (tf.raw_ops under a
GradientTape, so TensorFlow's own gradient ops), hands the same tensors to
interop_ops, and compares. TensorFlow's CPU kernels have no float64
dilated convolutions, so those cases are judged in float32 only; and its
DepthwiseConv2dNative backprop kernels ignore dilations, so dilated depthwise
cases are judged by tf.nn.depthwise_conv2d (Keras's path), which dilates by
space_to_batch. Relative means against the largest magnitude of
the tensor compared, so that elements that cancel to near zero are judged by
the scale of the sums that made them."""

import zlib

import numpy as np
import pytest
import tensorflow as tf

import values
from compare import TOLERANCE, assert_close


def conv(name, op, input, filter, strides=(1, 1, 1, 1), padding="VALID", dilations=(1, 1, 1, 1),
         explicit_paddings=()):
    return pytest.param(
        op, {"input": input, "filter": filter},
        {"strides": list(strides), "padding": padding, "dilations": list(dilations),
         "explicit_paddings": list(explicit_paddings)},
        id=name,
    )


def pool(name, op, input, ksize, strides, padding):
    arg = "input" if op == "MaxPool" else "value"
    return pytest.param(
        op, {arg: input},
        {"ksize": [1, *ksize, 1], "strides": [1, *strides, 1], "padding": padding},
        id=name,
    )


CASES = [
    conv("conv_pointwise", "Conv2D", [2, 7, 7, 16], [1, 1, 16, 8]),
    conv("conv_pointwise_stride2", "Conv2D", [2, 7, 7, 8], [1, 1, 8, 4], strides=(1, 2, 2, 1),
         padding="SAME"),
    conv("conv_3x3_same", "Conv2D", [2, 9, 9, 3], [3, 3, 3, 8], padding="SAME"),
    conv("conv_3x3_valid_stride2_odd", "Conv2D", [3, 11, 9, 4], [3, 3, 4, 5], strides=(1, 2, 2, 1)),
    conv("conv_7x7_same_stride2", "Conv2D", [1, 15, 13, 3], [7, 7, 3, 6], strides=(1, 2, 2, 1),
         padding="SAME"),
    conv("conv_7x7_valid", "Conv2D", [2, 9, 8, 2], [7, 7, 2, 3]),
    conv("conv_uneven_strides", "Conv2D", [2, 10, 9, 3], [2, 3, 3, 4], strides=(1, 3, 2, 1),
         padding="SAME"),
    conv("conv_dilated_same", "Conv2D", [2, 11, 10, 3], [3, 3, 3, 4], padding="SAME",
         dilations=(1, 2, 2, 1)),
    conv("conv_dilated_valid", "Conv2D", [1, 12, 12, 2], [3, 2, 2, 3], dilations=(1, 2, 3, 1)),
    conv("conv_explicit", "Conv2D", [2, 6, 7, 3], [3, 3, 3, 4], padding="EXPLICIT",
         strides=(1, 2, 1, 1), explicit_paddings=(0, 0, 1, 2, 2, 0, 0, 0)),
    conv("conv_cnn_layer1", "Conv2D", [8, 28, 28, 1], [3, 3, 1, 32]),
    conv("conv_cnn_layer2", "Conv2D", [8, 13, 13, 32], [3, 3, 32, 64]),
    conv("conv_parts_of_images", "Conv2D", [2, 40, 40, 16], [3, 3, 16, 8], padding="SAME"),
    conv("depthwise_m1", "DepthwiseConv2dNative", [2, 8, 8, 4], [3, 3, 4, 1], padding="SAME"),
    conv("depthwise_m2_stride2", "DepthwiseConv2dNative", [2, 9, 9, 3], [3, 3, 3, 2],
         strides=(1, 2, 2, 1)),
    conv("depthwise_m3_dilated", "DepthwiseConv2dNative", [1, 10, 10, 2], [3, 3, 2, 3],
         padding="SAME", dilations=(1, 2, 2, 1)),
    conv("depthwise_explicit", "DepthwiseConv2dNative", [1, 6, 7, 2], [3, 3, 2, 2],
         padding="EXPLICIT", explicit_paddings=(0, 0, 1, 1, 2, 1, 0, 0)),
    pool("maxpool_2x2_valid", "MaxPool", [2, 8, 8, 3], (2, 2), (2, 2), "VALID"),
    pool("maxpool_2x2_valid_odd", "MaxPool", [2, 7, 9, 3], (2, 2), (2, 2), "VALID"),
    pool("maxpool_3x3_same_stride2", "MaxPool", [2, 9, 8, 4], (3, 3), (2, 2), "SAME"),
    pool("maxpool_uneven", "MaxPool", [1, 10, 9, 2], (2, 3), (3, 2), "SAME"),
    pool("maxpool_cnn", "MaxPool", [8, 26, 26, 32], (2, 2), (2, 2), "VALID"),
    pool("avgpool_2x2_valid", "AvgPool", [2, 8, 8, 3], (2, 2), (2, 2), "VALID"),
    pool("avgpool_3x3_same", "AvgPool", [2, 7, 6, 4], (3, 3), (1, 1), "SAME"),
    pool("avgpool_3x3_same_stride2", "AvgPool", [2, 9, 8, 4], (3, 3), (2, 2), "SAME"),
    pool("avgpool_uneven", "AvgPool", [1, 10, 9, 2], (2, 4), (3, 2), "SAME"),
]


def tf_run(op, inputs, attrs, dy):
    """y and {arg: gradient} by TensorFlow."""
    xs = {k: tf.constant(v) for k, v in inputs.items()}
    kwargs = dict(attrs)
    if op == "Conv2D":
        kwargs["data_format"] = "NHWC"
    dilated = any(d != 1 for d in attrs.get("dilations", []))
    with tf.GradientTape() as tape:
        for x in xs.values():
            tape.watch(x)
        if op == "DepthwiseConv2dNative" and dilated:
            # The raw op's CPU backprop kernels ignore dilations; Keras's
            # path, tf.nn.depthwise_conv2d, dilates by space_to_batch.
            y = tf.nn.depthwise_conv2d(
                xs["input"], xs["filter"], attrs["strides"], attrs["padding"],
                dilations=attrs["dilations"][1:3])
        else:
            y = getattr(tf.raw_ops, op)(**xs, **kwargs)
    grads = tape.gradient(y, list(xs.values()), output_gradients=tf.constant(dy))
    return y.numpy(), {k: g.numpy() for k, g in zip(xs, grads)}


def output_shape(op, inputs, attrs):
    xs = {k: tf.constant(v) for k, v in inputs.items()}
    return getattr(tf.raw_ops, op)(**xs, **attrs).shape


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op,shapes,attrs", CASES)
def test_op_and_gradients_match_tensorflow(tmp_path, ckflow, op, shapes, attrs, dtype, request):
    if dtype == "float64" and any(d != 1 for d in attrs.get("dilations", [])):
        pytest.skip("TensorFlow's CPU kernels do not support dilations in float64")
    rng = np.random.default_rng(zlib.crc32(request.node.name.encode()))
    inputs = {k: rng.uniform(-1, 1, shape).astype(dtype) for k, shape in shapes.items()}
    dy = rng.uniform(-1, 1, output_shape(op, inputs, attrs)).astype(dtype)
    want_y, want_grads = tf_run(op, inputs, attrs, dy)

    values.write(str(tmp_path / "in"), {**inputs, "dy": dy})
    flags = []
    for name, value in attrs.items():
        if name == "padding":
            flags += ["--padding", value]
        elif value:
            flags += ["--" + name.replace("_", "-"), ",".join(map(str, value))]
    ckflow.ops("--op", op, "--in", tmp_path / "in", "--out", tmp_path / "out", *flags)
    got = {k: values.as_array(v) for k, v in values.read(str(tmp_path / "out")).items()}

    tolerance = TOLERANCE[dtype]
    assert got["y"].dtype == np.dtype(dtype)
    assert_close(got["y"], want_y, tolerance, f"{op} output")
    for arg, want in want_grads.items():
        assert_close(got["d_" + arg], want, tolerance, f"{op} gradient of {arg}")
