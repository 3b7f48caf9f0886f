"""A Slurm job without GPUs on a GPU node: Slurm may set
CUDA_VISIBLE_DEVICES=NoDevFiles, which CUDA reads as no device (it stops at
the first entry it does not take). The launcher counted it as one GPU and
planned a GPU run that could not see one."""

import pytest

from official_bench.host import gpus
from support.launch_cli import fake_smi, hide_gpus, script


@pytest.fixture(autouse=True)
def no_gpu_here(tmp_path_factory, monkeypatch):
    hide_gpus(tmp_path_factory.mktemp("no_gpu"), monkeypatch)


@pytest.mark.parametrize("text,ids", [
    ("NoDevFiles", []), ("-1", []), ("0,1,-1,3", ["0", "1"]),
    ("2,NoDevFiles", ["2"]), ("GPU-a,MIG-b,3", ["GPU-a", "MIG-b", "3"]),
    ("0,,1,", ["0", "1"])])
def test_visible_ids_stop_where_cuda_stops(text, ids):
    assert gpus.visible_ids(text) == ids
    assert gpus.visible_count(text) == len(ids)


def test_gpu_ids_skip_what_cuda_does_not_see():
    assert gpus.gpu_ids("4,5,-1,7", 2) == ["4", "5"]


def test_no_dev_files_plans_a_cpu_run(tmp_path):
    path = fake_smi(tmp_path, 8)
    out = script("single", tmp_path, "4", "fp32", "1", "--dry-run",
                 PATH=path, CUDA_VISIBLE_DEVICES="NoDevFiles",
                 SLURM_JOB_ID="7", SLURM_JOB_NODELIST="node01")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "devices: cpu (nvidia-smi -L lists 8; CUDA_VISIBLE_DEVICES=" \
        "'NoDevFiles')" in out.stdout
    assert "1n1g" in out.stdout and '"num_gpus": 0' in out.stdout


def test_an_index_past_the_last_gpu_plans_a_cpu_run(tmp_path):
    # CUDA stops at "9" on an 8-GPU machine: no GPU, as with NoDevFiles.
    out = script("single", tmp_path, "4", "fp32", "1", "--dry-run",
                 PATH=fake_smi(tmp_path, 8), CUDA_VISIBLE_DEVICES="9")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "devices: cpu (nvidia-smi -L lists 8; CUDA_VISIBLE_DEVICES=" \
        "'9')" in out.stdout
