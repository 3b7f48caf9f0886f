"""The doctor on a machine without TensorFlow, for real: --backend auto
finds JAX and Keras 3, the jax probe's child reports this CPU, and one
short jax run passes its checks (the rest of the CPU subset is the same
code with other run specs, planned in test_check_plan)."""

import subprocess
import sys

from official_bench.doctor import report
from support.helpers import REPO, without_module_env


def test_doctor_checks_the_jax_backend_where_tensorflow_is_missing(
        tmp_path):
    out = tmp_path / "doctor.json"
    p = subprocess.run(
        [sys.executable, "-m", "official_bench.doctor", "--quick",
         "--only", "cpu-fp32", "--steps", "8", "--batch-size", "4",
         f"--workdir={tmp_path / 'work'}", f"--output={out}"], cwd=REPO,
        env=without_module_env(tmp_path, "tensorflow",
                               {"CUDA_VISIBLE_DEVICES": ""}),
        text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        timeout=600)
    assert p.returncode == 0, p.stdout[-4000:]
    assert "official-bench-doctor: backend jax: TensorFlow does not " \
           "import" in p.stdout
    doc = report.load(str(out))
    assert doc["complete"] and doc["exit_status"] == 0
    machine = doc["machine"]
    assert machine["backend"] == "jax" and machine["tensorflow"] is None
    assert "No module named 'tensorflow'" in machine["tensorflow_error"]
    jax = machine["jax"]
    assert jax["default_backend"] == "cpu" and jax["gpus"] == []
    assert jax["devices"][0]["platform"] == "cpu" and jax["gpu_error"]
    assert jax["keras"].startswith("3.")
    rows = {c["name"]: c for c in doc["checks"]}
    assert list(rows) == ["jax", "gpus", "cpu-fp32"]
    assert rows["jax"]["result"] == "PASS"
    assert rows["jax"]["detail"].startswith(f"JAX {jax['jax']} (jaxlib ")
    assert rows["gpus"]["result"] == "SKIP"
    assert doc["gpu_checks_skipped"].startswith("no GPU visible to JAX: ")
    run = rows["cpu-fp32"]
    assert run["result"] == "PASS", run
    assert "; on jax; replicas 1; devices cpu:0" in run["detail"]
    assert run["data"]["environment"]["backend"] == "jax"
    assert run["data"]["examples_per_second"] > 0
    assert "runtime.backend=jax" in run["data"]["command"][-1]
