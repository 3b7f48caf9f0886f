"""The one host:port parser, and the package staying TensorFlow-free."""

import os
import socket
import subprocess
import sys

import pytest

from official_bench.contracts import hostport
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
    ("grpc://gpu01:5050", "has a scheme (grpc://): write host:port alone, "
                          "e.g. 'gpu01:5050'"),
    ("tcp://[::1]:5555", "has a scheme (tcp://)"),
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


# -- free_ports: picked where the kernel's own picks cannot take them -------

def _low_of_ephemeral():
    with open(hostport.EPHEMERAL_RANGE_FILE) as f:
        return int(f.read().split()[0])


@pytest.mark.parametrize("consecutive", [False, True])
def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range(
        consecutive):
    ports = hostport.free_ports(3, consecutive=consecutive)
    assert len(set(ports)) == 3
    if consecutive:
        assert ports == list(range(ports[0], ports[0] + 3))
    if os.path.exists(hostport.EPHEMERAL_RANGE_FILE) \
            and _low_of_ephemeral() >= 21000:
        assert all(20000 <= p < _low_of_ephemeral() for p in ports)
    socks = [socket.socket() for _ in ports]
    try:
        for s, p in zip(socks, ports):
            s.bind(("127.0.0.1", p))
    finally:
        for s in socks:
            s.close()


def test_free_ports_skip_a_port_that_is_taken(monkeypatch):
    """Every candidate but one is held: the picker must return that one."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    taken = held.getsockname()[1]
    try:
        monkeypatch.setattr(hostport, "_below_ephemeral",
                            lambda: range(taken, taken + 2))
        assert hostport.free_ports(1) == [taken + 1] or \
            not _bindable(taken + 1)
    finally:
        held.close()


def _bindable(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def test_free_ports_fall_back_to_the_kernel_without_the_range_file(
        tmp_path, monkeypatch):
    monkeypatch.setattr(hostport, "EPHEMERAL_RANGE_FILE",
                        str(tmp_path / "absent"))
    assert hostport._below_ephemeral() is None
    ports = hostport.free_ports(2, consecutive=True)
    assert ports[1] == ports[0] + 1 and _bindable(ports[0])


@pytest.mark.parametrize("text, position", [
    ("a:1,,b:2", 1), (",a:1", 0), ("a:1,b:2,", 2), ("a:1 b:2, ,c:3", 2)])
def test_an_empty_entry_in_a_host_list_names_its_position(text, position):
    # Was dropped silently: a host left out of the cluster.
    with pytest.raises(hostport.HostListError,
                       match=f"position {position} of .* is empty"):
        hostport.split_list(text)


def test_host_lists_split_on_commas_and_whitespace():
    assert hostport.split_list(" a:1, b:2\nc:3 d ") == ["a:1", "b:2", "c:3",
                                                        "d"]
    assert hostport.split_list("  ") == []
