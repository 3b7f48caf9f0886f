"""The PNG and the HTML page name what was measured (issue 28 §3): model and
image size, CPU or GPU model, the CPU smoke-run mark, TensorFlow's CUDA as a
build version; checked on the page's text and on the figure's objects."""

import html.parser

import pytest

from official_bench.extract import extractor as extract, plot, series, subject
from support import logkit as kit

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
SMOKE_CONFIG = {"model": {"name": "resnet", "model_params": {"depth": 50}},
                "train_dataset": {"image_size": 64, "builder": "synthetic"},
                "runtime": {"num_gpus": 0}}
CPU_ENV = dict(kit.environment(num_replicas=1), devices=[CPU], gpu_names=[],
               cpu_model="AMD EPYC 7B13", cuda_version="12.5.1",
               cudnn_version="9", is_cuda_build=True)


def _tree(root, env=CPU_ENV, config=SMOKE_CONFIG, name="bz16"):
    """A CPU try: 1n1g, batch 16, log_steps 10, two runs with result JSONs."""
    logs = root / name
    for index in (1, 2):
        speeds = [5.0] + [20.0 + index] * 5
        path = kit.write_run(logs, "1n1g", speeds, batch=16, index=index,
                             log_steps=10)
        data = kit.result_json([(k * 10, k * 10 + 10, e)
                                for k, e in enumerate(speeds)], 16, 1, env)
        data["config"] = config
        kit.write_json(path[:-4] + ".json", data)
    return str(logs)


class Text(html.parser.HTMLParser):
    """Text of each element of the page, by tag and class."""

    def __init__(self, page):
        super().__init__(convert_charrefs=True)
        self.found, self._open = [], []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self._open.append((tag, dict(attrs).get("class")))

    def handle_endtag(self, tag):
        if self._open:
            self._open.pop()

    def handle_data(self, data):
        if self._open and data.strip():
            self.found.append((*self._open[-1], data.strip()))

    def of(self, tag, css=None):
        return [t for g, c, t in self.found if g == tag and (css is None or
                                                            c == css)]


def _page(tmp_path, logs):
    extraction = extract.extract(logs, window="auto")
    written, _ = extract.write_outputs(extraction, str(tmp_path / "out"),
                                       plot=False)
    path = next(p for p in written if p.endswith(".html"))
    with open(path, encoding="utf-8") as f:
        return extraction, f.read()


def test_cpu_try_html_names_model_image_size_cpu_and_smoke_run(tmp_path):
    extraction, page = _page(tmp_path, _tree(tmp_path))
    text = Text(page)
    (h1,) = text.of("h1")
    assert h1 == ("Throughput of ResNet-50 v1.5, 64x64 images (synthetic "
                  "data), CPU: AMD EPYC 7B13: bz16")
    assert text.of("title") == [h1]
    assert text.of("p", "smoke") == [subject.SMOKE_TEXT]
    assert "no GPU used; TensorFlow built with CUDA 12.5.1, cuDNN 9" in \
        text.of("p", "note")
    # CUDA is never shown as if it were the machine's
    assert page.count("CUDA 12.5.1") == page.count("built with CUDA 12.5.1")
    # a CPU section's device column is not called gpu_num
    headers = text.of("th")
    assert "gpu_num" not in headers and "devices (CPU)" in headers
    entry = extraction.result["rn50"]["1n1g"]
    assert entry["measured"] == {
        "model": "ResNet-50 v1.5", "image_size": 64, "data": "synthetic",
        "device_kind": "cpu", "device": "AMD EPYC 7B13", "smoke_run": True,
        "tensorflow_cuda_build":
            "no GPU used; TensorFlow built with CUDA 12.5.1, cuDNN 9"}
    # the environment table has the CPU's name and the build label
    assert "TF built with CUDA" in headers and "AMD EPYC 7B13" in text.of("td")


def test_gpu_run_names_the_gpu_model_and_is_not_a_smoke_run(tmp_path):
    env = dict(CPU_ENV,
               devices=["/job:localhost/replica:0/task:0/device:GPU:0"],
               gpu_names=["NVIDIA A100-SXM4-40GB"], cuda_version="12.5")
    config = {"model": {"name": "resnet", "model_params": {"depth": 50}},
              "train_dataset": {"image_size": 224, "builder": "records"},
              "runtime": {"num_gpus": 1}}
    _, page = _page(tmp_path, _tree(tmp_path, env, config))
    text = Text(page)
    assert text.of("h1") == ["Throughput of ResNet-50 v1.5, 224x224 images "
                             "(records data), GPU: NVIDIA A100-SXM4-40GB: "
                             "bz16"]
    assert subject.SMOKE_TEXT not in page
    assert "TensorFlow built with CUDA 12.5, cuDNN 9" in text.of("p", "note")
    assert "no GPU used" not in page
    assert "gpu_num" in text.of("th")


def test_logs_without_result_json_say_what_is_not_known(tmp_path):
    logs = tmp_path / "bz128"
    kit.write_run(logs, "1n1g", [50.0] + [300.0] * 5)
    _, page = _page(tmp_path, str(logs))
    assert Text(page).of("h1") == [f"Throughput of {subject.UNKNOWN}: bz128"]
    assert subject.SMOKE_TEXT not in page


def test_plot_title_and_warm_up_point(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    extraction = extract.extract(_tree(tmp_path), window="auto")
    fig = plot.figure(extraction.result, "bz16",
                      series.collect(extraction.outcomes))
    title = fig.get_suptitle()
    assert title.splitlines() == [
        "ResNet-50 v1.5, 64x64 images (synthetic data), CPU: AMD EPYC 7B13: "
        "bz16",
        subject.SMOKE_TEXT + " | no GPU used; TensorFlow built with CUDA "
        "12.5.1, cuDNN 9"]
    intervals = fig.axes[-1]
    lines = {line.get_label(): line for line in intervals.lines}
    median = lines["1n1g (median run 1)"]
    assert list(median.get_xdata()) == [20, 30, 40, 50, 60]  # no warm-up
    assert list(lines[plot.NOT_COUNTED].get_xdata()) == [10]
    assert lines[plot.NOT_COUNTED].get_linestyle() == "None"


@pytest.mark.parametrize("env, text", [
    ({"is_cuda_build": False, "cuda_version": None},
     "TensorFlow built without CUDA"),
    ({"cuda_version": "12.3", "cudnn_version": None},
     "TensorFlow built with CUDA 12.3"),
    ({}, None),
])
def test_cuda_is_labelled_as_tensorflows_build(env, text):
    assert subject.cuda_build_text("gpu", env) == text


def test_device_kind_falls_back_to_the_config_then_the_gpu_names():
    assert subject.device_kind({"runtime": {"num_gpus": 0}}, {}) == "cpu"
    assert subject.device_kind({"runtime": {"num_gpus": 8}}, {}) == "gpu"
    assert subject.device_kind(None, {"gpu_names": ["T4"]}) == "gpu"
    assert subject.device_kind(None, {}) is None
    assert subject.model_name({"model": {"name": "resnet_cifar",
                                         "model_params": {"width": 2}}}) == \
        "ResNet-20 (CIFAR), width 2"


def test_markdown_says_it_too_but_only_when_a_result_json_did(tmp_path):
    from official_bench.extract import tables
    result = extract.extract(_tree(tmp_path), window="auto").result
    lines = tables.markdown_report(result, "bz16").splitlines()
    assert lines[:7] == [
        "# ResNet-50 v1.5 throughput: bz16", "",
        "Measured: ResNet-50 v1.5, 64x64 images (synthetic data), CPU: AMD "
        "EPYC 7B13", "", f"**{subject.SMOKE_TEXT}**", "",
        "no GPU used; TensorFlow built with CUDA 12.5.1, cuDNN 9"]
    logs = tmp_path / "plain"
    kit.write_run(logs, "1n1g", [50.0] + [300.0] * 5)
    plain = tables.markdown_report(extract.extract(str(logs)).result, "plain")
    assert plain.startswith("# ResNet-50 v1.5 throughput: plain\n\n## rn50")
    assert "Measured" not in plain
