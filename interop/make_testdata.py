"""Writes the golden checkpoints of tests/testdata/ with TensorFlow itself.

    build/venv/bin/python interop/make_testdata.py [OUT_DIR]   (default: tests/testdata)

Each checkpoint goes to OUT_DIR/<name>/ with fixed values (no random
initializers, no training steps whose arithmetic could differ from one CPU to
another: optimizer slots are assigned, not computed), so that the same
TensorFlow writes the same bytes again; the interop suite
(test_testdata.py) regenerates them and compares. Beside each checkpoint
goes manifest.json, TensorFlow's own account of what it wrote: for each
checkpoint prefix every key TensorFlow's reader lists with its dtype, shape
and the CRC-32 (zlib's) and length of its value's bytes as TensorFlow reads
them back (numbers: little-endian elements; strings: each element as a
uint64 little-endian length and its bytes), the object graph as TensorFlow
parses it, and the state file as tf.train.get_checkpoint_state reads it.
The C++ tests (tests/bundle/testdata_util.h) compare ckflow's reading with it.

The interop conftest makes two logical CPUs; this script does too, before
anything touches a device, so it runs the same alone or under pytest's
subprocess."""

import json
import os
import shutil
import sys
import tempfile
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402
from tensorflow.core.protobuf import trackable_object_graph_pb2  # noqa: E402
from tensorflow.python.ops import resource_variable_ops  # noqa: E402

import tf_side  # noqa: E402

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def two_cpus():
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
        )
    except RuntimeError:  # already initialized (by the caller, with two)
        pass
    assert len(tf.config.list_logical_devices("CPU")) == 2


def grid(shape, scale=0.25, offset=-3.0, dtype=np.float32):
    """Element i of a row-major `shape` is (i % 97) * scale + offset: fixed,
    distinct nearby, exact in float32."""
    n = int(np.prod(shape)) if shape else 1
    return ((np.arange(n) % 97) * scale + offset).astype(dtype).reshape(shape)


# -------------------------------------------------------------------- manifest


def value_bytes(array, dtype):
    if dtype == tf.string:
        out = bytearray()
        for s in np.asarray(array, dtype=object).reshape(-1):
            out += len(s).to_bytes(8, "little") + bytes(s)
        return bytes(out)
    return np.ascontiguousarray(array).tobytes()


def read_whole(reader, prefix, key, shape, dtype):
    """The whole value of `key`: TensorFlow's reader cannot assemble a V1
    file's sliced tensor, the RestoreV2 op (which reads V1 files too) can."""
    try:
        return reader.get_tensor(key)
    except tf.errors.UnimplementedError:
        spec = " ".join(map(str, shape)) + " " + ":".join("-" for _ in shape)
        return tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=[key], shape_and_slices=[spec],
                                    dtypes=[dtype])[0].numpy()


def tensors_of(prefix):
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    out = []
    for key in sorted(shapes):
        value = read_whole(reader, prefix, key, shapes[key], dtypes[key])
        raw = value_bytes(value, dtypes[key])
        out.append({
            "key": key,
            "dtype": dtypes[key].name,
            "shape": list(shapes[key]),
            "bytes": len(raw),
            "crc32": zlib.crc32(raw),
        })
    return out


def object_graph_of(prefix):
    reader = tf.train.load_checkpoint(prefix)
    if not reader.has_tensor(OBJECT_GRAPH_KEY):
        return None
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))
    nodes = []
    for node in graph.nodes:
        nodes.append({
            "children": [{"local_name": c.local_name, "node_id": c.node_id} for c in node.children],
            "attributes": [
                {"name": a.name, "full_name": a.full_name, "checkpoint_key": a.checkpoint_key}
                for a in node.attributes
            ],
            "slot_variables": [
                {
                    "original_variable_node_id": s.original_variable_node_id,
                    "slot_name": s.slot_name,
                    "slot_variable_node_id": s.slot_variable_node_id,
                }
                for s in node.slot_variables
            ],
        })
    return {"nodes": nodes}


def state_of(directory):
    state = tf.train.get_checkpoint_state(directory)
    if state is None:
        return None
    # TensorFlow makes the relative paths it read absolute: back to relative,
    # so that the manifest does not depend on where it was written.
    return {
        "model_checkpoint_path": os.path.relpath(state.model_checkpoint_path, directory),
        "all_model_checkpoint_paths": [
            os.path.relpath(p, directory) for p in state.all_model_checkpoint_paths
        ],
        "all_model_checkpoint_timestamps": list(state.all_model_checkpoint_timestamps),
        "last_preserved_timestamp": state.last_preserved_timestamp,
    }


def write_manifest(directory, prefixes, what):
    checkpoints = []
    for prefix in prefixes:
        path = os.path.join(directory, prefix)
        entry = {
            "prefix": prefix,
            "format": "V2" if os.path.exists(path + ".index") else "V1",
            "tensors": tensors_of(path),
        }
        graph = object_graph_of(path)
        if graph is not None:
            entry["object_graph"] = graph
        checkpoints.append(entry)
    manifest = {
        "written_by": f"interop/make_testdata.py with TensorFlow {tf.__version__}",
        "what": what,
        "checkpoints": checkpoints,
    }
    state = state_of(directory)
    if state is not None:
        manifest["state"] = state
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


def tf1_save(saver, path, assigns, config=None, global_step=None):
    """Initializes the graph's variables, runs `assigns`, saves with the TF1
    `saver` to `path`; returns the path saved."""
    with tf.compat.v1.Session(config=config) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(assigns)
        return saver.save(session, path, global_step=global_step, write_meta_graph=False)


# ----------------------------------------------------------------- checkpoints
# Each returns (the prefixes written in `d`, relative to it; what it covers).


def every_dtype(d):
    """Every dtype TensorFlow and ckflow share, with the awkward values of
    each (-0, infinities, NaN payloads, subnormals, integer extremes,
    strings empty, of 1 KiB, with NULs and bytes that are not UTF-8), a
    scalar and an empty tensor, in an eager tf.train.Checkpoint.write()."""
    root = tf.train.Checkpoint()
    for dtype in (tf.float16, tf.bfloat16, tf.float32, tf.float64):
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.5, 65504.0], np.float64)
        array = np.concatenate([special, np.arange(8) * 1.5 - 4]).astype(dtype.as_numpy_dtype)
        array.view(f"u{array.itemsize}")[-1] = 1  # the smallest subnormal
        if dtype == tf.float32:
            array.view(np.uint32)[8:10] = 0x7FC12345, 0xFFC00001  # NaN payloads
        if dtype == tf.float64:
            array.view(np.uint64)[8] = 0x7FF8000000ABCDEF
        setattr(root, dtype.name, tf.Variable(array.reshape(4, 4), dtype=dtype))
    for dtype in (tf.int8, tf.uint8, tf.int16, tf.uint16, tf.int32, tf.uint32, tf.int64, tf.uint64):
        info = np.iinfo(dtype.as_numpy_dtype)
        array = np.array([info.min, info.max, 0, 1, info.max // 3, info.min // 5 if info.min else 7],
                         dtype=dtype.as_numpy_dtype)
        setattr(root, dtype.name, tf.Variable(array.reshape(2, 3), dtype=dtype))
    root.bool = tf.Variable([True, False, False, True, True])
    for dtype in (tf.complex64, tf.complex128):
        array = np.array([complex(-0.0, np.inf), 1.5 - 2j, complex(np.nan, 0.25), 3j],
                         dtype=dtype.as_numpy_dtype)
        setattr(root, dtype.name, tf.Variable(array))
    root.string = tf.Variable(np.array(
        [[b"", b"a\x00b\x00", "λ ckflow".encode()], [bytes(range(256)), b"c" * 1024, b"\xff\xfe"]],
        dtype=object))
    root.scalar = tf.Variable(np.float32(3.25))
    root.empty = tf.Variable(np.zeros([0, 3], np.int32))
    return [os.path.basename(root.write(os.path.join(d, "ckpt")))], every_dtype.__doc__


def string_tensors(d):
    """DT_STRING tensors of shape [1] and [4] holding "" and a 1 KiB element,
    and a float tensor, written by the SaveV2 op in an order other than the
    keys' (the data file is in the order written, the index in key order)."""
    names = ["strs", "scalar", "string_tensor", "nul_bytes", "floats"]
    tensors = [
        tf.constant([b"hello", b"", b"x01", b"c" * 1024]),
        tf.constant([b"hello"]),
        tf.constant([b""]),
        tf.constant([[b"\x00", b"a\x00"], [b"\x00\x00z", b""]]),
        tf.constant(np.full([2, 3], 16.18, np.float32)),
    ]
    tf.raw_ops.SaveV2(prefix=os.path.join(d, "foo"), tensor_names=names,
                      shape_and_slices=[""] * len(names), tensors=tensors)
    return ["foo"], string_tensors.__doc__


def tf1_saver_sharded(d):
    """A TF1 tf.compat.v1.train.Saver(sharded=True) V2 checkpoint over two
    devices (two data files): variables from get_variable (float32 layers,
    an int32 counter, a 1.1 MiB embedding that readers take in chunks),
    AdamOptimizer's slots named <var>/Adam and <var>/Adam_1 (none for the
    embedding, which is not trained) and its beta powers, a
    global_step, saved at step 1000 with a `checkpoint` state file."""
    with tf.Graph().as_default():
        variables, assigns = [], []
        with tf.device("/cpu:0"):
            step = tf.compat.v1.train.get_or_create_global_step()
            counter = tf.compat.v1.get_variable("train_stats/steps", [], tf.int32,
                                                tf.compat.v1.zeros_initializer())
            with tf.compat.v1.variable_scope("losses_avg"):
                for name in ("total_loss", "training_loss"):
                    v = tf.compat.v1.get_variable(name, [], tf.float32,
                                                  tf.compat.v1.zeros_initializer(),
                                                  trainable=False)
                    assigns.append(v.assign(100.0))
        with tf.device("/cpu:1"):
            embedding = tf.compat.v1.get_variable("embedding/weights", [2200, 128], tf.float32,
                                                  tf.compat.v1.zeros_initializer(),
                                                  trainable=False)
            assigns.append(embedding.assign(grid([2200, 128], 0.5, -24)))
            for layer in range(6):
                for name, shape in (("kernel", [16, 8]), ("bias", [8])):
                    v = tf.compat.v1.get_variable(f"body/layer_{layer}/ffn/{name}", shape,
                                                  tf.float32, tf.compat.v1.zeros_initializer())
                    variables.append(v)
            loss = tf.add_n([tf.reduce_sum(v) for v in variables])
            optimizer = tf.compat.v1.train.AdamOptimizer(0.001)
            train = optimizer.minimize(loss, global_step=step)
        del train  # built for its slots; never run
        for i, v in enumerate(variables):
            shape = v.shape.as_list()
            assigns.append(v.assign(grid(shape, 0.125, -i)))
            assigns.append(optimizer.get_slot(v, "m").assign(grid(shape, 1e-3, 0.01 * i)))
            assigns.append(optimizer.get_slot(v, "v").assign(grid(shape, 1e-6, 1e-4)))
        beta1, beta2 = optimizer._get_beta_accumulators()
        assigns += [beta1.assign(0.81), beta2.assign(0.9604), step.assign(1000), counter.assign(7)]
        saver = tf.compat.v1.train.Saver(sharded=True, save_relative_paths=True)
        config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
        path = tf1_save(saver, os.path.join(d, "model.ckpt"), assigns, config, global_step=step)
    return [os.path.basename(path)], tf1_saver_sharded.__doc__


def tf1_saver_small(d):
    """The smallest TF1 Saver checkpoint: two float32 scalars W and b under
    prefix "model", with a `checkpoint` state file."""
    with tf.Graph().as_default():
        tf.compat.v1.get_variable("W", [], initializer=tf.compat.v1.constant_initializer(0.25))
        tf.compat.v1.get_variable("b", [], initializer=tf.compat.v1.constant_initializer(1.5))
        saver = tf.compat.v1.train.Saver(save_relative_paths=True)
        tf1_save(saver, os.path.join(d, "model"), [])
    return ["model"], tf1_saver_small.__doc__


def tf1_saver_v1(d):
    """A V1 checkpoint (Saver(write_version=SaverDef.V1)): one file, no
    .index, in graph mode, of
      dense/kernel  float32 [2,3]  arange(6) * 0.5 - 1
      step          int64   []     -3
      i32           int32   [3]    1, -2, 3
      f64           float64 [2]    1.5, -2.25
      flag          bool    [3]    true, false, true
      h             float16 [2]    1.5, -2
      words         string  [3]    "ab", "", "\\0z"
      emb           float32 [5,2]  arange(10) + 0.25, from get_variable with
                                   fixed_size_partitioner(2): slices "0,3:-"
                                   and "3,2:-"
    with a `checkpoint` state file naming it."""
    with tf.Graph().as_default():
        constants = {
            "dense/kernel": np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1,
            "step": np.int64(-3),
            "i32": np.array([1, -2, 3], np.int32),
            "f64": np.array([1.5, -2.25], np.float64),
            "flag": np.array([True, False, True]),
            "h": np.array([1.5, -2], np.float16),
            "words": np.array([b"ab", b"", b"\x00z"], dtype=object),
        }
        saved = [tf.compat.v1.Variable(value, name=name) for name, value in constants.items()]
        emb = tf.compat.v1.get_variable("emb", [5, 2], tf.float32, tf.compat.v1.zeros_initializer(),
                                        partitioner=tf.compat.v1.fixed_size_partitioner(2))
        whole = np.arange(10, dtype=np.float32).reshape(5, 2) + 0.25
        assigns = [emb._variable_list[0].assign(whole[:3]), emb._variable_list[1].assign(whole[3:])]
        saver = tf.compat.v1.train.Saver(saved + list(emb),
                                         write_version=tf.compat.v1.train.SaverDef.V1,
                                         save_relative_paths=True)
        tf1_save(saver, os.path.join(d, "model.ckpt"), assigns)
    return ["model.ckpt"], tf1_saver_v1.__doc__


def tf1_partitioned(d):
    """TF1 partitioned variables (get_variable with fixed_size_partitioner)
    in a V2 Saver checkpoint: "emb" [10,6] in 3 parts along axis 0 and
    "proj" [6,4] in 2 parts along axis 1, one key of several slices each,
    beside a plain variable "bias"."""
    with tf.Graph().as_default():
        assigns = []
        for name, shape, parts, axis in (("emb", [10, 6], 3, 0), ("proj", [6, 4], 2, 1)):
            var = tf.compat.v1.get_variable(
                name, shape, tf.float32, tf.compat.v1.zeros_initializer(),
                partitioner=tf.compat.v1.fixed_size_partitioner(parts, axis))
            whole = grid(shape, 1.25, -7)
            for part in var:
                info = part._get_save_slice_info()
                box = tuple(slice(o, o + s) for o, s in zip(info.var_offset, info.var_shape))
                assigns.append(part.assign(whole[box]))
        bias = tf.compat.v1.get_variable("bias", [4], tf.float32, tf.compat.v1.zeros_initializer())
        assigns.append(bias.assign([0.5, -0.5, 1.5, -1.5]))
        saver = tf.compat.v1.train.Saver(save_relative_paths=True)
        tf1_save(saver, os.path.join(d, "model.ckpt"), assigns)
    return ["model.ckpt"], tf1_partitioned.__doc__


def keras_save_weights(d):
    """tf_keras Sequential([Dense(4), Dense(2)]) on [batch, 3] inputs,
    save_weights in the TensorFlow format: the model is the root (keys
    layer_with_weights-N/...), no save_counter, a `checkpoint` state file."""
    model = keras.Sequential([keras.layers.Dense(4), keras.layers.Dense(2)])
    model(tf.zeros([1, 3]))
    model.set_weights([grid(w.shape, 0.5, -2 + i) for i, w in enumerate(model.get_weights())])
    model.save_weights(os.path.join(d, "weights"))
    return ["weights"], keras_save_weights.__doc__


def checkpoint_manager(d):
    """A tf.train.CheckpointManager directory (max_to_keep=2) after three
    saves of an eager tf.train.Checkpoint whose values change between them:
    ckpt-2 and ckpt-3 kept, ckpt-1 deleted, and a state file with the
    checkpoints' timestamps (which differ from run to run)."""
    model = tf.Module()
    model.w = tf.Variable(grid([3, 2]))
    model.b = tf.Variable(np.zeros([2], np.float32))
    checkpoint = tf.train.Checkpoint(model=model)
    manager = tf.train.CheckpointManager(checkpoint, d, max_to_keep=2)
    for i in range(3):
        model.b.assign([i, -i])
        manager.save()
    return [os.path.basename(p) for p in manager.checkpoints], checkpoint_manager.__doc__


def eager_optimizer_slots(d):
    """An eager tf.train.Checkpoint(agent=...).save(): an agent of two
    networks of tf_keras Dense layers, each with its own tf_keras legacy
    Adam (slots m and v for every weight: 16 slot variables), float32,
    int64, bool and string variables, an edge from the agent back to the
    root (a cycle), save_counter and a `checkpoint` state file."""
    agent = tf.Module()
    checkpoint = tf.train.Checkpoint(agent=agent)
    agent.checkpoint = checkpoint  # the cycle
    agent.timesteps = tf.Variable(np.int64(1234))
    agent.terminal = tf.Variable([[True, False, True, False]])
    agent.names = tf.Variable([b"policy", b"baseline", b""])
    for n, name in enumerate(("policy", "baseline")):
        network = keras.Sequential([keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
        network(tf.zeros([1, 4]))
        network.set_weights([grid(w.shape, 0.0625, -n - i) for i, w in enumerate(network.get_weights())])
        optimizer = keras.optimizers.legacy.Adam(0.001)
        # Zero gradients: the slots appear and nothing moves (m = v = 0 and
        # the update is exactly 0); their values are assigned below.
        optimizer.apply_gradients((tf.zeros_like(w), w) for w in network.trainable_weights)
        for i, w in enumerate(network.trainable_weights):
            optimizer.get_slot(w, "m").assign(grid(w.shape, 1e-3, 0.01 * (i + n)))
            optimizer.get_slot(w, "v").assign(grid(w.shape, 1e-6, 1e-3))
        optimizer.iterations.assign(41 + n)
        setattr(agent, name, network)
        setattr(agent, name + "_optimizer", optimizer)
    path = checkpoint.save(os.path.join(d, "ckpt"))
    return [os.path.basename(path)], eager_optimizer_slots.__doc__


def graph_checkpoint(d):
    """Graph mode's tf.compat.v1.train.Checkpoint(optimizer=, model=): the
    Regress model of tf_keras Dense layers input_transform, hidden and out,
    tf.compat.v1.train.AdamOptimizer's slots m and v and beta powers,
    save(session=) with save_counter and a `checkpoint` state file."""
    with tf.Graph().as_default():
        model = tf_side.Regress()
        optimizer = tf.compat.v1.train.AdamOptimizer(0.01)
        checkpoint = tf.compat.v1.train.Checkpoint(optimizer=optimizer, model=model)
        x = tf.compat.v1.placeholder(tf.float32, [None, 4])
        optimizer.minimize(tf.reduce_sum(model(x)))
        assigns = []
        for i, v in enumerate(model.trainable_weights):
            shape = v.shape.as_list()
            assigns.append(v.assign(grid(shape, 0.125, -i)))
            assigns.append(optimizer.get_slot(v, "m").assign(grid(shape, 1e-3, 0.1)))
            assigns.append(optimizer.get_slot(v, "v").assign(grid(shape, 1e-5, 1e-3)))
        beta1, beta2 = optimizer._get_beta_accumulators()
        assigns += [beta1.assign(0.729), beta2.assign(0.997003)]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(assigns)
            path = checkpoint.save(os.path.join(d, "ckpt"), session=session)
    return [os.path.basename(path)], graph_checkpoint.__doc__


def cyclic_module(d):
    """A tf.Module root whose child points back to it (child/parent is the
    root: a cycle), with one variable under the child, written with
    tf.train.Checkpoint(root=module).write()."""
    module = tf.Module()
    module.child = tf.Module()
    module.child.parent = module
    module.child.my_variable = tf.Variable(3.0)
    return [os.path.basename(tf.train.Checkpoint(root=module).write(
        os.path.join(d, "ckpt")))], cyclic_module.__doc__


def uninitialized_variable(d):
    """An object graph naming checkpoint keys the bundle lacks: two
    UninitializedVariables (one under a sub-module) are in the graph, but
    TensorFlow saves no value for them; one initialized variable is saved."""
    module = tf.Module()
    module.sub_module = tf.Module()
    module.initialized_variable = tf.Variable(1.0)
    module.uninitialized_variable = resource_variable_ops.UninitializedVariable(
        shape=[], dtype=tf.float32)
    module.sub_module.uninitialized_variable = resource_variable_ops.UninitializedVariable(
        shape=[2], dtype=tf.float32)
    return [os.path.basename(tf.train.Checkpoint(root=module).write(
        os.path.join(d, "ckpt")))], uninitialized_variable.__doc__


def two_shards(d):
    """An eager object-based checkpoint in two data files: the object graph
    in shard 0 (the CPU it is saved from), the one variable, on the second
    CPU, in shard 1 (a sharding callback of a file per device)."""
    module = tf.Module()
    with tf.device("/cpu:1"):
        module.v = tf.Variable(np.ones([1, 1, 1], np.float32))
    options = tf.train.CheckpointOptions(experimental_sharding_callback=tf_side.ShardPerDevice())
    path = tf.train.Checkpoint(root=module).write(os.path.join(d, "ckpt"), options=options)
    return [os.path.basename(path)], two_shards.__doc__


def sliced_values(d):
    """TensorFlow's MaxShardSizePolicy: data files of at most 6,000 bytes,
    so the two [64,64] float32 values are cut into slices across several
    data files (one key, its slices in several files)."""
    model = tf.Module()
    model.v0 = tf.Variable(grid([64, 64], 0.5, -10))
    model.v1 = tf.Variable(grid([64, 64], 0.25, 3))
    options = tf.train.CheckpointOptions(
        experimental_sharding_callback=tf.train.experimental.MaxShardSizePolicy(6000))
    path = tf.train.Checkpoint(model=model).write(os.path.join(d, "ckpt"), options=options)
    return [os.path.basename(path)], sliced_values.__doc__


def saved_model_variables(d):
    """The variables of a SavedModel (variables/variables.*): an ordinary V2
    checkpoint whose object graph has a SavedModel's shape (functions,
    signatures) beside three float32 variables a, b, c."""
    module = tf.Module()
    module.a = tf.Variable(0.5)
    module.b = tf.Variable(2.0)
    module.c = tf.Variable(3.0)
    module.predict = tf.function(lambda x: module.a * x + module.c,
                                 input_signature=[tf.TensorSpec([None], tf.float32)])
    with tempfile.TemporaryDirectory() as tmp:
        tf.saved_model.save(module, tmp, signatures={"serving_default": module.predict})
        for name in os.listdir(os.path.join(tmp, "variables")):
            shutil.copy(os.path.join(tmp, "variables", name), d)
    return ["variables"], saved_model_variables.__doc__


GOLDENS = {
    "every_dtype": every_dtype,
    "string_tensors": string_tensors,
    "tf1_saver_sharded": tf1_saver_sharded,
    "tf1_saver_small": tf1_saver_small,
    "tf1_saver_v1": tf1_saver_v1,
    "tf1_partitioned": tf1_partitioned,
    "keras_save_weights": keras_save_weights,
    "checkpoint_manager": checkpoint_manager,
    "eager_optimizer_slots": eager_optimizer_slots,
    "graph_checkpoint": graph_checkpoint,
    "cyclic_module": cyclic_module,
    "uninitialized_variable": uninitialized_variable,
    "two_shards": two_shards,
    "sliced_values": sliced_values,
    "saved_model_variables": saved_model_variables,
}


def generate(out, names=None):
    """Writes each golden (all, or `names`) into out/<name>/, made anew."""
    two_cpus()
    for name in names or GOLDENS:
        d = os.path.join(out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        prefixes, what = GOLDENS[name](d)
        write_manifest(d, prefixes, " ".join(what.split()))


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.normpath(os.path.join(here, "..", "tests", "testdata"))
    generate(out, sys.argv[2:] or None)
    print(f"make_testdata: {len(sys.argv[2:]) or len(GOLDENS)} checkpoint directories in {out}")
