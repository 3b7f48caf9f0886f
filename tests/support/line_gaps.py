"""How long a command stays silent: its output read line by line, as it
comes, each line timed, and the longest wait between two lines reported
with the lines around it (issue 40: no command is silent for more than
10 s while it works).

    run = timed_lines(["bash", "run_single_node.sh", "4"], timeout=600)
    assert run.returncode == 0, run.text
    assert run.longest_gap() <= 10, run.describe_gap()

stdout and stderr are read together, as a person at a terminal sees them.
The first gap counted is from the start to the first line.
"""

import dataclasses
import subprocess
import threading
import time
from typing import List, Optional, Tuple


@dataclasses.dataclass
class TimedLines:
    """A finished process's lines, each with its seconds since the start."""
    lines: List[Tuple[float, str]]
    returncode: Optional[int]
    seconds: float

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


def timed_lines(argv, timeout: float = 600, **popen) -> TimedLines:
    """Runs ``argv`` (extra keywords go to Popen: cwd, env) and times each
    line it prints; a process still running at ``timeout`` is killed
    (returncode None)."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            errors="replace", bufsize=1, **popen)
    lines: List[Tuple[float, str]] = []

    def read():
        for line in proc.stdout:
            lines.append((time.monotonic() - start, line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        returncode = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        returncode = None
    reader.join(10)
    return TimedLines(lines, returncode, time.monotonic() - start)
