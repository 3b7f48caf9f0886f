"""How long a command stays silent: its output read line by line, as it
comes, each line timed, and the longest wait between two lines reported
with the lines around it (issue 40: no command is silent for more than
10 s while it works).

    run = timed_lines(["bash", "run_single_node.sh", "4"], timeout=600)
    assert run.returncode == 0, run.text
    assert run.longest_gap() <= 10, run.describe_gap()

stdout and stderr are read together, as a person at a terminal sees them
(``separate=True`` keeps each stream's text too, for a caller that parses
stdout). The first gap counted is from the start to the first line.
"""

import dataclasses
import subprocess
import sys
import threading
import time
from typing import List, Optional, Tuple

from official_bench.contracts.trainer_command import trainer_argv
from support.helpers import REPO, cli_env

# The longest a command may stay silent while it works (issue 40).
MAX_SILENCE = 10.0


@dataclasses.dataclass
class TimedLines:
    """A finished process's lines, each with its seconds since the start."""
    lines: List[Tuple[float, str]]
    returncode: Optional[int]
    seconds: float
    stdout: str = ""  # both streams; with separate=True stdout's own
    stderr: str = ""

    @property
    def text(self) -> str:
        """The whole output, for assertion messages."""
        return "\n".join(line for _, line in self.lines)

    def gaps(self) -> List[Tuple[float, int]]:
        """(seconds, index of the line that ended the wait) for every wait,
        the start to the first line included, the last line to the end
        included (index len(lines))."""
        times = [0.0] + [t for t, _ in self.lines] + [self.seconds]
        return [(times[i + 1] - times[i], i) for i in range(len(times) - 1)]

    def longest_gap(self) -> float:
        """The longest silence, in seconds."""
        return max(gap for gap, _ in self.gaps())

    def describe_gap(self, around: int = 3) -> str:
        """The longest silence, and the lines before and after it."""
        gap, index = max(self.gaps())
        before = self.lines[max(0, index - around):index]
        after = self.lines[index:index + around]
        shown = [f"  {t:7.1f} s  {line}" for t, line in before]
        shown.append(f"  ---- {gap:.1f} s without a line ----")
        shown += [f"  {t:7.1f} s  {line}" for t, line in after]
        if index == len(self.lines):
            shown.append(f"  {self.seconds:7.1f} s  (the process ended)")
        return f"longest silence {gap:.1f} s:\n" + "\n".join(shown)


def timed_lines(argv, timeout: float = 600, separate: bool = False,
                **popen) -> TimedLines:
    """Runs ``argv`` (extra keywords go to Popen: cwd, env) and times each
    line it prints; a process still running at ``timeout`` is killed
    (returncode None)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if separate else subprocess.STDOUT,
        text=True, errors="replace", bufsize=1, **popen)
    lines: List[Tuple[float, str]] = []
    texts = {"stdout": [], "stderr": []}
    lock = threading.Lock()

    def read(stream, name):
        for line in stream:
            with lock:
                lines.append((time.monotonic() - start, line.rstrip("\n")))
                texts[name].append(line)

    readers = [threading.Thread(target=read, args=(proc.stdout, "stdout"),
                                daemon=True)]
    if separate:
        readers.append(threading.Thread(
            target=read, args=(proc.stderr, "stderr"), daemon=True))
    for reader in readers:
        reader.start()
    try:
        returncode = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        returncode = None
    for reader in readers:
        reader.join(10)
    return TimedLines(lines, returncode, time.monotonic() - start,
                      "".join(texts["stdout"]), "".join(texts["stderr"]))


def timed_cli(args, timeout: float = 300) -> TimedLines:
    """The trainer CLI as support.helpers.cli runs it, its lines timed."""
    return timed_lines(trainer_argv(sys.executable, extra=args),
                       timeout=timeout, cwd=REPO, env=cli_env())
