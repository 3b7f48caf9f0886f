"""launch/one_run.py: one run on this node, from a fresh model directory to
its outcome, with a stand-in trainer (real processes): the log with the
launcher's header and closing line, the status record (written with
keywords, read back as the extractor reads it), the result copied beside
the log, the next attempt of a model_dir that exists, a peer's failure,
local workers, and a log that cannot be written."""

import json
import os

from official_bench.contracts import exit_status as es, run_status
from official_bench.launch import one_run
from official_bench.launch.outcome import Status
from official_bench.measure import host_env
from support.small_disk import PAGE, leave_free, small_tmpfs


def _record(worker):
    record, warning = run_status.load_status(worker.log_path)
    assert warning is None and record is not None
    return record


def test_ok_run_leaves_log_status_record_and_result_copy(plan_of):
    plan = plan_of("ok")
    run = plan.runs[0]
    this = one_run.OneRun(plan, run)
    o = this.execute()
    assert (o.status, o.rc, o.reason) == (Status.OK, 0, "")
    assert this.trainer_started and this.rate is not None  # node 0 follows
    w = run.workers[0]
    log = open(w.log_path, encoding="utf-8").read().splitlines()
    assert log[0].startswith("# official_bench.launch: run_single_node.sh "
                             "1n1g run 1, node 0 of 1 on ")
    assert log[1].startswith("# command: ") and w.model_dir in log[1]
    assert log[2] == f"# official_bench: {host_env.suite()}"
    assert log[3] == one_run.CONFIG_LINE + one_run.config_digest(w.command)
    assert "stand-in trainer ok" in log
    assert log[-1] == "# official_bench.launch: 1n1g run 1 ok (exit 0)"
    record = _record(w)
    assert (record["status"], record["exit"], record["signal"],
            record["reason"], record["node"], record["worker"]) == \
        ("ok", 0, None, "", 0, "")
    assert record["host"] == one_run.hostname()
    assert record["started"] <= record["ended"]
    assert run_status.exclusion(record) is None
    assert json.load(open(w.json_path)) == {"ok": 1}


def test_failed_run_says_why_in_log_and_record_and_copies_nothing(plan_of):
    plan = plan_of("fail")
    run = plan.runs[0]
    o = one_run.OneRun(plan, run).execute()
    assert (o.status, o.rc) == (Status.FAILED, es.FAILED)
    assert o.reason == "error: stand-in trainer failed"
    w = run.workers[0]
    assert open(w.log_path).read().splitlines()[-1] == (
        "# official_bench.launch: 1n1g run 1 failed (exit 1; error: "
        "stand-in trainer failed)")
    record = _record(w)
    assert (record["status"], record["exit"], record["reason"]) == \
        ("failed", es.FAILED, "error: stand-in trainer failed")
    assert run_status.exclusion(record).startswith(
        "the launcher saw this run failed (exit 1)")
    assert not os.path.exists(w.json_path)


def test_an_existing_model_dir_gets_the_next_attempt(plan_of):
    plan = plan_of("ok")
    run = plan.runs[0]
    planned = run.workers[0].model_dir_spec
    os.makedirs(planned.path)
    assert one_run.OneRun(plan, run).execute().ok
    assert os.listdir(planned.path) == []  # never written into
    second = planned.next_attempt().path
    assert os.path.isfile(os.path.join(second, "result.json"))
    assert f"--model_dir={second}" in open(run.log_path).read()


def test_a_peer_failure_stops_the_trainer_as_aborted(plan_of):
    plan = plan_of("sleep")
    run = plan.runs[0]
    asked = []

    def peer_failure():
        asked.append(1)
        return "stopped because node 1 failed this run (exit 1)"
    o = one_run.OneRun(plan, run, peer_failure).execute()
    assert asked
    assert o.status is Status.ABORTED and o.rc == es.TERMINATED
    assert o.reason == "stopped because node 1 failed this run (exit 1)"
    assert _record(run.workers[0])["status"] == "aborted"


def test_local_workers_each_get_a_record_the_first_failure_speaks(plan_of):
    plan = plan_of("task1_fails", workers_per_node=2, cpu_devices=2)
    run = plan.runs[0]
    o = one_run.OneRun(plan, run).execute()
    assert (o.status, o.rc) == (Status.FAILED, es.FAILED)
    assert o.reason == "local worker 1 (task 1): error: task 1 failed"
    first, second = (_record(w) for w in run.workers)
    assert (second["status"], second["worker"]) == \
        ("failed", "local worker 1 (task 1)")
    assert (first["status"], first["worker"]) == \
        ("aborted", "local worker 0 (task 0)")
    assert first["reason"] == ("stopped because local worker 1 (task 1) of "
                               "this node failed (exit 1)")


def test_a_jax_abort_is_named_alike_in_the_run_and_its_siblings(plan_of):
    """Worker 1 aborted by JAX (exit 134) for its lost coordinator: the
    run's exit 4 (outcome.judge) and worker 0's reason say the same."""
    plan = plan_of("task1_jax_aborts", workers_per_node=2, cpu_devices=2)
    run = plan.runs[0]
    o = one_run.OneRun(plan, run).execute()
    assert (o.status, o.rc) == (Status.FAILED, es.PEER_LOST)
    assert o.reason.endswith("(JAX aborted it: SIGABRT, exit 134)"), o.reason
    first = _record(run.workers[0])
    assert first["status"] == "aborted"
    assert first["reason"] == (
        "stopped because local worker 1 (task 1) of this node failed "
        f"({es.describe(es.PEER_LOST)}; JAX aborted it: SIGABRT, exit 134)")


def test_a_log_that_cannot_be_written_fails_the_run_and_stops_the_sweep(
        tmp_path, plan_of):
    logs = tmp_path / "logs"
    with small_tmpfs(logs, 16 * PAGE):
        leave_free(str(logs), 0)
        plan = plan_of("ok")
        run = plan.runs[0]
        this = one_run.OneRun(plan, run)
        o = this.execute()
        assert o.status is Status.FAILED and o.rc is None and o.cannot_write
        assert "no space left on the device" in o.reason
        assert not this.trainer_started
        assert not os.path.exists(run.log_path)  # nothing half-written
