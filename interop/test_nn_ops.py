"""TensorFlow 2.21 as the judge of the normalization, activation and
slicing ops: FusedBatchNormV3 (training, with and without a moving average,
and inference; its statistics outputs too), Relu6, LeakyRelu, Elu, Selu,
Softplus, Pad, PadV2, Slice and ConcatV2, forward and gradients, against
ckflow's (interop/ops_side.cc), within 1e-5 relative in float32 and 1e-12 in
float64 (relative to the largest magnitude of the tensor compared).

Each case draws the op's inputs and the gradient dy of its first output,
runs tf.raw_ops under a GradientTape (so TensorFlow's own gradient ops),
hands the same tensors to interop_ops, and compares every output and every
gradient TensorFlow has; ckflow must give a gradient exactly for the inputs
TensorFlow gives one for."""

import zlib

import numpy as np
import pytest
import tensorflow as tf

import values
from compare import TOLERANCE, assert_close


# Judged ops that are compositions in TensorFlow rather than one raw op.
COMPOSITES = {"Gelu": lambda features, approximate: tf.nn.gelu(features, approximate)}


def tf_run(op, inputs, attrs, dy_of_shape):
    """TensorFlow's outputs and {input name: gradient} (None-free)."""
    xs = {k: tf.constant(v) for k, v in inputs.items()}
    float_names = [k for k, v in inputs.items() if v.dtype.kind == "f"]
    with tf.GradientTape() as tape:
        for k in float_names:
            tape.watch(xs[k])
        if op == "ConcatV2":
            listed = [xs[k] for k in sorted(xs) if k.startswith("values_")]
            ys = tf.raw_ops.ConcatV2(values=listed, axis=xs["axis"])
        elif op == "DynamicStitch":
            n = sum(1 for k in xs if k.startswith("indices_"))
            ys = tf.raw_ops.DynamicStitch(indices=[xs[f"indices_{i}"] for i in range(n)],
                                          data=[xs[f"data_{i}"] for i in range(n)])
        else:
            ys = COMPOSITES.get(op, getattr(tf.raw_ops, op, None))(**xs, **attrs)
        ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    dy = dy_of_shape(ys[0].shape)
    grads = tape.gradient(ys[0], [xs[k] for k in float_names], output_gradients=tf.constant(dy))
    return ([y.numpy() for y in ys], dy,
            # A gather's gradient is IndexedSlices: compared dense.
            {k: tf.convert_to_tensor(g).numpy() for k, g in zip(float_names, grads)
             if g is not None})


def judge(tmp_path, ckflow, op, inputs, attrs, flags, seed_name, compared_outputs=None):
    dtype = next(v.dtype for v in inputs.values() if v.dtype.kind == "f")
    rng = np.random.default_rng(zlib.crc32(seed_name.encode()))
    want_ys, dy, want_grads = tf_run(
        op, inputs, attrs, lambda shape: rng.uniform(-1, 1, shape).astype(dtype))
    values.write(str(tmp_path / "in"), {**inputs, "dy": dy})
    ckflow.ops("--op", op, "--in", tmp_path / "in", "--out", tmp_path / "out", *flags)
    got = {k: values.as_array(v) for k, v in values.read(str(tmp_path / "out")).items()}

    tolerance = TOLERANCE[dtype.name]
    keys = ["y"] + [f"y{i}" for i in range(1, len(want_ys))]
    for i in compared_outputs if compared_outputs is not None else range(len(want_ys)):
        assert got[keys[i]].dtype == want_ys[i].dtype, f"{op} output {i} dtype"
        assert_close(got[keys[i]], want_ys[i], tolerance, f"{op} output {i}")
    got_grads = {k[2:] for k in got if k.startswith("d_")}
    assert got_grads == set(want_grads), f"{op}: gradients of {sorted(got_grads)}, " \
                                         f"TensorFlow's of {sorted(want_grads)}"
    for name, want in want_grads.items():
        assert_close(got["d_" + name], want, tolerance, f"{op} gradient of {name}")


@pytest.mark.parametrize("training,factor", [(True, 1.0), (True, 0.01), (False, 1.0)])
@pytest.mark.parametrize("shape", [(4, 5, 5, 3), (16, 14, 14, 8), (2, 1, 1, 32)])
def test_fused_batch_norm_matches_tensorflow(tmp_path, ckflow, training, factor, shape, request):
    rng = np.random.default_rng(zlib.crc32(request.node.name.encode()))
    c = shape[-1]
    f32 = np.float32
    inputs = {"x": rng.normal(2, 3, shape).astype(f32),
              "scale": rng.uniform(0.5, 2, c).astype(f32),
              "offset": rng.normal(0, 1, c).astype(f32),
              "mean": rng.normal(0, 1, c).astype(f32),
              "variance": rng.uniform(0.5, 2, c).astype(f32)}
    attrs = {"epsilon": 1e-3, "exponential_avg_factor": factor, "is_training": training,
             "data_format": "NHWC"}
    flags = ["--epsilon", "1e-3", "--exponential-avg-factor", str(factor),
             "--is-training", "true" if training else "false"]
    # TensorFlow's inference kernel leaves the reserve spaces unset. Its
    # gradient for mean and variance is None in both modes, ckflow's too.
    outputs = range(5) if training else range(3)
    judge(tmp_path, ckflow, "FusedBatchNormV3", inputs, attrs, flags, request.node.name, outputs)


ACTIVATIONS = [
    pytest.param("Relu6", {}, (-2, 8), id="relu6"),
    pytest.param("LeakyRelu", {"alpha": 0.2}, (-3, 3), id="leaky_relu_0.2"),
    pytest.param("LeakyRelu", {"alpha": 0.01}, (-3, 3), id="leaky_relu_0.01"),
    pytest.param("Elu", {}, (-4, 3), id="elu"),
    pytest.param("Selu", {}, (-4, 3), id="selu"),
    pytest.param("Softplus", {}, (-40, 40), id="softplus"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op,attrs,bounds", ACTIVATIONS)
def test_activations_match_tensorflow(tmp_path, ckflow, op, attrs, bounds, dtype, request):
    rng = np.random.default_rng(zlib.crc32(request.node.name.encode()))
    features = rng.uniform(*bounds, (64, 33)).astype(dtype)
    flags = [f for k, v in attrs.items() for f in ("--" + k, str(v))]
    judge(tmp_path, ckflow, op, {"features": features}, attrs, flags, request.node.name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pad_and_slice_match_tensorflow(tmp_path, ckflow, dtype, request):
    rng = np.random.default_rng(zlib.crc32(request.node.name.encode()))
    x = rng.normal(size=(4, 7, 6, 5)).astype(dtype)
    paddings = np.array([[0, 0], [1, 2], [2, 1], [0, 0]], np.int32)
    judge(tmp_path, ckflow, "Pad", {"input": x, "paddings": paddings}, {}, [], "pad" + dtype)
    judge(tmp_path, ckflow, "PadV2",
          {"input": x, "paddings": paddings.astype(np.int64),
           "constant_values": np.array(-1.5, dtype)}, {}, [], "padv2" + dtype)
    judge(tmp_path, ckflow, "Slice",
          {"input": x, "begin": np.array([1, 0, 2, 1], np.int32),
           "size": np.array([2, -1, 3, 4], np.int32)}, {}, [], "slice" + dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis,shapes", [
    pytest.param(3, [(4, 7, 6, 5), (4, 7, 6, 1), (4, 7, 6, 3)], id="channels"),
    pytest.param(-1, [(4, 7, 6, 5), (4, 7, 6, 1), (4, 7, 6, 3)], id="negative_axis"),
    pytest.param(1, [(4, 2, 6, 5), (4, 7, 6, 5)], id="rows"),
])
def test_concat_matches_tensorflow(tmp_path, ckflow, axis, shapes, dtype, request):
    rng = np.random.default_rng(zlib.crc32(request.node.name.encode()))
    inputs = {f"values_{i}": rng.normal(size=s).astype(dtype) for i, s in enumerate(shapes)}
    inputs["axis"] = np.array(axis, np.int32)
    judge(tmp_path, ckflow, "ConcatV2", inputs, {}, [], request.node.name)
