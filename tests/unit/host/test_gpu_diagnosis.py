"""Why TensorFlow sees no GPU (host/gpu_diagnosis.py), from faked device
lists and faked nvidia-smi output, and the nvidia-smi probe behind it."""

import subprocess

import pytest

from official_bench.host import gpu_diagnosis as gd
from support.doctor_facts import CPU_BUILD, CUDA_BUILD, NO_SMI, smi


def test_diagnosis_gpus_visible_is_ok():
    d = gd.diagnose(CUDA_BUILD, ["/physical_device:GPU:0"], smi("A100"))
    assert d.ok and d.fix is None
    assert d.verdict == "TensorFlow sees 1 GPU(s)"
    verdict, fix = d  # unpacks as a pair
    assert fix is None


def test_diagnosis_no_driver():
    verdict, fix = gd.diagnose(CUDA_BUILD, [], NO_SMI, tf_version="2.21.0")
    assert "nvidia-smi is not on PATH" in verdict
    assert "install the NVIDIA driver" in fix
    assert "tensorflow[and-cuda]" not in fix  # the wheel is fine


def test_diagnosis_cpu_only_build_with_gpus():
    verdict, fix = gd.diagnose(CPU_BUILD, [], smi("V100"),
                               tf_version="2.21.0")
    assert "CPU-only build" in verdict
    assert fix.startswith("pip install 'tensorflow[and-cuda]==2.21.0'")


def test_diagnosis_cpu_build_and_no_driver_lists_both_fixes():
    verdict, fix = gd.diagnose(CPU_BUILD, [], NO_SMI, tf_version="2.21.0")
    assert "nvidia-smi" in verdict and "CPU-only" in verdict
    assert fix.startswith("(1) install the NVIDIA driver")
    assert "(2) pip install 'tensorflow[and-cuda]==2.21.0'" in fix


def test_diagnosis_cuda_libraries_missing():
    verdict, fix = gd.diagnose(CUDA_BUILD, [], smi("V100", "V100"),
                               tf_version="2.21.0")
    assert "nvidia-smi lists 2 GPU(s) (driver 550.54.15)" in verdict
    assert "CUDA 12.5.1 / cuDNN 9 libraries" in verdict
    assert "tensorflow[and-cuda]==2.21.0" in fix


def test_diagnosis_driver_too_old_for_cuda_12():
    verdict, fix = gd.diagnose(CUDA_BUILD, [], smi("V100", driver="470.82.01"))
    assert "driver 470.82.01 is too old for CUDA 12.5.1" in verdict
    assert "525.60.13" in fix
    # 525.60.13 itself is new enough: then the libraries are blamed.
    verdict, _ = gd.diagnose(CUDA_BUILD, [], smi("V100", driver="525.60.13"))
    assert "libraries" in verdict


def test_diagnosis_compute_capability_too_low():
    verdict, fix = gd.diagnose(CUDA_BUILD, [], smi("K80", cap="3.7"))
    assert "compute capability 3.7" in verdict and "(6.0)" in verdict
    assert "supported compute capability" in fix


@pytest.mark.parametrize("cvd", ["", "-1", "7", "none", "5,0"])
def test_diagnosis_cuda_visible_devices_hides_all(cvd):
    verdict, fix = gd.diagnose(CUDA_BUILD, [], smi("A100", "A100"),
                               cuda_visible=cvd)
    assert f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU" in verdict
    assert "unset CUDA_VISIBLE_DEVICES" in fix


def test_diagnosis_blank_first_entry_hides_nothing():
    # host/gpus.py's rule: blanks are dropped, so ",1" shows GPU 1.
    verdict, _ = gd.diagnose(CUDA_BUILD, [], smi("A100", "A100"),
                             cuda_visible=",1")
    assert "hides" not in verdict


def test_diagnosis_smi_fails():
    facts = gd.SmiFacts(found=True, ok=False, error="NVIDIA-SMI has failed "
                        "because it couldn't communicate with the NVIDIA "
                        "driver.")
    verdict, fix = gd.diagnose(CUDA_BUILD, [], facts)
    assert verdict.startswith("nvidia-smi fails: NVIDIA-SMI has failed")
    assert "reinstall the driver" in fix


def test_diagnosis_fewer_gpus_than_smi():
    d = gd.diagnose(CUDA_BUILD, ["GPU:0"], smi("A", "B"))
    assert "but nvidia-smi lists 2" in d.verdict and not d.ok
    # A deliberate CUDA_VISIBLE_DEVICES=0 is not a problem.
    assert gd.diagnose(CUDA_BUILD, ["GPU:0"], smi("A", "B"),
                       cuda_visible="0").ok


def _fake_run(outputs):
    """A subprocess.run stand-in that plays nvidia-smi's answers in order."""
    calls = []

    def run(cmd, **kwargs):
        calls.append(cmd)
        rc, out = outputs[len(calls) - 1]
        return subprocess.CompletedProcess(cmd, rc, out, "")
    return run, calls


def test_probe_nvidia_smi_parses_and_falls_back_for_old_drivers():
    run, calls = _fake_run([
        (2, 'Field "compute_cap" is not a valid field to query.\n'),
        (0, "0, Tesla V100-SXM2-16GB, 470.82.01\n"
            "1, Tesla V100-SXM2-16GB, 470.82.01\n")])
    facts = gd.probe_nvidia_smi(run=run, which=lambda name: "/usr/bin/x")
    assert facts.ok and len(facts.gpus) == 2
    assert facts.gpus[1] == gd.SmiGpu(1, "Tesla V100-SXM2-16GB", "470.82.01")
    assert facts.driver_version == "470.82.01"
    assert "compute_cap" in calls[0][1] and "compute_cap" not in calls[1][1]


def test_probe_nvidia_smi_absent_and_failing():
    assert gd.probe_nvidia_smi(which=lambda n: None) == gd.SmiFacts(False)
    run, _ = _fake_run([(9, "NVIDIA-SMI has failed\nmore\n")] * 2)
    facts = gd.probe_nvidia_smi(run=run, which=lambda n: "/x")
    assert facts.found and not facts.ok
    assert facts.error == "NVIDIA-SMI has failed"


def test_parse_smi_rejects_unknown_format():
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        gd.parse_smi_gpus("GPU 0: Tesla V100 (UUID: GPU-123)\n")
    assert gd.parse_smi_gpus("0, A100, 535.1, 8.0\n")[0].compute_cap == "8.0"
