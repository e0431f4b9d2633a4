"""How the op judges compare ckflow's tensors with TensorFlow's."""

import numpy as np

TOLERANCE = {"float32": 1e-5, "float64": 1e-12}


def assert_close(got, want, tolerance, what):
    """|got - want| within `tolerance` of the largest magnitude of `want`:
    elements that cancel to near zero are judged by the scale of the sums
    that made them."""
    assert got.shape == want.shape, f"{what}: shape {got.shape}, TensorFlow's {want.shape}"
    scale = max(float(np.max(np.abs(want))), 1e-30) if want.size else 1.0
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    assert err <= tolerance * scale, f"{what}: max |ckflow - TensorFlow| = {err}, scale {scale}"
