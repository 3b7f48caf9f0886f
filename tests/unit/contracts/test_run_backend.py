"""contracts/run_backend: a run's backend from its record (config first,
then environment), else its place in the log tree or model_dir tree, else
tensorflow (runs from before the JAX backend)."""

import os

from official_bench.contracts import log_tree, run_backend


def test_the_record_says_it_config_first():
    jax = {"runtime": {"backend": "jax"}}
    assert run_backend.backend(jax, {"backend": "tensorflow"}) == "jax"
    assert run_backend.backend({"runtime": {}}, {"backend": "jax"}) == "jax"
    assert run_backend.backend({"runtime": {"backend": ""}},
                               {"backend": "jax"}) == "jax"
    # The record wins over the tree it sits in.
    assert run_backend.backend(
        jax, None, "/l/tensorflow/resnet50/bz8/1n1g/rn50_b8_fp32_1.log") \
        == "jax"


def test_the_tree_says_it_for_a_log_alone(tmp_path):
    for backend in log_tree.BACKEND_DIRS:
        log = os.path.join(log_tree.case_dir(str(tmp_path), 8, "2n1g", 1,
                                             backend),
                           log_tree.log_name(8, "fp32", 1))
        assert run_backend.of_path(log) == backend
        md = log_tree.ModelDir(str(tmp_path), 8, "1n1g",
                               log_tree.run_stem(8, "fp32", 1),
                               "20261126-120000", backend=backend)
        assert run_backend.backend(
            None, None, os.path.join(md.path, "result.json")) == backend
    # a tree of another shape names none: tensorflow, as older runs
    assert run_backend.of_path("/x/jax/bz8/1n1g/rn50_b8_fp32_1.log") is None
    assert run_backend.of_path("/runs/jax") is None
    assert run_backend.backend({}, {}, "") == run_backend.DEFAULT == \
        "tensorflow"
    assert run_backend.backend({"runtime": "odd"}, {"backend": 3}) == \
        "tensorflow"
