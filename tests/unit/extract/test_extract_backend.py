"""A JAX tree's extraction names its framework: the environment note gives
Keras's and JAX's versions as a TensorFlow tree's gives TensorFlow's, and
the CSV (and each case entry) says which backend each row ran on."""

import csv
import io

from official_bench.extract import extractor as extract, tables
from support import logkit as kit

RATES = [50.0] + [300.0] * 5
JAX_ENV = {"backend": "jax", "python": "3.11.7", "keras": "3.15.1",
           "jax": "0.10.2", "jaxlib": "0.10.2", "hostname": "node1",
           "gpu_names": [], "num_workers": 1, "num_replicas": 1,
           "strategy": "mirrored", "dtype": "fp32"}


def write_tree(logs, env):
    """One 1n1g run; with its result JSON when ``env`` is given."""
    path = kit.write_run(logs, "1n1g", RATES)
    if env is not None:
        data = kit.result_json([(k * 100, k * 100 + 100, e)
                                for k, e in enumerate(RATES)], 128, 1, env=env)
        kit.write_json(path[:-4] + ".json", data)
    return str(logs)


def extraction(logs):
    result = extract.extract(logs).result
    rows = list(csv.DictReader(io.StringIO(tables.csv_text(result))))
    return result, rows


def test_a_jax_tree_notes_keras_and_jax_and_its_rows_say_jax(tmp_path):
    result, rows = extraction(write_tree(
        tmp_path / "logs" / "jax" / "resnet50" / "bz128", JAX_ENV))
    notes = tables.notes(result["rn50"])
    assert "environment: Keras 3.15.1, JAX 0.10.2, jaxlib 0.10.2, " \
        "Python 3.11.7, strategy mirrored" in notes
    assert result["rn50"]["1n1g"]["backend"] == "jax"
    assert [r["backend"] for r in rows] == ["jax"]


def test_a_tensorflow_tree_keeps_its_note_and_says_tensorflow(tmp_path):
    env = kit.environment(num_replicas=1, gpu_names=["A100"])
    result, rows = extraction(write_tree(tmp_path / "bz128", env))
    assert "environment: TensorFlow 2.21.0, tf_keras 2.21.0, Python 3.11.7, " \
        "TensorFlow built with CUDA 12.5, cuDNN 9, strategy mirrored, " \
        "GPUs: 1 x A100" in tables.notes(result["rn50"])
    assert [r["backend"] for r in rows] == ["tensorflow"]
    assert list(rows[0])[-1] == "backend"


def test_logs_without_result_json_take_the_backend_of_their_tree(tmp_path):
    _, rows = extraction(write_tree(
        tmp_path / "jax" / "resnet50" / "bz128", None))
    assert [r["backend"] for r in rows] == ["jax"]
