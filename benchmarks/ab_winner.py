"""The winner of an A/B, as the run script's batch and --params_override:
the base's overrides plus the one candidate judged faster by the widest
margin (the largest B/A whose verdict is `faster`), or the base alone
where none is. Reads the ab.json of either driver (jax_step_ab.py,
jax_speed_ab.py), so scripts/gpu_pending.sh can hand its trust runs what
its step A/B found in the same call.

One candidate, never several together: a combination nobody measured is
no winner (bn_vjp won alone and lost beside one-pass statistics,
BENCHMARKS.md).

    python benchmarks/ab_winner.py OUT/step/ab.json --dtype fp16 \
        --base "$BASE"

prints one line, "BATCH OVERRIDE" (the override '' when there is none),
and says on stderr which candidate won and by how much; exit 1 with the
file's problem in one line. Without a file, the base alone, split so.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, NamedTuple, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import jax_speed_ab  # noqa: E402

from official_bench.judge.verdict import FASTER  # noqa: E402

BATCH_KEY = "train_dataset.batch_size"


class Judged(NamedTuple):
    """One candidate's verdict, as an ab.json holds it."""
    candidate: str
    override: str
    ratio: float
    low: float
    high: float
    verdict: str


class Choice(NamedTuple):
    """What the trust runs train: the batch, the override, and why."""
    batch: Optional[int]
    override: str
    why: str


def judged(doc: dict, dtype: str) -> List[Judged]:
    """The judged candidates of `dtype` in an ab.json of either driver
    (rows with a verdict dict, or flat verdicts); ValueError when it is
    neither."""
    if "rows" in doc:
        flat = [dict(r["verdict"], candidate=r["candidate"],
                     override=r["override"], dtype=r["dtype"])
                for r in doc["rows"] if r.get("verdict")]
    elif "verdicts" in doc:
        flat = [v for v in doc["verdicts"] if "verdict" in v]
    else:
        raise ValueError("has neither 'rows' (jax_step_ab.py) nor "
                         "'verdicts' (jax_speed_ab.py)")
    return [Judged(v["candidate"], v["override"], v["ratio"], v["low"],
                   v["high"], v["verdict"])
            for v in flat if v["dtype"] == dtype]


def best(rows: Sequence[Judged]) -> Optional[Judged]:
    """The faster candidate with the largest B/A (None: none faster)."""
    faster = [r for r in rows if r.verdict == FASTER]
    return max(faster, key=lambda r: r.ratio) if faster else None


def choose(rows: Sequence[Judged], base: str) -> Choice:
    """The base with the best candidate's items on top (a key the
    candidate sets replaces the base's); the batch pulled out of the
    override, as the run script takes it as an argument."""
    win = best(rows)
    items = jax_speed_ab.override_items(base)
    if win is None:
        why = (f"no candidate of {len(rows)} judged faster; the base alone"
               if rows else "no candidate judged; the base alone")
    else:
        ours = jax_speed_ab.override_items(win.override)
        keys = {item.split("=", 1)[0] for item in ours}
        items = [i for i in items if i.split("=", 1)[0] not in keys] + ours
        why = (f"winner {win.candidate} ({win.override}): B/A "
               f"{win.ratio:.3f} [{win.low:.3f}, {win.high:.3f}], "
               f"{win.verdict}, of {len(rows)} judged")
    batch = jax_speed_ab.base_batch(",".join(items))
    rest = [i for i in items if i.split("=", 1)[0] != BATCH_KEY]
    return Choice(batch, ",".join(rest), why)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(
        description="The winner of an A/B's ab.json as 'BATCH OVERRIDE' "
                    "for the run script (the base's batch where the "
                    "winner sets none, else --batch).")
    p.add_argument("ab_json", nargs="?",
                   help="an ab.json of jax_step_ab.py or jax_speed_ab.py "
                        "(none: the base alone)")
    p.add_argument("--dtype", default="fp16",
                   help="the precision whose verdicts count (default: "
                        "%(default)s)")
    p.add_argument("--base", default="",
                   help="the A/B's base overrides (default: the one in "
                        "the file)")
    p.add_argument("--batch", type=int, default=256,
                   help="the batch where neither base nor winner sets one "
                        "(default: %(default)s)")
    args = p.parse_args(argv)
    try:
        doc = {"rows": []}
        if args.ab_json:
            with open(args.ab_json) as f:
                doc = json.load(f)
        base = args.base or doc.get("base") or ""
        choice = choose(judged(doc, args.dtype), base)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        what = f"no key {e}" if isinstance(e, KeyError) else str(e)
        print(f"ab_winner: {args.ab_json or '--base'}: {what}",
              file=sys.stderr)
        return 1
    if args.ab_json:
        print(f"ab_winner: {args.dtype}: {choice.why}", file=sys.stderr)
    print(choice.batch or args.batch, choice.override)
    return 0


if __name__ == "__main__":
    sys.exit(main())
