"""Results: benchmark logs -> per-run speeds -> per-case statistics -> reports.

Modules, one concern each (data flows down the list):

* :mod:`~official_bench.extract.logparse` -- finding the logs (their names
  are :mod:`official_bench.contracts.log_tree`'s) and the TimeHistory
  lines, finish marker, tracebacks and clock times in a log;
* :mod:`~official_bench.contracts.result_json` -- the trainer's per-run result JSON;
* :mod:`~official_bench.extract.speeds` -- one run's speed (``mean`` or
  ``time`` method) or the reason it is excluded;
* :mod:`~official_bench.extract.rounding` -- DLPerf's sums and roundings, so
  that the numbers equal DLPerf's to the hundredth;
* :mod:`~official_bench.extract.cases` -- per-case statistics, speedup,
  efficiency, spread, and the DLPerf-shaped result dictionary;
* :mod:`~official_bench.extract.tables` -- Markdown, CSV, comparisons;
* :mod:`~official_bench.extract.plot` -- PNG plot (optional matplotlib);
* :mod:`~official_bench.host.atomic` -- atomic file writes;
* :mod:`~official_bench.extract.extractor` -- the extractor API and CLI.

Nothing here imports TensorFlow: extraction must stay fast and run on a
machine without it.

Entry points: ``official_bench.extract.extractor.extract(log_dir, ...)`` (an
``Extraction``: result dictionary, every run's outcome, warnings), ``main(argv)``
(the CLI). They are not re-exported here: the function ``extract`` would
shadow its own module, and ``python -m official_bench.extract.extractor`` must
not find the module imported already.
"""

from official_bench.extract.errors import ExtractError

__all__ = ["ExtractError"]
