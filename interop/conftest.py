"""Shared setup of the interop suite: TensorFlow quiet and with two logical
CPU devices (set before anything touches a device), and the ckflow programs
built by ./run.sh interop."""

import os
import subprocess

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
)

BUILD = os.environ.get("CKFLOW_BUILD", os.path.join(os.path.dirname(__file__), "..", "build", "release"))


def _program(*parts):
    path = os.path.join(BUILD, *parts)
    if not os.access(path, os.X_OK):
        pytest.exit(f"{path} is missing: build it with ./run.sh interop", returncode=2)
    return path


class Ckflow:
    """Runs the ckflow programs; .side(...) and .cnn(...) parse their
    "name: value" lines."""

    def __init__(self):
        self.side_program = _program("interop", "interop_ckflow")
        self.cnn_program = _program("interop", "interop_cnn")
        self.example_program = _program("examples", "fashion_mnist")
        self.cli_program = _program("tools", "ckflow")
        self.ops_program = _program("interop", "interop_ops")
        self.sparse_program = _program("interop", "interop_sparse")
        self.layers_program = _program("interop", "interop_layers")
        self.transformer_program = _program("interop", "interop_transformer")
        self.char_transformer_program = _program("examples", "char_transformer")
        self.recsys_program = _program("examples", "embedding_recsys")

    def side(self, *args, check=True):
        return self._report(self.side_program, args, check)

    def cnn(self, *args, check=True):
        """Runs interop_cnn (interop/cnn_side.cc) as side() runs interop_ckflow."""
        return self._report(self.cnn_program, args, check)

    def _report(self, program, args, check):
        proc = subprocess.run(
            [program, *map(str, args)], capture_output=True, text=True, check=False
        )
        if check and proc.returncode != 0:
            name = os.path.basename(program)
            raise AssertionError(f"{name} {' '.join(map(str, args))}:\n{proc.stderr}")
        report = {}
        for line in proc.stdout.splitlines():
            name, _, value = line.partition(": ")
            report[name] = value
        report["returncode"] = proc.returncode
        report["stderr"] = proc.stderr
        return report

    def ops(self, *args):
        """Runs interop_ops (one op and its gradients); raises on failure."""
        self._run(self.ops_program, args)

    def sparse(self, *args):
        """Runs interop_sparse (sparse optimizer steps); raises on failure."""
        self._run(self.sparse_program, args)

    def layers(self, *args):
        """Runs interop_layers (one sequence layer); raises on failure."""
        self._run(self.layers_program, args)

    def transformer(self, *args):
        """Runs interop_transformer (the example's model trained); raises on
        failure."""
        self._run(self.transformer_program, args)

    @staticmethod
    def _run(program, args):
        proc = subprocess.run([program, *map(str, args)], capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            name = os.path.basename(program)
            raise AssertionError(f"{name} {' '.join(map(str, args))}:\n{proc.stderr}")

    def cli(self, *args):
        return subprocess.run(
            [self.cli_program, *map(str, args)], capture_output=True, text=True, check=True
        ).stdout


@pytest.fixture(scope="session")
def ckflow():
    return Ckflow()
