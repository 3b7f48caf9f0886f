"""Slurm hostlist expressions as a job's SLURM_JOB_NODELIST holds them:
ranges with zero padding, several ranges, a single node; a range that runs
backwards is refused, not dropped (it named no node and the rest of the
list ran without it)."""

import pytest

from official_bench.launch.node_list import NodeError
from official_bench.launch.slurm import expand_hostlist, slurm_nodes


@pytest.mark.parametrize("expr,hosts", [
    ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
    ("gpu01", ["gpu01"]),
    ("node[08-10]", ["node08", "node09", "node10"]),
    ("n[9-11],login1", ["n9", "n10", "n11", "login1"])])
def test_expand(expr, hosts):
    assert expand_hostlist(expr) == hosts


def test_backwards_range_is_refused():
    with pytest.raises(NodeError, match=r"range '3-1' runs backwards "
                       r"\(3 > 1\)"):
        expand_hostlist("login1,node[3-1]")


def test_nodeid_places_the_task_in_a_padded_range():
    nodes, index, _, how = slurm_nodes(
        {"SLURM_JOB_NODELIST": "node[01-03,07]", "SLURM_NODEID": "3"}, 11111)
    assert [n.host for n in nodes][-1] == "node07" and index == 3
    assert how == "SLURM_NODEID=3"
