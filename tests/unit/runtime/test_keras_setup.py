"""runtime/keras_setup.py in a fresh Python: tf-keras is the Keras, and JAX
is not loaded by TensorFlow's start-up but imports afterwards."""

import json
import subprocess
import sys

import pytest

from support.helpers import child_env

CHILD = """
import json, sys
from official_bench.runtime.keras_setup import keras, tf
out = {"keras": keras.__name__, "jax_after_tf": "jax" in sys.modules,
       "tf_keras_env": __import__("os").environ["TF_USE_LEGACY_KERAS"]}
try:
    import jax
    out["jax_imports"] = bool(jax.__version__)
except ImportError as e:
    out["jax_imports"] = repr(e)
print(json.dumps(out))
"""


def test_tensorflow_starts_without_jax_and_jax_imports_afterwards():
    pytest.importorskip("jax", reason="the jax extra is not installed")
    p = subprocess.run([sys.executable, "-c", CHILD], env=child_env(),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out == {"keras": "tf_keras", "jax_after_tf": False,
                   "tf_keras_env": "1", "jax_imports": True}
