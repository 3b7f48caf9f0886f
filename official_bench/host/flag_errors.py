"""One line for a flag error, naming the flag and the closest valid one.

argparse answers a typo with its whole usage block and no suggestion
("unrecognized arguments: --log_dri"), absl with "FATAL Flags parsing
error" and exit 1. Every entry point answers instead with one line and
exit 2 (contracts/exit_status.CONFIG, as docs/exit_status.md says):

    official-bench-extract: error: unknown flag --log_dri (did you mean
    --log_dir?); see --help

`OneLineParser` is the argparse.ArgumentParser every console script
builds; `closest` and `unknown_flag` serve absl's entry points too
(config/flags.parse_flags). Standard library only.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from typing import Iterable, Optional

CONFIG = 2  # contracts/exit_status.CONFIG (host/ sits below contracts/)


def closest(word: str, valid: Iterable[str],
            cutoff: float = 0.5) -> Optional[str]:
    """The valid word nearest `word` (difflib, similarity at least
    `cutoff`), or None if none is near."""
    found = difflib.get_close_matches(word, list(valid), n=1, cutoff=cutoff)
    return found[0] if found else None


def suggestion(word: str, valid: Iterable[str], cutoff: float = 0.5) -> str:
    """' (did you mean X?)' or '' when nothing valid is near."""
    near = closest(word, valid, cutoff)
    return f" (did you mean {near}?)" if near else ""


def unknown_flag(flag: str, valid: Iterable[str], cutoff: float = 0.5) -> str:
    """'unknown flag --x (did you mean --y?)', `flag` without its value."""
    name = flag.split("=", 1)[0]
    return f"unknown flag {name}{suggestion(name, valid, cutoff)}"


_NUMBER = re.compile(r"^-\d+(\.\d*)?([eE][-+]?\d+)?$|^-\.\d+$")
_CHOICE = re.compile(r"argument (?P<flag>\S+): invalid choice: "
                     r"'(?P<value>[^']*)' \(choose from (?P<choices>.*)\)$")


class OneLineParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose errors are one line on stderr, exit 2:
    an unknown flag is named with the closest valid one, a bad choice with
    the closest valid choice."""

    def parse_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        # An unknown flag first: argparse would name a missing required
        # flag instead, the user's typo being the cause.
        unknown = self._first_unknown(args)
        if unknown:
            self.error(unknown_flag(unknown, self._option_string_actions))
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            flag = next((a for a in extras if a.startswith("-")), None)
            self.error(unknown_flag(flag, self._option_string_actions)
                       if flag else f"unexpected argument(s) {extras}")
        return ns

    def _first_unknown(self, args) -> Optional[str]:
        """The first flag in `args` this parser does not know (an
        abbreviation argparse accepts is known), or None."""
        known = self._option_string_actions
        for arg in args:
            if arg == "--":
                return None
            name = arg.split("=", 1)[0]
            if not arg.startswith("-") or arg == "-" or _NUMBER.match(arg) \
                    or name in known:
                continue
            if self.allow_abbrev and arg.startswith("--") and any(
                    k.startswith(name) for k in known):
                continue
            return name
        return None

    def error(self, message: str):
        match = _CHOICE.match(message)
        if match:
            choices = [c.strip().strip("'")
                       for c in match["choices"].split(",")]
            message += suggestion(match["value"], choices)
        line = " ".join(message.split())
        sys.stderr.write(f"{self.prog}: error: {line}; see --help\n")
        sys.exit(CONFIG)
