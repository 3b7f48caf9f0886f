"""The tensorflow, jax and gpus rows (doctor/env_checks.py), from faked
TensorFlow, JAX and nvidia-smi facts."""

from official_bench.doctor import env_checks, jax_diagnosis, report
from official_bench.host import gpu_diagnosis as gd
from support.doctor_facts import CPU_BUILD, CUDA_BUILD, NO_SMI, jax_facts, smi


def test_gpus_row_verdicts():
    no_smi = gd.diagnose(CUDA_BUILD, [], NO_SMI)
    row = env_checks.gpus_row({"gpus": []}, NO_SMI, no_smi, "no GPU")
    assert row.result == report.SKIP
    assert row.detail.startswith("no GPU visible to TensorFlow: no NVIDIA")
    assert env_checks.gpus_row({"gpus": []}, NO_SMI, no_smi, "no GPU",
                               require_gpu=True).result == report.FAIL
    facts = smi("V100", "V100")
    missing = gd.diagnose(CUDA_BUILD, [], facts, tf_version="2.21.0")
    row = env_checks.gpus_row({"gpus": []}, facts, missing, "nvidia-smi")
    assert row.result == report.FAIL and "tensorflow[and-cuda]" in row.fix
    tf_facts = {"gpus": [{"name": f"/physical_device:GPU:{i}",
                          "device_name": "NVIDIA A100-SXM4-40GB",
                          "compute_capability": [8, 0]} for i in range(2)]}
    ok = gd.diagnose(CUDA_BUILD, env_checks.gpu_names(tf_facts),
                     smi("A100", "A100"))
    row = env_checks.gpus_row(tf_facts, smi("A100", "A100"), ok,
                              "NVML (pynvml)")
    assert row.result == report.PASS
    assert row.detail == ("2 x NVIDIA A100-SXM4-40GB (compute 8.0), driver "
                          "550.54.15 (nvidia-smi); utilisation via NVML "
                          "(pynvml); peak A100 SXM: fp32 156 (TF32), fp16 "
                          "312, bf16 312 TFLOP/s dense (NVIDIA A100 Tensor "
                          "Core GPU datasheet)")
    assert list(row.data["peaks"]) == ["NVIDIA A100-SXM4-40GB"]
    assert env_checks.capabilities(tf_facts) == [(8, 0), (8, 0)]


def test_tensorflow_row():
    row = env_checks.tensorflow_row(None, "TensorFlow probe failed (exit 1):"
                                          " ImportError: libcudart")
    assert row.result == report.FAIL and "libcudart" in row.detail
    row = env_checks.tensorflow_row(
        {"tensorflow": "2.21.0", "tf_keras": "2.18.0", "build": CPU_BUILD},
        None)
    assert row.result == report.FAIL and "different minor" in row.detail


def test_jax_row():
    row = env_checks.jax_row(jax_facts(8), None)
    assert row.result == report.PASS and row.name == row.kind == "jax"
    assert row.detail.startswith("JAX 0.11.2 (jaxlib 0.11.2, "
                                 "jax-cuda13-plugin 0.11.2")
    assert len(row.data["devices"]) == 8
    failed = env_checks.jax_row(None, "JAX probe failed (exit 1): "
                                      "ModuleNotFoundError: No module named "
                                      "'jax'")
    assert failed.result == report.FAIL and "'jax'" in failed.detail
    assert failed.fix.startswith("pip install -e '.[jax]'")
    no_keras = env_checks.jax_row(jax_facts(0, keras=None), None)
    assert no_keras.result == report.FAIL
    assert "Keras does not import: ModuleNotFoundError" in no_keras.detail
    keras2 = env_checks.jax_row(jax_facts(0, keras="2.15.0"), None)
    assert keras2.result == report.FAIL
    assert keras2.detail.endswith("the jax backend needs Keras 3")


def test_gpus_row_on_jax_compares_jax_with_nvidia_smi():
    h200 = smi(*["NVIDIA H200"] * 8, driver="580.159.04", cap="9.0")
    facts = jax_facts(8)
    row = env_checks.gpus_row(facts, h200, jax_diagnosis.diagnose(
        facts, h200), "nvidia-smi", backend="jax")
    assert row.result == report.PASS
    assert row.detail.startswith("8 x NVIDIA H200 (compute 9.0), driver "
                                 "580.159.04 (nvidia-smi)")
    assert list(row.data["peaks"]) == ["NVIDIA H200"]
    cpu_only = jax_facts(0)
    row = env_checks.gpus_row(cpu_only, h200, jax_diagnosis.diagnose(
        cpu_only, h200), "no GPU", backend="jax")
    assert row.result == report.FAIL
    assert row.detail.startswith("no GPU visible to JAX: nvidia-smi lists 8 "
                                 "GPU(s) but JAX sees none: jaxlib 0.11.2 "
                                 "is CPU-only")
    assert row.fix.startswith("pip install 'jax[cuda13]==0.11.2'")
    diagnosis = jax_diagnosis.diagnose(cpu_only, h200)
    assert env_checks.no_gpu_reason(cpu_only, None, diagnosis, "jax") == \
        f"no GPU visible to JAX: {diagnosis.verdict}"
    assert env_checks.no_gpu_reason(None, "JAX probe failed", diagnosis,
                                    "jax") == \
        "JAX did not start: JAX probe failed"
