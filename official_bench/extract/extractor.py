"""Turn a directory of benchmark logs into DLPerf's result JSON and reports.

Command line (also ``extract_tensorflow_logs.py`` at the repository root and
the ``official-bench-extract`` console script; every flag in docs/extractor.md)::

    official-bench-extract --log_dir logs/tensorflow/resnet50/bz128 \\
        [--output_dir ./result] [--warmup_batches 100] [--train_batches 600] \\
        [--window auto] [--method mean|time] [--plot | --no_plot]
    official-bench-extract --compare result/bz128_result.json result/bz256_result.json

Reads ``{log_dir}/{N}n{G}g/rn50_b{B}_{dtype}_{i}.log``, the trainer's result
JSON next to each log when present and the ``allreduce_{dtype}_{i}.json`` of
``BENCH=allreduce`` sessions (a bandwidth table, and with a 1n1g run the
scaling model's bounds, :mod:`official_bench.extract.scaling`). Writes
``{name}_result.json`` (always, also printed on stdout; ``name`` is the base
name of ``log_dir``) and, unless turned off, ``.md``, ``.csv``, ``.png``
(with matplotlib) and ``.html`` beside it; warnings and excluded runs go to
stderr. This module holds that pipeline and its command line; a run's speed
and exclusions are :mod:`official_bench.extract.speeds`, per-case statistics
and the JSON shape :mod:`official_bench.extract.cases`.

Its exit statuses are EXIT_STATUSES below, listed by --help from
contracts/exit_status (docs/extractor.md: what each covers).
"""  # noqa: E501

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import sys
from typing import (
    Any,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
)

from official_bench.contracts import (
    counting,
    exit_status,
    log_tree,
    result_json,
    run_backend,
    run_status,
)
from official_bench.extract import (
    allreduce_logs,
    cases,
    history_plot,
    logparse,
    scaling,
    speeds,
    tables,
    windows,
)
from official_bench.extract.errors import ExtractError, MixedBackends
from official_bench.extract.logparse import RunId
from official_bench.extract.speeds import RunOutcome
from official_bench.host import atomic
from official_bench.host.flag_errors import OneLineParser
from official_bench.host.terminal import help_formatter
from official_bench.host.write_errors import NotWritable, writing

DEFAULT_WARMUP_BATCHES, DEFAULT_TRAIN_BATCHES = counting.DLPERF_WINDOW
DEFAULT_SPREAD_WARN = 5.0
AUTO_WINDOW = windows.AUTO  # --window auto


@dataclasses.dataclass
class Extraction:
    """Result of :func:`extract`: the result dict plus what was left out."""

    log_dir: str
    name: str
    result: tables.Result
    outcomes: List[RunOutcome]
    warnings: List[str]  # human-readable, already prefixed with case/log
    # (path, reason) for .log files outside the naming scheme
    skipped: List[Tuple[str, str]]
    # All-reduce results (BENCH=allreduce) per case: allreduce_logs.collect
    bandwidth: Dict[str, List[Dict[str, Any]]] = dataclasses.field(
        default_factory=dict)
    # (warmup_batches, train_batches) that --window auto chose, else None
    chosen_window: Optional[Tuple[int, int]] = None
    # what the report lacks and why (missing_json_note), for stderr
    notes: List[str] = dataclasses.field(default_factory=list)

    @property
    def excluded(self) -> List[RunOutcome]:
        """Outcomes of runs that were left out of the statistics."""
        return [o for o in self.outcomes if not o.ok]


def result_name(log_dir: str) -> str:
    """Base name of the result files: the last component of ``log_dir``.

    Trailing slashes and ``.`` are resolved first, so ``bz128/`` gives
    ``bz128`` like DLPerf's ``bz128_result.json``.
    """
    return os.path.basename(os.path.normpath(os.path.abspath(log_dir)))


def _check_options(warmup_batches: int, train_batches: int, method: str,
                   spread_warn: float) -> None:
    """Reject option values that cannot give a meaningful result."""
    if method not in speeds.METHODS:
        raise ExtractError(f"method {method!r} is not one of: "
                           f"{', '.join(speeds.METHODS)}")
    problem = windows.window_problem(warmup_batches, train_batches)
    if problem:
        raise ExtractError(problem)
    if not spread_warn >= 0:  # NaN too
        raise ExtractError(f"spread_warn is {spread_warn:g}, must be >= 0 "
                           "(percent)")


def measure_log(run: RunId, path: str,
                warmup_batches: int = DEFAULT_WARMUP_BATCHES,
                train_batches: int = DEFAULT_TRAIN_BATCHES,
                method: str = "mean") -> RunOutcome:
    """Parse one log (and its result JSON, if any) into a RunOutcome."""
    try:
        parsed = logparse.parse_log_file(path)
    except OSError as e:
        return speeds.RunOutcome(run, path, excluded=f"cannot read log: {e}")
    record, status_warning = run_status.load_status(path)
    failed = run_status.exclusion(record)
    if failed:
        return speeds.RunOutcome(run, path, excluded=failed)
    run_json, warning = result_json.load_run_json(log_tree.json_path(path))
    outcome = speeds.measure_run(run, parsed, run_json, warmup_batches,
                                   train_batches, method)
    for w in (warning, status_warning):
        if w:
            outcome.warnings.insert(0, w)
    return outcome


def extract(log_dir: str, warmup_batches: int = DEFAULT_WARMUP_BATCHES,
            train_batches: int = DEFAULT_TRAIN_BATCHES, method: str = "mean",
            spread_warn: float = DEFAULT_SPREAD_WARN,
            window: Optional[str] = None) -> Extraction:
    """Extract all runs under ``log_dir``; raises ExtractError for bad input.

    Bad runs do not raise: they are excluded with their reason (see
    :attr:`Extraction.excluded`). Raises only when there is nothing to report:
    missing directory, no log following the naming, or no usable run at all;
    MixedBackends when the usable runs trained on several backends.
    ``window="auto"`` replaces ``warmup_batches``/``train_batches`` by the
    longest window every run covers after its warm-up interval
    (:func:`official_bench.extract.windows.auto_window`;
    :attr:`Extraction.chosen_window` says which).
    """
    if window not in (None, AUTO_WINDOW):
        raise ExtractError(f"window {window!r}: the only value is "
                           f"{AUTO_WINDOW!r}")
    if window is None:
        _check_options(warmup_batches, train_batches, method, spread_warn)
    if not os.path.isdir(log_dir):
        raise ExtractError(f"log directory {log_dir} does not exist or is not "
                           "a directory" + _next_to_repository_hint(log_dir))
    runs, skipped = logparse.find_logs(log_dir)
    warnings = [f"skipped {p}: {why}" for p, why in skipped]
    table, bw_warnings = allreduce_logs.collect(log_dir)
    waits, wait_warnings = allreduce_logs.compute_waits(log_dir)
    warnings += bw_warnings + wait_warnings
    if not runs and table:  # an all-reduce session alone: its table only
        return Extraction(log_dir, result_name(log_dir), {}, [], warnings,
                          skipped, table)
    if not runs:
        raise ExtractError(
            "no logs named {N}n{G}g/rn50_b{B}_{fp32|fp16|bf16}_{i}.log under "
            + log_dir + logparse.below_hint(log_dir)
            + "".join("\n  " + w for w in warnings))
    chosen = None
    if window == AUTO_WINDOW:
        chosen = windows.auto_window(runs, method)
        # None: every run failed or is unreadable; DLPerf's window then,
        # and "no usable run" below names each one's reason
        warmup_batches, train_batches = chosen or windows.given_or_dlperf(
            None, None)
        _check_options(warmup_batches, train_batches, method, spread_warn)
    outcomes = [measure_log(run, path, warmup_batches, train_batches, method)
                for run, path in runs]
    for o in outcomes:
        where = os.path.join(o.run.case, o.run.log_name)
        warnings += [f"{where}: {w}" for w in o.warnings]
        if not o.ok:
            warnings.append(f"{where}: excluded: {o.excluded}")
    if not any(o.ok for o in outcomes):
        listing = "".join("\n  " + w for w in warnings)
        raise ExtractError(f"no usable run under {log_dir} ({len(outcomes)} "
                           f"log(s), all excluded):{listing}"
                           + window_hint(outcomes))
    _refuse_mixed_backends(log_dir, outcomes)
    result, case_warnings = cases.summarize(outcomes, method, warmup_batches,
                                            train_batches, spread_warn)
    scaling.apply(result, table, waits)
    note = missing_json_note(outcomes)
    return Extraction(log_dir, result_name(log_dir), result, outcomes,
                      warnings + case_warnings, skipped, table, chosen,
                      [note] if note else [])


def _next_to_repository_hint(log_dir: str) -> str:
    """DLPerf's README says --log_dir=logs/...; its scripts write ../logs/...
    (next to the repository): the flag to give when that folder exists."""
    beside = os.path.join(os.pardir, log_dir)
    if os.path.isabs(log_dir) or not os.path.isdir(beside):
        return ""
    return (" (DLPerf's scripts write next to the repository: --log_dir "
            f"{beside})")


# The trainer's line naming its result JSON (training/run_record.py).
RESULT_WRITTEN = re.compile(r"official_bench: result written to (\S.*?)\s*$")
# DLPerf's *_train.sh: MODEL_DIR=../output, `rm -rf $MODEL_DIR` before each run
DLPERF_MODEL_DIR = os.path.join(os.pardir, "output")


def result_written_to(log_path: str) -> Optional[str]:
    """The path the trainer's log says it wrote the result JSON to (the
    last such line), or None (DLPerf's own logs, an unreadable log)."""
    found = None
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                match = RESULT_WRITTEN.search(line)
                if match:
                    found = match.group(1)
    except OSError:
        return None
    return found


def missing_json_note(outcomes: Sequence[RunOutcome]) -> Optional[str]:
    """One line when counted runs have no result JSON beside their log
    (their environment, device, MFU and input wait are then unknown),
    saying where their logs say it went; None when every one has it."""
    counted = [o for o in outcomes if o.ok]
    missing = [o.log_path for o in counted
               if not os.path.exists(log_tree.json_path(o.log_path))]
    if not missing:
        return None
    note = (f"{len(missing)} of {len(counted)} counted run(s) have no result "
            "JSON beside their log: no environment, device, MFU or "
            "input-wait figures for them")
    written = sorted({p for p in map(result_written_to, missing) if p})
    if not written:
        return note
    shown = ", ".join(written[:3]) + (", ..." if len(written) > 3 else "")
    note += f"; their logs say the trainer wrote it to {shown}"
    if all(os.path.normpath(os.path.dirname(p)) == DLPERF_MODEL_DIR
           for p in written):
        note += (", the --model_dir of DLPerf's *_train.sh scripts, which "
                 "delete it before each run (rm -rf ../output); this "
                 "suite's run scripts keep one beside each log")
    return note


def _refuse_mixed_backends(log_dir: str,
                           outcomes: Sequence[RunOutcome]) -> None:
    """MixedBackends when the counted runs trained on several backends
    (contracts/run_backend: the result JSON's, else the log's place in
    the tree): their averages and speedups would mix them."""
    runs: Dict[str, List[str]] = {}
    for o in outcomes:
        if o.ok:
            name = run_backend.backend(o.config, o.environment, o.log_path)
            runs.setdefault(name, []).append(
                os.path.join(o.run.case, o.run.log_name))
    if len(runs) > 1:
        raise MixedBackends(
            f"{log_dir} holds runs of {len(runs)} backends, which one "
            "result would average: " + "; ".join(
                f"{name}: {', '.join(logs)}" for name, logs in runs.items())
            + "; give each backend's runs their own folder, and extract "
            "each with its own --log_dir and --output_dir")


def window_hint(outcomes: Sequence[RunOutcome]) -> str:
    """For runs shorter than the window (DLPerf's 100-600 on a short CPU
    try): the window every run covers after its first interval (warm-up),
    and the flags that count it; empty when there is none."""
    found = [o.steps_found for o in outcomes if o.steps_found]
    window = (counting.common_window(found) if len(found) == len(outcomes)
              else None)
    if window is None:
        return ""
    start, end = window
    return (f"\nthe runs cover steps {start}-{end} after their first "
            f"(warm-up) interval: count them with --warmup_batches {start} "
            f"--train_batches {end} (or --window auto)")


def output_paths(output_dir: str, name: str) -> Dict[str, str]:
    """File names of every output for result ``name`` in ``output_dir``."""
    base = os.path.join(output_dir, name + "_result")
    return {"json": base + ".json", "markdown": base + ".md",
            "csv": base + ".csv", "png": base + ".png", "html": base + ".html"}


def result_json_text(result: tables.Result) -> str:
    """The result dictionary as written to the JSON file and stdout."""
    return json.dumps(result, indent=4) + "\n"


def write_outputs(extraction: Extraction, output_dir: str,
                  markdown: bool = True, csv: bool = True,
                  plot: Optional[bool] = None, html: bool = True,
                  history: Optional[str] = None
                  ) -> Tuple[List[str], List[str]]:
    """Write the JSON and the requested reports atomically.

    ``plot``: True requires a PNG (ExtractError without matplotlib), False
    skips it, None makes it when matplotlib is importable. ``html``: write the
    HTML page too when the Markdown is written (it embeds the PNG when there
    is one). ``history``: a run-history file (contracts/history_db.py) whose
    cases over time the HTML page shows too. Returns ``(written_paths,
    notes)``; notes say what was skipped and why.
    """
    with _writing_results(output_dir):
        return _write_outputs(extraction, output_dir, markdown, csv, plot,
                              html and markdown, history)


@contextlib.contextmanager
def _writing_results(output_dir: str) -> Iterator[None]:
    """A full disk, quota, read-only mount or permission error leaves as
    NotWritable (exit NOT_WRITABLE, the free space named); any other OSError
    (a file where the folder should be) as ExtractError."""
    try:
        with writing(output_dir, "the extractor's results"):
            yield
    except NotWritable:
        raise
    except OSError as e:
        raise ExtractError(f"cannot write results to {output_dir}: {e}")


def _write_outputs(extraction: Extraction, output_dir: str, markdown: bool,
                   csv: bool, plot: Optional[bool], html: bool,
                   history: Optional[str] = None
                   ) -> Tuple[List[str], List[str]]:
    """write_outputs without the OSError translation. Every file is
    rendered before the first is written: a report that cannot be made
    leaves the previous set as it was, not half of it replaced."""
    paths = output_paths(output_dir, extraction.name)
    files, notes = render_outputs(extraction, paths, markdown, csv, plot,
                                  html, history)
    for kind, content in files:
        if isinstance(content, bytes):
            atomic.write_bytes_atomic(paths[kind], content)
        else:
            atomic.write_text_atomic(paths[kind], content)
    return [paths[kind] for kind, _ in files], notes


def render_outputs(extraction: Extraction, paths: Dict[str, str],
                   markdown: bool, csv: bool, plot: Optional[bool],
                   html: bool, history: Optional[str] = None
                   ) -> Tuple[List[Tuple[str, Any]], List[str]]:
    """The output files' contents, ``[(kind, text or PNG bytes)]`` in
    writing order (kinds of output_paths), and the notes on what was
    skipped and why; writes nothing."""
    from official_bench.extract import html_report, series

    files: List[Tuple[str, Any]] = []
    notes: List[str] = []
    history_png = history_plot.history_figure(history) \
        if history and html else None
    files.append(("json", result_json_text(extraction.result)))
    if markdown:
        files.append(("markdown", tables.markdown_report(
            extraction.result, extraction.name)
            + allreduce_logs.markdown(extraction.bandwidth)))
    if csv:
        files.append(("csv", tables.csv_text(extraction.result)))
    run_series = (series.collect(extraction.outcomes)
                  if plot is not False or html else None)
    png, plot_note = _make_plot(extraction, plot, run_series)
    if png:
        files.append(("png", png))
    elif plot is None:  # wanted if possible: say why there is none
        notes.append(plot_note)
    if html:
        images = [(png, _plot_caption(extraction.result))] if png else []
        if history_png:
            images.append((history_png,
                           f"Run history ({history}): each case's mean "
                           "img/s per run over time"))
        files.append(("html", html_report.html_report(
            extraction.result, extraction.name, images, plot_note,
            run_series, extraction.bandwidth)))
    return files, notes


def _plot_caption(result: tables.Result) -> str:
    """The HTML page's words for the PNG (extract/plot.py's layout)."""
    from official_bench.extract import plot as plotting
    top = ("Scaling against devices" if plotting.scaling_panels(result) > 1
           else "Samples/s per section on one device count")
    return f"{top}, and throughput per interval of each case's runs"


def _make_plot(extraction: Extraction, plot: Optional[bool],
               series: Any) -> Tuple[Optional[bytes], Optional[str]]:
    """The PNG when wanted and possible: ``(png_bytes, None)``, or
    ``(None, why_not)`` for the notes and the HTML page."""
    from official_bench.extract import (
        plot as plotting,  # matplotlib is lazy there
    )

    if not extraction.result:
        if plot:
            raise ExtractError(
                f"--plot: nothing to plot, {extraction.log_dir} "
                "holds all-reduce results only")
        return None, "no plot: all-reduce results only (no training runs)"
    if plot or (plot is None and plotting.matplotlib_available()):
        return plotting.png_bytes(extraction.result, extraction.name,
                                  series), None
    if plot is None:
        return None, ("no plot: matplotlib is not installed (pip install "
                      "matplotlib, or the package's [plot] extra)")
    return None, "no plot (--no_plot)"


def side_by_side(path_a: str, path_b: str, output_dir: Optional[str] = None,
                 markdown: bool = True, csv: bool = True
                 ) -> Tuple[str, List[str]]:
    """Side-by-side table of two result files (``--compare``; not a
    verdict: that is judge/compare.py); returns (markdown, written)."""
    a, b = tables.load_result(path_a), tables.load_result(path_b)
    label_a, label_b = tables.compare_labels(path_a, path_b)
    if not tables.pair_models(a, b)[0]:
        raise ExtractError(f"nothing to compare: {path_a} has sections "
                           f"{', '.join(a)}, {path_b} has {', '.join(b)}")
    text = tables.compare_markdown(a, b, label_a, label_b)
    if output_dir is None:
        return text, []
    with _writing_results(output_dir):
        return text, _write_compare(a, b, label_a, label_b, text, output_dir,
                                    markdown, csv)


def _write_compare(a: tables.Result, b: tables.Result, label_a: str,
                   label_b: str, text: str, output_dir: str, markdown: bool,
                   csv: bool) -> List[str]:
    """Write the comparison's Markdown and CSV; returns the paths written."""
    written: List[str] = []
    a_name, b_name = (label.replace(os.sep, "_")
                      for label in (label_a, label_b))
    base = os.path.join(output_dir, f"compare_{a_name}_vs_{b_name}")
    if markdown:
        atomic.write_text_atomic(base + ".md", text)
        written.append(base + ".md")
    if csv:
        atomic.write_text_atomic(base + ".csv",
                                 tables.compare_csv(a, b, label_a, label_b))
        written.append(base + ".csv")
    return written


# --help's exit statuses (contracts/exit_status.help_text).
EXIT_STATUSES = {
    exit_status.OK: "success (excluded runs are listed on stderr)",
    exit_status.FAILED: "bad input",
    exit_status.CONFIG: "bad usage (also a --log_dir holding runs of two "
                        "backends)",
    exit_status.NOT_WRITABLE: "--output_dir cannot be written",
}


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface (DLPerf's flags plus this project's)."""
    p = OneLineParser(
        description="Turn benchmark logs {log_dir}/{N}n{G}g/rn50_b{B}_{dtype}_"
                    "{i}.log into DLPerf's result JSON ({output_dir}/"
                    "{basename(log_dir)}_result.json: average and median "
                    "samples/s per case, speedup against 1n1g), plus a "
                    "Markdown table, a CSV, a PNG plot (scaling, and "
                    "throughput per interval) and a self-contained HTML page "
                    "with the tables, the plot and each case's environment. "
                    "Crashed or truncated runs are listed and left out.",
        epilog=exit_status.help_text(EXIT_STATUSES)
        + " Example: %(prog)s --log_dir logs/tensorflow/resnet50/bz128",
        formatter_class=help_formatter())
    p.add_argument("--log_dir", help="directory holding the {N}n{G}g "
                   "subdirectories (required unless --compare)")
    p.add_argument("--output_dir", default="./result",
                   help="where the result files are written "
                        "(default: %(default)s)")
    windows.add_flags(p)
    p.add_argument("--method", choices=speeds.METHODS, default="mean",
                   help="mean: mean of the intervals' examples/second "
                        "(DLPerf); time: global batch x steps / clock time "
                        "between the first and last counted interval "
                        "(default: %(default)s)")
    p.add_argument("--spread_warn", type=float, default=DEFAULT_SPREAD_WARN,
                   help="warn when a case's runs have a coefficient of "
                        "variation above this many percent (default: "
                        "%(default)s)")
    p.add_argument("--batch_size_per_device", type=int, metavar="N",
                   help="accepted for DLPerf's command lines and ignored, "
                        "as DLPerf's extractors did: the batch comes from "
                        "the log names (rn50_b{B}_...)")
    p.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                   help="print (and write to --output_dir) a side-by-side "
                        "table of two result files instead of extracting")
    p.add_argument("--no_markdown", dest="markdown", action="store_false",
                   help="do not write {name}_result.md")
    p.add_argument("--no_csv", dest="csv", action="store_false",
                   help="do not write {name}_result.csv")
    p.add_argument("--no_html", dest="html", action="store_false",
                   help="do not write {name}_result.html (a self-contained "
                        "page with the tables, the plot and each case's "
                        "environment, written beside the Markdown)")
    p.add_argument("--history", metavar="FILE", default=None,
                   help="also show this run history (official-bench-"
                        "history's file) over time in the HTML page")
    p.add_argument("--json_only", dest="table", action="store_false",
                   help="print the result JSON alone on stdout (for "
                        "scripts): {name}_result.json's text, DLPerf's keys "
                        "and values and more (not DLPerf's stdout); "
                        "default: the JSON, then the Markdown table of "
                        "{name}_result.md")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--plot", dest="plot", action="store_const", const=True,
                       default=None, help="require the PNG plot (fails "
                       "without matplotlib); default: plot when available")
    group.add_argument("--no_plot", dest="plot", action="store_const",
                       const=False, help="do not write the PNG plot")
    return p


def window_note(window: Tuple[int, int]) -> str:
    """The line saying which window --window auto chose."""
    return (f"--window auto: counting steps {window[0]}-{window[1]}, the "
            "longest window every run covers after its first (warm-up) "
            f"interval (= --warmup_batches {window[0]} --train_batches "
            f"{window[1]})")


def ignored_batch_note(batch: int) -> str:
    """The line saying DLPerf's unused --batch_size_per_device is ignored."""
    return (f"--batch_size_per_device {batch} is ignored, as in DLPerf's "
            "extractors: each log's batch per device comes from its name "
            "(rn50_b{B}_{dtype}_{i}.log)")


def stdout_text(extraction: Extraction, table: bool = True) -> str:
    """What the extractor prints: the result JSON as written to
    {name}_result.json (DLPerf's keys and values, and more: docs/extractor.md
    "Outputs"), then (unless --json_only) the Markdown a person reads, as in
    {name}_result.md with the all-reduce table."""
    text = result_json_text(extraction.result)
    if not table:
        return text
    report = (tables.markdown_report(extraction.result, extraction.name)
              if extraction.result else "")
    report += allreduce_logs.markdown(extraction.bandwidth)
    return text + ("\n" + report.strip("\n") + "\n" if report.strip() else "")


def _print_lines(prefix: str, lines: Iterable[str]) -> None:
    """Print messages to stderr, one per line, with a prefix."""
    for line in lines:
        print(f"{prefix}{line}", file=sys.stderr)


def _usage_problem(args: argparse.Namespace) -> Optional[str]:
    """Flags that name no mode, or that the chosen mode would ignore;
    None when fine."""
    if args.compare is None and args.log_dir is None:
        return "--log_dir is required (or --compare A.json B.json)"
    if args.compare is not None:
        ignored = [flag for flag, given in (
            ("--log_dir", args.log_dir is not None),
            ("--history", args.history is not None),
            ("--window", args.window is not None),
            ("--warmup_batches", args.warmup_batches is not None),
            ("--train_batches", args.train_batches is not None)) if given]
        if ignored:
            return (f"{', '.join(ignored)} with --compare: --compare reads "
                    "two result files and extracts nothing")
    if args.history is not None and not (args.html and args.markdown):
        return ("--history is drawn in the HTML page, which --no_html/"
                "--no_markdown turn off")
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status (never calls sys.exit)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits on --help and on usage errors
        return e.code if isinstance(e.code, int) else exit_status.CONFIG
    conflict = _usage_problem(args) or windows.flag_conflict(
        args.window, args.warmup_batches, args.train_batches)
    if conflict:
        print(f"{parser.prog}: error: {conflict}; see --help",
              file=sys.stderr)
        return exit_status.CONFIG
    if args.batch_size_per_device is not None:
        _print_lines("note: ",
                     [ignored_batch_note(args.batch_size_per_device)])
    window = windows.given_or_dlperf(args.warmup_batches,
                                     args.train_batches)
    try:  # a bad flag value is bad usage, before any file is read
        _check_options(*window, args.method, args.spread_warn)
    except ExtractError as e:
        print(f"{parser.prog}: error: {e}; see --help", file=sys.stderr)
        return exit_status.CONFIG
    try:
        if args.compare:
            text, written = side_by_side(args.compare[0], args.compare[1],
                                         args.output_dir, args.markdown,
                                         args.csv)
            print(text, end="")
        else:
            extraction = extract(args.log_dir, *window, args.method,
                                 args.spread_warn, args.window)
            if extraction.chosen_window:
                _print_lines("note: ", [window_note(extraction.chosen_window)])
            _print_lines("warning: ", extraction.warnings)
            _print_lines("note: ", extraction.notes)
            written, notes = write_outputs(extraction, args.output_dir,
                                           args.markdown, args.csv, args.plot,
                                           args.html, args.history)
            _print_lines("note: ", notes)
            if extraction.bandwidth and not args.table:  # stdout: JSON only
                _print_lines("", allreduce_logs.markdown(
                    extraction.bandwidth).strip("\n").splitlines())
            print(stdout_text(extraction, args.table), end="")
    except MixedBackends as e:  # bad usage: the folder given
        print(f"error: {e}", file=sys.stderr)
        return exit_status.CONFIG
    except ExtractError as e:
        print(f"error: {e}", file=sys.stderr)
        return exit_status.FAILED
    except NotWritable as e:
        print(f"error: {e}", file=sys.stderr)
        return exit_status.NOT_WRITABLE
    _print_lines("wrote ", written)
    return exit_status.OK


def run_main() -> None:
    """Console-script entry point ``official-bench-extract``."""
    sys.exit(main())


if __name__ == "__main__":
    run_main()
