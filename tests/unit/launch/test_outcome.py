"""launch/outcome.py, the one home of every rule of how a run went: a
trainer process judged (real stand-in processes), a node's processes, the
nodes of one run, a peer's failure mid-run, the sweep's exit status, and
the outcome as the barrier carries it."""

import json
from types import SimpleNamespace

import pytest

from official_bench.contracts import exit_status as es
from official_bench.launch import outcome
from official_bench.launch.outcome import (
    Next,
    Outcome,
    RunVerdict,
    Status,
)
from official_bench.launch.trainer_process import TrainerProcess, wait_all


def _ended(plan, worker, stop_because=None):
    """Runs `worker`'s stand-in to its end (stopping it first when
    `stop_because` is given) and returns its TrainerProcess."""
    with open(worker.log_path, "w", encoding="utf-8") as log:
        proc = TrainerProcess(worker, plan, log)
        if stop_because:
            proc.stop(stop_because, grace=1.0)
        wait_all([proc], [worker.label], plan.settings.kill_after)
    return proc


def _worker(plan, tmp_path):
    (tmp_path / "logs").mkdir(exist_ok=True)
    w = plan.runs[0].workers[0]
    w.log_path = str(tmp_path / "logs" / "run.log")
    return w


def test_ok_is_exit_0_with_the_result_file(plan_of, tmp_path):
    plan = plan_of("ok")
    w = _worker(plan, tmp_path)
    o = outcome.judge(w, _ended(plan, w), plan.settings)
    assert (o.status, o.rc, o.reason, o.ok) == (Status.OK, 0, "", True)
    assert o.log == w.log_path


def test_exit_0_without_the_result_file_fails(plan_of, tmp_path):
    plan = plan_of("no_result")
    w = _worker(plan, tmp_path)
    o = outcome.judge(w, _ended(plan, w), plan.settings)
    assert o.status is Status.FAILED and o.rc == 0 and not o.ok
    assert o.reason == f"the trainer wrote no {outcome.result_path(w)}"


def test_nonzero_exit_fails_with_the_logs_error_line(plan_of, tmp_path):
    plan = plan_of("fail")
    w = _worker(plan, tmp_path)
    o = outcome.judge(w, _ended(plan, w), plan.settings)
    assert (o.status, o.rc) == (Status.FAILED, es.FAILED)
    assert o.reason == "error: stand-in trainer failed"


def test_stopped_by_the_launcher_is_aborted_with_why(plan_of, tmp_path):
    plan = plan_of("sleep")
    w = _worker(plan, tmp_path)
    o = outcome.judge(w, _ended(plan, w, "a peer failed"), plan.settings)
    assert (o.status, o.reason) == (Status.ABORTED, "a peer failed")
    assert o.rc == es.TERMINATED


def test_past_run_timeout_fails_naming_the_limit(plan_of, tmp_path):
    plan = plan_of("sleep", run_timeout=1)
    w = _worker(plan, tmp_path)
    o = outcome.judge(w, _ended(plan, w), plan.settings)
    assert (o.status, o.rc) == (Status.FAILED, es.TIMEOUT)
    assert o.reason == "still running after RUN_TIMEOUT=1 s: sent SIGTERM"


def test_node_outcome_names_the_process_that_failed_first(plan_of, tmp_path):
    plan = plan_of("task1_fails", workers_per_node=2, cpu_devices=2)
    run = plan.runs[0]
    (tmp_path / "logs").mkdir()
    logs = [open(tmp_path / "logs" / f"w{i}.log", "w") for i in range(2)]
    procs = [TrainerProcess(w, plan, log) for w, log in zip(run.workers,
                                                            logs)]
    wait_all(procs, [w.label for w in run.workers], 2.0)
    for log in logs:
        log.close()
    for w, log in zip(run.workers, logs):
        w.log_path = log.name
    judged = [outcome.judge(w, p, plan.settings)
              for w, p in zip(run.workers, procs)]
    assert [o.status for o in judged] == [Status.ABORTED, Status.FAILED]
    node = outcome.node_outcome(judged, run.workers, procs)
    assert node.status is Status.FAILED and node.rc == es.FAILED
    assert node.reason == "local worker 1 (task 1): error: task 1 failed"
    # Only aborted processes: the first aborted one speaks, named.
    aborted = [Outcome(143, Status.ABORTED, "", "a.log"),
               Outcome(143, Status.ABORTED, "why", "b.log")]
    assert outcome.node_outcome(aborted, run.workers, procs).reason == \
        "local worker 0 (task 0)"
    ok = [Outcome(0, Status.OK, "", "a.log")] * 2
    assert outcome.node_outcome(ok, run.workers, procs) == ok[0]


def test_outcome_crosses_the_barrier_as_json_and_back():
    for o in (Outcome(0, Status.OK, "", "x.log"),
              Outcome(3, Status.FAILED, "error: x", "y.log"),
              outcome.could_not_write("no space", "z.log"),
              Outcome.kept("k.log")):
        payload = json.loads(json.dumps(o.as_payload()))
        assert Outcome.from_payload(payload) == o
    assert outcome.could_not_write("x", "l").as_payload()["stop"] == \
        outcome.STOP_NOT_WRITABLE
    odd = Outcome.from_payload({"status": "weird", "rc": 0, "log": "l"})
    assert odd.status is Status.FAILED and "'weird'" in odd.reason


def test_run_verdict_and_what_the_sweep_does_next():
    ok, failed = Outcome(0, Status.OK, "", "l"), \
        Outcome(1, Status.FAILED, "boom", "l")
    full = outcome.could_not_write("no space", "l")
    assert RunVerdict({0: ok, 1: ok}).ok
    assert RunVerdict({0: ok, 1: ok}).next_step("stop") is Next.GO_ON
    assert not RunVerdict({0: ok, 1: failed}).ok
    assert RunVerdict({0: ok, 1: failed}).next_step("continue") is \
        Next.GO_ON
    assert RunVerdict({0: ok, 1: failed}).next_step("stop") is \
        Next.STOP_ON_FAILURE
    v = RunVerdict({0: ok, 1: full})
    assert v.cannot_write == [1]
    assert v.next_step("continue") is Next.STOP_NOT_WRITABLE
    assert RunVerdict.from_payloads(
        {"0": ok.as_payload(), "1": full.as_payload()}) == v


def test_sweep_status_on_each_node():
    ok, failed = Outcome(0, Status.OK, "", "l"), \
        Outcome(1, Status.FAILED, "boom", "l")
    full = outcome.could_not_write("no space", "l")
    assert outcome.sweep_status([], 0) == es.OK
    assert outcome.sweep_status([RunVerdict({0: ok})] * 2, 0) == es.OK
    assert outcome.sweep_status([RunVerdict({0: ok, 1: failed}),
                                 RunVerdict({0: ok, 1: ok})], 0) == es.FAILED
    stopped = [RunVerdict({0: ok, 1: ok}), RunVerdict({0: ok, 1: full})]
    assert outcome.sweep_status(stopped, 1) == es.NOT_WRITABLE
    assert outcome.sweep_status(stopped, 0) == es.FAILED


def test_peer_failure_names_another_node_that_ended_not_ok():
    name = "node {}".format
    ok = Outcome(0, Status.OK, "", "l").as_payload()
    failed = Outcome(es.PEER_LOST, Status.FAILED, "x", "l").as_payload()
    assert outcome.peer_failure(None, 0, name) is None
    assert outcome.peer_failure({0: failed, 1: ok, 2: None}, 0, name) is None
    assert outcome.peer_failure({0: ok, 2: failed}, 0, name) == (
        "stopped because node 2 failed this run "
        f"({es.describe(es.PEER_LOST)})")


@pytest.mark.parametrize("lines, reason", [
    (["TimeHistory: 1.2 seconds, 300.00 examples/second between steps 0 "
      "and 20"], "no error line; the last logged interval ended at step 20"),
    (["Traceback (most recent call last):", "ValueError: bad",
      "# official_bench.launch: footer"], "ValueError: bad"),
    (["just a line", "# comment"], "just a line"),
    # horovodrun's traceback after a rank's own line: the rank's wins
    (["[1,0]<stderr>:error: official_bench: loss is nan at step 4 of 20",
      "Traceback (most recent call last):",
      "RuntimeError: Horovod detected that one or more processes exited "
      "with non-zero status"],
     "error: official_bench: loss is nan at step 4 of 20"),
])
def test_the_reason_read_from_a_log_never_reads_as_a_measurement(
        tmp_path, lines, reason):
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    assert outcome.last_error_line(str(log)) == reason
    assert outcome.last_error_line(str(tmp_path / "missing.log")) == ""


def test_the_trainers_error_line_survives_a_long_traceback_after_it(
        tmp_path):
    # Another rank's 300-line traceback pushed the rank's own line out of
    # the last 200 lines read, and a long line lost its end (the fix).
    line = ("error: official_bench: " + "x" * 1200
            + " (fix: set runtime.num_gpus=1)")
    log = tmp_path / "run.log"
    log.write_text("\n".join(
        ["step 1", f"[1,0]<stderr>:{line}", "Traceback (most recent call "
         "last):"] + ["  File \"x.py\", line 1, in f"] * 300
        + ["RuntimeError: Horovod detected that one or more processes "
           "exited with non-zero status"]) + "\n")
    reason = outcome.last_error_line(str(log))
    assert reason.startswith("error: official_bench: xxx")
    assert reason.endswith("xxx (fix: set runtime.num_gpus=1)")
    assert " ... " in reason and len(reason) == outcome.OUR_LINE_MAX + 5


# Worker 1's log, trimmed (JAX 0.10.2, CPU, gloo): worker 0 of two trainers
# on 127.0.0.1 was SIGKILLed while worker 1 compiled its train step; JAX's
# coordination client aborted worker 1 0.26 s later (exit 134, SIGABRT).
JAX_ABORT = """\
I1130 08:55:19.320688 139862675954560 devices.py:123] official_bench: \
worker 1 joins 2 process(es) at 127.0.0.1:32090 (jax.distributed)
I1130 08:55:35.149739 139862675954560 stages.py:54] official_bench: stage: \
compiling the train step (XLA, 2 replica(s) on cpu) ...
E1130 08:55:35.403925   23825 coordination_service_agent.cc:289] Polled an \
error from coordination service (this can be an error from this or another \
task).
F1130 08:55:35.403968   23825 client.h:80] Terminating process because the \
JAX distributed service detected fatal errors. This most likely indicates \
that another task died; see the other task logs for more details. Disable \
Python buffering, i.e. `python -u`, to be sure to see all the previous \
output. absl::Status: UNAVAILABLE: Failed to send RPC to coordination \
service. Either the leader task was preempted/died/restarted unexpectedly or \
this task is experiencing network issues. Check earlier logs from 1) this \
task, 2) the leader (usually slice 0 task 0), and 3) cluster scheduler to \
debug further.
Additional GRPC error information from remote target coordination_service \
while calling /xla.coordination.CoordinationService/PollForError:
:UNKNOWN:Error received from peer  {grpc_message:"Socket closed", \
grpc_status:14}
*** Check failure stack trace: ***
    @     0x7f343c640634  absl::lts_20260107::log_internal::LogMessage::\
SendToLog()
    @     0x7f3450aa71f5  (unknown)
Fatal Python error: Aborted

Thread 0x00007f34511e1b80 (most recent call first):
  File "/work/main/official_bench/jax_backend/trainer.py", line 332 in \
_compile
  File "<frozen runpy>", line 198 in _run_module_as_main

Extension modules: yaml._yaml, numpy._core._multiarray_umath, jaxlib.\
cpu_feature_guard, PIL._imaging, scipy._cyutility (total: 69)
"""
COORDINATOR_GONE = ("worker 1 stopped: the JAX coordinator (worker 0, "
                    "127.0.0.1:32090) went away or stopped answering; see "
                    "worker 0's log")


def _judged(tmp_path, text, rc):
    """judge() on a process that ended with `rc`, its log `text`."""
    log = tmp_path / "run.log"
    log.write_text(text)
    worker = SimpleNamespace(log_path=str(log))
    proc = SimpleNamespace(rc=rc, stopped_because="", elapsed=1.0)
    return outcome.judge(worker, proc, SimpleNamespace(run_timeout=600.0))


def test_a_jax_worker_aborted_for_its_lost_coordinator_names_it(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(JAX_ABORT)
    # Without the mapping: ':UNKNOWN:Error received from peer ...'.
    assert outcome.last_error_line(str(log)) == COORDINATOR_GONE
    o = _judged(tmp_path, JAX_ABORT, es.by_signal(6))
    # The lost peer's status, as a TensorFlow worker (or this one, when its
    # collective fails first) exits; the real one stays in the reason.
    assert (o.status, o.rc) == (Status.FAILED, es.PEER_LOST)
    assert o.reason == COORDINATOR_GONE + " (JAX aborted it: SIGABRT, " \
        "exit 134)"
    # The same kill mid-run (real lines, trimmed): worker 1's collective
    # failed first, so it exited 4 with its own line after JAX's.
    lost = ("error: official_bench: lost worker 0 at 127.0.0.1:20445 at "
            "step 10 of 100000 (worker 1 saw its collective fail: "
            "JaxRuntimeError: UNKNOWN: Gloo all-reduce failed: ...)")
    o = _judged(tmp_path, JAX_ABORT + lost + "\n", es.PEER_LOST)
    assert (o.rc, o.reason) == (es.PEER_LOST, lost)


def test_a_jax_abort_for_another_reason_gives_jaxs_status(tmp_path):
    # Not reproduced here: the real line with another status put in.
    text = JAX_ABORT.replace(
        "Failed to send RPC to coordination service.",
        "Task /job:jax_worker/replica:0/task:2 heartbeat timeout.")
    o = _judged(tmp_path, text, es.by_signal(6))
    assert o.rc == es.PEER_LOST
    assert o.reason.startswith(
        "worker 1 stopped: JAX's distributed service reported a fatal error "
        "(UNAVAILABLE: Task /job:jax_worker/replica:0/task:2 heartbeat "
        "timeout."), o.reason
    assert "most likely another worker ended; see the other workers' logs" \
        in o.reason


def test_jaxs_line_in_a_process_that_exited_otherwise_keeps_its_status(
        tmp_path):
    o = _judged(tmp_path, JAX_ABORT, es.KILLED)
    assert (o.rc, o.reason) == (es.KILLED, COORDINATOR_GONE)
