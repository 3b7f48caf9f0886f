"""The project's image (Containerfile) run for real in podman, built on the
local Debian base (scripts/container_setup.sh) by support/containers.py: the
CPU smoke of run_single_node.sh inside it, and run_two_node.sh as two
containers on one podman network that find each other by name, as pods do;
their logs land on a mounted volume, where the extractor reads them.
Skips with one line where containers cannot run here."""

import json
import os

import pytest

from support import containers
from support.run_scripts import TINY

pytestmark = pytest.mark.slow

FINISH = "official_bench: run finished"
KNOBS = dict(DEVICE="cpu", STEPS="6", LOG_STEPS="2", PARAMS_OVERRIDE=TINY,
             LOG_DIR="/out/logs", MODEL_DIR="/out/model_dir",
             SLEEP_SECONDS="0", PYTHON_CHECK_TIMEOUT="0", RUN_TIMEOUT="240")
ROOT = os.path.join("logs", "tensorflow", "resnet50", "bz16")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The image, the CPU smoke and the two-container sweep, run once for
    every test here: {"out": volume, "smoke": output, "nodes": [(exit,
    output)] of node 0 and 1, "extract": the extractor's output}."""
    image = containers.test_image()
    out = tmp_path_factory.mktemp("container")
    volume = {str(out): "/out"}
    smoke = containers.run(
        image, ["bash", "run_single_node.sh", "16", "fp32", "1"],
        env=KNOBS, volumes=volume, timeout=300)
    assert smoke.returncode == 0, smoke.stdout[-4000:]
    tag = f"ob{os.getpid()}"
    names = [f"{tag}-w0", f"{tag}-w1"]
    with containers.network(f"{tag}-net", names) as net:
        nodes = ",".join(f"{n}:22301" for n in names)
        procs = [containers.start(
            image, ["bash", "run_two_node.sh", "16", "fp32", "1"],
            name=name, network=net, volumes=volume, env=dict(
                KNOBS, NODES=nodes, TASK_INDEX=str(i), BARRIER_PORT="22302",
                BARRIER_SECRET=f"{tag}-secret", BARRIER_TIMEOUT="120",
                PEER_TIMEOUT="120")) for i, name in enumerate(names)]
        outs = [p.communicate(timeout=400)[0] for p in procs]
        results = [(p.returncode, o) for p, o in zip(procs, outs)]
    extract = containers.run(
        image, ["python", "extract_tensorflow_logs.py", "--log_dir",
                f"/out/{ROOT}", "--warmup_batches", "2", "--train_batches",
                "6", "--output_dir", "/out/result", "--no_plot"],
        volumes=volume, timeout=120)
    return dict(out=out, smoke=smoke.stdout, nodes=results,
                extract=extract)


def test_cpu_smoke_in_the_image(runs):
    """`bash run_single_node.sh 16 fp32` in the image's working directory:
    the run finishes, the launcher prints its img/s, the result record and
    result.json land on the mounted volume."""
    assert "done: 1 of 1 run(s) ok" in runs["smoke"], runs["smoke"][-3000:]
    assert " img/s" in runs["smoke"]
    log = runs["out"] / ROOT / "1n1g" / "rn50_b16_fp32_1.log"
    assert FINISH in log.read_text()
    record = json.loads(log.with_suffix(".json").read_text())
    assert record["stats"]["global_batch_size"] == 16
    assert list((runs["out"] / "model_dir").rglob("result.json"))


def test_two_containers_train_together_by_name(runs):
    """Node 0 and node 1 reach each other by container name on the podman
    network: one multi_worker_mirrored run of two workers."""
    (rc0, out0), (rc1, out1) = runs["nodes"]
    assert (rc0, rc1) == (0, 0), out0[-3000:] + "\n----\n" + out1[-3000:]
    for out in (out0, out1):
        assert "done: 1 of 1 run(s) ok on every node" in out
    root = runs["out"] / ROOT / "2n1g"
    chief = json.loads((root / "rn50_b16_fp32_1.json").read_text())
    worker = json.loads((root / "node1" / "rn50_b16_fp32_1.json")
                        .read_text())
    assert chief["environment"]["num_workers"] == 2
    assert chief["stats"]["global_batch_size"] == 32
    assert (chief["task"]["index"], worker["task"]["index"]) == (0, 1)
    assert chief["history"]["loss"] == worker["history"]["loss"]


def test_extractor_reads_the_volume(runs):
    """The extractor, in the image, on the volume's log tree: a 1n1g and a
    2n1g row, one run each."""
    out = runs["extract"]
    assert out.returncode == 0, out.stdout[-3000:]
    table = json.loads((runs["out"] / "result" / "bz16_result.json")
                       .read_text())["rn50"]
    assert sorted(table) == ["1n1g", "2n1g"]
    assert all(row["num_runs"] == 1 for row in table.values())
    assert "1n1g" in out.stdout and "2n1g" in out.stdout
