"""The TFRecord builder's command line: image folders -> ImageNet-style shards.

Parses the flags, runs builder.build (or record_verify for --verify) and
turns each failure into its one error line and exit status. What it writes,
the layouts it reads, restarts and exit statuses are its --help (HELP
below; docs/data.md for the user's side).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import textwrap
from typing import Optional, Sequence

from official_bench.contracts import exit_status
from official_bench.data.build import manifest as manifest_lib
from official_bench.data.build.builder import BuildOptions, build
from official_bench.data.build.image_codec import NeedsPillow
from official_bench.data.build.manifest import (
    LABELS_FILE,
    MANIFEST,
    SKIPPED_FILE,
)
from official_bench.data.build.shards import WorkerLost
from official_bench.data.build.sources import BuildError, read_lines
from official_bench.host.flag_errors import OneLineParser
from official_bench.host.terminal import help_formatter, help_width
from official_bench.host.write_errors import NotWritable

# --help's epilog: usage, layouts, outputs, restarts (then EXIT_STATUSES).
HELP = """\
    python -m official_bench.data.build.build_records \\
        --input_dir=/data/digits --output_dir=/data/digits-records \\
        --train_shards=4 --validation_shards=2 [--verify]

    # ImageNet as distributed (train synset folders, flat validation folder):
    python -m official_bench.data.build.build_records --layout=imagenet \\
        --train_dir=/raw/train --validation_dir=/raw/val \\
        --validation_labels=imagenet_2012_validation_synset_labels.txt \\
        [--bounding_boxes=imagenet_2012_bounding_boxes.csv] \\
        --output_dir=/data/imagenet          # 1024 + 128 shards by default

    # Check existing shards only: count records, decode every image.
    python -m official_bench.data.build.build_records \\
        --output_dir=/data/imagenet --verify

Layouts:
- imagefolder: `<input_dir>/train/<class>/*.jpg` and
  `<input_dir>/validation/<class>/*.jpg` (`val/` also accepted).
- imagenet: train as above (synset folders); validation is one flat folder
  plus a label file: one class (synset) per line for the images in sorted
  file-name order (`imagenet_2012_validation_synset_labels.txt`), or
  `<file name> <class>` per line.

Output: `train-00000-of-01024`, ..., `validation-00000-of-00128` with keys
image/encoded (RGB JPEG), image/class/label (1-based), image/class/synset,
image/class/text, image/height, image/width, image/format, image/filename,
image/colorspace, image/channels and image/object/bbox/{xmin,ymin,xmax,ymax}
(from --bounding_boxes); `labels.txt` (line i holds the class of label i);
`build_records.json` (what was built, checked on a re-run; after a finished
build also the record and skipped counts per split, which --verify checks).

""" + f"""\
Classes are the sorted train folder names (or --class_names), so the class
index is deterministic. Images are assigned to shards after a seeded shuffle
(--seed), so every shard mixes classes. RGB JPEGs are stored unchanged; CMYK,
grayscale, PNG and other formats are converted to RGB JPEG (--quality), with
Pillow (the `builder` extra) if installed, else with TensorFlow, which reads
JPEG, PNG, GIF, BMP and WebP (TIFF and PPM/PGM then stop the build: \
exit {exit_status.CONFIG},
saying what to install). Unreadable images are skipped, listed in
skipped_images.txt and reported at the end.

Restartable: each shard is written under a hidden temporary name and renamed
when complete, after a record of what it skipped (`.shards/<shard>.json`);
shards that already exist are skipped on a re-run (the same inputs, seed and
shard counts give the same assignment, which build_records.json guards), and
every run ends by merging the records of all shards into
skipped_images.txt and build_records.json. Workers (--num_workers) convert
images in parallel processes that die with this one (even on SIGKILL);
SIGTERM or Ctrl-C stops the workers, keeps finished shards and exits
128+signal ({exit_status.TERMINATED}, {exit_status.INTERRUPTED}).
"""

# --help's exit statuses (contracts/exit_status.help_text).
EXIT_STATUSES = {
    exit_status.OK: "done",
    exit_status.FAILED: "--verify found problems or a worker died (killed, "
                        "e.g. by the out-of-memory killer)",
    exit_status.CONFIG: "bad arguments or inputs",
    exit_status.NOT_WRITABLE: "a file could not be written (no space, a "
                              "quota, a read-only file system or no "
                              "permission: the last line names it and the "
                              "free space there; finished shards are kept)",
    exit_status.SIGNALS: "stopped by a signal",
}


def _parser() -> argparse.ArgumentParser:
    d = BuildOptions(output_dir="")  # the defaults, shown by --help
    p = OneLineParser(
        prog="official-bench-build-records",
        description="Write image folders as ImageNet-style TFRecord shards.",
        formatter_class=help_formatter(argparse.RawDescriptionHelpFormatter),
        epilog=HELP + "\n" + textwrap.fill(
            exit_status.help_text(EXIT_STATUSES), help_width()) + "\n")
    p.add_argument("--output_dir", required=True,
                   help="where the shards, labels.txt and "
                        "build_records.json go")
    p.add_argument("--input_dir", help="root holding train/ and validation/")
    p.add_argument("--layout", choices=("imagefolder", "imagenet"),
                   default=d.layout,
                   help=f"how the inputs are laid out (Layouts below; "
                        f"default {d.layout})")
    p.add_argument("--train_dir",
                   help="train folder (default input_dir/train)")
    p.add_argument("--validation_dir",
                   help="validation folder (default input_dir/validation "
                        "or input_dir/val)")
    p.add_argument("--validation_labels",
                   help="imagenet layout: the validation label file")
    p.add_argument("--bounding_boxes",
                   help="CSV file,xmin,ymin,xmax,ymax (fractions), optional")
    p.add_argument("--class_names",
                   help="file with one class per line: fixes the class order "
                        "(default: sorted train folder names)")
    p.add_argument("--class_text",
                   help="'<class> <text>' per line for image/class/text")
    p.add_argument("--splits", default=d.splits,
                   help=f"comma-separated splits to build (default "
                        f"{d.splits})")
    p.add_argument("--train_shards", type=int, default=d.train_shards,
                   help=f"train files to write (default {d.train_shards})")
    p.add_argument("--validation_shards", type=int,
                   default=d.validation_shards,
                   help=f"validation files to write (default "
                        f"{d.validation_shards})")
    p.add_argument("--num_workers", type=int, default=d.num_workers,
                   help=f"processes converting images (default: the "
                        f"CPUs, {d.num_workers} here)")
    p.add_argument("--quality", type=int, default=d.quality,
                   help=f"JPEG quality for converted images (default "
                        f"{d.quality})")
    p.add_argument("--seed", type=int, default=d.seed,
                   help=f"shuffle seed for the image -> shard assignment "
                        f"(default {d.seed})")
    p.add_argument("--verify", action="store_true",
                   help="afterwards (or, without inputs, only) count records "
                        "and decode every image")
    return p


class Interrupted(BaseException):
    """SIGTERM/SIGINT reached the builder (BaseException: nothing on the
    way up may swallow it)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stop_on_signals():
    """Turns SIGTERM/SIGINT into Interrupted in the main thread, so the
    pool is stopped on the way out; restores the old handlers after."""
    def handler(signum, frame):
        raise Interrupted(signum)
    old = {}
    try:
        for signum in (signal.SIGTERM, signal.SIGINT):
            old[signum] = signal.signal(signum, handler)
    except ValueError:  # not the main thread: leave signals alone
        pass
    try:
        yield
    finally:
        for signum, previous in old.items():
            signal.signal(signum, previous)


def main(argv: Optional[Sequence[str]] = None, log=print) -> int:
    args = _parser().parse_args(argv)
    try:
        with _stop_on_signals():
            has_input = bool(args.input_dir or args.train_dir or
                             args.validation_dir)
            if not has_input and not args.verify:
                raise BuildError("give --input_dir (or --train_dir / "
                                 "--validation_dir), or --verify to check "
                                 "existing shards")
            if has_input:
                build(BuildOptions.from_namespace(args), log=log)
            if args.verify:
                return _verify_cli(args, log)
    except Interrupted as e:
        name = signal.Signals(e.signum).name
        print(f"build_records: stopped by {name}; finished shards are kept, "
              "re-run the same command to build the rest", file=sys.stderr)
        return exit_status.by_signal(e.signum)
    except (BuildError, NeedsPillow) as e:
        print(f"error: {e}", file=sys.stderr)
        return exit_status.CONFIG
    except WorkerLost as e:
        print(f"error: build_records: {e}", file=sys.stderr)
        return exit_status.FAILED
    except NotWritable as e:
        print("build_records: finished shards are kept; make room (or fix "
              "the folder) and re-run the same command to build the rest",
              file=sys.stderr)
        print(f"error: {e}", file=sys.stderr)
        return exit_status.NOT_WRITABLE
    return exit_status.OK


def _verify_cli(args, log) -> int:
    if not os.path.isdir(args.output_dir):
        what = ("is not a folder" if os.path.exists(args.output_dir)
                else "does not exist")
        raise BuildError(f"--verify: --output_dir {args.output_dir} {what}; "
                         "give the folder the shards were built in")
    manifest = manifest_lib.read_manifest(args.output_dir)
    expected, expected_shards, num_classes = None, None, None
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    if manifest:
        num_classes = len(manifest.get("classes") or []) or None
        infos = manifest.get("splits", {})
        expected = {s: info["records"] for s, info in infos.items()
                    if info.get("records") is not None}
        expected_shards = {s: info["shards"] for s, info in infos.items()}
        for split in splits:
            if split in infos and split not in expected:
                log(f"verify [{split}]: {MANIFEST} has no record count (the "
                    "build did not finish, or an older builder made it); "
                    "record count not compared")
        skipped = sum(info.get("skipped") or 0 for info in infos.values())
        if skipped:
            log(f"verify: {skipped} source image(s) were skipped when "
                f"building ({SKIPPED_FILE}); expected counts exclude them")
    elif os.path.exists(os.path.join(args.output_dir, LABELS_FILE)):
        num_classes = len(read_lines(os.path.join(args.output_dir,
                                                   LABELS_FILE)))
    from official_bench.data.build.record_verify import verify
    problems = verify(args.output_dir, splits, num_classes, expected, log=log,
                      expected_shards=expected_shards)
    log("verify: OK" if not problems else f"verify: {problems} problem(s)")
    return 1 if problems else 0


def run_main() -> None:
    """Console-script entry (official-bench-build-records)."""
    code = main()
    if exit_status.signal_number(code) is not None:
        # Stopped by a signal: the pool is stopped and its workers reaped,
        # every finished shard is in place. Interpreter exit would still
        # join concurrent.futures' manager thread, which can wait forever on
        # a worker killed halfway through a message (once under load after
        # Ctrl-C, despite worker_pool's unblocking): leave at once.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run_main()
