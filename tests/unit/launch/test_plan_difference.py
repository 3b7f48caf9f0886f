"""The plan check's line when a node runs an older official_bench (its plan
names no version: an older launcher's summary string, or a field mapping
from before the version field): it says so, with node 0's version, on one
line, instead of both plans whole or a field "(unset)" (walk_upgrade2 U1).
Plans of the same version keep naming each field that differs."""

import pytest

from official_bench.launch.barrier import (
    BarrierError,
    Client,
    Coordinator,
    plan_difference,
)
from support.helpers import free_ports

VERSION = "0.1.0 (git 2ef1efc)"
OLDER = ("node 1 runs an older official_bench (its plan names no version) "
         f"and node 0 runs {VERSION}: update the checkout on node 1")


def plan(**fields):
    """A field mapping like Plan.digest's, with 22 fields."""
    made = {"script": "run_two_node.sh", "BATCH": "16", "DTYPE": "fp32",
            "official_bench": VERSION}
    made.update({f"trainer's key{i}": str(i) for i in range(18)})
    made.update(fields)
    return {k: v for k, v in made.items() if v is not None}


def test_an_older_launchers_summary_string_is_named_as_an_older_version():
    theirs = ("two bz16 fp32 x2 workers/node 1 cases 2n1g nodes "
              "127.0.0.1:23451,127.0.0.1:23452 [44cdd31f]")
    text = plan_difference(plan(), theirs, "node 1 (127.0.0.1:23452)")
    assert text == OLDER
    assert "trainer's" not in text and "44cdd31f" not in text


def test_a_mapping_without_the_version_is_an_older_version_not_unset():
    older = plan(official_bench=None)
    assert plan_difference(plan(), older, "node 1 (h:1)") == OLDER
    # fields only our version sends are the versions' own: not listed
    fewer = {k: v for k, v in older.items() if k != "trainer's key3"}
    assert plan_difference(plan(), fewer, "node 1 (h:1)") == OLDER
    # a field both name that differs is still named, after the version
    assert plan_difference(plan(), plan(official_bench=None, BATCH="8"),
                           "node 1 (h:1)") == \
        f"{OLDER}; BATCH: node 0 16, node 1 8"


def test_plans_of_one_version_still_name_each_field_that_differs():
    assert plan_difference(plan(), plan(BATCH="8", X="1"), "node 1 (h:1)") \
        == "BATCH: node 0 16, node 1 8; X: node 0 (unset), node 1 1"
    assert plan_difference(plan(), plan(official_bench="0.1.0 (git aaaaaaa)"),
                           "node 1 (h:1)") == (
        f"official_bench: node 0 {VERSION}, node 1 0.1.0 (git aaaaaaa)")


def test_the_refusal_every_node_gets_is_one_line_naming_the_version():
    port = free_ports(1)[0]
    coordinator = Coordinator(port, 2, plan(), host="127.0.0.1",
                              describe=lambda i: f"node {i} (h:{i})",
                              log=lambda m: None)
    try:
        client = Client("127.0.0.1", port, 1, "old", "two bz16 fp32 [1a2b]")
        with pytest.raises(BarrierError) as e:
            client.meet("hello", {}, 10)
    finally:
        coordinator.close(linger=0.5)
    message = str(e.value)
    assert e.value.fatal and "\n" not in message
    assert (f"node 1 (h:1) runs a different plan than node 0: {OLDER}; "
            "start every node with the same settings") in message
    assert "node 0: {" not in message
