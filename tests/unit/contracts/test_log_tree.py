"""The log tree contract: every name builds and parses back from one
definition, and the launcher's plan writes only names the extractor reads
back (or, for the files it must not count, names it skips)."""

import os

import pytest

from official_bench.contracts import log_tree as L, run_status
from official_bench.extract import allreduce_logs, logparse
from official_bench.launch import plan as plan_lib, settings as settings_lib


@pytest.mark.parametrize("name,expected", [
    ("1n1g", (1, 1)), ("1n8g", (1, 8)), ("10n8g", (10, 8)), ("1n16g", (1, 16)),
    ("128n8g", (128, 8)), ("0n8g", None), ("1n0g", None), ("1n8", None),
    ("n8g", None), ("1n8g_old", None), ("misc", None)])
def test_case_names(name, expected):
    assert L.parse_case_name(name) == expected


@pytest.mark.parametrize("name,expected", [
    ("rn50_b128_fp32_1.log", (128, "fp32", 1)),
    ("rn50_b256_fp16_12.log", (256, "fp16", 12)),
    ("rn50_b64_bf16_0.log", (64, "bf16", 0)),
    ("rn50_b128_fp8_1.log", None), ("rn50_b0_fp32_1.log", None),
    ("rn50_b128_fp32.log", None), ("rn50_b128_fp32_1.json", None),
    ("resnet_b128_fp32_1.log", None), ("rn50_b128_fp32_1.log.local1", None),
    ("xrn50_b128_fp32_1.log", None)])
def test_log_names(name, expected):
    assert L.parse_log_name(name) == expected


def test_layout_matches_the_run_scripts():
    root = L.batch_root("/logs", 256)
    assert root == os.path.join("/logs", "tensorflow", "resnet50", "bz256")
    assert os.path.join(L.case_dir("/logs", 256, L.case_name(10, 8)),
                        L.log_name(256, "fp16", 3)) == \
        os.path.join(root, "10n8g", "rn50_b256_fp16_3.log")
    assert L.case_dir("/logs", 256, "2n8g", 1) == \
        os.path.join(root, "2n8g", "node1")
    with pytest.raises(ValueError, match="'allreduce'"):
        L.log_name(256, "fp16", 3, "nccl")


def test_result_json_and_status_sit_next_to_log():
    assert L.json_path("/x/1n1g/rn50_b128_fp32_2.log") == \
        "/x/1n1g/rn50_b128_fp32_2.json"
    assert L.status_path("/x/1n1g/rn50_b128_fp32_2.log") == \
        "/x/1n1g/rn50_b128_fp32_2.log.status.json"
    assert run_status.status_path is L.status_path


@pytest.mark.parametrize("nodes,gpus,batch,dtype,index", [
    (1, 1, 128, "fp32", 1), (10, 8, 256, "fp16", 12), (2, 16, 1, "bf16", 0)])
def test_names_round_trip(nodes, gpus, batch, dtype, index):
    assert L.parse_case_name(L.case_name(nodes, gpus)) == (nodes, gpus)
    assert L.parse_log_name(L.log_name(batch, dtype, index)) == \
        (batch, dtype, index)
    assert L.parse_allreduce_json_name(
        L.run_stem(batch, dtype, index, "allreduce") + L.JSON_SUFFIX) == \
        (dtype, index)
    assert L.is_run_log(L.log_name(batch, dtype, index), batch, dtype)
    assert not L.is_run_log(L.log_name(batch + 1, dtype, index), batch, dtype)
    assert L.is_run_log(L.log_name(batch, dtype, index, "allreduce"), batch,
                        dtype, "allreduce")
    assert not L.is_run_log(L.log_name(batch, dtype, index), batch, dtype,
                            "allreduce")
    for node in (1, 7):
        assert L.parse_node_dir(os.path.basename(
            L.case_dir("/r", batch, "1n1g", node))) == node
    assert L.case_dir("/r", batch, "1n1g") == os.path.join(
        L.batch_root("/r", batch), "1n1g")
    log = f"/r/x/{L.log_name(batch, dtype, index)}"
    for local in (0, 1, 12):
        assert L.parse_local_path(L.local_path(log, local)) == (log, local)


def test_result_file_names():
    assert L.result_file_name("worker0", True) == "result.json"
    assert L.result_file_name("worker1", False) == "result_worker1.json"
    assert L.process_file_name("rank3", False, "allreduce") == \
        "allreduce_rank3.json"
    assert L.process_file_name("x", True, "allreduce") == "allreduce.json"
    with pytest.raises(ValueError, match="'allreduce'"):
        L.process_file_name("x", True, "nccl")
    assert L.RESULT_FILE.parse("result_chief0.json") == {"tag": "chief0"}


@pytest.mark.parametrize("node,local,attempt", [
    (None, 0, 1), (0, 0, 1), (3, 0, 1), (1, 2, 1), (None, 1, 4), (2, 0, 2)])
def test_model_dir_round_trip(node, local, attempt):
    stamp = L.session_stamp(0)
    md = L.ModelDir("/m", 64, "2n8g", L.run_stem(64, "fp16", 2), stamp,
                    node, local, attempt)
    assert md.path.startswith(os.path.join(
        "/m", "tensorflow", "resnet50", "bz64", "2n8g",
        f"rn50_b64_fp16_2.{stamp}"))
    assert L.parse_model_dir(md.path) == md
    assert L.parse_model_dir(md.restamped("20000101-000000").path).stamp == \
        "20000101-000000"
    assert L.parse_model_dir(md.next_attempt().path).attempt == attempt + 1
    assert L.parse_model_dir("/m/elsewhere/bz64/2n8g/" + md.tag) is None


# -- the launcher's plan and the extractor agree ------------------------------


def _plan(tmp_path, argv, mode="single", **knobs):
    env = {"DEVICE": "cpu", "LOG_DIR": str(tmp_path / "logs"),
           "MODEL_DIR": str(tmp_path / "md"), "PATH": os.environ["PATH"]}
    env.update({k.upper(): str(v) for k, v in knobs.items()})
    settings = settings_lib.parse(argv, environ=env, mode=mode)
    return plan_lib.make_plan(settings, L.session_stamp(0))


def _touch(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").close()


@pytest.mark.parametrize("argv,mode,knobs", [
    (["4", "fp32", "2"], "single", {"cpu_devices": "1,2"}),
    (["8", "fp16", "1"], "single", {"workers_per_node": 2}),
    (["4", "bf16", "2"], "two", {"nodes": "127.0.0.1:23400,127.0.0.1:23500",
                                 "task_index": 0, "cpu_devices": 1}),
])
def test_extractor_reads_back_exactly_the_planned_logs(tmp_path, argv, mode,
                                                      knobs):
    plan = _plan(tmp_path, argv, mode, **knobs)
    batch, dtype = plan.batch, plan.dtype
    for run in plan.runs:
        for w in run.workers:
            for path in (w.log_path, w.json_path, L.status_path(w.log_path)):
                _touch(path)
            assert L.parse_model_dir(w.model_dir) == w.model_dir_spec
            assert f"--model_dir={w.model_dir}" in w.command
    found, skipped = logparse.find_logs(plan.log_root)
    assert skipped == []  # .local1 logs and status records are not *.log
    expected = sorted((r.case, r.index) for r in plan.runs)
    assert sorted((rid.case, rid.index) for rid, _ in found) == expected
    by_case = {(r.case, r.index): r for r in plan.runs}
    for rid, path in found:
        run = by_case[(rid.case, rid.index)]
        assert path == run.log_path
        assert (rid.batch_size, rid.dtype) == (batch, dtype)
        assert (rid.num_nodes, rid.gpus_per_node) == \
            L.parse_case_name(run.case)
        assert L.json_path(path) == run.workers[0].json_path


def test_node_k_logs_sit_where_the_extractor_does_not_look(tmp_path):
    plan = _plan(tmp_path, ["4", "fp32", "1"], "two",
                 nodes="127.0.0.1:23400,127.0.0.1:23500", task_index=1,
                 cpu_devices=1)
    (run,) = plan.runs
    assert os.path.basename(os.path.dirname(run.log_path)) == "node1"
    assert run.workers[0].model_dir_spec.node == 1
    assert run.workers[0].result_name == "result_worker1.json"
    _touch(run.log_path)
    assert logparse.find_logs(plan.log_root) == ([], [])


def test_allreduce_bench_results_are_found_by_the_bandwidth_table(tmp_path):
    plan = _plan(tmp_path, ["4", "fp32", "2"], "single", bench="allreduce",
                 cpu_devices=1)
    for run in plan.runs:
        assert run.workers[0].result_name == "allreduce.json"
        _touch(run.workers[0].json_path)
        _touch(run.log_path)
    assert sorted(allreduce_logs.find(plan.log_root)) == sorted(
        (r.case, r.workers[0].json_path) for r in plan.runs)
    assert logparse.find_logs(plan.log_root)[0] == []


def test_restamp_and_fresh_attempt_move_model_dir_and_command(tmp_path):
    """model_dir is decided by log_tree.ModelDir: node 0's stamp and the
    launcher's next free attempt change the decision, and the command line
    follows it (nothing edits an argv)."""
    from official_bench.launch import one_run
    plan = _plan(tmp_path, ["8", "fp16", "1"], "single", workers_per_node=2)
    plan.restamp("20300101-000000")
    (run,) = plan.runs
    for w in run.workers:
        assert w.model_dir_spec.stamp == "20300101-000000"
        assert f"--model_dir={w.model_dir}" in w.command
    taken = run.workers[1].model_dir
    os.makedirs(taken)
    fresh = one_run.prepare(run.workers[1])
    assert fresh.model_dir == taken + "-2" and os.path.isdir(fresh.model_dir)
    assert f"--model_dir={taken}-2" in fresh.command
    assert f"--model_dir={taken}" not in fresh.command
    assert run.workers[1].model_dir == taken  # the plan keeps its decision


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_model_dir_round_trip_per_backend(backend):
    """runtime.backend names the trees' first directory; a model_dir reads
    back with its backend, and a directory no backend names is not one."""
    assert L.batch_root("/logs", 8, backend) == os.path.join(
        "/logs", backend, "resnet50", "bz8")
    md = L.ModelDir("/m", 8, "2n1g", L.run_stem(8, "bf16", 1),
                    L.session_stamp(0), node=1, backend=backend)
    assert md.path.startswith(os.path.join("/m", backend, "resnet50", "bz8",
                                           "2n1g", ""))
    back = L.parse_model_dir(md.path)
    assert back == md and back.backend == backend
    assert L.parse_model_dir(md.path.replace(f"/{backend}/", "/pytorch/")) \
        is None


def test_jax_plan_logs_are_read_back_under_jax(tmp_path):
    """BACKEND=jax: the plan's logs and model_dirs lie under jax/, where
    the extractor finds the logs and parse_model_dir the backend."""
    plan = _plan(tmp_path, ["4", "fp32", "1"], "two",
                 nodes="127.0.0.1:23400,127.0.0.1:23500", task_index=0,
                 cpu_devices=1, backend="jax")
    assert plan.log_root == L.batch_root(str(tmp_path / "logs"), 4, "jax")
    (run,) = plan.runs
    (w,) = run.workers
    assert L.parse_model_dir(w.model_dir).backend == "jax"
    assert w.model_dir_spec.backend == "jax"
    _touch(run.log_path)
    (found,) = logparse.find_logs(plan.log_root)[0]
    assert found[1] == run.log_path
