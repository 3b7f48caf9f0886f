"""Results: benchmark logs -> per-run speeds -> per-case statistics -> reports.

Modules, one concern each (data flows down the list):

* :mod:`~official_bench.results.logparse` -- finding the logs (their names
  are :mod:`official_bench.contracts.log_tree`'s) and the TimeHistory
  lines, finish marker, tracebacks and clock times in a log;
* :mod:`~official_bench.results.runjson` -- the trainer's per-run result JSON;
* :mod:`~official_bench.results.runspeed` -- one run's speed (``mean`` or
  ``time`` method) or the reason it is excluded;
* :mod:`~official_bench.results.rounding` -- DLPerf's sums and roundings, so
  that the numbers equal DLPerf's to the hundredth;
* :mod:`~official_bench.results.cases` -- per-case statistics, speedup,
  efficiency, spread, and the DLPerf-shaped result dictionary;
* :mod:`~official_bench.results.report` -- Markdown, CSV, comparisons;
* :mod:`~official_bench.results.plot` -- PNG plot (optional matplotlib);
* :mod:`~official_bench.results.atomic` -- atomic file writes;
* :mod:`~official_bench.results.extract` -- the extractor API and CLI.

Nothing here imports TensorFlow: extraction must stay fast and run on a
machine without it.

Entry points: ``official_bench.results.extract.extract(log_dir, ...)`` (an
``Extraction``: result dictionary, every run's outcome, warnings), ``main(argv)``
(the CLI). They are not re-exported here: the function ``extract`` would
shadow its own module, and ``python -m official_bench.results.extract`` must
not find the module imported already.
"""

from official_bench.results.errors import ExtractError

__all__ = ["ExtractError"]
