#!/usr/bin/env python3
"""DLPerf-compatible entry: extract throughput results from benchmark logs.

    python extract_tensorflow_logs.py --log_dir logs/tensorflow/resnet50/bz128

A thin wrapper over :mod:`official_bench.extract.extractor` (same as the
``official-bench-extract`` console script); see ``--help``. Works from any
working directory without installing the package: the repository root is put
first on ``sys.path`` so this checkout's package is the one used.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from official_bench.extract.extractor import run_main  # noqa: E402

if __name__ == "__main__":
    run_main()
