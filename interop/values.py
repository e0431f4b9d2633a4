"""The values files both sides dump their variables to (interop/values_file.h
has the byte layout): {checkpoint key: numpy array}, compared bit for bit."""

import struct

import numpy as np
import tensorflow as tf

MAGIC = b"ckflow-values 1\n"


def _raw(array, dtype):
    if dtype == tf.string:
        out = bytearray()
        for s in np.asarray(array, dtype=object).reshape(-1):
            out += struct.pack("<Q", len(s)) + bytes(s)
        return bytes(out)
    return np.ascontiguousarray(array, dtype=dtype.as_numpy_dtype).tobytes()


def write(path, values):
    """values: {key: (tf.DType, numpy array)} or {key: numpy array}."""
    with open(path, "wb") as f:
        f.write(MAGIC)
        for key, value in values.items():
            dtype, array = value if isinstance(value, tuple) else (tf.as_dtype(value.dtype), value)
            array = np.asarray(array, dtype=object if dtype == tf.string else dtype.as_numpy_dtype)
            raw = _raw(array, dtype)
            dims = " ".join(str(d) for d in array.shape)
            f.write(f"{key}\n{dtype.as_datatype_enum}\n{dims}\n{len(raw)}\n".encode())
            f.write(raw + b"\n")


def read(path):
    """{key: (tf.DType, shape, raw bytes)}: the bytes as dumped."""
    out = {}
    with open(path, "rb") as f:
        assert f.readline() == MAGIC, path
        while True:
            key = f.readline()
            if not key:
                return out
            dtype = tf.as_dtype(int(f.readline()))
            shape = tuple(int(d) for d in f.readline().split())
            size = int(f.readline())
            raw = f.read(size)
            assert f.read(1) == b"\n", (path, key)
            out[key[:-1].decode()] = (dtype, shape, raw)


def as_array(entry):
    """A read entry as a numpy array (strings as an object array of bytes)."""
    dtype, shape, raw = entry
    if dtype == tf.string:
        items, at = [], 0
        while at < len(raw):
            (n,) = struct.unpack_from("<Q", raw, at)
            items.append(raw[at + 8 : at + 8 + n])
            at += 8 + n
        return np.array(items, dtype=object).reshape(shape)
    return np.frombuffer(raw, dtype=dtype.as_numpy_dtype).reshape(shape)


def entry(dtype, array):
    """What read() would return for `array` of `dtype`."""
    array = np.asarray(array, dtype=object if dtype == tf.string else dtype.as_numpy_dtype)
    return (dtype, tuple(array.shape), _raw(array, dtype))
