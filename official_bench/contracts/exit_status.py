"""Every exit status an official_bench command ends with, in one table.

The trainer, the launcher (run_*_node.sh), the extractor, the doctor and the
small tools all read their codes from here, so that a scheduler or a script
that checks `$?` sees the same number for the same cause everywhere. The table
in docs/exit_status.md is this module's `markdown_table()` (a test compares
them); `python -m official_bench.contracts.exit_status` prints it. The shell
library (scripts/lib/launch.sh) writes its few codes as literals, each
tagged `# exit_status.NAME`; a test checks the numbers against this module.

Codes above 128 follow the shell's convention for a process ended by a
signal (128 + the signal number); 124 is coreutils `timeout`'s "timed out"
(the launcher wraps each trainer in `timeout`); 75 is sysexits.h EX_TEMPFAIL
("try again later"), used when a node never arrived at the launcher's
barrier.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
from typing import Mapping, Optional, Tuple, Union

OK = 0
FAILED = 1
CONFIG = 2
CLUSTER = 3
PEER_LOST = 4
NOT_WRITABLE = 5
LOGS_IN_USE = 6
SLOWER = 7
BARRIER_TIMEOUT = 75
TIMEOUT = 124
SIGNAL_BASE = 128
INTERRUPTED = SIGNAL_BASE + int(signal.SIGINT)    # 130
KILLED = SIGNAL_BASE + int(signal.SIGKILL)        # 137
TERMINATED = SIGNAL_BASE + int(signal.SIGTERM)    # 143
# Linux's highest real-time signal is 64; above 128 + that is not a signal.
_MAX_SIGNAL = 64


@dataclasses.dataclass(frozen=True)
class ExitStatus:
    """One row of the table: the number, its constant's name, the cause,
    and the few words the launcher's run lines put after "exit N: " when a
    trainer ends so (`describe`; empty: the number alone)."""
    code: int
    name: str
    meaning: str
    short: str = ""


TABLE: Tuple[ExitStatus, ...] = (
    ExitStatus(OK, "OK", "success (launcher: every run ok; doctor: no check "
               "failed)"),
    ExitStatus(FAILED, "FAILED", "other failure: an unexpected error (a "
               "traceback), a NaN/infinite loss under `train.stop_on_nan`, "
               "a bad input record or batch, an input source (python, zmq, "
               "tf.data service) that sent no batch within its timeout; "
               "launcher: some run failed (its summary "
               "names the run and why); extractor: no usable log; doctor: a "
               "check failed"),
    ExitStatus(CONFIG, "CONFIG", "bad configuration or arguments: config "
               "file, `--params_override`, flags (every command: an unknown "
               "flag or a bad value, in one line naming the flag and the "
               "closest valid one), a malformed TF_CONFIG "
               "(trainer), launcher knobs, a trainer Python that cannot "
               "import the trainer, eval/export without a checkpoint; "
               "extractor: a --log_dir holding runs of two backends",
               short="bad configuration"),
    ExitStatus(CLUSTER, "CLUSTER", "node or cluster set-up: a node list, "
               "TF_CONFIG or task index the launcher cannot use (malformed, "
               "or not fitting this machine or the run script), a port in "
               "use, a parameter-server peer that never came up",
               short="cluster problem"),
    ExitStatus(PEER_LOST, "PEER_LOST", "a peer task went away mid-run: the "
               "last line is `error: official_bench: lost worker 1 at "
               "host:port at step S of T (...); see that task's log ...`; "
               "also a worker or ps task whose chief or ps went away before "
               "the run finished; launcher: a JAX worker that JAX aborted "
               "(SIGABRT, 134) when its coordinator (worker 0) or another "
               "worker went away, the reason naming the coordinator",
               short="a peer task went away mid-run"),
    ExitStatus(NOT_WRITABLE, "NOT_WRITABLE", "a result, log, status, "
               "checkpoint or record file could not be written: no space "
               "left, a quota, a read-only file system or no permission; "
               "the last line names the path, what was being written and "
               "the free space there (host/write_errors.py). Launcher: the "
               "sweep stops there, the runs already finished are kept"),
    ExitStatus(LOGS_IN_USE, "LOGS_IN_USE", "launcher: the log tree already "
               "holds this case: another launcher is writing it (named by "
               "host, pid and start time), or finished runs would be "
               "overwritten (re-run with RESUME=1 or OVERWRITE=1)"),
    ExitStatus(SLOWER, "SLOWER", "official-bench-history: a case's latest "
               "run is slower than its earlier runs beyond their spread (the "
               "95% interval of latest/earlier lies below 1); the last line "
               "names the cases"),
    ExitStatus(BARRIER_TIMEOUT, "BARRIER_TIMEOUT", "launcher: a node never "
               "arrived at the start barrier within BARRIER_TIMEOUT (the "
               "missing nodes are named), or another node's launcher "
               "stopped answering mid-sweep (given up on after 30 s + "
               "KILL_AFTER; the error line names the node) or left the "
               "sweep on a signal (at once: `error: at 'end 2n1g run 2': "
               "node 1 (host:port) left the sweep: interrupted by "
               "SIGTERM`)",
               short="a peer never arrived (runtime.peer_timeout_seconds)"),
    ExitStatus(TIMEOUT, "TIMEOUT", "a trainer run over RUN_TIMEOUT, stopped "
               "with SIGTERM (as reported for the run in the launcher's "
               "summary)",
               short="timed out (RUN_TIMEOUT), stopped with SIGTERM"),
    ExitStatus(INTERRUPTED, "INTERRUPTED", "stopped by SIGINT (128 + 2), "
               "e.g. Ctrl-C: during the steps as for SIGTERM below; before "
               "them the trainer's last line names the stage, `error: "
               "official_bench: stopped by SIGINT while loading TensorFlow; "
               "no result written` (while the backend loads, when the load "
               "returns; a second Ctrl-C at once)",
               short="interrupted (SIGINT)"),
    ExitStatus(KILLED, "KILLED", "killed by SIGKILL (128 + 9): a "
               "multi-worker peer did not arrive within "
               "`runtime.peer_timeout_seconds` (its last line `error: "
               "official_bench: timeout: worker 0 waited 300 s ...; not "
               "reachable: worker 1 at host:port`), or a run still going "
               "KILL_AFTER seconds after RUN_TIMEOUT's SIGTERM, or a "
               "TensorFlow worker stopped by Ctrl-C while it waits for its "
               "peers (after its `stopped by SIGINT while waiting for the "
               "cluster to start` line: TensorFlow holds the interpreter "
               "there, so the start-up watchdog kills it)",
               short="killed (SIGKILL)"),
    ExitStatus(TERMINATED, "TERMINATED", "stopped by SIGTERM (128 + 15): "
               "the trainer ends after the current step (or loop) with "
               "`error: official_bench: stopped by SIGTERM at step S of T; "
               "no result written`, or `runtime.stop_grace_seconds` (60) "
               "after the signal; before the steps it names the stage, as "
               "SIGINT does (`... stopped by SIGTERM while waiting for the "
               "first batch of train_dataset (2 input worker(s)); no "
               "result written`); a second signal exits at once (the "
               "same one within 1 s is the same stop: GNU `timeout` sends "
               "it to the command, then to its group)",
               short="terminated (SIGTERM)"),
)
# Any other 128+N: stopped by signal N, as the shell reports it.
SIGNAL_ROW = ("128+N", "by_signal(N)", "stopped by signal N (the rows above "
              "are the usual ones)")
# help_text's key for that row: "128+N ..." after the table's rows.
SIGNALS = SIGNAL_ROW[0]

_BY_CODE = {s.code: s for s in TABLE}


def by_signal(signum: int) -> int:
    """The status of a process ended by `signum`, as a shell reports it."""
    return SIGNAL_BASE + int(signum)


def signal_number(rc: Optional[int]) -> Optional[int]:
    """The signal behind an exit status: Popen's -N or the shell's 128+N;
    None for a normal exit (or no status)."""
    if rc is None:
        return None
    if rc < 0:
        return -rc
    if SIGNAL_BASE < rc <= SIGNAL_BASE + _MAX_SIGNAL:
        return rc - SIGNAL_BASE
    return None


def lookup(rc: Optional[int]) -> Optional[ExitStatus]:
    """The table row for `rc` (Popen's -N is read as 128+N), or None."""
    if rc is not None and rc < 0:
        rc = by_signal(-rc)
    return _BY_CODE.get(rc)


def describe(rc: Optional[int]) -> str:
    """How the launcher's lines name a trainer's exit status: "exit 4: a
    peer task went away mid-run" (the row's `short`), "exit 1" (none),
    "did not start" (None)."""
    if rc is None:
        return "did not start"
    row = _BY_CODE.get(rc)
    text = row.short if row else ""
    return f"exit {rc}" + (f": {text}" if text else "")


def help_text(texts: Mapping[Union[int, str], str]) -> str:
    """A command's "Exit status: 0 success, 1 bad input, ..." for its
    --help, in the table's order, with `SIGNALS` ("128+N stopped by a
    signal") last; every other key must be a row of the table (KeyError
    otherwise). Every console script's list of statuses is made here."""
    for code in texts:
        if code != SIGNALS:
            _BY_CODE[code]  # noqa: B018 - a status outside the table fails
    items = [f"{s.code} {texts[s.code]}" for s in TABLE if s.code in texts]
    if SIGNALS in texts:
        items.append(f"{SIGNALS} {texts[SIGNALS]}")
    return "Exit status: " + ", ".join(items) + "."


def markdown_table() -> str:
    """The table of docs/exit_status.md, generated from TABLE."""
    rows = ["| status | name | meaning |", "|---|---|---|"]
    rows += [f"| {s.code} | `{s.name}` | {s.meaning} |" for s in TABLE]
    code, name, meaning = SIGNAL_ROW
    rows.append(f"| {code} | `{name}` | {meaning} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown_table())
