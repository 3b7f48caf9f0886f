"""The width command-line help is wrapped at: 80 columns, or the
terminal's when it is narrower.

argparse and absl both wrap help at the terminal's width (the COLUMNS
variable, else the tty's), so on a wide terminal a help line ran to 184
columns: hard to read, and broken when pasted into an issue or a doc. Every
console script wraps its help through here instead.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
from typing import Callable, Iterator, Type

HELP_COLUMNS = 80
# Below this argparse puts every help text under its flag, one word a line.
MIN_COLUMNS = 40


def help_width() -> int:
    """80, or the terminal's width when narrower (never below 40)."""
    columns = shutil.get_terminal_size((HELP_COLUMNS, 24)).columns
    return max(MIN_COLUMNS, min(HELP_COLUMNS, columns))


def help_formatter(base: Type[argparse.HelpFormatter] = argparse.HelpFormatter
                   ) -> Callable[[str], argparse.HelpFormatter]:
    """An argparse formatter_class: `base` wrapping at help_width().

    argparse wraps at width - 2 when it picks the width itself; given one,
    it uses it as is, so a line is at most help_width() columns."""
    def make(prog: str) -> argparse.HelpFormatter:
        return base(prog, width=help_width())
    return make


@contextlib.contextmanager
def fitted_absl_help() -> Iterator[None]:
    """absl's help text (FLAGS.module_help) wrapped at help_width(): absl
    takes its width from COLUMNS alone, so COLUMNS is set while inside."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(help_width())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before
