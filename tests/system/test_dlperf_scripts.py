"""DLPerf's way of running, from our root: ``python3 classifier_trainer.py``
with DLPerf's exact command line, logs under ``../logs``, then our extractor.

The root is a scratch directory holding what DLPerf's README tells its users to
put next to their scripts (``classifier_trainer.py``, here a symbolic link to
ours, and the YAMLs under ``configs/examples/resnet/imagenet/``), so that the
``../output`` and ``../logs`` of DLPerf's scripts land in the test's temporary
directory and not beside the checkout. No GPU here: a test-only ``python3`` on
PATH appends CPU-sized overrides to DLPerf's ``--params_override`` and runs the
venv's Python; the command line itself is DLPerf's, unedited.
"""

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from official_bench import config as C
from official_bench.extract import extractor as extract
from support.helpers import (
    DLPERF_CONFIGS,
    DLPERF_REGEX,
    EXAMPLES,
    REPO,
    TINY_OVERRIDE,
    cli_env,
)

# DLPerf's single_node_train.sh, reduced to what it runs for one case: the
# log layout and the command line (verbatim) of its TensorFlow ResNet-50 v1.5
# scripts (github.com/Oneflow-Inc/DLPerf, TensorFlow/resnet50v1.5/scripts).
DLPERF_STYLE_SCRIPT = r"""
MODEL_DIR=../output
rm -rf $MODEL_DIR
num_gpu=1
BATCH_SIZE=128
DTYPE=fp32
TEST_NUM=1
LOG_FOLDER=../logs/tensorflow/resnet50/bz${BATCH_SIZE}/1n${num_gpu}g
mkdir -p $LOG_FOLDER
LOGFILE=${LOG_FOLDER}/rn50_b${BATCH_SIZE}_${DTYPE}_$TEST_NUM.log
config_file=configs/examples/resnet/imagenet/gpu.yaml
export CUDA_VISIBLE_DEVICES=0
DATA_DIR=/datasets/ImageNet/tfrecord
python3 classifier_trainer.py \
  --mode=train_and_eval \
  --model_type='resnet' \
  --dataset=imagenet \
  --model_dir=$MODEL_DIR \
  --data_dir=$DATA_DIR \
  --config_file=${config_file} \
  --params_override=runtime.num_gpus=$num_gpu  2>&1 | tee ${LOGFILE}
"""

# --model_type='resnet' wins over model.name (flags beat overrides), so the
# smallest ImageNet ResNet, at 16x16 pixels. DLPerf's --data_dir is read (a
# builder that ignores it is refused): gpu.yaml's records builder stays.
CPU_OVERRIDE = ",".join(
    [kv for kv in TINY_OVERRIDE.split(",")
     if not kv.startswith(("model.name=", "model.model_params.depth=",
                           "train_dataset.builder=",
                           "validation_dataset.builder="))]
    + ["model.model_params.depth=18", "train.steps=6",
       "train.time_history.log_steps=2"])


def _python3_wrapper(bin_dir, records):
    """A ``python3`` that appends CPU_OVERRIDE to ``--params_override`` and
    points ``--data_dir`` at `records`, a tiny record set.

    DLPerf's override (runtime.num_gpus=1) stays in place; ours come after it
    in the same flag and so win (num_gpus=0, a tiny model).
    """
    path = os.path.join(bin_dir, "python3")
    with open(path, "w") as f:
        f.write("#!%s\n" % sys.executable)
        f.write("import os, sys\n"
                "extra = %r\n"
                "args = [a + ',' + extra if a.startswith('--params_override=')"
                " else '--data_dir=' + %r if a.startswith('--data_dir=')"
                " else a for a in sys.argv[1:]]\n"
                "os.execv(sys.executable, [sys.executable] + args)\n"
                % (CPU_OVERRIDE, records))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def _dlperf_root(tmp_path):
    """tmp/root as DLPerf's README sets up Model Garden's folder, on our
    code."""
    root = tmp_path / "root"
    yaml_dir = root / "configs" / "examples" / "resnet" / "imagenet"
    yaml_dir.mkdir(parents=True)
    for name in os.listdir(DLPERF_CONFIGS):
        shutil.copy(os.path.join(DLPERF_CONFIGS, name), yaml_dir / name)
    os.symlink(os.path.join(REPO, "classifier_trainer.py"),
               root / "classifier_trainer.py")
    return root


def test_our_root_has_what_dlperf_scripts_reference():
    assert os.path.isfile(os.path.join(REPO, "classifier_trainer.py"))
    for name in ("gpu.yaml", "gpu_fp16.yaml", "two_node_gpu.yaml",
                 "two_node_gpu_fp16.yaml", "multi_node_gpu.yaml",
                 "multi_node_gpu_fp16.yaml"):
        assert os.path.isfile(os.path.join(
            REPO, "configs", "examples", "resnet", "imagenet", name)), name


def test_root_entry_answers_help_from_anywhere(tmp_path):
    p = subprocess.run([sys.executable,
                        os.path.join(REPO, "classifier_trainer.py"),
                        "--help"], cwd=str(tmp_path), env=cli_env(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:]
    assert "--params_override" in p.stdout and "--config_file" in p.stdout


def test_dlperf_command_line_from_our_root(tmp_path):
    root = _dlperf_root(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    from support.records import write_records
    records = write_records(str(tmp_path / "imagenet"), 8)
    _python3_wrapper(str(bin_dir), records)
    (root / "single_node_case.sh").write_text(DLPERF_STYLE_SCRIPT)
    env = cli_env({"PATH": "%s%s%s" % (bin_dir, os.pathsep,
                                       os.environ.get("PATH", ""))})
    p = subprocess.run(["bash", "single_node_case.sh"], cwd=str(root), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:]

    log = tmp_path / "logs/tensorflow/resnet50/bz128/1n1g/rn50_b128_fp32_1.log"
    text = log.read_text()
    lines = [l for l in text.splitlines() if "TimeHistory" in l]
    assert len(lines) == 3 and all(DLPERF_REGEX.search(l) for l in lines)
    assert "official_bench: run finished: 6 steps" in text
    # DLPerf's gpu.yaml and override reached the trainer, ours came after
    params = (tmp_path / "output" / "params.yaml").read_text()
    assert "momentum: 0.875" in params and "num_gpus: 0" in params
    result = json.loads((tmp_path / "output" / "result.json").read_text())
    assert result["stats"]["total_steps"] == 6
    assert result["config"]["train_dataset"]["data_dir"] == records
    assert result["config"]["train_dataset"]["builder"] == "records"
    assert "train_dataset: 1 classic record file(s) for split train" in text

    # and the log tree is what our extractor (and DLPerf's) reads
    extraction = extract.extract(
        str(tmp_path / "logs/tensorflow/resnet50/bz128"),
        warmup_batches=2, train_batches=6)
    entry = extraction.result["rn50"]["1n1g"]
    assert entry["speedup"] == 1.0 and entry["median_speed"] > 0
    assert entry["num_runs"] == 1 and entry["excluded"] == []


@pytest.mark.parametrize("name", sorted(
    n for n in os.listdir(EXAMPLES)
    if n.startswith(("gpu", "two_node", "multi_node"))))
def test_example_yamls_keep_dlperfs_batchnorm_mode(name):
    # cuDNN's batch-norm mode changes GPU speed: ours must be DLPerf's (bf16
    # files, which DLPerf lacks, follow their fp16 twin).
    twin = name.replace("_bf16", "_fp16")
    ours = C.load_config(os.path.join(EXAMPLES, name))
    dlperf = C.load_config(os.path.join(DLPERF_CONFIGS, twin))
    assert ours.runtime.batchnorm_spatial_persistent == \
        dlperf.runtime.batchnorm_spatial_persistent
    if not ours.runtime.batchnorm_spatial_persistent:
        header = open(os.path.join(EXAMPLES, name)).read().split(
            "\nruntime:")[0]
        assert ("True would set TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT=1"
                in header)
