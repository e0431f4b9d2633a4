"""TensorFlow 2.21 as the judge: ckflow and TensorFlow take turns on the
same checkpoints, and every value they hand over must arrive bit for bit.

Each test runs TensorFlow here and ckflow's programs (interop/ckflow_side.cc,
the ckflow CLI) as subprocesses; both dump their live variables, keyed by
checkpoint key, to values files (values.py) that the test compares."""

import gc
import json
import os
import time

import numpy as np
import pytest
import tensorflow as tf

import tf_side
import values

SUFFIX = tf_side.SUFFIX


def assert_same_bits(got, want, what):
    """Two dumps {key: entry}: the same keys, dtypes, shapes and bytes."""
    assert sorted(got) == sorted(want), f"{what}: keys differ"
    differ = [k for k in want if got[k] != want[k]]
    assert not differ, f"{what}: values differ in {differ}"


def read(path):
    return values.read(str(path))


# (1), (3): the seed's graph-mode example, alternating TF -> ckflow -> TF ->
# ckflow in one directory. Each side restores the other's latest checkpoint
# through the state file before its model is built (deferred: the layers'
# variables and Adam's slots restore as they appear), asserts it consumed
# everything, holds exactly the bits the other side saved, trains and saves
# the next checkpoint.
def test_seed_example_alternates_tf_ckflow_tf(tmp_path, ckflow):
    d = tmp_path / "ckpt"
    d.mkdir()
    data_file = tmp_path / "data"
    data = tf_side.make_data(data_file)

    tf1 = tf_side.train(str(d), data, restore="latest", steps=5)
    assert tf1["restore"] == "none"
    assert tf1["saved"] == str(d / "ckpt-1")

    ck2 = ckflow.side(
        "train", "--dir", d, "--expect-restore", "--data", data_file, "--steps", 5,
        "--restored", tmp_path / "ck2.restored", "--trained", tmp_path / "ck2.trained",
    )
    assert ck2["restore"] == str(d / "ckpt-1")
    assert ck2["kind"] == "CheckpointLoadStatus"
    assert ck2["assert_consumed"] == "ok"
    assert ck2["restored_save_counter"] == "1"
    assert ck2["saved"] == str(d / "ckpt-2")
    assert ck2["save_counter"] == "2"
    assert_same_bits(read(tmp_path / "ck2.restored"), tf1["trained"], "ckflow restoring ckpt-1")
    slots = [k for k in tf1["trained"] if "/.OPTIMIZER_SLOT/optimizer/" in k]
    assert len(slots) == 12  # m and v of 6 variables
    assert "optimizer/beta1_power" + SUFFIX in tf1["trained"]

    tf3 = tf_side.train(str(d), data, restore="latest", steps=5)
    assert tf3["restore"] == str(d / "ckpt-2")
    assert tf3["assert_consumed"] == "ok"
    assert tf3["restored_save_counter"] == "2"
    assert tf3["saved"] == str(d / "ckpt-3")
    assert tf3["save_counter"] == "3"
    assert_same_bits(tf3["restored"], read(tmp_path / "ck2.trained"), "TensorFlow restoring ckpt-2")

    ck4 = ckflow.side(
        "train", "--dir", d, "--expect-restore", "--data", data_file, "--steps", 5,
        "--restored", tmp_path / "ck4.restored",
    )
    assert ck4["restore"] == str(d / "ckpt-3")
    assert ck4["assert_consumed"] == "ok"
    assert ck4["saved"] == str(d / "ckpt-4")
    assert ck4["save_counter"] == "4"
    assert_same_bits(read(tmp_path / "ck4.restored"), tf3["trained"], "ckflow restoring ckpt-3")

    # The state file ckflow wrote last, as TensorFlow reads it.
    state = tf.train.get_checkpoint_state(str(d))
    assert state.model_checkpoint_path == str(d / "ckpt-4")
    assert tf.train.latest_checkpoint(str(d)) == str(d / "ckpt-4")


# (8) Every dtype both share (all of ckflow's but resource), with the awkward values of each: NaN payloads,
# -0, infinities, subnormals, integer extremes, complex parts, strings with
# NULs and bytes that are not UTF-8.
def dtype_values(seed):
    rng = np.random.default_rng(seed)
    out = {}
    for dtype in (tf.float16, tf.bfloat16, tf.float32, tf.float64):
        np_type = dtype.as_numpy_dtype
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.5], dtype=np.float64)
        array = np.concatenate([special, rng.normal(0, 1e3, 9)]).astype(np_type)
        array.view(f"u{array.itemsize}")[-1] = 1  # the smallest subnormal
        out[dtype.name] = (dtype, array.reshape(4, 4))
    # A NaN with a payload, and a negative one.
    f32 = out["float32"][1].reshape(-1).view(np.uint32)
    f32[8], f32[9] = 0x7FC12345, 0xFFC00001
    f64 = out["float64"][1].reshape(-1).view(np.uint64)
    f64[8] = 0x7FF8000000ABCDEF
    for dtype in (tf.int8, tf.uint8, tf.int16, tf.uint16, tf.int32, tf.uint32, tf.int64, tf.uint64):
        info = np.iinfo(dtype.as_numpy_dtype)
        array = rng.integers(info.min, info.max, size=6, dtype=dtype.as_numpy_dtype, endpoint=True)
        array[:2] = info.min, info.max
        out[dtype.name] = (dtype, array.reshape(2, 3))
    out["bool"] = (tf.bool, np.array([True, False, False, True, seed % 2 == 0]))
    for dtype in (tf.complex64, tf.complex128):
        array = (rng.normal(size=4) + 1j * rng.normal(size=4)).astype(dtype.as_numpy_dtype)
        array[0] = complex(-0.0, np.inf)
        array.view(np.float32 if dtype == tf.complex64 else np.float64)[3] = np.nan
        out[dtype.name] = (dtype, array)
    out["string"] = (
        tf.string,
        np.array([[b"", b"\x00\xff\xfe", "λ ckflow".encode()], [bytes(range(256)), b"a" * (1000 + seed), b"\n"]],
                 dtype=object),
    )
    out["scalar_float32"] = (tf.float32, np.array(3.25 + seed, dtype=np.float32))
    out["empty_int32"] = (tf.int32, np.zeros([0, 3], dtype=np.int32))
    return {f"dtypes/{name}{SUFFIX}": value for name, value in out.items()}


def tf_module(spec):
    """Nested tf.Modules with a tf.Variable per spec key (as the ckflow side
    builds from the same keys); returns {top-level name: module}, {key: var}."""
    top, variables = tf.Module(), {}
    for key, (dtype, array) in spec.items():
        path = key[: -len(SUFFIX)].split("/")
        parent = top
        for part in path[:-1]:
            if not hasattr(parent, part):
                setattr(parent, part, tf.Module())
            parent = getattr(parent, part)
        var = tf.Variable(tf.constant(array, dtype=dtype), name=path[-1])
        setattr(parent, path[-1], var)
        variables[key] = var
    roots = {name: getattr(top, name) for name in {k.split("/")[0] for k in spec}}
    return roots, variables


def zeros_spec(spec):
    return {
        k: (dtype, np.full(np.shape(a), b"", dtype=object) if dtype == tf.string else np.zeros_like(a))
        for k, (dtype, a) in spec.items()
    }


def eager_dump(variables, checkpoint=None):
    out = {k: values.entry(v.dtype, v.numpy()) for k, v in variables.items()}
    if checkpoint is not None:
        out["save_counter" + SUFFIX] = values.entry(tf.int64, checkpoint.save_counter.numpy())
    return out


def expected_dump(spec):
    return {k: values.entry(dtype, a) for k, (dtype, a) in spec.items()}


def listing_tf(prefix):
    reader = tf.train.load_checkpoint(str(prefix))
    dtypes = reader.get_variable_to_dtype_map()
    shapes = dict(tf.train.list_variables(str(prefix)))
    return sorted((k, dtypes[k].name, list(shapes[k])) for k in shapes)


def listing_ckflow(ckflow, prefix):
    tensors = json.loads(ckflow.cli("inspect", "--json", prefix))["tensors"]
    return sorted((t["key"], t["dtype"], t["shape"]) for t in tensors)


def test_every_shared_dtype_round_trips_bit_for_bit(tmp_path, ckflow):
    spec_a, spec_b = dtype_values(1), dtype_values(2)
    values.write(tmp_path / "a", spec_a)
    values.write(tmp_path / "b", spec_b)

    # TensorFlow writes A; ckflow restores it into zeros and writes it back.
    roots, variables = tf_module(spec_a)
    tf_a = tf.train.Checkpoint(**roots).save(str(tmp_path / "tf_a"))
    assert eager_dump(variables) == expected_dump(spec_a)  # the side file says what TF holds
    ck = ckflow.side(
        "generic", "--spec", tmp_path / "a", "--zeros", "--restore", tf_a,
        "--dump", tmp_path / "ck_a", "--write", tmp_path / "ck_a_ckpt",
    )
    assert ck["restore"] == "ok" and ck["assert_consumed"] == "ok"
    got = read(tmp_path / "ck_a")
    del got["save_counter" + SUFFIX]
    assert_same_bits(got, expected_dump(spec_a), "ckflow restoring TensorFlow's dtypes")

    # ckflow writes B from its own constants.
    ck = ckflow.side("generic", "--spec", tmp_path / "b", "--write", tmp_path / "ck_b_ckpt")
    assert ck["saved"] == str(tmp_path / "ck_b_ckpt")

    for prefix, spec in ((tmp_path / "ck_a_ckpt", spec_a), (tmp_path / "ck_b_ckpt", spec_b)):
        roots, variables = tf_module(zeros_spec(spec))
        # ck_a_ckpt holds the save_counter ckflow restored: TensorFlow's
        # read() (the pair of write()) would leave it unmatched.
        checkpoint = tf.train.Checkpoint(**roots)
        status = checkpoint.restore(str(prefix)) if spec is spec_a else checkpoint.read(str(prefix))
        status.assert_consumed()
        assert_same_bits(eager_dump(variables), expected_dump(spec), f"TensorFlow reading {prefix}")

    # The two tools list the same tensors, dtypes and shapes.
    for prefix in (tf_a, tmp_path / "ck_a_ckpt", tmp_path / "ck_b_ckpt"):
        assert listing_ckflow(ckflow, prefix) == listing_tf(prefix), prefix


def float_spec(names, seed, shape=(3,)):
    rng = np.random.default_rng(seed)
    return {
        f"{name}{SUFFIX}": (tf.float32, rng.normal(size=shape).astype(np.float32)) for name in names
    }


def data_files(prefix):
    directory, base = os.path.split(str(prefix))
    return sorted(f for f in os.listdir(directory) if f.startswith(base + ".data-"))


# (7) Variables on two logical CPU devices, over several data files, both ways.
def test_two_devices_and_several_data_files_both_ways(tmp_path, ckflow):
    names = [f"model/v{i}" for i in range(6)]
    spec_a = float_spec(names, 3, shape=(64, 64))
    spec_b = float_spec(names, 4, shape=(64, 64))
    values.write(tmp_path / "a", spec_a)
    values.write(tmp_path / "b", spec_b)

    model = tf.Module()
    variables = {}
    for i, (key, (dtype, array)) in enumerate(spec_a.items()):
        with tf.device(f"/cpu:{i % 2}"):
            variables[key] = tf.Variable(array, name=f"v{i}")
        setattr(model, f"v{i}", variables[key])
    assert {v.device[-5:] for v in variables.values()} == {"CPU:0", "CPU:1"}
    options = tf.train.CheckpointOptions(experimental_sharding_callback=tf_side.ShardPerDevice())
    tf_a = tf.train.Checkpoint(model=model).save(str(tmp_path / "tf_a"), options=options)
    assert data_files(tf_a) == ["tf_a-1.data-00000-of-00002", "tf_a-1.data-00001-of-00002"]
    ck = ckflow.side(
        "generic", "--spec", tmp_path / "a", "--zeros", "--restore", tf_a,
        "--dump", tmp_path / "ck_a",
    )
    assert ck["restore"] == "ok" and ck["assert_consumed"] == "ok"
    got = read(tmp_path / "ck_a")
    del got["save_counter" + SUFFIX]
    assert_same_bits(got, expected_dump(spec_a), "ckflow reading TensorFlow's sharded save")

    # Graph mode, as TensorFlow shards by default: both devices of the task
    # go to one data file (checkpoint/NOTES.md).
    with tf.Graph().as_default():
        model = tf.Module()
        for i, (key, (dtype, array)) in enumerate(spec_a.items()):
            with tf.device(f"/cpu:{i % 2}"):
                setattr(model, f"v{i}", tf.Variable(array, name=f"v{i}"))
        checkpoint = tf.compat.v1.train.Checkpoint(model=model)
        config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
        with tf.compat.v1.Session(config=config) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            tf_graph = checkpoint.save(str(tmp_path / "tf_graph"), session=session)
    assert data_files(tf_graph) == ["tf_graph-1.data-00000-of-00001"]
    ck = ckflow.side(
        "generic", "--spec", tmp_path / "a", "--zeros", "--restore", tf_graph,
        "--dump", tmp_path / "ck_graph",
    )
    assert ck["restore"] == "ok" and ck["assert_consumed"] == "ok"
    got = read(tmp_path / "ck_graph")
    del got["save_counter" + SUFFIX]
    assert_same_bits(got, expected_dump(spec_a), "ckflow reading TensorFlow's graph-mode save")

    ck = ckflow.side(
        "generic", "--spec", tmp_path / "b", "--devices", 2, "--files-per-device", 2,
        "--write", tmp_path / "ck_b",
    )
    assert data_files(tmp_path / "ck_b") == [f"ck_b.data-0000{i}-of-00004" for i in range(4)]
    roots, variables = tf_module(zeros_spec(spec_b))
    tf.train.Checkpoint(**roots).read(str(tmp_path / "ck_b")).assert_consumed()
    assert_same_bits(eager_dump(variables), expected_dump(spec_b), "TensorFlow reading ckflow's")
    assert listing_ckflow(ckflow, tmp_path / "ck_b") == listing_tf(tmp_path / "ck_b")


# A group save (checkpoint/group.h), three threads as the members: each
# writes the values placement gives it, over two data files, and member 0
# merges the parts. TensorFlow restores the merged checkpoint bit for bit.
def test_group_save_restores_in_tensorflow(tmp_path, ckflow):
    spec = float_spec([f"model/v{i}" for i in range(7)], 11, shape=(16, 8))
    values.write(tmp_path / "spec", spec)
    ck = ckflow.side(
        "generic", "--spec", tmp_path / "spec", "--group", 3, "--files-per-device", 2,
        "--save", tmp_path / "ckpt",
    )
    prefix = ck["saved"]
    assert prefix == str(tmp_path / "ckpt-1")
    assert len(data_files(prefix)) > 3, data_files(prefix)
    roots, variables = tf_module(zeros_spec(spec))
    tf.train.Checkpoint(**roots).restore(prefix).assert_consumed()
    assert_same_bits(eager_dump(variables), expected_dump(spec), "TensorFlow reading a group save")
    assert listing_ckflow(ckflow, prefix) == listing_tf(prefix)


def reader_dump(prefix):
    """Every value TensorFlow's reader finds in `prefix`, as a values dump."""
    reader = tf.train.load_checkpoint(str(prefix))
    return {
        key: values.entry(dtype, reader.get_tensor(key))
        for key, dtype in reader.get_variable_to_dtype_map().items()
        if key != "_CHECKPOINTABLE_OBJECT_GRAPH"
    }


# ckflow's eager program (Scope::NewEagerScope, Minimize of a loss function,
# Checkpoint::Save without a Session): TensorFlow's reader finds every value
# ckflow held, and Keras' Sequential restores its layers from it eagerly.
def test_eager_save_restores_in_tensorflow(tmp_path, ckflow):
    import tf_keras as keras

    data_file = tmp_path / "data"
    tf_side.make_data(data_file)
    ck = ckflow.side(
        "eager", "--data", data_file, "--steps", 3, "--save", tmp_path / "ckpt",
        "--dump", tmp_path / "dump",
    )
    assert ck["saved"] == str(tmp_path / "ckpt-1")
    want = read(tmp_path / "dump")
    assert any("/.OPTIMIZER_SLOT/optimizer/" in k for k in want)
    assert_same_bits(reader_dump(ck["saved"]), want, "TensorFlow's reader on ckflow's eager save")

    model = keras.Sequential([keras.layers.Dense(10, activation="relu"), keras.layers.Dense(1)])
    model(tf.zeros([1, 4]))
    checkpoint = tf.train.Checkpoint(optimizer=tf.compat.v1.train.AdamOptimizer(0.01), model=model)
    status = checkpoint.restore(ck["saved"])
    status.assert_existing_objects_matched()
    status.expect_partial()  # Adam's slots would restore at its first update
    got = {
        f"model/layer_with_weights-{i}/{weight}{SUFFIX}": values.entry(
            tf.float32, getattr(layer, weight).numpy()
        )
        for i, layer in enumerate(model.layers)
        for weight in ("kernel", "bias")
    }
    assert_same_bits(got, {k: want[k] for k in got}, "Keras restoring ckflow's eager save")
    assert int(checkpoint.save_counter) == 1


# TensorFlow's MaxShardSizePolicy slices a value across data files to fill
# each one (one key, its slices in several files); ckflow restores every
# value whole, bit for bit.
def test_sliced_values_restore_whole(tmp_path, ckflow):
    spec = float_spec(["model/v0", "model/v1"], 9, shape=(64, 64))
    values.write(tmp_path / "spec", spec)
    roots, _ = tf_module(spec)
    options = tf.train.CheckpointOptions(
        experimental_sharding_callback=tf.train.experimental.MaxShardSizePolicy(20000)
    )
    prefix = tf.train.Checkpoint(**roots).save(str(tmp_path / "tf"), options=options)
    tensors = json.loads(ckflow.cli("inspect", "--json", prefix))["tensors"]
    assert any(t.get("slices", 0) > 1 for t in tensors), tensors
    ck = ckflow.side(
        "generic", "--spec", tmp_path / "spec", "--zeros", "--restore", prefix,
        "--dump", tmp_path / "dump",
    )
    assert ck["restore"] == "ok", ck
    got = read(tmp_path / "dump")
    assert_same_bits({k: got[k] for k in spec}, expected_dump(spec), "ckflow reading slices")
    assert listing_ckflow(ckflow, prefix) == listing_tf(prefix)


# (8) TF1 partitioned variables (get_variable(partitioner=
# fixed_size_partitioner(n))): one key holding n slices. TensorFlow's
# restores into ckflow's variable whole and in other partitionings;
# ckflow's 3 parts restore into TensorFlow's partitioned and plain variables.
def partition_grid():
    return (np.arange(60, dtype=np.float32).reshape(10, 6) * 1.25 - 7).astype(np.float32)


PARTITIONINGS = [(0, 0), (2, 0), (2, 1), (3, 0), (4, 1)]


def test_tf_partitioned_variable_restores_in_ckflow(tmp_path, ckflow):
    array = partition_grid()
    values.write(tmp_path / "spec", {"w": array})
    path = tf_side.tf1_partitioned_save(str(tmp_path / "tf" / "model.ckpt"), "w", array, 3)
    tensors = json.loads(ckflow.cli("inspect", "--json", path))["tensors"]
    assert [(t["key"], t.get("slices")) for t in tensors] == [("w", 3)]
    assert listing_ckflow(ckflow, path) == listing_tf(path)
    for parts, axis in PARTITIONINGS:
        dump = tmp_path / f"dump_{parts}_{axis}"
        ck = ckflow.side(
            "partitioned", "--spec", tmp_path / "spec", "--parts", parts, "--axis", axis,
            "--restore", path, "--dump", dump,
        )
        assert ck["restore"] == "ok", (parts, axis, ck)
        assert read(dump) == {"w": values.entry(tf.float32, array)}, (parts, axis)


def test_ckflow_partitioned_variable_restores_in_tf(tmp_path, ckflow):
    array = partition_grid()
    values.write(tmp_path / "spec", {"w": array})
    path = str(tmp_path / "ck" / "model.ckpt")
    ck = ckflow.side("partitioned", "--spec", tmp_path / "spec", "--parts", 3, "--save", path)
    assert ck["saved"] == path
    assert tf.train.list_variables(path) == [("w", [10, 6])]
    for parts, axis in PARTITIONINGS:
        got = tf_side.tf1_partitioned_restore(path, "w", [10, 6], parts, axis)
        assert got.tobytes() == array.tobytes(), (parts, axis)


# (7) TF1 Saver's pad_step_number and latest_filename, both ways: each side
# finds the other's "<path>-000000NN" through a state file named "latest"
# (and none under "checkpoint"), and restores it bit for bit.
def test_tf1_saver_pad_step_number_and_latest_filename_both_ways(tmp_path, ckflow):
    array = partition_grid()
    values.write(tmp_path / "spec", {"w": array})
    want = {"w": values.entry(tf.float32, array)}
    tf_dir = tmp_path / "tf"
    path = tf_side.tf1_partitioned_save(
        str(tf_dir / "model.ckpt"), "w", array, 0, global_step=42, pad_step_number=True,
        latest_filename="latest",
    )
    assert path == str(tf_dir / "model.ckpt-00000042")
    assert sorted(os.listdir(tf_dir)) == [
        "latest", "model.ckpt-00000042.data-00000-of-00001", "model.ckpt-00000042.index"
    ]
    ck = ckflow.side(
        "partitioned", "--spec", tmp_path / "spec", "--restore-latest", tf_dir,
        "--latest-filename", "latest", "--dump", tmp_path / "dump",
    )
    assert ck["latest"] == path and ck["restore"] == "ok", ck
    assert read(tmp_path / "dump") == want

    ck_dir = tmp_path / "ck"
    ck = ckflow.side(
        "partitioned", "--spec", tmp_path / "spec", "--parts", 3, "--save", ck_dir / "model.ckpt",
        "--step", 7, "--pad-step-number", "--latest-filename", "latest",
    )
    assert ck["saved"] == str(ck_dir / "model.ckpt-00000007")
    assert tf.train.latest_checkpoint(str(ck_dir), "latest") == ck["saved"]
    assert tf.train.latest_checkpoint(str(ck_dir)) is None
    state = tf.train.get_checkpoint_state(str(ck_dir), "latest")
    assert list(state.all_model_checkpoint_paths) == [ck["saved"]]
    got = tf_side.tf1_partitioned_restore(ck["saved"], "w", [10, 6], 0)
    assert got.tobytes() == array.tobytes()


# (7) V1 checkpoints (Saver(write_version=SaverDef.V1)), which TensorFlow
# 2.21 still writes: one file, no .index. A plain and a 3-part variable
# restore in ckflow whole and in other partitionings.
@pytest.mark.parametrize("tf_parts", [0, 3])
def test_tf1_v1_checkpoint_restores_in_ckflow(tmp_path, ckflow, tf_parts):
    array = partition_grid()
    values.write(tmp_path / "spec", {"w": array})
    (tmp_path / "tf").mkdir()  # V1 saves make no directory
    path = tf_side.tf1_partitioned_save(str(tmp_path / "tf" / "model.ckpt"), "w", array, tf_parts,
                                        v1=True, global_step=3)
    assert os.path.isfile(path) and not os.path.exists(path + ".index")
    for parts, axis in PARTITIONINGS:
        dump = tmp_path / f"dump_{parts}_{axis}"
        ck = ckflow.side(
            "partitioned", "--spec", tmp_path / "spec", "--parts", parts, "--axis", axis,
            "--restore-latest", tmp_path / "tf", "--dump", dump,
        )
        assert ck["latest"] == path and ck["restore"] == "ok", (parts, axis, ck)
        assert read(dump) == {"w": values.entry(tf.float32, array)}, (parts, axis)


# (6) Keras save_weights / load_weights of a Sequential against ckflow's
# SaveWeights / LoadWeights of its Sequential: the model is the root, no
# save_counter. And the seed's warning on both sides: a weights file
# restored through a Checkpoint root matches nothing of the model.
def keras_sequential():
    import tf_keras as keras

    model = keras.Sequential([keras.layers.Dense(4), keras.layers.Dense(2)])
    model(tf.zeros([1, 3]))
    by_key = {}
    for i, layer in enumerate(model.layers):
        by_key[f"layer_with_weights-{i}/kernel{SUFFIX}"] = layer.kernel
        by_key[f"layer_with_weights-{i}/bias{SUFFIX}"] = layer.bias
    return model, by_key


def test_save_weights_and_load_weights_both_ways(tmp_path, ckflow):
    model, by_key = keras_sequential()
    model.save_weights(str(tmp_path / "keras_weights"))
    ck = ckflow.side("weights", "--load", tmp_path / "keras_weights", "--dump", tmp_path / "ck")
    assert ck["load_weights"] == "ok" and ck["assert_consumed"] == "ok", ck
    assert_same_bits(read(tmp_path / "ck"), eager_dump(by_key), "ckflow LoadWeights of Keras's")

    ck = ckflow.side("weights", "--save", tmp_path / "ck_weights", "--dump", tmp_path / "ck2")
    other, other_by_key = keras_sequential()
    other.load_weights(str(tmp_path / "ck_weights")).assert_consumed()
    assert_same_bits(eager_dump(other_by_key), read(tmp_path / "ck2"), "Keras load_weights of ckflow's")

    # A weights file through a Checkpoint root.
    for weights in (tmp_path / "keras_weights", tmp_path / "ck_weights"):
        model, _ = keras_sequential()
        status = tf.train.Checkpoint(model=model).restore(str(weights))
        tf_report = {
            "restore": "ok",
            "assert_consumed": tf_side.outcome(status.assert_consumed),
            "assert_existing_objects_matched": tf_side.outcome(status.assert_existing_objects_matched),
            "assert_nontrivial_match": tf_side.outcome(status.assert_nontrivial_match),
        }
        status.expect_partial()
        ck = ckflow.side("weights", "--load-via-checkpoint", weights)
        assert verdicts(ck) == verdicts(tf_report), (ck, tf_report)
        assert tf_report["assert_nontrivial_match"] != "ok"

    # And a Checkpoint's file through load_weights: both refuse it.
    model, _ = keras_sequential()
    prefix = tf.train.Checkpoint(model=model).save(str(tmp_path / "checkpoint"))
    with pytest.raises(AssertionError):
        keras_sequential()[0].load_weights(prefix)
    assert ckflow.side("weights", "--load", prefix)["load_weights"].startswith("failed: FailedPrecondition")


# (5) A TF1 tf.compat.v1.train.Saver checkpoint (no object graph) restores
# into ckflow's model by variable name, as TF1's Saver restores it.
def test_tf1_saver_checkpoint_restores_by_name(tmp_path, ckflow):
    data_file = tmp_path / "data"
    data = tf_side.make_data(data_file)
    saved = tf_side.train(str(tmp_path), data, restore=None, steps=3, saver=True)
    by_saver = tf_side.train(
        str(tmp_path / "tf"), data, restore=saved["saved"], save="none", restore_with_saver=True
    )
    assert_same_bits(by_saver["restored"], saved["trained"], "TensorFlow's Saver restoring")
    ck = ckflow.side(
        "train", "--dir", tmp_path / "ck", "--restore", saved["saved"],
        "--restored", tmp_path / "ck.restored", "--trained", tmp_path / "ck.trained",
    )
    assert ck["kind"] == "NameBasedSaverStatus"
    assert ck["assert_consumed"] == "ok"
    got = read(tmp_path / "ck.restored")
    counter = got.pop("save_counter" + SUFFIX)
    assert values.as_array(counter) == 0
    assert_same_bits(got, saved["trained"], "ckflow restoring a TF1 Saver checkpoint")
    # ... and its loop goes on saving, numbered from 1.
    assert ck["saved"] == str(tmp_path / "ck" / "ckpt-1")

    # ckflow saves no name-based checkpoints; TF1's Saver reads its
    # object-based one through the variables' names the object graph holds.
    by_saver = tf_side.train(
        str(tmp_path / "tf"), data, restore=ck["saved"], save="none", restore_with_saver=True
    )
    want = read(tmp_path / "ck.trained")
    want.pop("save_counter" + SUFFIX)
    assert_same_bits(by_saver["restored"], want, "TensorFlow's Saver restoring ckflow's")

    # Where they differ (checkpoint/NOTES.md): TensorFlow 2.21's own
    # tf.compat.v1.train.Checkpoint cannot restore it in graph mode, because
    # its name-based restore asks the checkpoint for save_counter too.
    with pytest.raises(tf.errors.NotFoundError, match="save_counter"):
        tf_side.train(str(tmp_path / "tf2"), data, restore=saved["saved"], save="none")


# (4) Restoring into a structure that does not match: both report the same
# outcome for the restore and each assertion.
STRUCTURE_CASES = {
    "same": ["a/x", "a/y", "b/z"],
    "fewer objects": ["a/x", "b/z"],
    "more objects": ["a/x", "a/y", "b/z", "a/w"],
    "disjoint": ["c/q"],
    "renamed child": ["a/x", "a/y", "c/z"],
}


def restore_outcomes(roots, prefix):
    """TensorFlow's verdicts for the restore of `prefix` into `roots` and
    each assertion, with the checkpoint and its status (None where the
    restore raised), which the caller drops when it is done with them."""
    checkpoint = tf.train.Checkpoint(**roots)
    try:
        status = checkpoint.restore(str(prefix))
    except (tf.errors.OpError, ValueError) as e:
        return {"restore": "failed: " + str(e).splitlines()[0]}, checkpoint, None
    report = {
        "restore": "ok",
        "assert_consumed": tf_side.outcome(status.assert_consumed),
        "assert_existing_objects_matched": tf_side.outcome(status.assert_existing_objects_matched),
        "assert_nontrivial_match": tf_side.outcome(status.assert_nontrivial_match),
    }
    return report, checkpoint, status


def tf_outcomes(spec, prefix, expect_partial, caplog):
    """TensorFlow's verdicts, and whether dropping the status warned."""
    roots, _ = tf_module(zeros_spec(spec))
    report, checkpoint, status = restore_outcomes(roots, prefix)
    if status is None:
        return report
    if expect_partial:
        status.expect_partial()
    caplog.clear()
    del status, checkpoint, roots
    gc.collect()
    report["warned"] = any("could not be found" in r.getMessage() for r in caplog.records)
    return report


def verdicts(report):
    return {k: report[k].split(":")[0] for k in report if k.startswith("assert") or k == "restore"}


@pytest.mark.parametrize("expect_partial", [False, True])
@pytest.mark.parametrize("case", sorted(STRUCTURE_CASES) + ["shape mismatch", "dtype mismatch"])
def test_mismatched_structure_gets_the_same_verdicts(tmp_path, ckflow, caplog, case, expect_partial):
    written = float_spec(STRUCTURE_CASES["same"], 6)
    roots, _ = tf_module(written)
    prefix = tf.train.Checkpoint(**roots).save(str(tmp_path / "ckpt"))
    if case == "shape mismatch":
        spec = dict(written)
        spec["a/x" + SUFFIX] = (tf.float32, np.zeros([4], np.float32))
    elif case == "dtype mismatch":
        spec = dict(written)
        spec["a/x" + SUFFIX] = (tf.float64, np.zeros([3], np.float64))
    else:
        spec = float_spec(STRUCTURE_CASES[case], 7)
    values.write(tmp_path / "spec", spec)
    tf_report = tf_outcomes(spec, prefix, expect_partial, caplog)
    flags = ["--expect-partial"] if expect_partial else []
    ck = ckflow.side("generic", "--spec", tmp_path / "spec", "--zeros", "--restore", prefix, *flags)
    ck_verdicts = verdicts(ck)
    if tf_report["restore"] != "ok":
        # Both refuse: TensorFlow raises in restore(), ckflow's restore ops
        # fail by key before anything is assigned (checkpoint/NOTES.md).
        assert case.endswith("mismatch")
        assert ck["restore"].startswith("failed: InvalidArgument"), ck
        assert "(root).a.x" in ck["restore"]
        return
    assert ck_verdicts == verdicts(tf_report), (ck, tf_report)
    # Dropping a status with checkpoint values left over warns, on both
    # sides, unless expect_partial.
    ck_warned = "is being deleted with unrestored values" in ck["stderr"]
    assert ck_warned == tf_report["warned"], (ck["stderr"], tf_report)
    assert tf_report["warned"] == (not expect_partial and ck["assert_consumed"] != "ok"
                                   and case != "more objects")


# (2) The same numbers after every one of 100 steps of each optimizer, from
# the same start and batches: every variable within 1e-5 of its scale (its
# largest magnitude over the run), 1e-4 under Adam. Measured against the
# value of the step instead, a slot passing through zero (the momentum of the
# output bias as its gradient changes sign) differs by up to 2e-4 relative,
# and TensorFlow's own two CPU kernels (oneDNN and Eigen) differ from each
# other by as much: summation order, not a different definition
# (checkpoint/NOTES.md). Adam divides each step by the root of the squared
# gradients' average, so a rounding difference in a small gradient moves the
# variable by a step's fraction, not a gradient's, and such differences add
# up over 100 steps: 5e-7 here on every CPU kind oneDNN can be limited to,
# but 1.8e-5 (the input layer's bias) on one CI machine.
@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_hundred_training_steps_agree(tmp_path, ckflow, optimizer):
    data_file = tmp_path / "data"
    data = tf_side.make_data(data_file)
    start = tf_side.train(str(tmp_path), data, restore=None, optimizer=optimizer)
    steps = 100
    tf_run = tf_side.train(
        str(tmp_path), data, restore=start["saved"], steps=steps, optimizer=optimizer,
        save="none", trajectory=True,
    )
    ck = ckflow.side(
        "train", "--dir", tmp_path, "--restore", start["saved"], "--data", data_file,
        "--steps", steps, "--optimizer", optimizer, "--save", "none",
        "--trajectory", tmp_path / "ck",
    )
    assert ck["assert_consumed"] == tf_run["assert_consumed"] == "ok"
    difference, scale = {}, {}
    for step in range(1, steps + 1):
        got, want = read(tmp_path / f"ck.{step}"), tf_run["trajectory"][step - 1]
        assert sorted(got) == sorted(want), step
        for key in want:
            a = values.as_array(got[key]).astype(np.float64)
            b = values.as_array(want[key]).astype(np.float64)
            difference[key] = max(difference.get(key, 0.0), float(np.max(np.abs(a - b))))
            scale[key] = max(scale.get(key, 0.0), float(np.max(np.abs(b))))
    relative = {k: difference[k] / scale[k] if scale[k] else difference[k] for k in difference}
    bound = 1e-4 if optimizer == "adam" else 1e-5
    bad = {k: v for k, v in relative.items() if v > bound}
    assert not bad, f"relative differences over {bound}: {bad}"
    assert tf_run["trained"] != tf_run["restored"]  # it trained


# (9) TensorFlow's and ckflow's CheckpointManagers taking turns on one
# directory: numbering continues, each keeps max_to_keep of the other's and
# deletes the files of the ones it drops, or with
# keep_checkpoint_every_n_hours (36 ms here; the turns are 100 ms apart)
# keeps every dropped one's files, as the state file's timestamps say.
@pytest.mark.parametrize("keep_every_hours, name", [(None, "ckpt"), (1e-5, "model")])
def test_checkpoint_managers_take_turns(tmp_path, ckflow, keep_every_hours, name):
    d = tmp_path / "ckpts"
    spec = float_spec(["model/w", "model/b"], 8)
    values.write(tmp_path / "spec", spec)

    def tf_turn():
        if keep_every_hours:
            time.sleep(0.1)
        roots, variables = tf_module(zeros_spec(spec))
        checkpoint = tf.train.Checkpoint(**roots)
        manager = tf.train.CheckpointManager(
            checkpoint, str(d), max_to_keep=2, keep_checkpoint_every_n_hours=keep_every_hours,
            checkpoint_name=name,
        )
        if manager.latest_checkpoint:
            checkpoint.restore(manager.latest_checkpoint).assert_consumed()
            assert eager_dump(variables) == expected_dump(spec)
        else:
            for key, var in variables.items():
                var.assign(spec[key][1])
        return manager.save(), manager.checkpoints

    def ck_turn():
        if keep_every_hours:
            time.sleep(0.1)
        flags = ["--keep-every-hours", keep_every_hours] if keep_every_hours else []
        ck = ckflow.side(
            "generic", "--spec", tmp_path / "spec", "--zeros", "--restore-latest", d,
            "--manager", d, "--max-to-keep", 2, "--checkpoint-name", name,
            "--dump", tmp_path / "ck", *flags,
        )
        assert ck["assert_consumed"] == "ok"
        got = read(tmp_path / "ck")
        got.pop("save_counter" + SUFFIX)
        assert_same_bits(got, expected_dump(spec), "ckflow restoring the manager's latest")
        return ck["saved"], ck["kept"].split(" ")

    def ckpt(n):
        return str(d / f"{name}-{n}")

    assert tf_turn() == (ckpt(1), [ckpt(1)])
    assert ck_turn() == (ckpt(2), [ckpt(1), ckpt(2)])
    assert tf_turn() == (ckpt(3), [ckpt(2), ckpt(3)])
    assert ck_turn() == (ckpt(4), [ckpt(3), ckpt(4)])
    assert tf_turn() == (ckpt(5), [ckpt(4), ckpt(5)])
    kept_files = [4, 5] if keep_every_hours is None else [1, 2, 3, 4, 5]
    assert sorted(f for f in os.listdir(d) if f.endswith(".index")) == [
        f"{name}-{n}.index" for n in kept_files
    ]
    state = tf.train.get_checkpoint_state(str(d))
    assert list(state.all_model_checkpoint_paths) == [ckpt(4), ckpt(5)]


# Incremental saves (SaveOptions::incremental, issue 37 section 2): the
# manager saves four times while only the head changes. From the third save
# on, the base's data file is a hard link to the previous checkpoint's, and
# max_to_keep=2 has deleted the checkpoints they were linked from. TensorFlow
# restores each kept checkpoint, not knowing, bit for bit.
def test_incremental_saves_restore_in_tensorflow(tmp_path, ckflow):
    base = float_spec([f"model/base/w{i}" for i in range(4)], 21, shape=(512, 256))
    head = float_spec(["model/head/kernel", "model/head/bias"], 22, shape=(64,))
    spec = {**base, **head}
    values.write(tmp_path / "spec", spec)
    d = tmp_path / "ckpts"
    ck = ckflow.side(
        "generic", "--spec", tmp_path / "spec", "--manager", d, "--max-to-keep", 2,
        "--saves", 4, "--change", "model/head/", "--incremental",
    )
    saved = ck["saved_all"].split(" ")
    assert saved == [str(d / f"ckpt-{n}") for n in range(1, 5)]
    assert ck["kept"].split(" ") == saved[2:]

    def inodes(prefix):
        return {os.stat(os.path.join(d, f)).st_ino for f in data_files(prefix)}

    assert len(inodes(saved[3])) == 2 and len(inodes(saved[2]) & inodes(saved[3])) == 1
    for n, prefix in ((2, saved[2]), (3, saved[3])):
        want = dict(spec)
        for key, (dtype, array) in head.items():
            changed = array.copy()
            for _ in range(n):
                changed = changed + np.float32(1)
            want[key] = (dtype, changed)
        roots, variables = tf_module(zeros_spec(spec))
        checkpoint = tf.train.Checkpoint(**roots)
        checkpoint.restore(prefix).assert_consumed()
        assert int(checkpoint.save_counter.numpy()) == n + 1
        assert_same_bits(eager_dump(variables), expected_dump(want), f"TensorFlow reading {prefix}")
        assert listing_ckflow(ckflow, prefix) == listing_tf(prefix)


# A relative directory (issue 37, section 6): TensorFlow's
# update_checkpoint_state stores a relative path relative to the directory
# ("train", "train/model-1" stores "model-1"); ckflow's UpdateCheckpointState,
# run from its own working directory with the same arguments, writes the same
# state.
def test_relative_directory_state_paths_match_tensorflow(tmp_path, ckflow):
    import subprocess

    from tensorflow.python.checkpoint import checkpoint_management

    cases = [
        ("train", "train/model-0", []),
        ("train", "train/model-1", ["train/model-0", "/abs/x", "other/model-9"]),
        ("./runs/a", "runs/a/ckpt-3", ["runs/a/ckpt-2", "runs/b/ckpt-1"]),
        ("train", "model-2", []),
    ]
    for i, (directory, path, all_paths) in enumerate(cases):
        states = {}
        for side in ("tf", "ckflow"):
            cwd = tmp_path / f"{side}{i}"
            os.makedirs(cwd / directory, exist_ok=True)
            if side == "tf":
                here = os.getcwd()
                os.chdir(cwd)
                try:
                    # A copy: TensorFlow rewrites the list it is given.
                    checkpoint_management.update_checkpoint_state(
                        directory, path, all_model_checkpoint_paths=list(all_paths) or None
                    )
                finally:
                    os.chdir(here)
            else:
                args = [os.path.abspath(ckflow.side_program), "state", "--dir", directory, "--path", path]
                for p in all_paths:
                    args += ["--all", p]
                subprocess.run(args, cwd=cwd, check=True, capture_output=True)
            states[side] = (cwd / directory / "checkpoint").read_text()
        assert states["ckflow"] == states["tf"], (directory, path, all_paths, states)


# RestoreOptions::cast judged by TensorFlow: TensorFlow saves values of one
# dtype, ckflow restores them into variables of another under CastRule::kAny,
# and every value is what TensorFlow itself makes of it: tf.cast for float
# and bool targets, tf.dtypes.saturate_cast for integer ones (NaN left out
# there: TensorFlow's answer is the CPU's). Pairs whose integer bound a float
# cannot hold exactly (float32 -> int32, float64 -> int64) are left out:
# saturate_cast clamps to the rounded bound and then overflows to the
# minimum. One deliberate difference: TensorFlow's CPU kernels run with
# denormals flushed to zero, so tf.cast turns a subnormal result (or input)
# into 0; a restore keeps IEEE arithmetic, as NumPy does, which judges those
# positions (checkpoint/NOTES.md).
CAST_PAIRS = [
    (tf.float64, tf.float32), (tf.float64, tf.bfloat16), (tf.float64, tf.float16),
    (tf.float32, tf.float16), (tf.float32, tf.bfloat16), (tf.bfloat16, tf.float32),
    (tf.float16, tf.float64), (tf.float32, tf.int8), (tf.float32, tf.uint8),
    (tf.float64, tf.int32), (tf.float64, tf.int16), (tf.int64, tf.int8), (tf.int64, tf.uint16),
    (tf.uint16, tf.int8), (tf.int64, tf.float32), (tf.int32, tf.float16), (tf.int32, tf.bool),
    (tf.float32, tf.bool), (tf.uint8, tf.int8),
]


def cast_source(src, dst, rng):
    if src.is_floating:
        special = [0.0, -0.0, np.inf, -np.inf, 1.0, -2.5, 2.5, -0.7, 127.9, 128.0, -128.9, 255.5,
                   256.0, 65504.0, 65519.0, 65520.0, 1e10, -1e10, 3e9, -3e9, 9.3e18, -9.3e18,
                   1e30, 1e300, 1 + 2**-8 + 2**-30, 1 + 2**-11 + 2**-40, 1 + 2**-24,
                   3.4028235677973366e38, 3.4028234663852886e38 + 2**102, 1e-40, 5e-324]
        if not dst.is_integer:
            special.append(np.nan)
        wide = np.concatenate([special, rng.normal(0, 1e3, 64), rng.normal(0, 1, 64)])
        with np.errstate(over="ignore"):
            return wide.astype(src.as_numpy_dtype)
    info = np.iinfo(src.as_numpy_dtype)
    special = [info.min, info.max, 0, 1, info.max - 1]
    if info.min < 0:
        special += [-1, max(info.min, -(2**24) - 1)]
    special += [min(info.max, v) for v in (2**24 + 1, 2**24 + 3, 2**31, 2**53 + 1)]
    drawn = rng.integers(info.min, info.max, size=64, dtype=src.as_numpy_dtype, endpoint=True)
    return np.concatenate([np.array(special, dtype=src.as_numpy_dtype), drawn])


def same_values(got, want):
    """Bit for bit, but any NaN matches any NaN (payloads are not data)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind == "f" or got.dtype == tf.bfloat16.as_numpy_dtype:
        got_nan = np.isnan(got.astype(np.float64))
        want_nan = np.isnan(want.astype(np.float64))
        if not np.array_equal(got_nan, want_nan):
            return False
        got, want = got[~got_nan], want[~want_nan]
    return got.tobytes() == want.tobytes()


def test_restore_cast_converts_as_tensorflow_does(tmp_path, ckflow):
    rng = np.random.default_rng(5)
    source, target = {}, {}
    for src, dst in CAST_PAIRS:
        key = f"cast/{src.name}_to_{dst.name}{SUFFIX}"
        source[key] = (src, cast_source(src, dst, rng))
        target[key] = (dst, np.zeros(source[key][1].shape, dtype=dst.as_numpy_dtype))
    roots, _ = tf_module(source)
    prefix = tf.train.Checkpoint(**roots).write(str(tmp_path / "tf_ckpt"))
    values.write(tmp_path / "spec", target)

    ck = ckflow.side("generic", "--spec", tmp_path / "spec", "--zeros", "--restore", prefix,
                     "--cast", "any", "--dump", tmp_path / "dump")
    assert ck["restore"] == "ok", ck["restore"]
    got = read(tmp_path / "dump")
    wrong = []
    for key, (src, array) in source.items():
        dst = target[key][0]
        x = tf.constant(array, dtype=src)
        want = (tf.dtypes.saturate_cast(x, dst) if dst.is_integer else tf.cast(x, dst)).numpy()
        if not dst.is_integer:
            tiny = np.finfo(np.float32).tiny if dst != tf.float64 else np.finfo(np.float64).tiny
            with np.errstate(over="ignore", invalid="ignore"):
                ieee = array.astype(np.float64).astype(dst.as_numpy_dtype)
                wide = np.abs(array.astype(np.float64))
            subnormal = (wide > 0) & (wide < tiny)
            want = np.where(subnormal, ieee, want)
        mine = values.as_array(got[key])
        if not same_values(mine, want):
            at = [i for i in range(len(want)) if not same_values(mine[i:i + 1], want[i:i + 1])]
            wrong.append(f"{key}: at {at[:4]} from {array[at[:4]]} ckflow {mine[at[:4]]} "
                         f"TensorFlow {want[at[:4]]}")
    assert not wrong, f"ckflow's conversions differ from TensorFlow's in {wrong}"

    # The default refuses, TensorFlow's way; kWidening refuses a narrowing
    # and names the rule that would convert it.
    for rule, needle in (("none", "kWidening or kAny"), ("widening", "kAny converts it")):
        ck = ckflow.side("generic", "--spec", tmp_path / "spec", "--zeros", "--restore", prefix,
                         "--cast", rule)
        assert ck["restore"].startswith("failed: InvalidArgument"), ck["restore"]
        assert needle in ck["restore"], ck["restore"]
