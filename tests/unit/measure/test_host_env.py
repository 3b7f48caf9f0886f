"""host_env.cpu_model: the CPU's name for the reports of a CPU run
(issue 28 §3: the PNG and HTML say what a run was measured on); suite and
git_commit: the suite's version and commit that every run records."""

import os
import platform
import shutil
import subprocess
import types

import pytest

import official_bench
from official_bench.jax_backend import environment as jax_environment
from official_bench.measure import host_env

needs_git = pytest.mark.skipif(shutil.which("git") is None,
                               reason="git is not installed")


def test_cpu_model_reads_the_model_name_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\n"
                    "model name\t: AMD EPYC 7B13 64-Core Processor\n"
                    "processor\t: 1\nmodel name\t: AMD EPYC 7B13 64-Core "
                    "Processor\n")
    assert host_env.cpu_model(str(info)) == \
        "AMD EPYC 7B13 64-Core Processor"


def test_cpu_model_falls_back_to_platform(tmp_path):
    assert host_env.cpu_model(str(tmp_path / "missing")) == \
        (platform.processor() or None)
    empty = tmp_path / "empty"
    empty.write_text("processor\t: 0\n")
    assert host_env.cpu_model(str(empty)) == (platform.processor() or None)


def _git(root, *args):
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c",
         "user.email=t@t", *args], check=True, capture_output=True,
        text=True).stdout.strip()


@needs_git
def test_git_commit_is_the_short_hash_and_dirty_on_tracked_changes(
        tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "commit", "-q", "-m", "one")
    head = _git(tmp_path, "rev-parse", "--short", "HEAD")
    assert host_env.git_commit(str(tmp_path)) == head
    (tmp_path / "new.py").write_text("untracked\n")  # not a change
    assert host_env.git_commit(str(tmp_path)) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    assert host_env.git_commit(str(tmp_path)) == head + "+dirty"


@needs_git
def test_git_commit_only_for_the_top_of_a_checkout(tmp_path):
    """A package inside someone else's checkout (a venv's site-packages in
    a repository) is not that repository's commit."""
    _git(tmp_path, "init", "-q")
    inner = tmp_path / "site-packages"
    inner.mkdir()
    assert host_env.git_commit(str(inner)) is None
    assert host_env.git_commit(str(tmp_path)) is None  # no commit yet


def test_without_git_the_version_alone(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert host_env.git_commit(str(tmp_path)) is None
    host_env.suite.cache_clear()
    try:
        assert host_env.suite() == official_bench.__version__
    finally:
        host_env.suite.cache_clear()


def test_suite_names_this_packages_version_and_commit(monkeypatch):
    seen = []
    monkeypatch.setattr(host_env, "git_commit",
                        lambda root: seen.append(root) or "abc1234+dirty")
    host_env.suite.cache_clear()
    try:
        assert host_env.suite() == \
            f"{official_bench.__version__} (git abc1234+dirty)"
        assert host_env.suite() == \
            f"{official_bench.__version__} (git abc1234+dirty)"
    finally:
        host_env.suite.cache_clear()
    assert seen == [os.path.dirname(os.path.dirname(
        os.path.abspath(official_bench.__file__)))]


def test_the_tensorflow_environment_record_names_the_suite():
    from official_bench.measure import environment
    assert environment.collect()[host_env.SUITE_KEY] == host_env.suite()


def test_the_jax_environment_record_names_the_suite():
    run = types.SimpleNamespace(
        local_devices=[], devices=[], platform="cpu", process_count=1,
        device_names=lambda: [])
    env = jax_environment.collect(run, {}, "default", 1, "fp32", 1)
    assert env[host_env.SUITE_KEY] == host_env.suite()
