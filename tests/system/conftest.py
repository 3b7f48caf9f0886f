"""Fixtures the system tests share: `two_hosts` (two network namespaces
joined by a veth pair, tests/support/netns.py)."""

from support.netns import two_hosts  # noqa: F401 - a fixture, used by name
