"""TensorFlow 2.21 as the judge of the ops attention and embeddings are
built from: Transpose, BatchMatMulV2 (broadcast batch dimensions,
adjoints), ExpandDims, Squeeze, Erf, Erfc, tf.nn.gelu exact and
approximate, GatherV2 (its sparse gradient compared dense),
UnsortedSegmentSum, Split, SplitV, Tile, OneHot, MatrixBandPart,
StridedSlice (every mask), DynamicPartition and DynamicStitch, forward and
gradients,
against ckflow's (interop/ops_side.cc), with test_nn_ops.py's harness and
tolerances."""

import zlib

import numpy as np
import pytest

from test_nn_ops import judge

DTYPES = ["float32", "float64"]


def rng_of(request):
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,perm", [
    pytest.param((2, 16, 4, 8), (0, 2, 1, 3), id="heads_forward"),
    pytest.param((2, 4, 16, 8), (0, 2, 1, 3), id="heads_back"),
    pytest.param((3, 5, 7), (2, 0, 1), id="rotate"),
    pytest.param((33, 65), (1, 0), id="matrix"),
    pytest.param((1, 6, 1, 4), (2, 1, 3, 0), id="ones"),
])
def test_transpose_matches_tensorflow(tmp_path, ckflow, shape, perm, dtype, request):
    x = rng_of(request).normal(size=shape).astype(dtype)
    judge(tmp_path, ckflow, "Transpose", {"x": x, "perm": np.array(perm, np.int32)}, {}, [],
          request.node.name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("adj_x", [False, True])
@pytest.mark.parametrize("adj_y", [False, True])
@pytest.mark.parametrize("x_shape,y_shape", [
    pytest.param((3, 4), (4, 5), id="matrices"),
    pytest.param((2, 4, 16, 8), (2, 4, 8, 16), id="attention"),
    pytest.param((2, 3, 6, 5), (5, 7), id="broadcast_y"),
    pytest.param((2, 1, 6, 5), (4, 5, 3), id="broadcast_both"),
    pytest.param((3, 70, 40), (1, 40, 150), id="batch_of_one"),
])
def test_batch_matmul_matches_tensorflow(tmp_path, ckflow, x_shape, y_shape, adj_x, adj_y,
                                         dtype, request):
    rng = rng_of(request)
    xs, ys = list(x_shape), list(y_shape)
    if adj_x:
        xs[-1], xs[-2] = xs[-2], xs[-1]
    if adj_y:
        ys[-1], ys[-2] = ys[-2], ys[-1]
    inputs = {"x": rng.normal(size=xs).astype(dtype), "y": rng.normal(size=ys).astype(dtype)}
    flags = ["--adj-x", str(adj_x).lower(), "--adj-y", str(adj_y).lower()]
    judge(tmp_path, ckflow, "BatchMatMulV2", inputs, {"adj_x": adj_x, "adj_y": adj_y}, flags,
          request.node.name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_expand_dims_and_squeeze_match_tensorflow(tmp_path, ckflow, dtype, request):
    rng = rng_of(request)
    x = rng.normal(size=(4, 1, 6, 1)).astype(dtype)
    for axis in (0, 2, -1, -5):
        judge(tmp_path, ckflow, "ExpandDims", {"input": x, "axis": np.array(axis, np.int32)}, {},
              [], f"expand{axis}{dtype}")
    for axis in ([], [1], [1, -1]):
        flags = ["--axis", ",".join(map(str, axis))] if axis else []
        judge(tmp_path, ckflow, "Squeeze", {"input": x}, {"axis": axis}, flags,
              f"squeeze{axis}{dtype}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_erf_and_gelu_match_tensorflow(tmp_path, ckflow, dtype, request):
    rng = rng_of(request)
    x = rng.uniform(-6, 6, (64, 33)).astype(dtype)
    judge(tmp_path, ckflow, "Erf", {"x": x}, {}, [], "erf" + dtype)
    judge(tmp_path, ckflow, "Erfc", {"x": x}, {}, [], "erfc" + dtype)
    for approximate in (False, True):
        judge(tmp_path, ckflow, "Gelu", {"features": x}, {"approximate": approximate},
              ["--approximate", str(approximate).lower()], f"gelu{approximate}{dtype}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("params_shape,indices_shape,axis", [
    pytest.param((50, 16), (8, 12), 0, id="embedding_lookup"),
    pytest.param((50, 16), (), 0, id="one_row"),
    pytest.param((4, 30, 6), (9,), 1, id="middle_axis"),
    pytest.param((4, 30, 6), (3, 2), -1, id="last_axis"),
])
def test_gather_matches_tensorflow(tmp_path, ckflow, params_shape, indices_shape, axis, dtype,
                                   request):
    rng = rng_of(request)
    bound = params_shape[axis]
    inputs = {"params": rng.normal(size=params_shape).astype(dtype),
              # Repeats, so the gradient adds rows.
              "indices": rng.integers(0, bound, indices_shape).astype(np.int64),
              "axis": np.array(axis, np.int32)}
    judge(tmp_path, ckflow, "GatherV2", inputs, {"batch_dims": 0}, [], request.node.name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unsorted_segment_sum_matches_tensorflow(tmp_path, ckflow, dtype, request):
    rng = rng_of(request)
    inputs = {"data": rng.normal(size=(40, 3, 5)).astype(dtype),
              # Negative ids drop their rows; segment 9 gets none.
              "segment_ids": rng.integers(-1, 9, (40,)).astype(np.int32),
              "num_segments": np.array(10, np.int32)}
    judge(tmp_path, ckflow, "UnsortedSegmentSum", inputs, {}, [], request.node.name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis,pieces", [
    pytest.param((4, 6, 8), 2, 4, id="heads"),
    pytest.param((6, 5), 0, 3, id="rows"),
    pytest.param((2, 9, 3), -2, 3, id="negative_axis"),
])
def test_split_matches_tensorflow(tmp_path, ckflow, shape, axis, pieces, dtype, request):
    inputs = {"axis": np.array(axis, np.int32),
              "value": rng_of(request).normal(size=shape).astype(dtype)}
    judge(tmp_path, ckflow, "Split", inputs, {"num_split": pieces},
          ["--num-split", pieces], request.node.name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,sizes,axis", [
    pytest.param((4, 10), (3, -1, 2), 1, id="rest"),
    pytest.param((7, 3, 2), (2, 0, 5), 0, id="empty_piece"),
])
def test_split_v_matches_tensorflow(tmp_path, ckflow, shape, sizes, axis, dtype, request):
    inputs = {"value": rng_of(request).normal(size=shape).astype(dtype),
              "size_splits": np.array(sizes, np.int64), "axis": np.array(axis, np.int32)}
    judge(tmp_path, ckflow, "SplitV", inputs, {"num_split": len(sizes)},
          ["--num-split", len(sizes)], request.node.name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,multiples", [
    pytest.param((2, 3), (3, 2), id="matrix"),
    pytest.param((1, 4, 1), (5, 1, 3), id="ones"),
    pytest.param((3,), (0,), id="zero"),
])
def test_tile_matches_tensorflow(tmp_path, ckflow, shape, multiples, dtype, request):
    inputs = {"input": rng_of(request).normal(size=shape).astype(dtype),
              "multiples": np.array(multiples, np.int32)}
    judge(tmp_path, ckflow, "Tile", inputs, {}, [], request.node.name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_matches_tensorflow(tmp_path, ckflow, axis, dtype, request):
    # Out-of-range and negative ids give rows of off_value, as in TensorFlow.
    inputs = {"indices": np.array([[0, 3, 7], [-1, 2, 2]], np.int64),
              "depth": np.array(5, np.int32), "on_value": np.array(2.5, dtype),
              "off_value": np.array(-0.5, dtype)}
    judge(tmp_path, ckflow, "OneHot", inputs, {"axis": axis}, ["--axis", axis],
          request.node.name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower,upper", [(-1, 0), (1, 2), (0, -1)])
def test_band_part_matches_tensorflow(tmp_path, ckflow, lower, upper, dtype, request):
    inputs = {"input": rng_of(request).normal(size=(2, 5, 6)).astype(dtype),
              "num_lower": np.array(lower, np.int64), "num_upper": np.array(upper, np.int64)}
    judge(tmp_path, ckflow, "MatrixBandPart", inputs, {}, [], request.node.name)


MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,begin,end,strides,masks", [
    pytest.param((6, 7, 5), (1, 0, -1), (5, 0, 0), (2, 1, 1), (0, 2, 0, 0, 4), id="shrink_last"),
    pytest.param((6, 7, 5), (-1, 6, 0), (0, 1, 5), (-1, -2, 2), (1, 0, 0, 0, 0), id="backwards"),
    pytest.param((6, 7, 5), (0, 2, 0), (0, 5, 0), (1, 1, 1), (0, 0, 1, 0, 0), id="ellipsis"),
    pytest.param((6, 7, 5), (0, 3, 0, 1), (0, 4, 0, 0), (1, 1, 1, -1), (8, 8, 0, 5, 2),
                 id="newaxis_shrink"),
    pytest.param((6, 7, 5), (-20, 2), (20, 2), (3, 1), (0, 0, 0, 0, 0), id="clamped_empty"),
    pytest.param((4, 3, 2, 5), (1, 0, 0), (3, 0, 0), (1, 1, -2), (6, 6, 2, 0, 0),
                 id="ellipsis_middle"),
])
def test_strided_slice_matches_tensorflow(tmp_path, ckflow, shape, begin, end, strides, masks,
                                          dtype, request):
    inputs = {"input": rng_of(request).normal(size=shape).astype(dtype),
              "begin": np.array(begin, np.int32), "end": np.array(end, np.int32),
              "strides": np.array(strides, np.int32)}
    judge(tmp_path, ckflow, "StridedSlice", inputs, dict(zip(MASKS, masks)),
          ["--masks", ",".join(map(str, masks))], request.node.name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("data_shape,partitions_shape,num", [
    pytest.param((40, 6), (40,), 4, id="rows"),
    pytest.param((5, 4, 3), (5, 4), 3, id="prefix_of_two"),
])
def test_dynamic_partition_matches_tensorflow(tmp_path, ckflow, data_shape, partitions_shape,
                                              num, dtype, request):
    rng = rng_of(request)
    inputs = {"data": rng.normal(size=data_shape).astype(dtype),
              "partitions": rng.integers(0, num, size=partitions_shape).astype(np.int32)}
    judge(tmp_path, ckflow, "DynamicPartition", inputs, {"num_partitions": num},
          ["--num-split", num], request.node.name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dynamic_stitch_matches_tensorflow(tmp_path, ckflow, dtype, request):
    rng = rng_of(request)
    # Positions 0..29 dealt to three tensors (one of rank 2), each row 4 wide.
    order = rng.permutation(30).astype(np.int32)
    inputs = {"indices_0": order[:12], "indices_1": order[12:20].reshape(2, 4),
              "indices_2": order[20:],
              "data_0": rng.normal(size=(12, 4)).astype(dtype),
              "data_1": rng.normal(size=(2, 4, 4)).astype(dtype),
              "data_2": rng.normal(size=(10, 4)).astype(dtype)}
    judge(tmp_path, ckflow, "DynamicStitch", inputs, {}, [], request.node.name)
