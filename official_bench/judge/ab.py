"""The A/B runner: two (or more) setups, each run as its own process on this
machine, alternated, then compared with judge/verdict.py's rule.

A *side* is a command that trains and prints TimeHistory lines (this
project's trainer with a config and overrides, another checkout's, Model
Garden's classifier_trainer in its own venv: benchmarks/vs_model_garden.py);
the runner neither imports nor knows what it runs. Every process gets a
fresh work directory (its model_dir) so no run reuses another's checkpoint.

Rounds alternate the order (A B, then B A, ...) so that a drift in the
machine's load (a shared box, thermal throttling) falls on every side
alike rather than always on the side that runs second. A run's intervals
are read from its output with the extractor's parser (extract/logparse.py);
the first ``warmup_intervals`` (graph tracing, warm-up) are left out, the
same number on every side, so both are measured by one rule even when only
one of them writes a result.json. While a run trains, its output is shown
as the run scripts show theirs (launch/progress.py): "[A round 1/3] step
10/30, 18.4 img/s, ETA 17s", and the trainer's stage lines before that.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from official_bench.contracts import counting
from official_bench.contracts.throughput import ReadInterval
from official_bench.contracts.trainer_command import trainer_argv
from official_bench.extract import logparse
from official_bench.extract.errors import ExtractError
from official_bench.host import write_errors
from official_bench.judge import verdict
from official_bench.launch.progress import RunProgress

DEFAULT_WARMUP_INTERVALS = 2
_TAIL_LINES = 25


@dataclasses.dataclass(frozen=True)
class Side:
    """One setup: ``argv(work_dir)`` is the command for one run whose
    model_dir (or scratch space) is ``work_dir``."""
    name: str
    argv: Callable[[str], List[str]]
    cwd: Optional[str] = None
    env: Optional[Dict[str, str]] = None  # None: this process's environment


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """One finished run: its counted interval rates and how it went."""
    side: str
    round: int
    intervals: List[ReadInterval]  # the counted ones
    seconds: float
    load_before: float
    load_after: float
    log_path: Optional[str]
    cpu_count: int = dataclasses.field(
        default_factory=lambda: os.cpu_count() or 1)

    @property
    def rates(self) -> List[float]:
        """The counted intervals' examples/second."""
        return [iv.examples_per_second for iv in self.intervals]

    @property
    def speed(self) -> float:
        """Mean of the counted intervals (the rule of judge/verdict.py)."""
        return sum(self.rates) / len(self.rates)


def trainer_side(name: str, config_file: Optional[str] = None,
                 override: Optional[str] = None,
                 python: str = sys.executable, cwd: Optional[str] = None,
                 env: Optional[Dict[str, str]] = None,
                 mode: str = "train") -> Side:
    """A side that runs this project's trainer CLI (or another checkout's,
    through ``cwd``) with a config file and/or a --params_override."""
    def argv(work_dir: str) -> List[str]:
        return trainer_argv(
            python, mode=mode,
            config_file=os.path.abspath(config_file) if config_file else None,
            model_dir=os.path.join(work_dir, "model"),
            params_override=override or None)
    return Side(name, argv, cwd, env)


def _load() -> float:
    """The 1-minute load average, printed beside each run."""
    return os.getloadavg()[0]


def counted_intervals(output: str, warmup_intervals: int
                      ) -> List[ReadInterval]:
    """A run's TimeHistory intervals after the first ``warmup_intervals``
    (read by the extractor's parser)."""
    parsed = logparse.parse_log_lines(output.splitlines())
    return counting.after_first(parsed.intervals, warmup_intervals)


def prepare_logs(logs: Optional[str]) -> None:
    """Make the folder the runs' logs are kept in, and write a file there,
    before any run: a run trains for minutes, and its log failing to be
    kept after it would waste it. ExtractError naming ``logs`` when a file
    is in the way, NotWritable when it cannot be written (no space, a
    read-only file system, no permission)."""
    if not logs:
        return
    if os.path.lexists(logs) and not os.path.isdir(logs):
        raise ExtractError(f"logs folder {logs} is a file, not a folder")
    try:
        with write_errors.writing(logs, "the A/B runs' logs"):
            os.makedirs(logs, exist_ok=True)
            with tempfile.TemporaryFile(dir=logs):
                pass
    except write_errors.NotWritable:
        raise
    except OSError as e:
        raise ExtractError(f"logs folder {logs}: cannot make it: "
                           f"{e.strerror or e}") from None


def _keep_log(path: Optional[str], text: str) -> None:
    """Write a run's output where the user asked it kept."""
    if not path:
        return
    with write_errors.writing(path, "an A/B run's log"):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def _run_streamed(cmd: List[str], side: Side, timeout: Optional[float],
                  watch: RunProgress) -> Tuple[int, str, bool]:
    """Runs ``cmd``, each output line fed to ``watch`` as it comes;
    (exit status, the whole output, whether it was killed at timeout)."""
    proc = subprocess.Popen(cmd, cwd=side.cwd, env=side.env, text=True,
                            errors="replace", stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        proc.kill()

    timer = threading.Timer(timeout, kill) if timeout else None
    if timer:
        timer.daemon = True
        timer.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            watch.feed([line.rstrip("\n")])
        proc.wait()
    finally:
        if timer:
            timer.cancel()
        if proc.poll() is None:  # interrupted: leave no trainer behind
            proc.kill()
            proc.wait()
    watch.finish()
    return proc.returncode, "".join(lines), killed.is_set()


def run_once(side: Side, work_dir: str, round_no: int,
             warmup_intervals: int = DEFAULT_WARMUP_INTERVALS,
             log_path: Optional[str] = None,
             timeout: Optional[float] = None,
             progress: Optional[Callable[[str], None]] = None,
             label: str = "") -> RunRecord:
    """Run ``side`` once in its own process, its progress lines (labelled
    ``label``) given to ``progress``; ExtractError (naming the side, the
    command's exit status and its last lines) when it fails or prints no
    interval after the warm-up ones."""
    os.makedirs(work_dir, exist_ok=True)
    before, start = _load(), time.perf_counter()
    cmd = side.argv(work_dir)
    label = label or f"{side.name} round {round_no}"
    watch = RunProgress(None, label, None, progress is None,
                        progress or (lambda line: None))
    if progress:
        progress(f"[{label}] starting")
    try:
        returncode, output, killed = _run_streamed(cmd, side, timeout, watch)
    except OSError as e:
        raise ExtractError(f"side {side.name}: cannot start {cmd[0]}: {e}"
                           ) from e
    _keep_log(log_path, output)  # a stopped run's too
    if killed:
        raise ExtractError(f"side {side.name}, round {round_no}: still "
                           f"running after {timeout:g} s: {' '.join(cmd)}")
    seconds = time.perf_counter() - start
    counted = counted_intervals(output, warmup_intervals)
    if returncode != 0 or not counted:
        tail = "\n".join(output.splitlines()[-_TAIL_LINES:])
        kept = f" (log: {log_path})" if log_path else ""
        raise ExtractError(
            f"side {side.name}, round {round_no}: exit {returncode}, "
            f"{len(counted)} TimeHistory interval(s) after the "
            f"{warmup_intervals} warm-up one(s){kept}; command: "
            f"{' '.join(cmd)}\n{tail}")
    return RunRecord(side.name, round_no, counted, seconds, before, _load(),
                     log_path)


def round_order(sides: Sequence[Side], round_no: int) -> List[Side]:
    """Sides in order on even rounds, reversed on odd ones (module doc)."""
    return list(sides) if round_no % 2 == 0 else list(reversed(sides))


def alternate(sides: Sequence[Side], pairs: int, work_root: str,
              warmup_intervals: int = DEFAULT_WARMUP_INTERVALS,
              logs: Optional[str] = None, timeout: Optional[float] = None,
              on_run: Optional[Callable[[RunRecord], None]] = None,
              progress: Optional[Callable[[str], None]] = None
              ) -> Dict[str, List[RunRecord]]:
    """``pairs`` rounds of every side, one process each; the records by
    side (in the sides' order). ``on_run`` sees each record as it ends,
    ``progress`` each run's progress lines ("[A round 1/3] step ...")."""
    names = [s.name for s in sides]
    if len(set(names)) != len(names):
        raise ExtractError(f"side names must differ: {', '.join(names)}")
    if pairs < 1:
        raise ExtractError(f"pairs is {pairs}, expected >= 1")
    prepare_logs(logs)
    records: Dict[str, List[RunRecord]] = {s.name: [] for s in sides}
    for round_no in range(pairs):
        for side in round_order(sides, round_no):
            tag = f"{side.name}_{round_no + 1}"
            record = run_once(
                side, os.path.join(work_root, tag), round_no + 1,
                warmup_intervals,
                os.path.join(logs, tag + ".log") if logs else None, timeout,
                progress, f"{side.name} round {round_no + 1}/{pairs}")
            records[side.name].append(record)
            if on_run:
                on_run(record)
    return records


def setting(record: RunRecord) -> verdict.RunSetting:
    """What verdict.setting_notes reads of a run: the higher of its loads
    before and after, on this machine's CPUs (all runs share the host)."""
    return verdict.RunSetting(load=(max(record.load_before,
                                        record.load_after),
                                    record.cpu_count))


def describe_run(record: RunRecord) -> str:
    """The progress line of one run; it says when the load average before
    or after it was above the CPU count (its intervals waited for cores)."""
    over = (f", above the {record.cpu_count} CPUs"
            if max(record.load_before, record.load_after) > record.cpu_count
            else "")
    return (f"round {record.round}: {record.side} {record.speed:.2f} img/s "
            f"over {len(record.rates)} interval(s) ({record.seconds:.0f} s, "
            f"load {record.load_before:.2f}->{record.load_after:.2f}{over})")
