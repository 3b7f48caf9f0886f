"""The extractor: benchmark logs -> per-run speeds -> per-case statistics ->
tables, JSON, plot and HTML (the `official-bench-extract` console script and
extract_tensorflow_logs.py).

Modules, data flowing down the list: logparse (finding the logs, named by
contracts/log_tree.py, and the TimeHistory lines in them; result.json is
read by contracts/result_json.py), speeds (one run's speed or why it is
left out), rounding (DLPerf's arithmetic to the hundredth), cases
(per-case statistics, speedup, the DLPerf-shaped dictionary),
allreduce_logs and scaling (the all-reduce benchmark's table and the
scaling model), subject (what a case measured: model, image size, device,
the CPU smoke-run mark) and model_flops (TFLOP/s and MFU per case), tables
(Markdown, CSV, comparisons), series, plot and html_report, windows
(`--window auto`), history_plot (the run history over time, for the HTML
page and `official-bench-history --plot`), and extractor (the API
`extract(log_dir)` and the CLI). Judging runs (compare, A/B, verdict,
history) is official_bench/judge/, which reads runs through this package.

Nothing here imports TensorFlow: extraction must run on a machine without
it (tests/unit/test_layering.py checks this). `extract` is not re-exported
here: the function would shadow its package's name.
"""

from official_bench.extract.errors import ExtractError

__all__ = ["ExtractError"]
