"""The extractor's HTML report: tables, embedded plot, environment, escaping.

Every property is checked on the file with Python's html.parser; one test
also opens the page in a real headless browser (Debian's ``chromium``; skipped
with the reason when it is not installed) and checks the screenshot, the DOM
after scripts ran (tables, images that decoded) and the console (empty).
"""

import base64
import html.parser
import os
import re
import shutil
import subprocess
import sys

import pytest

from official_bench.extract import extractor as extract, html_report, tables
from support import logkit as kit

REPO = os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "logs", "bz128")
CHROMIUM = shutil.which("chromium")
HOSTILE = '<img src=x onerror="alert(1)"> & <script>alert(2)</script>'


class Page(html.parser.HTMLParser):
    """What a browser would build from the file, as plain Python lists."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.tables, self.images, self.scripts, self.urls = [], [], [], []
        self.tags, self.metas, self.items = [], [], []
        self._row = self._cell = self._li = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        self.urls += [v for k, v in attrs.items()
                      if k in ("src", "href") and v]
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "li":
            self._li = []
        elif tag == "img":
            self.images.append(attrs)
        elif tag == "script":
            self.scripts.append(attrs)
        elif tag == "meta":
            self.metas.append(attrs)

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr":
            self.tables[-1].append(self._row)
        elif tag == "li":
            self.items.append("".join(self._li))
            self._li = None

    def handle_data(self, data):
        for part in (self._cell, self._li):
            if part is not None:
                part.append(data)


def _write(tmp_path, log_dir, plot=False, **kw):
    """Extract ``log_dir`` into tmp_path/out; returns (extraction, html
    path)."""
    extraction = extract.extract(str(log_dir))
    written, _ = extract.write_outputs(extraction, str(tmp_path / "out"),
                                       plot=plot, **kw)
    path = extract.output_paths(str(tmp_path / "out"), extraction.name)["html"]
    assert path in written
    return extraction, path


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _markdown_cells(markdown):
    """Cells of every Markdown table row that is not the header or rule."""
    return [[c.strip() for c in line.strip("|").split("|")]
            for line in markdown.splitlines()
            if line.startswith("| ") and not line.startswith("| node_num")
            and not line.startswith("| -")]


def test_tables_hold_the_markdown_numbers_and_notes(tmp_path):
    extraction, path = _write(tmp_path, FIXTURE)
    page = Page(_read(path))
    results, averages, env = page.tables
    assert results[0] == list(tables.MARKDOWN_COLUMNS)
    markdown = _read(path[:-5] + ".md")
    assert results[1:] == _markdown_cells(markdown)
    # input wait, GPU util: not in the fixtures' JSONs
    assert results[1:] == [
        ["1", "1", "320.00", "1.00", "100.00%", "320.00", "3", "3.12%", "n/a",
         "n/a"],
        ["1", "2", "615.00", "1.92", "96.09%", "307.50", "2 (+1 excluded)",
         "1.15%", "n/a", "n/a"],
        ["2", "4", "1190.00", "3.72", "92.97%", "297.50", "3 (+1 excluded)",
         "0.84%", "n/a", "n/a"]]
    assert page.items == tables.notes(extraction.result["rn50"])
    assert any(i.startswith("excluded 1n2g/rn50_b128_fp32_3.log: crashed")
               for i in page.items)
    assert env[0] == list(html_report.ENV_COLUMNS)
    assert env[1][:9] == ["1n1g", "2.21.0", "2.21.0", "3.11.7", "12.5", "9",
                          "mirrored", "1", "1"]
    assert env[1][10:] == ["1 x Tesla V100-SXM2-16GB", "n/a", "node1", "n/a"]
    assert env[2] == ["1n2g"] + ["n/a"] * 13  # no result JSON there
    # DLPerf's samples/s beside images / time over the same intervals
    assert averages[0] == list(html_report.AVERAGES_COLUMNS)
    assert [row[2] for row in averages[1:]] == ["320.00", "615.00", "1190.00"]
    # the time method's samples/s is not a mean of rates, and says so
    timed = extract.extract(FIXTURE, method="time")
    written, _ = extract.write_outputs(timed, str(tmp_path / "time"),
                                       plot=False)
    page = Page(_read(next(p for p in written if p.endswith(".html"))))
    assert page.tables[1][0][2] == "samples/s (images / clock time)"
    assert page.images == []  # --no_plot: nothing to embed, and it says so
    assert "no plot (--no_plot)" in _read(path)


def test_cpu_kernels_cell_says_what_tensorflow_reported():
    """environment.onednn_enabled (TensorFlow's IsMklEnabled) and the
    runtime.cpu_kernels asked for; n/a from trainers that did not record
    them."""
    cell = html_report.cpu_kernels_cell
    assert cell({"onednn_enabled": True, "cpu_kernels": "auto"}) == \
        "oneDNN (auto)"
    assert cell({"onednn_enabled": False, "cpu_kernels": "eigen"}) == \
        "Eigen (eigen)"
    # A bf16 run without AVX-512: TensorFlow's bf16 ops ran on Eigen.
    assert cell({"onednn_enabled": True, "cpu_kernels": "auto",
                 "cpu_kernels_note": "bf16 ops on Eigen: no AVX-512"}) == \
        "oneDNN (auto; bf16 ops on Eigen: no AVX-512)"
    assert cell({"tensorflow": "2.21.0"}) == "n/a"


def test_page_is_self_contained(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    _, path = _write(tmp_path, FIXTURE, plot=True)
    page = Page(_read(path))
    assert page.urls and all(u.startswith("data:") for u in page.urls)
    assert "link" not in page.tags and "iframe" not in page.tags
    assert [s for s in page.scripts if s.get("src")] == []
    policy = [m["content"] for m in page.metas
              if m.get("http-equiv") == "Content-Security-Policy"]
    assert len(policy) == 1 and "default-src 'none'" in policy[0]
    assert "img-src data:;" in policy[0]


def test_plot_is_embedded_byte_for_byte(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    _, path = _write(tmp_path, FIXTURE, plot=True)
    (img,) = Page(_read(path)).images
    prefix = "data:image/png;base64,"
    assert img["src"].startswith(prefix) and img["alt"]
    with open(path[:-5] + ".png", "rb") as f:
        assert base64.b64decode(img["src"][len(prefix):]) == f.read()


def _hostile_tree(tmp_path):
    """1n2g with two runs on hosts n1 and n2; the GPU name and a host are
    hostile."""
    logs = tmp_path / "bz64"
    for index, host in ((1, "n1"), (2, HOSTILE)):
        path = kit.write_run(logs, "1n2g", [50] + [600] * 5, batch=64,
                             index=index)
        kit.write_json(path[:-4] + ".json", kit.result_json(
            [(k * 100, k * 100 + 100, e)
             for k, e in enumerate([50] + [600] * 5)],
            128, 2, kit.environment(hostname=host, gpu_names=[HOSTILE] * 2)))
    kit.write_run(logs, "1n1g", [50] + [310] * 5, batch=64)
    return logs


def test_text_from_files_is_escaped_and_hosts_of_all_runs_listed(tmp_path):
    _, path = _write(tmp_path, _hostile_tree(tmp_path))
    text = _read(path)
    page = Page(text)
    assert page.images == [] and len(page.scripts) == 1  # only the page's own
    assert "<script>alert(2)" not in text and "&lt;script&gt;alert(2)" in text
    env = {row[0]: row for row in page.tables[-1][1:]}
    assert env["1n2g"][10] == "2 x " + HOSTILE  # shown literally
    assert env["1n2g"][12] == ", ".join(sorted(["n1", HOSTILE]))
    assert env["1n1g"][10:] == ["n/a", "n/a", "n/a", "n/a"]


def test_html_is_written_beside_the_markdown_only(tmp_path, capsys):
    out = tmp_path / "out"
    assert extract.main(["--log_dir", FIXTURE, "--output_dir", str(out),
                         "--no_plot"]) == 0
    assert (out / "bz128_result.html").exists()
    assert "wrote %s" % (out / "bz128_result.html") in capsys.readouterr().err
    for flag, name in (("--no_html", "a"), ("--no_markdown", "b")):
        assert extract.main(["--log_dir", FIXTURE, "--output_dir",
                             str(tmp_path / name), "--no_plot", flag]) == 0
        assert not (tmp_path / name / "bz128_result.html").exists()
    assert (tmp_path / "a" / "bz128_result.md").exists()
    assert "--no_html" in _help(capsys)


def test_page_says_why_it_has_no_plot(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    _, path = _write(tmp_path, FIXTURE, plot=None)
    page = Page(_read(path))
    assert page.images == [] and len(page.tables) == 3
    assert "no plot: matplotlib is not installed" in _read(path)


def _help(capsys):
    extract.main(["--help"])
    return capsys.readouterr().out


# ---- a real browser ---------------------------------------------------------

def open_in_chromium(page, tmp_path):
    """Load ``page`` in headless chromium; returns (DOM after load, console
    lines, screenshot path). Console messages of any level appear on stderr
    as ``...:CONSOLE...`` lines with --enable-logging=stderr."""
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync",
         "--user-data-dir=%s" % (tmp_path / "profile"),
         "--enable-logging=stderr",
         "--v=0", "--virtual-time-budget=5000", "--window-size=1200,2000",
         "--screenshot=%s" % shot, "--dump-dom", "file://%s" % page],
        capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.stdout, console, shot


def _png_size(path):
    """(width, height) from a PNG's IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return (int.from_bytes(head[16:20], "big"),
            int.from_bytes(head[20:24], "big"))


needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (Debian: apt-get install "
    "chromium; .ci/run installs it as root); the html.parser tests above "
    "cover the page's structure")


@needs_chromium
def test_report_in_a_headless_browser(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    from matplotlib import image

    _, path = _write(tmp_path, FIXTURE, plot=True)
    dom, console, shot = open_in_chromium(path, tmp_path)
    assert console == []
    assert 'data-images-decoded="1/1"' in dom  # the plot decoded in the page
    assert len(re.findall(r"<table\b", dom)) == 3
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', dom)) == 1
    assert "1190.00" in dom and "Tesla V100-SXM2-16GB" in dom
    assert _png_size(shot) == (1200, 2000)
    pixels = image.imread(str(shot))
    drawn = (pixels[..., :3] < 0.9).any(axis=-1).mean()
    assert drawn > 0.02  # text, tables and the plot: far from a blank page


@needs_chromium
def test_browser_check_sees_broken_images_and_console_errors(tmp_path):
    # The check above must be able to fail: same page machinery, a PNG that
    # does not decode and a script that logs an error.
    text = html_report.html_report({"rn50": {"1n1g": {"median_speed": 1.0}}},
                                   images=[(b"\x89PNG not really", "broken")])
    text = text.replace("</body>",
                        "<script>console.error('boom')</script></body>")
    page = tmp_path / "broken.html"
    page.write_text(text, encoding="utf-8")
    dom, console, _ = open_in_chromium(page, tmp_path)
    assert 'data-images-decoded="0/1"' in dom
    assert any('"boom"' in line for line in console)
