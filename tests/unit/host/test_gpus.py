"""host/gpus.py: the one nvidia-smi runner (played by a fake nvidia-smi
script on PATH), the one CUDA_VISIBLE_DEVICES reader, and the one split of
GPU ids among workers."""

import os
import subprocess
import sys
import textwrap

import pytest

from official_bench.host import gpu_diagnosis, gpus, probes


def fake_smi(folder, body):
    """An executable `nvidia-smi` in `folder` running Python `body` (its
    arguments in sys.argv)."""
    folder.mkdir(exist_ok=True)
    path = folder / "nvidia-smi"
    path.write_text(f"#!{sys.executable}\nimport sys, time\n"
                    + textwrap.dedent(body))
    path.chmod(0o755)
    return str(path)


ANSWERS = """
    args = sys.argv[1:]
    if args == ["-L"]:
        print("GPU 0: A100 (UUID: GPU-a)")
        print("GPU 1: A100 (UUID: GPU-b)")
    elif args[0].startswith("--query-gpu=index,name"):
        print("0, A100-SXM4-40GB, 535.104.05, 8.0")
        print("1, A100-SXM4-40GB, 535.104.05, 8.0")
    elif args[0].startswith("--query-gpu=index,utilization"):
        print("0, 97, 1234")
    else:
        print("unknown query", file=sys.stderr)
        sys.exit(6)
"""


@pytest.fixture
def smi_on_path(tmp_path, monkeypatch):
    fake_smi(tmp_path / "bin", ANSWERS)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}"
                       + os.environ.get("PATH", ""))


def test_runs_nvidia_smi_from_path_and_returns_its_output(smi_on_path):
    out = gpus.run_nvidia_smi(["-L"], 30)
    assert out.error is None and out.returncode == 0
    assert out.stdout.splitlines() == ["GPU 0: A100 (UUID: GPU-a)",
                                       "GPU 1: A100 (UUID: GPU-b)"]
    failed = gpus.run_nvidia_smi(["--bogus"], 30)
    assert failed.returncode == 6 and "unknown query" in failed.stderr


def test_the_callers_read_the_same_fake(smi_on_path):
    facts = gpu_diagnosis.probe_nvidia_smi()
    assert facts.ok and [g.index for g in facts.gpus] == [0, 1]
    assert facts.driver_version == "535.104.05"
    sample = probes.SmiReader()()
    assert sample == [probes.GpuSample(0, 97.0, 1234.0)]


def test_a_hung_nvidia_smi_is_a_timeout_not_a_hang(tmp_path):
    smi = fake_smi(tmp_path, "time.sleep(30)\n")
    out = gpus.run_nvidia_smi(["-L"], 0.5, program=smi)
    assert out.returncode is None
    assert isinstance(out.error, subprocess.TimeoutExpired)
    # The diagnosis words it; the sampler's reader raises it to be recorded.
    facts = gpu_diagnosis.probe_nvidia_smi(
        timeout=0.5, which=lambda name: smi,
        run=lambda cmd, **kw: subprocess.run([smi] + cmd[1:], **kw))
    assert facts.error == "nvidia-smi did not answer within 0.5 s"


def test_an_nvidia_smi_that_cannot_start_is_an_error(tmp_path):
    out = gpus.run_nvidia_smi(["-L"], 5, program=str(tmp_path / "none"))
    assert out.returncode is None and isinstance(out.error, OSError)
    with pytest.raises(OSError):
        probes.SmiReader(lambda cmd, **kw: subprocess.run(
            [str(tmp_path / "none")], **kw))()


def test_cuda_visible_devices_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpus.cuda_visible_devices() is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpus.cuda_visible_devices() == ""  # set, hiding every GPU
    assert gpus.cuda_visible_devices({"CUDA_VISIBLE_DEVICES": "2,3"}) == "2,3"
    assert gpus.cuda_visible_devices({}) is None


@pytest.mark.parametrize("text,count", [
    ("", 0), (" ", 0), ("-1", 0), ("0", 1), ("0, 2,3", 3), ("0,,1,", 2),
    ("GPU-a,GPU-b", 2)])
def test_visible_count(text, count):
    assert gpus.visible_count(text) == count


def test_split_gpus_and_visible_ids():
    assert gpus.split_ids(["0", "1", "2"], 2) == [["0"], ["1"]]  # equal
    assert gpus.split_ids(["0", "1", "2", "3"], 4) == [["0"], ["1"], ["2"],
                                                       ["3"]]
    with pytest.raises(ValueError, match="2 workers need at least 2 GPUs"):
        gpus.split_ids(["0"], 2)
    # CUDA_VISIBLE_DEVICES=2,3: the process's GPU 0 and 1 are physical 2, 3.
    assert gpus.gpu_ids("2,3", 2) == ["2", "3"]
    assert gpus.gpu_ids(" 2, 3 ,4", 2) == ["2", "3"]
    assert gpus.gpu_ids(None, 3) == ["0", "1", "2"]
    assert gpus.gpu_ids("5", 2) == ["0", "1"]  # too few: TensorFlow's order
    ids = gpus.gpu_ids("4,5,6,7", 4)
    assert gpus.split_ids(ids, 2) == [["4", "5"], ["6", "7"]]


@pytest.mark.parametrize("text,n_gpus,hidden", [
    (None, 2, False), ("", 2, True), ("-1", 2, True),
    ("NoDevFiles", None, True), ("none", 2, True), ("7", 2, True),
    ("7", None, False), ("0,7", 2, False), (",0", 2, False),
    ("GPU-a", 2, False)])
def test_hides_all_is_the_one_rule(text, n_gpus, hidden):
    # The GPU and JAX diagnoses ask this; an entry CUDA does not take
    # ("none") ends the list, as an index past the last GPU does.
    assert gpus.hides_all(text, n_gpus) is hidden
    if text is not None:
        assert (gpus.visible_count(text, n_gpus) == 0) is hidden
