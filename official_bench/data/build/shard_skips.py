"""Per-shard records of what each finished shard holds and what it skipped.

A build can be killed and re-run; the re-run only rebuilds missing shards,
so the list of skipped (undecodable) images cannot live only in the memory
of one run. Each shard gets a small JSON record in `<output_dir>/.shards/`
(hidden, so `train-*` globs and the records reader never see it), written
atomically *before* the shard itself: whenever a shard exists, its record
does. At the end of every run the records of all finished shards are merged
into skipped_images.txt and into the split's record count in
build_records.json, which --verify compares against.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

from official_bench.data.records import set_counts
from official_bench.host.atomic import write_text_atomic
from official_bench.host.write_errors import writing

# The trainer reads these records too (set_counts.built_records).
RECORDS_DIR = set_counts.SHARD_RECORDS
record_path = set_counts.shard_record_path


def write_record(output_dir: str, shard: str, images: int, records: int,
                 skipped: Sequence[Tuple[str, str]]) -> None:
    """Atomically records one shard; call before writing the shard."""
    body = {"shard": shard, "images": images, "records": records,
            "skipped": [[path, why] for path, why in skipped]}
    path = record_path(output_dir, shard)
    with writing(path, "the shard's record of skipped images"):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_text_atomic(path, json.dumps(body, indent=1) + "\n")


def read_record(output_dir: str, shard: str) -> Optional[Dict]:
    """The shard's record, or None if there is none (an older builder)."""
    path = record_path(output_dir, shard)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: unreadable shard record ({e}); delete it "
                         "and the shard it describes, then re-run") from e


def remove_stale_temporaries(output_dir: str) -> None:
    """Temporaries of records a killed run was writing."""
    directory = os.path.join(output_dir, RECORDS_DIR)
    if not os.path.isdir(directory):
        return
    for name in os.listdir(directory):
        if name.startswith(".") and name.endswith(".tmp"):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(directory, name))


def merge(output_dir: str, shards: Sequence[str]
          ) -> Tuple[Optional[int], List[Tuple[str, str]], List[str]]:
    """(records in `shards` or None if unknown, [(path, why)] skipped,
    shards without a record). Only finished shards may be passed."""
    total: Optional[int] = 0
    skipped: List[Tuple[str, str]] = []
    missing: List[str] = []
    for shard in shards:
        record = read_record(output_dir, shard)
        if record is None:
            missing.append(shard)
            total = None
            continue
        if total is not None:
            total += int(record["records"])
        skipped.extend((path, why) for path, why in record["skipped"])
    return total, skipped, missing
