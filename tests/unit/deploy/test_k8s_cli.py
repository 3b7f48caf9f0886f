"""official-bench-k8s (official_bench/deploy/k8s_cli.py): flags -> YAML on
stdout that reads back as the manifests; the Secret's command in the
header; bad flags and values (names and the image against their grammars,
test_k8s_names.py) in one line, exit 2, nothing on stdout. --help's width is
tests/unit/test_console_help.py's."""

import subprocess
import sys

import pytest
import yaml

from official_bench.deploy import k8s_cli, kubernetes as k8s
from support.helpers import REPO, cli_env

BASE = ["--nodes", "2", "--gpus", "8", "--image", "reg.example/ob:1"]


def test_yaml_reads_back_as_the_manifests_of_the_flags(capsys):
    argv = BASE + ["--kind", "jobset", "--batch", "128", "--dtype", "bf16",
                   "--test-num", "3", "--name", "rn50", "--namespace", "ml",
                   "--logs-pvc", "logs", "--port", "3000"]
    assert k8s_cli.main(argv) == 0
    out = capsys.readouterr().out
    docs = list(yaml.safe_load_all(out))
    assert docs == k8s.manifests(k8s.Options(
        nodes=2, gpus=8, image="reg.example/ob:1", kind="jobset",
        batch=128, dtype="bf16", test_num=3, name="rn50", namespace="ml",
        logs_pvc="logs", port=3000))
    header = [l for l in out.splitlines() if l.startswith("#")]
    assert any("kubectl -n ml create secret generic rn50-barrier "
               "--from-literal=secret=" in l for l in header)
    assert any("JobSet controller" in l for l in header)


def test_defaults_are_an_indexed_job():
    docs = k8s_cli.render(k8s_cli.options(k8s_cli.build_parser()
                                          .parse_args(BASE)))
    kinds = [d["kind"] for d in yaml.safe_load_all(docs)]
    assert kinds == ["Service", "Job"]


@pytest.mark.parametrize("argv,words", [
    (BASE + ["--kind", "mpijob"], ["--kind", "'job', 'tfjob', 'jobset'"]),
    (BASE + ["--name", "Bad_Name"], ["--name 'Bad_Name'", "DNS-1035 label"]),
    (BASE + ["--image", "my image:latest"],
     ["--image 'my image:latest': not an image reference",
      "[registry[:port]/]path[:tag][@digest]"]),
    (BASE + ["--namespace", "Team-A"], ["--namespace 'Team-A'",
                                        "not a DNS-1123 label"]),
    (BASE + ["--secret", "x" * 254], ["--secret", "254 characters"]),
    (BASE + ["--nodse", "3"], ["--nodse", "--nodes?"]),
    (["--nodes", "2", "--gpus", "1"], ["--image"]),
])
def test_bad_flags_are_one_line_and_exit_2(argv, words):
    p = subprocess.run([sys.executable, "-m", "official_bench.deploy.k8s_cli",
                        *argv], cwd=REPO, env=cli_env(), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1, p.stderr
    assert [w for w in words if w not in p.stderr] == []
