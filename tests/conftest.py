"""Shared test set-up.

TensorFlow fixes its device list at the first op, so the session splits the
CPU into two logical devices before anything else runs: mirrored tests then
have two replicas, and every other test uses the first device.
"""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))


def pytest_configure(config):
    from official_bench.runtime import devices
    devices.ensure_cpu_devices(2)
