"""host/cuda_noise.py: on a machine without GPUs, TensorFlow's CUDA
start-up lines are dropped from fd 2 while it loads, every other line
passing through; a GPU machine is never filtered. The trainer's CPU run
(tests/unit/test_classifier_trainer.py) checks the whole: no cuInit line,
our "no GPU" line once."""

import os
import subprocess
import sys

from official_bench.host import cuda_noise
from support.helpers import REPO, child_env


def test_no_gpu_reason_only_without_device_nodes_and_nvidia_smi(
        tmp_path, monkeypatch):
    dev, bin_dir = tmp_path / "dev", tmp_path / "bin"
    dev.mkdir()
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    reason = cuda_noise.no_gpu_reason(str(dev))
    assert reason == (f"no GPU on this machine (no {dev}/nvidia* device, no "
                      "nvidia-smi): TensorFlow runs on the CPU")
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n")
    smi.chmod(0o755)
    assert cuda_noise.no_gpu_reason(str(dev)) is None
    smi.unlink()
    (dev / "nvidia0").write_text("")
    assert cuda_noise.no_gpu_reason(str(dev)) is None


# C++ writes straight to fd 2, Python through sys.stderr: both are
# filtered inside the block, and nothing after it.
FILTERED = """
import os, sys
from official_bench.host import cuda_noise
os.write(2, b"before\\n")
with cuda_noise.dropping_lines():
    os.write(2, b"I0000 cudart_stub.cc:31] Could not find cuda drivers on "
                b"your machine, GPU will not be used.\\nkept 1\\n")
    print("kept 2 (python)", file=sys.stderr)
    os.write(2, b"E0000 cuda_platform.cc:52] failed call to cuInit: "
                b"UNKNOWN ERROR (303)\\nkept 3, no newline")
os.write(2, b"\\nafter: failed call to cuInit (not filtered)\\n")
"""


def test_dropping_lines_filters_fd_2_inside_the_block_only():
    p = subprocess.run([sys.executable, "-c", FILTERED], cwd=REPO,
                       env=child_env(), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines() == [
        "before", "kept 1", "kept 2 (python)", "kept 3, no newline",
        "after: failed call to cuInit (not filtered)"]


def test_fd_2_is_restored_after_the_block():
    before = os.fstat(2)
    with cuda_noise.dropping_lines():
        assert os.fstat(2).st_ino != before.st_ino  # the pipe
    after = os.fstat(2)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
