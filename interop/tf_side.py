"""TensorFlow's half of the interop suite: the same programs as
interop/ckflow_side.cc, written the way TensorFlow's users write them."""

import os

import numpy as np
import tensorflow as tf
import tf_keras as keras

import values

SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"


class Regress(keras.Model):
    """The seed's model: Dense "input_transform", Dense "hidden" (ReLU),
    Dense "out"."""

    def __init__(self):
        super().__init__(name="regress")
        self.input_transform = keras.layers.Dense(10)
        self.hidden = keras.layers.Dense(10, activation="relu")
        self.out = keras.layers.Dense(1)

    def call(self, x):
        return self.out(self.hidden(self.input_transform(x)))


class ShardPerDevice(tf.train.experimental.ShardingCallback):
    """A data file per device, in the devices' order, as ckflow shards
    (TensorFlow's default maps every device of a task to one file)."""

    @property
    def description(self):
        return "a data file per device"

    def __call__(self, shardable_tensors):
        shards = {}
        for t in shardable_tensors:
            shard = shards.setdefault(t.device.to_string(), {})
            shard.setdefault(t.checkpoint_key, {})[t.slice_spec] = t.tensor
        return [shards[device] for device in sorted(shards)]


def make_optimizer(name, learning_rate):
    if name == "adam":
        return tf.compat.v1.train.AdamOptimizer(learning_rate)
    if name == "momentum":
        return tf.compat.v1.train.MomentumOptimizer(learning_rate, momentum=0.9)
    if name == "sgd":
        return tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
    raise ValueError(name)


def make_data(path, rows=64, seed=7):
    """x uniform in [-1, 1]^4, y = 2 x0 - x1 + 0.5 x2 x3 (+ noise), float32."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(rows, 4)).astype(np.float32)
    y = (2 * x[:, 0] - x[:, 1] + 0.5 * x[:, 2] * x[:, 3]).astype(np.float32)
    y = (y + rng.normal(0, 0.01, size=rows).astype(np.float32)).reshape(rows, 1)
    values.write(path, {"x": x, "y": y})
    return x, y


def add_variable(out, path, var, optimizer):
    """out[key] = variable for `var` at object path `path` and for each of
    its slots in `optimizer` (checkpointed as "optimizer")."""
    out[path + SUFFIX] = var
    for slot in optimizer.get_slot_names():
        slot_var = optimizer.get_slot(var, slot)
        if slot_var is not None:
            out[f"{path}/.OPTIMIZER_SLOT/optimizer/{slot}{SUFFIX}"] = slot_var


def add_non_slot_variables(out, optimizer):
    """out[key] = variable for the optimizer's own (Adam's beta powers)."""
    for (name, _), var in optimizer._non_slot_dict.items():
        out[f"optimizer/{name}{SUFFIX}"] = var


def regress_variables(model, optimizer, checkpoint):
    """{checkpoint key: variable}, written out by hand from the object graph
    TensorFlow saves (the ckflow side walks its objects instead)."""
    out = {}
    for child in ("input_transform", "hidden", "out"):
        layer = getattr(model, child)
        for weight in ("kernel", "bias"):
            add_variable(out, f"model/{child}/{weight}", getattr(layer, weight), optimizer)
    add_non_slot_variables(out, optimizer)
    if checkpoint is not None and checkpoint.save_counter is not None:
        out["save_counter" + SUFFIX] = checkpoint.save_counter
    return out


def dump(session, variables):
    """{key: values entry} of the variables' values in `session`."""
    fetched = session.run({k: v.read_value() for k, v in variables.items()})
    return {
        k: values.entry(variables[k].dtype.base_dtype, fetched[k]) for k in sorted(variables)
    }


def outcome(fn):
    try:
        fn()
        return "ok"
    except (AssertionError, tf.errors.OpError, ValueError) as e:
        return "failed: " + str(e).splitlines()[0]


def train(
    directory,
    data,
    restore="latest",
    steps=0,
    optimizer="adam",
    learning_rate=0.01,
    batch=8,
    save="checkpoint",
    max_to_keep=3,
    saver=False,
    restore_with_saver=False,
    trajectory=False,
):
    """The graph-mode example of tf.compat.v1.train.Checkpoint: restore
    (deferred: before the model is built), build, initialize_or_restore,
    train `steps` steps, save. Returns a report like interop_ckflow's, with
    the dumps under "restored" and "trained" (and with trajectory=True, one
    after every step under "trajectory"). With saver=True it saves with a
    TF1 tf.compat.v1.train.Saver instead (a name-based checkpoint); with
    restore_with_saver=True it restores with one."""
    report = {}
    with tf.Graph().as_default():
        model = Regress()
        opt = make_optimizer(optimizer, learning_rate)
        checkpoint = (
            None if saver or restore_with_saver
            else tf.compat.v1.train.Checkpoint(optimizer=opt, model=model)
        )
        path = tf.train.latest_checkpoint(directory) if restore == "latest" else restore
        report["restore"] = path or "none"
        status = checkpoint.restore(path) if checkpoint is not None else None
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        y = tf.compat.v1.placeholder(tf.float32, [None, 1], name="y")
        loss = tf.reduce_mean(tf.math.squared_difference(model(x), y))
        train_op = opt.minimize(loss)
        with tf.compat.v1.Session() as session:
            if status is not None:
                status.initialize_or_restore(session)
                if path:
                    report["kind"] = type(status).__name__
                    report["assert_consumed"] = outcome(status.assert_consumed)
            else:
                session.run(tf.compat.v1.global_variables_initializer())
                if restore_with_saver and path:
                    tf.compat.v1.train.Saver().restore(session, path)
            variables = regress_variables(model, opt, checkpoint)
            report["restored_save_counter"] = str(
                session.run(checkpoint.save_counter) if checkpoint is not None else 0
            )
            report["restored"] = dump(session, variables)
            xs, ys = data
            report["trajectory"] = []
            for step in range(steps):
                begin = (step % (len(xs) // batch)) * batch
                last = session.run(
                    [loss, train_op], {x: xs[begin : begin + batch], y: ys[begin : begin + batch]}
                )[0]
                report["loss"] = repr(float(last))
                if trajectory:
                    report["trajectory"].append(dump(session, variables))
            with session.as_default():
                if saver:
                    report["saved"] = tf.compat.v1.train.Saver().save(
                        session, os.path.join(directory, "model.ckpt")
                    )
                elif save == "manager":
                    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep)
                    report["saved"] = manager.save()
                elif save == "checkpoint":
                    report["saved"] = checkpoint.save(os.path.join(directory, "ckpt"), session=session)
            if checkpoint is not None:
                report["save_counter"] = str(session.run(checkpoint.save_counter))
            report["trained"] = dump(session, regress_variables(model, opt, checkpoint))
    return report


def tf1_partitioned_save(path, name, array, parts, axis=0, v1=False, global_step=None,
                         pad_step_number=False, latest_filename=None, dtype=tf.float32):
    """get_variable(partitioner=fixed_size_partitioner(parts, axis)) of
    `dtype` holding `array` (parts=0: a plain variable), saved by a TF1
    Saver (one key, `parts` slices) to `path`; v1: write_version=SaverDef.V1,
    the others as Saver's and save's arguments."""
    return tf1_save({name: (dtype, array, parts, axis)}, path, v1=v1, global_step=global_step,
                    pad_step_number=pad_step_number, latest_filename=latest_filename)


def _tf1_variable(name, dtype, shape, parts, axis):
    return tf.compat.v1.get_variable(
        name,
        shape=shape,
        dtype=dtype,
        initializer=tf.compat.v1.zeros_initializer(),
        partitioner=tf.compat.v1.fixed_size_partitioner(parts, axis) if parts else None,
    )


def tf1_save(variables, path, v1=False, global_step=None, pad_step_number=False,
             latest_filename=None):
    """{name: (dtype, array, parts, axis)} as TF1 variables (parts=0: plain,
    else fixed_size_partitioner(parts, axis)), saved by a TF1 Saver."""
    with tf.Graph().as_default():
        assigns = []
        for name, (dtype, array, parts, axis) in variables.items():
            var = _tf1_variable(name, dtype, np.shape(array), parts, axis)
            for part in var if parts else [var]:
                info = part._get_save_slice_info()
                box = tuple(slice(o, o + s) for o, s in zip(info.var_offset, info.var_shape)) if info else ...
                assigns.append(part.assign(tf.constant(array[box], dtype=dtype)))
        version = tf.compat.v1.train.SaverDef.V1 if v1 else tf.compat.v1.train.SaverDef.V2
        saver = tf.compat.v1.train.Saver(write_version=version, pad_step_number=pad_step_number)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(assigns)
            return saver.save(session, path, global_step=global_step,
                              latest_filename=latest_filename, write_meta_graph=False)


def tf1_partitioned_restore(path, name, shape, parts, axis=0, dtype=tf.float32):
    """The whole value of a `dtype` variable of `shape` in `parts` parts
    along `axis` (0: a plain variable) after a TF1 Saver restores `path`."""
    return tf1_restore({name: (dtype, shape, parts, axis)}, path)[name]


def tf1_restore(variables, path):
    """{name: whole value} of TF1 variables {name: (dtype, shape, parts,
    axis)} after a TF1 Saver restores `path`."""
    with tf.Graph().as_default():
        wholes = {}
        for name, (dtype, shape, parts, axis) in variables.items():
            var = _tf1_variable(name, dtype, shape, parts, axis)
            wholes[name] = var.as_tensor() if parts else var.read_value()
        with tf.compat.v1.Session() as session:
            tf.compat.v1.train.Saver().restore(session, path)
            return session.run(wholes)
