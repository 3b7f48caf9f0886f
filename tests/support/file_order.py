"""The order `make test` hands test files to its workers: longest first.

pytest-xdist's `--dist loadfile` gives each worker a whole file at a time,
in the order the files were collected (tests/conftest.py turns off xdist's
own reordering, by number of tests, which put the long system files last:
one worker then ran them alone for the last minute while a core idled).
Longest first leaves the many short files for the end, where they fill
the gaps. A file's length is its seconds in tests/file_seconds.json (a
past run's wall time on 3 workers); a file not listed there is estimated
from its tests' markers.

Refresh the table after a run that printed every duration:
    make test ARGS="--durations=0 --durations-min=0" > run.log
    .venv/bin/python tests/support/file_order.py run.log
"""

import collections
import json
import os
import re
import sys

TABLE = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "file_seconds.json")
# A file not in the table: seconds per test by its markers (setup.cfg: slow
# is "more than ~30 s", multiworker starts processes).
GUESS = {"slow": 30.0, "multiworker": 10.0}
GUESS_OTHER = 0.5
DURATION = re.compile(r"^(\d+\.\d+)s (?:setup|call|teardown) +(\S+?)::")


def load(path=TABLE):
    """{test file: seconds}; empty when the table is missing."""
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def _guess(item):
    for mark, seconds in GUESS.items():
        if item.get_closest_marker(mark) is not None:
            return seconds
    return GUESS_OTHER


def longest_first(items, seconds):
    """Sort `items` in place: files by their seconds, longest first; a
    file's tests stay together and in their order."""
    first, guessed = {}, collections.Counter()
    for index, item in enumerate(items):
        name = item.nodeid.split("::")[0]
        first.setdefault(name, index)
        guessed[name] += _guess(item)

    def key(item):
        name = item.nodeid.split("::")[0]
        return (-seconds.get(name, guessed[name]), first[name])
    items.sort(key=key)


def from_durations(lines):
    """{test file: seconds} from pytest's `--durations=0` lines."""
    totals = collections.Counter()
    for line in lines:
        match = DURATION.match(line.strip())
        if match:
            totals[match.group(2)] += float(match.group(1))
    return {name: round(s, 1) for name, s in sorted(totals.items())}


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} RUN_LOG (the output of a run with "
              f"--durations=0 --durations-min=0)", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        table = from_durations(f)
    if not table:
        print(f"{argv[1]}: no duration lines (run pytest with "
              f"--durations=0 --durations-min=0)", file=sys.stderr)
        return 1
    with open(TABLE + ".tmp", "w") as f:
        json.dump(table, f, indent=0, sort_keys=True)
        f.write("\n")
    os.replace(TABLE + ".tmp", TABLE)
    print(f"{TABLE}: {len(table)} files, {sum(table.values()):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
