"""The run history drawn over time, for `official-bench-history --plot` and
for the extractor's HTML report (`--history FILE`), which embeds it."""

from __future__ import annotations

import datetime
import io
from typing import Dict, List, Mapping, Sequence

from official_bench.contracts import history_db
from official_bench.contracts.history_db import HistoryError, Row
from official_bench.extract.errors import ExtractError


def by_case(rows: Sequence[Row]) -> Dict[str, List[Row]]:
    """Rows grouped by case label, each group in time order."""
    out: Dict[str, List[Row]] = {}
    for row in rows:
        out.setdefault(row.case_label, []).append(row)
    return out


def png_bytes(cases: Mapping[str, Sequence[Row]]) -> bytes:
    """Each case's mean rate per run against the run's time, as a PNG;
    ExtractError without matplotlib (the `plot` extra)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.dates as mdates
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ExtractError("the history plot needs matplotlib (pip install "
                           f"'official_bench[plot]'): {e}") from None
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for label, rows in cases.items():
        times = [datetime.datetime.fromtimestamp(r.unix_time,
                                                 datetime.timezone.utc)
                 for r in rows]
        ax.plot(times, [r.mean_rate for r in rows], marker="o", label=label)
    ax.set_ylabel("images/second (mean of intervals)")
    ax.set_title("official_bench run history")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d\n%H:%M"))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def history_figure(path: str) -> bytes:
    """The PNG of every case in the history at ``path``; ExtractError when
    the file is not a history or holds no run (the report would be empty)."""
    try:
        rows = history_db.read_rows(path)
    except HistoryError as e:
        raise ExtractError(str(e)) from None
    if not rows:
        raise ExtractError(f"the history {path} holds no run yet")
    return png_bytes(by_case(rows))
