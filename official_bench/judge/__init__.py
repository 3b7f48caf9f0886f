"""Judging runs: is B faster than A, and did the latest run get slower?

Modules: verdict.py (the one rule: ratio of medians, a bootstrap interval
from the runs' spread, the verdict), compare.py (`official-bench-compare`
on two log trees or folders of result.json files, or on two setups that
ab.py, the A/B runner, starts as trainer processes, alternated on this
machine) and history.py (`official-bench-history` on
contracts/history_db.py's file: the latest run of each case against the
earlier ones).

A layer above extract/: runs are read exactly as the extractor reads them
(extract/logparse.py, extractor.measure_log, the same window and excluded
runs), and the history's plot is extract/history_plot.py's, which the
extractor's HTML page embeds too. Nothing here imports TensorFlow
(tests/unit/test_layering.py checks this): judging runs on any machine.
"""
