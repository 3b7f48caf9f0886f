"""The builder's progress lines (data/build/progress.py)."""

import io

from official_bench.data.build.progress import Progress


def test_the_total_is_printed_once_by_the_last_line():
    """The workers' counts reach the total before the last shard is
    reported written: the loop's line at the total and the final one
    printed 12/12 twice."""
    out = io.StringIO()
    progress = Progress("validation", 12, stream=out, every_seconds=0.0)
    progress.update(5)
    progress.update(12)
    progress.update(12, force=True)
    lines = out.getvalue().splitlines()
    assert [line.split("] ")[2].split(" images")[0] for line in lines] == [
        "5/12", "12/12"], lines
