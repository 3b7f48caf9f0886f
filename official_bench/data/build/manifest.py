"""build_records.json, labels.txt and skipped_images.txt: what a build
made. The manifest is checked when a build starts (a re-run must match the
settings its finished shards were made with) and rewritten when it ends,
with the record and skipped counts of every finished split."""

from __future__ import annotations

import json
import os
from typing import Dict, List, Tuple

from official_bench.contracts import record_names
from official_bench.data.build import shard_skips
from official_bench.data.build.shards import shard_name
from official_bench.data.build.sources import BuildError
from official_bench.host.atomic import write_bytes_atomic, write_text_atomic
from official_bench.host.write_errors import writing

MANIFEST = record_names.BUILD_MANIFEST
LABELS_FILE = "labels.txt"
SKIPPED_FILE = "skipped_images.txt"


def read_manifest(output_dir: str) -> Dict:
    path = os.path.join(output_dir, MANIFEST)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def check_manifest(output_dir: str, manifest: Dict) -> None:
    path = os.path.join(output_dir, MANIFEST)
    old = read_manifest(output_dir)
    for split, info in manifest["splits"].items():
        before = old.get("splits", {}).get(split)
        keys = ("images", "shards", "seed")
        if before and any(before.get(k) != info[k] for k in keys):
            raise BuildError(
                f"{path}: split {split} was started with "
                f"{ {k: before.get(k) for k in keys} }, now "
                f"{ {k: info[k] for k in keys} }; finished shards would not "
                "match: use a new --output_dir or the old settings")
    if old.get("classes") and old["classes"] != manifest["classes"]:
        raise BuildError(f"{path}: the class list changed since the shards "
                         "were started; use a new --output_dir")


def start_manifest(output_dir: str, manifest: Dict) -> Dict:
    """Writes the manifest of a run about to start: this run's splits lose
    their record counts until it finishes; other splits are kept."""
    old = read_manifest(output_dir)
    merged = dict(manifest)
    merged["splits"] = {**old.get("splits", {}), **manifest["splits"]}
    _write(os.path.join(output_dir, MANIFEST), json.dumps(merged, indent=1)
           + "\n", "the build's manifest")
    return merged


def _write(path: str, text: str, what: str) -> None:
    """Atomically; a full disk or a read-only folder is NotWritable (one
    line naming the file and the free space), not a traceback."""
    with writing(path, what):
        write_text_atomic(path, text)


def finish(output_dir: str, manifest: Dict, log=print) -> List[Tuple[str,
                                                                   str]]:
    """Merges the per-shard records of every finished shard into
    skipped_images.txt and the record counts of build_records.json;
    returns all skipped images. Run at the end of every build, so a re-run
    that rebuilt only some shards still lists what earlier runs skipped."""
    all_skipped: List[Tuple[str, str]] = []
    for split, info in manifest["splits"].items():
        names = [shard_name(split, i, info["shards"])
                 for i in range(info["shards"])]
        finished = [n for n in names
                    if os.path.exists(os.path.join(output_dir, n))]
        try:
            total, skipped, unrecorded = shard_skips.merge(output_dir,
                                                           finished)
        except ValueError as e:
            raise BuildError(str(e)) from e
        all_skipped.extend(skipped)
        info.pop("records", None)
        info.pop("skipped", None)
        if unrecorded:
            log(f"WARNING: [{split}] {len(unrecorded)} shard(s) have no "
                f"record of skipped images (e.g. {unrecorded[0]}, from an "
                "older builder); --verify will not compare record counts")
        elif len(finished) == len(names):
            info["records"], info["skipped"] = total, len(skipped)
    _write(os.path.join(output_dir, MANIFEST),
           json.dumps(manifest, indent=1) + "\n", "the build's manifest")
    path = os.path.join(output_dir, SKIPPED_FILE)
    if all_skipped:
        # Paths as on disk, also those that are not UTF-8.
        text = "".join(f"{image}\t{why}\n" for image, why in all_skipped)
        with writing(path, "the list of skipped images"):
            write_bytes_atomic(path, text.encode("utf-8", "surrogateescape"))
    elif os.path.exists(path):
        os.remove(path)
    return all_skipped

