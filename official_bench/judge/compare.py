"""official-bench-compare: is B faster than A, beyond the runs' spread?

Two ways in:

* ``--a DIR --b DIR``: two log trees as the run scripts write them
  (``{N}n{G}g/rn50_b{B}_{dtype}_{i}.log``, read exactly as the extractor
  reads them: the same window, the same excluded runs, the result.json
  beside a log preferred) or two folders holding the trainer's result.json
  files (any depth; the chief's ``result.json`` only; the window is the one
  this version's trainer counts, contracts/counting.recorded_counted, unless
  --warmup_batches/--train_batches are given; a file whose own stats say
  another window, an older trainer's, gets a note naming both,
  recount_note).
* the A/B runner (judge/ab.py): ``--pairs N`` rounds of the trainer with
  ``--a-override``/``--b-override`` (over ``--config``) or ``--a-config``/
  ``--b-config``, each run its own process, alternated on this machine.

Per case (nodes, devices per node, per-device batch, precision) both print
the medians, the ratio B/A, its 95% interval and the verdict of
judge/verdict.py, with the runs counted on each side, and the median of
images / time over each run's counted window beside DLPerf's mean rate.
Sides of two backends (a TensorFlow tree against a JAX one) are compared
case by case, the first line naming each side's backend; a side holding
runs of both keeps them apart (pair_backends).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import tempfile
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from official_bench.contracts import (
    counting,
    dtypes,
    exit_status,
    log_tree,
    result_json,
    run_backend,
    utilisation as usage_contract,
)
from official_bench.contracts.throughput import (
    Interval,
    ReadInterval,
    images_per_second_over_window,
)
from official_bench.extract import logparse, windows
from official_bench.extract.errors import ExtractError
from official_bench.extract.extractor import (
    measure_log,
    window_hint,
    window_note,
)
from official_bench.host.flag_errors import OneLineParser
from official_bench.host.terminal import help_formatter
from official_bench.host.write_errors import NotWritable
from official_bench.judge import ab, verdict


class Case(NamedTuple):
    """What must match for two runs to be compared. The backend is part of
    it only where a side holds runs of several (pair_backends); empty
    otherwise."""
    nodes: int
    gpus_per_node: int
    batch: int  # per device
    dtype: str
    backend: str = ""  # contracts/run_backend's name, or "" (not a key)

    @property
    def label(self) -> str:
        """'1n8g b128 fp16' ('1n8g b128 fp16 jax' with the backend); the
        runner's one case is 'runner' (its rows are named by what differs
        between the sides, side_labels)."""
        if self == RUNNER_CASE:
            return "runner"
        text = (f"{log_tree.case_name(self.nodes, self.gpus_per_node)} "
                f"b{self.batch} {self.dtype}")
        return f"{text} {self.backend}" if self.backend else text


# The runner's sides are whatever their configs say; one case holds them.
RUNNER_CASE = Case(0, 0, 0, "runner")


@dataclasses.dataclass
class SideRuns:
    """One side's usable runs per case, and what was left out."""
    path: str
    kind: str  # "log tree", "result.json files" or "runner"
    runs: Dict[Case, List[List[ReadInterval]]]
    notes: List[str] = dataclasses.field(default_factory=list)
    label: str = ""  # what this side is, by what differs from the other
    # the backends of its runs, sorted (pair_backends: before it drops
    # them from the cases); "" for the runner's, which names none
    backends: Tuple[str, ...] = ()
    # what each run ran on, in the order of ``runs`` (setting_notes)
    settings: Dict[Case, List[verdict.RunSetting]] = dataclasses.field(
        default_factory=dict)


@dataclasses.dataclass(frozen=True)
class CaseComparison:
    """One case's verdict and the side facts printed with it."""
    case: Case
    verdict: verdict.Verdict
    over_window_a: Optional[float]
    over_window_b: Optional[float]
    label: str = ""  # the row's name: the case, or "A's vs B's" (runner)
    paired: Optional[verdict.RoundRatios] = None  # the runner's by round


# ---------------------------------------------------------------- reading

def _read_log_tree(path: str, found: Sequence[Tuple[logparse.RunId, str]],
                   warmup: int, train: int) -> SideRuns:
    """Runs of a log tree through the extractor's own measure_log."""
    side = SideRuns(path, "log tree", {})
    outcomes = [measure_log(run, log, warmup, train, "mean")
                for run, log in found]
    for (run, log), outcome in zip(found, outcomes):
        excluded = outcome.excluded or _rate_problem(outcome.counted)
        if excluded:
            side.notes.append(f"{log}: excluded: {excluded}")
            continue
        case = Case(run.num_nodes, run.gpus_per_node, run.batch_size,
                    run.dtype, run_backend.backend(
                        outcome.config, outcome.environment, log))
        side.runs.setdefault(case, []).append(outcome.counted)
        side.settings.setdefault(case, []).append(
            run_setting(log_tree.json_path(log))
            if outcome.source == "result_json"
            else verdict.RunSetting(outcome.environment or {}))
    if not side.runs:
        side.notes[-1] += window_hint(outcomes) or (
            f"\n(the window: --warmup_batches {warmup} --train_batches "
            f"{train}; or --window auto)")
    return side


def _raw(path: str) -> dict:
    """A result.json's decoded top level; {} where it cannot be read or is
    not an object."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run_setting(path: str) -> verdict.RunSetting:
    """What a result.json's run ran on (setting_of)."""
    return setting_of(_raw(path))


def setting_of(data: dict) -> verdict.RunSetting:
    """What a decoded result.json's run ran on: its environment, its load
    average and its process's CPU share (contracts/utilisation.py); empty
    where it does not say."""
    env, usage = data.get("environment"), data.get(usage_contract.KEY)
    return verdict.RunSetting(env if isinstance(env, dict) else {},
                              usage_contract.highest_load(usage),
                              usage_contract.process_cpu_share(usage))


def _rate_problem(counted: Sequence[ReadInterval]) -> Optional[str]:
    """verdict.run_problem of a run's counted intervals, naming their
    steps."""
    return verdict.run_problem(
        [iv.examples_per_second for iv in counted],
        [f"{iv.start_step}-{iv.end_step}" for iv in counted])


def _result_files(path: str) -> List[str]:
    """The chief result.json files under ``path``, sorted."""
    found = []
    for root, _, files in os.walk(path):
        if log_tree.CHIEF_RESULT_FILE in files:
            found.append(os.path.join(root, log_tree.CHIEF_RESULT_FILE))
    return sorted(found)


def _stats(data: dict) -> dict:
    """The raw ``stats`` object of a decoded result.json (its window's
    keys)."""
    stats = data.get("stats")
    return stats if isinstance(stats, dict) else {}


def _replicas(result: result_json.RunResultFile) -> Tuple[str, Optional[int]]:
    """(the key that says the run's replicas, its value): stats' first."""
    if result.num_replicas:
        return "stats.num_replicas", result.num_replicas
    return "environment.num_replicas", (result.environment or {}).get(
        "num_replicas")


def result_case(result: result_json.RunResultFile) -> Optional[Case]:
    """The case of a result.json from its stats, config and environment
    (the backend: contracts/run_backend, its path too), or None when it
    does not say its replicas, batch or precision (counts_problem: when
    its counts contradict each other)."""
    env = result.environment or {}
    replicas = _replicas(result)[1]
    nodes = env.get("num_workers") or 1
    if not replicas or not result.global_batch_size or not result.dtype \
            or result.dtype not in dtypes.SHORT_NAMES:
        return None
    return Case(nodes, replicas // nodes,
                result.global_batch_size // replicas, result.dtype,
                run_backend.backend(result.config, env, result.path))


def counts_problem(result: result_json.RunResultFile) -> Optional[str]:
    """Why a result.json's worker and replica counts name no case (each
    worker holds the same number of replicas, at least one), or None."""
    key, replicas = _replicas(result)
    workers = (result.environment or {}).get("num_workers")
    if not replicas or not workers or replicas % workers == 0:
        return None
    return (f"environment.num_workers is {workers} but {key} is "
            f"{replicas}, not a multiple of it (each worker holds as many "
            "replicas)")


def warmup_counted_note(name: str, stats: dict,
                        intervals: Sequence[Interval]) -> str:
    """Why a result.json whose trainer counted its warm-up
    (``stats.warmup_excluded`` false: no interval after warmup_steps) is
    left out, as the extractor's window leaves a warm-up out; with two
    intervals or more, the window that counts all but the first."""
    after = (f", or count it after its first interval: --warmup_batches "
             f"{intervals[0].end_step}" if len(intervals) > 1 else "")
    return (f"{name}: excluded: its counted intervals include the warm-up "
            "(stats.warmup_excluded false: no interval after its "
            f"warmup_steps {stats.get('warmup_steps')}); run more steps"
            + after)


def _same(x: float, y: float) -> bool:
    """Equal but for the rounding of two ways to sum the same numbers."""
    return math.isclose(x, y, rel_tol=1e-9)


# recorded_window tries every run of consecutive intervals up to this many.
_MOST_INTERVALS = 2000


def recorded_window(stats: dict, intervals: Sequence[Interval]
                    ) -> Optional[Tuple[int, int]]:
    """(first step, last step) of the consecutive intervals whose mean rate
    is the file's own ``stats.average_examples_per_second`` (and its images
    / time, where recorded): the window the trainer that wrote it counted;
    the longest when several match, None when none does."""
    mean = stats.get("average_examples_per_second")
    over = stats.get("images_per_second_over_window")
    if not isinstance(mean, (int, float)) or \
            not 0 < len(intervals) <= _MOST_INTERVALS:
        return None
    rates, images, seconds = [0.0], [0.0], [0.0]
    for iv in intervals:
        rates.append(rates[-1] + iv.examples_per_second)
        images.append(images[-1] + iv.examples_per_second * iv.seconds)
        seconds.append(seconds[-1] + iv.seconds)
    n = len(intervals)
    for length in range(n, 0, -1):
        for i in range(n - length, -1, -1):  # the latest first
            j = i + length
            if not _same((rates[j] - rates[i]) / length, mean):
                continue
            span = seconds[j] - seconds[i]
            if isinstance(over, (int, float)) and span > 0 and \
                    not _same((images[j] - images[i]) / span, over):
                continue
            return intervals[i].start_step, intervals[j - 1].end_step
    return None


def recount_note(name: str, stats: dict, intervals: Sequence[Interval],
                 counted: Sequence[Interval]) -> Optional[str]:
    """A note when the intervals this version's rule counts
    (recorded_counted) are not the window the file's own stats average
    over (a result.json of an older trainer, e.g. one that counted a
    resumed run's warm-up from step 0): both windows and rates, and the
    flags that count the file's own; None when they agree or the file
    records no mean."""
    recorded = stats.get("average_examples_per_second")
    if not counted or not isinstance(recorded, (int, float)) or \
            stats.get("basis", "intervals") != "intervals":
        return None
    rate = statistics.fmean(iv.examples_per_second for iv in counted)
    if _same(rate, recorded):
        return None
    own = recorded_window(stats, intervals)
    where = (f"the file's own window, steps {own[0]}-{own[1]}, says "
             f"{recorded:.2f} (stats.average_examples_per_second; "
             f"--warmup_batches {own[0]} --train_batches {own[1]} counts it)"
             if own else f"the file's own stats.average_examples_per_second "
             f"says {recorded:.2f}")
    warmup = stats.get("warmup_steps") or 0
    return (f"{name}: counted steps {counted[0].start_step}-"
            f"{counted[-1].end_step} ({rate:.2f} img/s) by this "
            f"official_bench's warm-up rule (stats.warmup_steps {warmup} "
            f"after the run's first step, {intervals[0].start_step}); "
            + where)


def _read_result_files(path: str, files: Sequence[str],
                       window: Optional[Tuple[int, int]]) -> SideRuns:
    """Runs of a folder of result.json files (module doc): each counted in
    ``window``, or where None in the trainer's own."""
    side = SideRuns(path, "result.json files", {})
    for name in files:
        result, problem = result_json.read_run_json(name)
        if result is None:
            side.notes.append(f"{problem or name + ': unreadable'}; skipped")
            continue
        problem = counts_problem(result)
        if problem:
            side.notes.append(f"{name}: {problem}; skipped")
            continue
        case = result_case(result)
        if case is None:
            side.notes.append(f"{name}: no num_replicas, global batch or "
                              "dtype to name its case; skipped")
            continue
        raw = _raw(name)  # the keys RunResultFile does not keep
        if window is None:
            stats = _stats(raw)
            if stats.get("warmup_excluded") is False:
                side.notes.append(warmup_counted_note(name, stats,
                                                      result.intervals))
                continue
            counted = counting.recorded_counted(stats, result.intervals)
            note = recount_note(name, stats, result.intervals, counted)
            if note:
                side.notes.append(note)
        else:
            counted = counting.in_window(result.intervals, *window)
        if not counted:
            side.notes.append(f"{name}: no interval inside the counted "
                              "window (give it with --warmup_batches/"
                              "--train_batches, or --window auto)")
            continue
        problem = _rate_problem(counted)
        if problem:
            side.notes.append(f"{name}: excluded: {problem}")
            continue
        side.runs.setdefault(case, []).append(counted)
        side.settings.setdefault(case, []).append(setting_of(raw))
    return side


def read_side(path: str, warmup: Optional[int] = None,
              train: Optional[int] = None) -> SideRuns:
    """A log tree or a folder of result.json files; ExtractError naming
    ``path`` when it is neither or holds no usable run."""
    if not os.path.isdir(path):
        raise ExtractError(f"{path} does not exist or is not a directory")
    found, _ = logparse.find_logs(path)
    if found:
        side = _read_log_tree(path, found,
                              *windows.given_or_dlperf(warmup, train))
    else:
        files = _result_files(path)
        if not files:
            raise ExtractError(
                f"{path} holds neither logs {{N}}n{{G}}g/rn50_b{{B}}_"
                f"{{dtype}}_{{i}}.log nor result.json files"
                + logparse.below_hint(path))
        side = _read_result_files(path, files,
                                  windows.given_window(warmup, train))
    if not side.runs:
        raise ExtractError(f"no usable run in {path} ({side.kind}):"
                           + "".join("\n  " + n for n in side.notes))
    return side


def auto_window(paths: Sequence[str]) -> Tuple[Optional[int], Optional[int]]:
    """--window auto over the log trees among ``paths``, the same window
    for both sides (its note on stderr); (None, None) when neither is a
    log tree: each result.json's own counted window."""
    found = [run for path in paths if os.path.isdir(path)
             for run in logparse.find_logs(path)[0]]
    if not found:
        return None, None
    window = windows.auto_window(found)
    print(f"note: {window_note(window)}", file=sys.stderr)
    return window


# ---------------------------------------------------------------- comparing

def _rates(runs: Sequence[Sequence[ReadInterval]]) -> List[List[float]]:
    return [[iv.examples_per_second for iv in run] for run in runs]


def _over_window(runs: Sequence[Sequence[ReadInterval]]) -> Optional[float]:
    """Median over runs of images / time over each run's counted window."""
    values = [v for v in (images_per_second_over_window(r) for r in runs)
              if v is not None]
    return statistics.median(values) if values else None


def _one_backend(side: SideRuns) -> Optional[str]:
    names = {case.backend for case in side.runs}
    return names.pop() if len(names) == 1 else None


def _named_with(label: str, backend: str) -> str:
    """A side's label with its backend, unless a folder of it says so."""
    if not backend or backend in label.split("/"):
        return label
    return f"{label} ({backend})" if label else backend


def pair_backends(a: SideRuns, b: SideRuns) -> None:
    """Sides of one backend each pair their cases by setup alone (is JAX
    faster than TensorFlow is a question to ask), and where the backends
    differ each side's label names its own: the first line says what
    differs. A side holding several backends keeps the backend in every
    case ('1n1g b128 fp32 jax'), so no two backends' runs are mixed."""
    for side in (a, b):
        side.backends = tuple(sorted({c.backend for c in side.runs}))
    first, second = _one_backend(a), _one_backend(b)
    if first is None or second is None:
        return
    for side in (a, b):
        side.runs = {case._replace(backend=""): runs
                     for case, runs in side.runs.items()}
        side.settings = {case._replace(backend=""): runs
                         for case, runs in side.settings.items()}
    if first != second:
        a.label = _named_with(a.label, first)
        b.label = _named_with(b.label, second)


def compare_sides(a: SideRuns, b: SideRuns, seed: int = verdict.DEFAULT_SEED,
                  resamples: int = verdict.DEFAULT_RESAMPLES
                  ) -> Tuple[List[CaseComparison], List[str]]:
    """Every case both sides hold, compared, after pair_backends (which
    may name the backends in the sides' labels), the runner's with its
    by-round ratios; notes list the cases only one side has and what makes
    a case's ratio hard to read (verdict.setting_notes). ExtractError when
    no case is in both."""
    pair_backends(a, b)
    notes = [f"{c.label}: only in A ({a.path})" for c in a.runs
             if c not in b.runs]
    notes += [f"{c.label}: only in B ({b.path})" for c in b.runs
              if c not in a.runs]
    common = sorted(set(a.runs) & set(b.runs))
    if not common:
        raise ExtractError(
            f"no case in both {a.path} and {b.path}: A has "
            f"{', '.join(c.label for c in sorted(a.runs))}; B has "
            f"{', '.join(c.label for c in sorted(b.runs))}; "
            + runner_hint(sorted(a.runs), sorted(b.runs)))
    out = []
    for case in common:
        rates_a, rates_b = _rates(a.runs[case]), _rates(b.runs[case])
        v = verdict.compare_runs(rates_a, rates_b, seed=seed,
                                 resamples=resamples)
        label = (f"{a.label or 'A'} vs {b.label or 'B'}"
                 if case == RUNNER_CASE else case.label)
        paired = (verdict.round_ratios(rates_a, rates_b, seed=seed,
                                       resamples=resamples)
                  if case == RUNNER_CASE and len(rates_a) == len(rates_b)
                  else None)
        out.append(CaseComparison(case, v, _over_window(a.runs[case]),
                                  _over_window(b.runs[case]), label, paired))
        notes += [f"{case.label}: {note}" for note in verdict.setting_notes(
            a.settings.get(case, []), b.settings.get(case, []))]
    return out, notes


def runner_hint(a: Sequence[Case], b: Sequence[Case]) -> str:
    """Where "no case in both" points: the A/B runner, which runs two
    different setups (another batch or device count) side by side."""
    overrides = ["--config FILE"]
    if len(a) == 1 and len(b) == 1:
        for key, x, y in (("train_dataset.batch_size", a[0].batch, b[0].batch),
                          ("runtime.num_gpus", a[0].gpus_per_node,
                           b[0].gpus_per_node)):
            if x != y:
                overrides += [f"--a-override {key}={x}",
                              f"--b-override {key}={y}"]
    if len(overrides) == 1:
        overrides += ["--a-override K=V", "--b-override K=V"]
    return ("to compare two different setups, run both with the A/B "
            "runner: official-bench-compare " + " ".join(overrides)
            + " --pairs 3 (docs/compare_and_history.md)")


def differing_parts(a: str, b: str) -> Tuple[str, str]:
    """Two paths named by the parts that differ: the folders both share at
    the start and at the end are dropped ('before/t/bz128' and
    'after/t/bz128' are 'before' and 'after')."""
    pa, pb = (os.path.normpath(os.path.abspath(p)).split(os.sep)
              for p in (a, b))
    if pa == pb:
        return a, b
    while len(pa) > 1 and len(pb) > 1 and pa[0] == pb[0]:
        pa, pb = pa[1:], pb[1:]
    while len(pa) > 1 and len(pb) > 1 and pa[-1] == pb[-1]:
        pa, pb = pa[:-1], pb[:-1]
    return "/".join(pa), "/".join(pb)


def side_labels(args: argparse.Namespace) -> Tuple[str, str]:
    """What A and B are, by what differs: the trees' differing path parts,
    or the runner's config files and overrides one side has alone."""
    if args.a is not None:
        return differing_parts(args.a, args.b)
    labels = []
    configs = (args.a_config or args.config, args.b_config or args.config)
    items = [[i.strip() for i in (o or "").split(",") if i.strip()]
             for o in (args.a_override, args.b_override)]
    for mine, other in ((0, 1), (1, 0)):
        parts = [os.path.basename(configs[mine] or "") or "no config"] \
            if configs[0] != configs[1] else []
        parts += [i for i in items[mine] if i not in items[other]]
        labels.append(", ".join(parts) or "as configured")
    return labels[0], labels[1]


def _num(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(rows: Sequence[CaseComparison], a_label: str = "",
          b_label: str = "") -> str:
    """The verdict table (plain text, one line per case, then a legend)."""
    width = max([16] + [len(row.label) for row in rows])
    head = (f"{'case':<{width}} {'A img/s':>9} {'B img/s':>9} {'B/A':>6} "
            f"{'95% interval':>15} {'runs':>5}  verdict")
    lines = [f"A: {a_label}, B: {b_label}"] if a_label or b_label else []
    lines.append(head)
    for row in rows:
        v = row.verdict
        lines.append(
            f"{row.label:<{width}} {v.median_a:>9.2f} {v.median_b:>9.2f} "
            f"{v.ratio:>6.3f} {v.interval_text():>15} "
            f"{f'{v.runs_a}/{v.runs_b}':>5}  {v.verdict}")
    lines += [f"{row.label}: {row.verdict.verdict}: "
              f"{row.verdict.too_few_reason()}" for row in rows
              if row.verdict.verdict == verdict.TOO_FEW]
    lines += [f"{row.label}: {row.paired.describe()}" for row in rows
              if row.paired]
    lines.append("img/s: median of the runs' mean interval rates "
                 "(DLPerf's); images / time over")
    lines.append("the window (median of the runs):")
    lines += [f"  {row.label}: A {_num(row.over_window_a)}, "
              f"B {_num(row.over_window_b)}" for row in rows]
    return "\n".join(lines) + "\n"


def side_backend(side: SideRuns) -> Optional[str]:
    """The backend of a side's runs, "mixed" when it holds several (its
    cases then name theirs), None when none is named (the runner)."""
    names = [n for n in side.backends if n]
    if not names:
        return None
    return names[0] if len(names) == 1 else "mixed"


def _case_backend(row: CaseComparison, side: SideRuns) -> Optional[str]:
    """The backend of a case's runs on one side."""
    return row.case.backend or side_backend(side)


def as_json(rows: Sequence[CaseComparison], a: SideRuns, b: SideRuns,
            notes: Sequence[str] = ()) -> str:
    """The comparison as JSON (for scripts), with each side's backend and
    each case's on both sides, the runner's by-round ratios (``paired``),
    and ``notes``: the lines stderr gives as "note: ..." (runs left out,
    windows recounted, cases of one side, setting_notes)."""
    return json.dumps({"a": a.path, "b": b.path, "a_label": a.label,
                       "b_label": b.label, "a_backend": side_backend(a),
                       "b_backend": side_backend(b), "cases": [
        dict(case=row.label, nodes=row.case.nodes,
             gpus_per_node=row.case.gpus_per_node,
             batch_size_per_device=row.case.batch, dtype=row.case.dtype,
             a_backend=_case_backend(row, a), b_backend=_case_backend(row, b),
             images_per_second_over_window_a=row.over_window_a,
             images_per_second_over_window_b=row.over_window_b,
             paired=row.paired.as_dict() if row.paired else None,
             **row.verdict.as_dict()) for row in rows],
        "notes": list(notes)}, indent=2) + "\n"


# ---------------------------------------------------------------- the runner

def runner_sides(args: argparse.Namespace) -> List[ab.Side]:
    """Sides A and B of the runner from the command line."""
    config_a = args.a_config or args.config
    config_b = args.b_config or args.config
    for key, value in (("--config", args.config),
                       ("--a-config", args.a_config),
                       ("--b-config", args.b_config)):
        if value and not os.path.isfile(value):
            raise ExtractError(f"{key} {value}: no such file")
    return [ab.trainer_side("A", config_a, args.a_override, args.python),
            ab.trainer_side("B", config_b, args.b_override, args.python)]


def _say(line: str) -> None:
    """The runner's progress on stderr (stdout holds the comparison)."""
    print(line, file=sys.stderr, flush=True)


def run_ab(args: argparse.Namespace) -> Tuple[SideRuns, SideRuns]:
    """Run the A/B rounds; each side's runs under the case 'runner'."""
    sides = runner_sides(args)
    with tempfile.TemporaryDirectory(prefix="official_bench_ab_") as work:
        records = ab.alternate(
            sides, args.pairs, work, args.warmup_intervals, args.logs,
            on_run=lambda r: _say(ab.describe_run(r)), progress=_say)
    case = RUNNER_CASE
    out = []
    for side in sides:
        runs = [r.intervals for r in records[side.name]]
        out.append(SideRuns(side.name, "runner", {case: runs}, settings={
            case: [ab.setting(r) for r in records[side.name]]}))
    return out[0], out[1]


# ---------------------------------------------------------------- CLI

# --help's exit statuses (contracts/exit_status.help_text).
EXIT_STATUSES = {
    exit_status.OK: "compared",
    exit_status.FAILED: "bad input (no runs, no common case, a run failed)",
    exit_status.CONFIG: "bad usage",
    exit_status.NOT_WRITABLE: "--logs DIR cannot be written",
    exit_status.INTERRUPTED: "interrupted (Ctrl-C; its trainer stopped)",
}


# The A/B runner's options that have defaults (_usage_problem reads them).
_DEFAULTS = {"pairs": 3, "warmup_intervals": ab.DEFAULT_WARMUP_INTERVALS,
             "logs": None, "python": sys.executable}


def build_parser() -> argparse.ArgumentParser:
    """The command line (--help fits 80 columns)."""
    p = OneLineParser(
        prog="official-bench-compare", formatter_class=help_formatter(),
        description="Is B faster than A? Per case: the ratio of median "
                    "img/s B/A, a 95% interval from the runs' spread "
                    "(bootstrap over runs and intervals) and a verdict: "
                    "faster, slower or no difference measurable.",
        epilog=exit_status.help_text(EXIT_STATUSES) + " Examples: "
               "%(prog)s --a logs_before/bz128 --b logs_after/bz128; "
               "%(prog)s --config c.yaml --b-override "
               "runtime.enable_xla=true --pairs 3")
    trees = p.add_argument_group(
        "two sets of finished runs", "Both sides count one window "
        "(--window auto chooses it over both); a folder of result.json "
        "files counts each run's own, the trainer's, unless "
        "--warmup_batches/--train_batches are given.")
    trees.add_argument("--a", metavar="DIR",
                       help="log tree or folder of result.json files")
    trees.add_argument("--b", metavar="DIR", help="the same for side B")
    windows.add_flags(trees)
    run = p.add_argument_group("A/B runner: alternate two trainer setups")
    run.add_argument("--config", metavar="FILE",
                     help="config file of both sides")
    run.add_argument("--a-config", metavar="FILE", help="A's config file")
    run.add_argument("--b-config", metavar="FILE", help="B's config file")
    run.add_argument("--a-override", metavar="K=V,...",
                     help="A's --params_override")
    run.add_argument("--b-override", metavar="K=V,...",
                     help="B's --params_override")
    run.add_argument("--pairs", type=int, default=_DEFAULTS["pairs"],
                     help="rounds of A and B (default: %(default)s)")
    run.add_argument("--warmup_intervals", type=int,
                     default=_DEFAULTS["warmup_intervals"],
                     help="intervals left out at the start of each run "
                          "(default: %(default)s)")
    run.add_argument("--logs", metavar="DIR", help="keep each run's log here")
    run.add_argument("--python", default=_DEFAULTS["python"],
                     help="Python that runs the trainer (default: this one)")
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true",
                     help="print JSON instead of the table")
    out.add_argument("--seed", type=int, default=verdict.DEFAULT_SEED,
                     help="bootstrap seed (default: %(default)s)")
    out.add_argument("--resamples", type=int,
                     default=verdict.DEFAULT_RESAMPLES,
                     help="bootstrap resamples (default: %(default)s)")
    return p


_RUNNER_KEYS = ("config", "a_config", "b_config", "a_override", "b_override")
# The runner's other options: ignored by --a/--b, so refused there.
_RUNNER_ONLY = ("pairs", "warmup_intervals", "logs", "python")


def _usage_problem(args: argparse.Namespace) -> Optional[str]:
    """Why the arguments name neither mode, or both; None when fine."""
    runner = any(getattr(args, k) for k in _RUNNER_KEYS)
    trees = args.a is not None or args.b is not None
    if runner and trees:
        return "--a/--b (finished runs) and the runner's options exclude " \
               "each other"
    if trees and (args.a is None or args.b is None):
        return "give both --a DIR and --b DIR"
    given = [k for k in _RUNNER_ONLY if getattr(args, k) != _DEFAULTS[k]]
    if trees and given:
        return (", ".join("--" + k for k in given) + " go" +
                ("es" if len(given) == 1 else "") + " with the A/B runner; "
                "--a/--b read finished runs where they are")
    conflict = windows.flag_conflict(args.window, args.warmup_batches,
                                     args.train_batches)
    if conflict:
        return conflict
    window = [f"--{k}" for k in ("window", "warmup_batches",
                                 "train_batches")
              if getattr(args, k) is not None]
    if window and runner:  # the runner counts by intervals, not steps
        return (f"{', '.join(window)} go{'es' if len(window) == 1 else ''}"
                " with --a/--b; the runner's window is --warmup_intervals")
    if not runner and not trees:
        return "give --a DIR --b DIR, or the runner's --config/--a-override" \
               "/--b-override/--a-config/--b-config"
    if args.pairs < 1 or args.warmup_intervals < 0 or args.resamples < 100:
        return "--pairs must be >= 1, --warmup_intervals >= 0 and " \
               "--resamples >= 100"
    return None


def _compare(args: argparse.Namespace
             ) -> Tuple[SideRuns, SideRuns, List[CaseComparison], List[str]]:
    """Both sides read (or run) and compared; raises what main maps."""
    if args.a is not None:
        window = (auto_window([args.a, args.b]) if args.window
                  else (args.warmup_batches, args.train_batches))
        a = read_side(args.a, *window)
        b = read_side(args.b, *window)
    else:
        a, b = run_ab(args)
    a.label, b.label = side_labels(args)
    rows, notes = compare_sides(a, b, args.seed, args.resamples)
    return a, b, rows, notes


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else exit_status.CONFIG
    problem = _usage_problem(args)
    if problem:
        print(f"{parser.prog}: error: {problem}; see --help", file=sys.stderr)
        return exit_status.CONFIG
    try:
        a, b, rows, notes = _compare(args)
    except KeyboardInterrupt:  # the runner has stopped its trainer
        kept = f"; the runs' logs so far are in {args.logs}" \
            if args.logs and args.a is None else ""
        print(f"error: interrupted (SIGINT); nothing compared{kept}",
              file=sys.stderr)
        return exit_status.INTERRUPTED
    except NotWritable as e:
        print(f"error: {e}", file=sys.stderr)
        return exit_status.NOT_WRITABLE
    except (ExtractError, ValueError, OSError) as e:  # OSError: a file
        print(f"error: {e}", file=sys.stderr)         # where a folder goes
        return exit_status.FAILED
    notes = a.notes + b.notes + notes
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    print(as_json(rows, a, b, notes) if args.json
          else table(rows, a.label, b.label), end="")
    return exit_status.OK


def run_main() -> None:
    """Console-script entry point ``official-bench-compare``."""
    sys.exit(main())


if __name__ == "__main__":
    run_main()
