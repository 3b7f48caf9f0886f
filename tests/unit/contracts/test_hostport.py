"""The one host:port parser, and the package staying TensorFlow-free."""

import subprocess
import sys

import pytest

from official_bench.contracts.hostport import (
    HostPortError,
    format_hostport,
    parse_hostport,
)
from support.helpers import REPO


@pytest.mark.parametrize("text, want", [
    ("gpu01:5000", ("gpu01", 5000)),
    ("10.0.0.1:1", ("10.0.0.1", 1)),
    ("host.example.com:65535", ("host.example.com", 65535)),
    (" h_1:22 ", ("h_1", 22)),
    ("[::1]:5000", ("::1", 5000)),
    ("[fd00::1:22]:7", ("fd00::1:22", 7)),
])
def test_good_inputs(text, want):
    assert parse_hostport(text) == want


@pytest.mark.parametrize("text, words", [
    ("gpu01", "has no port"),
    ("gpu01:0", "bad port '0'"),
    ("gpu01:65536", "bad port '65536'"),
    ("gpu01:http", "bad port 'http'"),
    ("gpu01:", "bad port ''"),
    (":5000", "no valid host"),
    ("", "no valid host"),
    ("bad host:1", "no valid host"),
    ("::1:5000", "bare IPv6"),
    ("fd00::1", "bare IPv6"),
    ("[::1", "is not [address]:port"),
    ("[::1]5000", "is not [address]:port"),
    ("[gpu01]:5000", "not an IPv6 address"),
    ("[::1]:0", "bad port"),
    ("[::1]", "has no port"),
])
def test_bad_inputs(text, words):
    with pytest.raises(HostPortError) as e:
        parse_hostport(text)
    assert words in str(e.value) and repr(text.strip()) in str(e.value)


def test_default_port_for_a_bare_host_only():
    assert parse_hostport("gpu01", 11111) == ("gpu01", 11111)
    assert parse_hostport("[::1]", 11111) == ("::1", 11111)
    assert parse_hostport("gpu01:5", 11111) == ("gpu01", 5)


def test_format_brackets_ipv6_and_round_trips():
    assert format_hostport("::1", 5000) == "[::1]:5000"
    assert format_hostport("gpu01", 5000) == "gpu01:5000"
    for text in ("[fd00::1]:9", "10.0.0.1:80", "h:1"):
        assert format_hostport(*parse_hostport(text)) == text


def test_contracts_package_does_not_import_tensorflow():
    code = ("import sys; import official_bench.contracts.hostport, "
            "official_bench.contracts.tf_config, "
            "official_bench.contracts.throughput; "
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, text=True,
                         capture_output=True, check=True).stdout
    assert out.strip() == "False"
