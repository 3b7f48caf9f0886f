"""The tensorflow and gpus rows (doctor/env_checks.py), from faked
TensorFlow and nvidia-smi facts."""

from official_bench.doctor import env_checks, report
from official_bench.host import gpu_diagnosis as gd
from support.doctor_facts import CPU_BUILD, CUDA_BUILD, NO_SMI, smi


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
