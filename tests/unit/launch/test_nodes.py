"""Node lists, Slurm host lists and task index resolution (no TensorFlow)."""

import json

import pytest

from official_bench.contracts import hostport
from official_bench.launch import (
    identity,
    node_list,
    nodes,
    settings as settings_lib,
    slurm,
)
from official_bench.launch.identity import Identity
from official_bench.launch.node_list import Node, NodeError

# Only 127.0.0.1 and the 10.200.0.0/24 test-namespace range appear here; no
# address is ever contacted (IP literals are not looked up).
A, B, C = "10.200.0.1", "10.200.0.2", "10.200.0.3"


def make_settings(mode="two", argv=(), **env):
    return settings_lib.parse(list(argv), environ={k.upper(): str(v)
                                                  for k, v in env.items()},
                              mode=mode)


def fake_identity(hostname="box", addresses=()):
    return lambda: Identity(hostname, set(addresses), "test")


def no_dns(host):
    """Resolver for tests: literals only, names from a fixed table."""
    table = {"localhost": ["127.0.0.1"], "box": [A], "other": [B]}
    try:
        import ipaddress
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        return table.get(host, [])


# -- parsing ------------------------------------------------------------------


def test_parse_node_forms():
    assert node_list.parse_node(f"{A}:2222", None, "x") == Node(A, 2222)
    assert node_list.parse_node("gpu01", 11111, "x") == Node("gpu01", 11111)
    v6 = node_list.parse_node("[fd00::1]:5", None, "x")
    assert v6 == Node("fd00::1", 5) and v6.address == "[fd00::1]:5"


@pytest.mark.parametrize("text, words", [
    (f"{A}:0", "bad port"), (f"{A}:65536", "bad port"),
    (f"{A}:http", "bad port"), (f"{A}:", "bad port"),
    (":2222", "no valid host"), ("fd00::1:22", "[address]:port"),
    ("[fd00::1:22", "[address]:port"), ("bad host:1", "no valid host"),
])
def test_parse_node_rejects(text, words):
    with pytest.raises(NodeError, match=words.replace("[", r"\[")):
        node_list.parse_node(text, None, "NODES")


def test_port_required_without_default():
    with pytest.raises(NodeError, match="has no port"):
        node_list.parse_node(A, None, "NODES")


def test_duplicate_node_is_an_error():
    with pytest.raises(NodeError, match=r"listed twice \(positions 0 and 2\)"):
        node_list.parse_node_list([f"{A}:1", f"{B}:1", f"{A}:1"], None,
                                  "NODES")
    # Same host, different ports: two workers on one machine is fine.
    assert len(node_list.parse_node_list([f"{A}:1", f"{A}:2"], None,
                                         "x")) == 2


@pytest.mark.parametrize("text,position", [
    (f"{A},,{B}", 1), (f",{A},{B}", 0), (f"{A},{B},", 2),
    (f"{A} {B}, ,{C}", 2)])
def test_an_empty_entry_in_nodes_is_refused(text, position):
    # Was skipped silently: a node left out of the list.
    with pytest.raises(NodeError) as e:
        resolve(make_settings(nodes=text, task_index=0))
    assert str(e.value) == (
        f"NODES (env NODES): position {position} of {text!r} is empty (two "
        "commas in a row, or one at an end); separate the host[:port] "
        "entries with one comma")


def test_nodes_split_on_commas_and_spaces():
    assert node_list.split_nodes(f" {A}:1, {B}:2\n{C} ", "NODES") == \
        [f"{A}:1", f"{B}:2", C]


def test_split_list_and_hostfile(tmp_path):
    assert hostport.split_list(f" {A}:1, {B}:1\n{C}:1 ") == \
        [f"{A}:1", f"{B}:1", f"{C}:1"]
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"# cluster\n{A} slots=8\n\n{B}:2222  # second\n")
    assert node_list.read_hostfile(str(hostfile)) == [A, f"{B}:2222"]
    with pytest.raises(NodeError, match="cannot be read"):
        node_list.read_hostfile(str(tmp_path / "missing"))


@pytest.mark.parametrize("expr, hosts", [
    ("gpu01", ["gpu01"]),
    ("gpu[01-03]", ["gpu01", "gpu02", "gpu03"]),
    ("gpu[08-10,12],login1", ["gpu08", "gpu09", "gpu10", "gpu12", "login1"]),
    ("r[1-2]-n[1-2]", ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]),
    ("a[7],b", ["a7", "b"]),
])
def test_expand_hostlist(expr, hosts):
    assert slurm.expand_hostlist(expr) == hosts


@pytest.mark.parametrize("expr", ["gpu[01-03", "gpu]1[", "gpu[a-b]"])
def test_expand_hostlist_rejects(expr):
    with pytest.raises(NodeError):
        slurm.expand_hostlist(expr)


# -- matching this machine ----------------------------------------------------


def test_match_by_interface_address():
    ident = fake_identity(addresses=[B])()
    index, why = identity.match_index([Node(A, 1), Node(B, 1)], ident,
                                      no_dns)
    assert index == 1 and B in why


def test_match_by_hostname_short_and_long():
    ident = fake_identity(hostname="gpu02.cluster.local")()
    index, why = identity.match_index([Node("gpu01", 1), Node("gpu02", 1)],
                                      ident, no_dns)
    assert index == 1 and "hostname" in why


def test_match_by_name_resolving_to_local_address():
    ident = fake_identity(hostname="elsewhere", addresses=[A])()
    index, _ = identity.match_index([Node("other", 1), Node("box", 1)],
                                    ident, no_dns)
    assert index == 1


def test_no_match_lists_everything_tried():
    ident = fake_identity(hostname="box9", addresses=[C])()
    with pytest.raises(NodeError) as e:
        identity.match_index([Node(A, 1), Node(B, 1)], ident, no_dns,
                             where="NODES")
    text = str(e.value)
    for part in ("not in NODES", "TASK_INDEX", "hostname 'box9'", C,
                 f"{A}:1 -> {A}", "Set TASK_INDEX"):
        assert part in text


def test_loopback_twice_is_ambiguous():
    ident = fake_identity()()
    with pytest.raises(NodeError, match="matches 2 nodes.*TASK_INDEX"):
        identity.match_index([Node("127.0.0.1", 1), Node("127.0.0.1", 2)],
                             ident, no_dns)


def test_same_address_under_two_names_is_a_duplicate():
    ident = fake_identity(addresses=[B])()
    with pytest.raises(NodeError, match="same address 127.0.0.1:1"):
        identity.match_index([Node("127.0.0.1", 1), Node("localhost", 1)],
                             ident, no_dns)


def test_local_identity_sees_loopback():
    ident = identity.local_identity()
    assert ident.hostname
    assert ident.is_local_address("127.0.0.1")


# -- resolve(): sources and precedence ----------------------------------------


def resolve(settings, hosts=None, index=None, **kw):
    return nodes.resolve(settings, hosts, "config", index,
                         identity_fn=kw.get("identity", fake_identity()),
                         resolver=no_dns)


def test_nodes_env_and_task_index():
    ns = resolve(make_settings(nodes=f"{A}:5,{B}", task_index=1,
                               worker_port=7))
    assert ns.worker_hosts == f"{A}:5,{B}:7"
    assert ns.index == 1 and "TASK_INDEX" in ns.index_from


def test_each_host_is_looked_up_once_per_plan():
    """unresolvable, same_machines, reject_aliases and the index match all
    ask about the same hosts: one lookup each (a slow DNS pays once)."""
    calls = []

    def counting(host):
        calls.append(host)
        return no_dns(host)
    nodes.resolve(make_settings(nodes="box:1,box:2", task_index=0), None,
                  "config", None, identity_fn=fake_identity(),
                  resolver=counting)
    assert calls == ["box"]


def test_command_line_beats_environment():
    s = make_settings(argv=["--task-index", "0"], nodes=f"{A}:1,{B}:1",
                      task_index=1)
    assert resolve(s).index == 0


def test_index_by_matching_addresses():
    ns = resolve(make_settings(nodes=f"{A}:1,{B}:1"),
                 identity=fake_identity(addresses=[A]))
    assert ns.index == 0 and "matched this machine" in ns.index_from


def test_hostfile_then_config_hosts(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"{A}:1\n{B}:1\n")
    ns = resolve(make_settings(hostfile=str(hostfile), task_index=0),
                 hosts=f"{C}:1,127.0.0.1:1")
    assert ns.worker_hosts == f"{A}:1,{B}:1"
    ns = resolve(make_settings(task_index=1), hosts=f"{C}:1,{A}:1")
    assert ns.worker_hosts == f"{C}:1,{A}:1" and ns.nodes_from == "config"


def test_no_node_list_is_a_clear_error():
    with pytest.raises(NodeError, match="needs a node list: set NODES"):
        resolve(make_settings())


def test_task_index_out_of_range():
    with pytest.raises(NodeError, match=r"task index 2 .* has 2 nodes"):
        resolve(make_settings(nodes=f"{A}:1,{B}:1", task_index=2))


def test_node_count_per_script():
    with pytest.raises(NodeError, match="needs 2 nodes.*lists 3"):
        resolve(make_settings(nodes=f"{A}:1,{B}:1,{C}:1", task_index=0))
    with pytest.raises(NodeError, match="needs 4 nodes"):
        resolve(make_settings("multi", nodes=f"{A}:1,{B}:1,{C}:1",
                              task_index=0, num_nodes=4))
    with pytest.raises(NodeError, match="at least 2 nodes"):
        resolve(make_settings("multi", nodes=f"{A}:1", task_index=0))
    ns = resolve(make_settings("multi", nodes=f"{A}:1,{B}:1,{C}:1",
                               task_index=2))
    assert len(ns.nodes) == 3


SLURM = {"slurm_job_id": "42", "slurm_job_nodelist": "gpu[07-08]",
         "slurm_ntasks": "2", "slurmd_nodename": "gpu08", "slurm_nodeid": "1"}


def test_slurm_node_list_and_index():
    ns = resolve(make_settings(worker_port=2222, **SLURM))
    assert ns.worker_hosts == "gpu07:2222,gpu08:2222"
    assert ns.index == 1 and "SLURMD_NODENAME" in ns.index_from
    assert "SLURM_JOB_NODELIST" in ns.nodes_from


def test_slurm_step_node_list_and_nodeid_fallback():
    env = dict(SLURM, slurm_step_nodelist="gpu[07-08]", slurmd_nodename="",
               slurm_nodeid="0")
    ns = resolve(make_settings(**env))
    assert ns.index == 0 and "SLURM_NODEID" in ns.index_from
    assert "SLURM_STEP_NODELIST" in ns.nodes_from


def test_slurm_needs_one_task_per_node():
    with pytest.raises(NodeError, match="one task per node"):
        resolve(make_settings(**dict(SLURM, slurm_ntasks="16")))


def test_slurm_loses_to_nodes_and_task_index_and_can_be_off():
    ns = resolve(make_settings(nodes=f"{A}:1,{B}:1", task_index=0, **SLURM))
    assert ns.worker_hosts == f"{A}:1,{B}:1"
    ns = resolve(make_settings(task_index=0, **SLURM))
    assert ns.index == 0 and "TASK_INDEX" in ns.index_from
    with pytest.raises(NodeError, match="needs a node list"):
        resolve(make_settings(use_slurm="no", **SLURM))
    with pytest.raises(NodeError, match="not in a Slurm job"):
        resolve(make_settings(use_slurm="yes", nodes=f"{A}:1,{B}:1"))


def test_tf_config_wins_and_is_kept():
    tf_config = json.dumps({"cluster": {"worker": [f"{A}:1", f"{B}:1"]},
                            "task": {"type": "worker", "index": 1}})
    ns = resolve(make_settings(tf_config=tf_config, nodes=f"{C}:1,{A}:9",
                               task_index=0))
    assert ns.index == 1 and ns.worker_hosts == f"{A}:1,{B}:1"
    assert ns.tf_config_json() == tf_config
    assert any("TF_CONFIG is set and wins" in n for n in ns.notes)
    assert any("TASK_INDEX=0 ignored" in n for n in ns.notes)


def test_tf_config_with_chief_and_bad_jobs():
    tf_config = json.dumps({"cluster": {"chief": [f"{A}:1"],
                                        "worker": [f"{B}:1"]},
                            "task": {"type": "worker", "index": 0}})
    ns = resolve(make_settings(tf_config=tf_config))
    assert ns.index == 1
    bad = json.dumps({"cluster": {"ps": [f"{A}:1"], "worker": [f"{B}:1"]},
                      "task": {"type": "worker", "index": 0}})
    with pytest.raises(NodeError, match="chief/worker"):
        resolve(make_settings(tf_config=bad))
    with pytest.raises(NodeError, match="TF_CONFIG is not valid"):
        resolve(make_settings(tf_config="{not json"))


# -- the same machine under two names (issue 11 §5) ---------------------------


def _aliases(host):
    """no_dns plus 'box-alias' -> box's address and 'gpu07' -> 'gpu7'."""
    table = {"box-alias": [A], "gpu07": [C], "gpu7": [C]}
    return table.get(host) or no_dns(host)


def resolve_aliases(settings, hosts=None):
    return nodes.resolve(settings, hosts, "config", None,
                         identity_fn=fake_identity(), resolver=_aliases)


@pytest.mark.parametrize("source", ["nodes", "hostfile", "config", "tf_config",
                                    "slurm"])
def test_same_node_under_two_names_fails_in_every_path(tmp_path, source):
    """Two names of one machine and one port: an error whether the index
    comes from TASK_INDEX, TF_CONFIG, Slurm or matching, for every source
    of the node list."""
    items = ["box:5000", "box-alias:5000"]
    env = {"task_index": 0}
    if source == "nodes":
        env["nodes"] = ",".join(items)
    elif source == "hostfile":
        (tmp_path / "h").write_text("\n".join(items) + "\n")
        env["hostfile"] = str(tmp_path / "h")
    elif source == "tf_config":
        env["tf_config"] = json.dumps({"cluster": {"worker": items},
                                       "task": {"type": "worker",
                                                "index": 0}})
    elif source == "slurm":
        env = dict(SLURM, slurm_job_nodelist="gpu07,gpu7",
                   slurmd_nodename="gpu07")
    hosts = ",".join(items) if source == "config" else None
    with pytest.raises(NodeError, match="are the same machine and port"):
        resolve_aliases(make_settings(worker_port=5000, **env), hosts)
    # Without TASK_INDEX too (the index would come from matching).
    env.pop("task_index", None)
    with pytest.raises(NodeError, match="are the same machine and port"):
        resolve_aliases(make_settings(worker_port=5000, **env), hosts)


def test_names_of_one_machine_share_it_in_ports_and_barrier():
    """Different ports on one machine under two names are fine, but the
    default barrier port and WORKERS_PER_NODE port ranges see one machine."""
    from official_bench.launch import plan
    from official_bench.launch.errors import PlanError
    ns = resolve_aliases(make_settings(nodes="box:5001,box-alias:5002",
                                       task_index=0))
    assert ns.machines == [0, 0]
    # One above every trainer port of the machine, not just of 'box'.
    assert nodes.barrier_address(ns, None) == ("box", 5003)
    with pytest.raises(PlanError, match="overlap those of node 0"):
        plan.worker_addresses(ns.nodes, 2, ns.machines)
    ns2 = resolve_aliases(make_settings(nodes=f"box:5001,{B}:5002",
                                        task_index=0))
    assert ns2.machines == [0, 1]
    assert nodes.barrier_address(ns2, None) == ("box", 5002)
    assert plan.worker_addresses(ns2.nodes, 2, ns2.machines) == [
        "box:5001", "box:5002", f"{B}:5002", f"{B}:5003"]


def test_barrier_binds_to_node_0s_own_address():
    ns = resolve_aliases(make_settings(nodes=f"box:1,{B}:1", task_index=0))
    assert nodes.barrier_bind(ns, None, _aliases) == [A]
    assert nodes.barrier_bind(ns, "0.0.0.0", _aliases) == ["0.0.0.0"]
    # Debian's /etc/hosts maps the hostname to 127.0.1.1: other machines
    # could not reach a barrier bound there.
    looped = lambda h: ["127.0.1.1"] if h == "box" else _aliases(h)  # noqa
    with pytest.raises(NodeError, match="loopback.*BARRIER_BIND"):
        nodes.barrier_bind(ns, None, looped)
    local = resolve_aliases(make_settings(nodes="localhost:1,127.0.0.1:2",
                                          task_index=0))
    assert nodes.barrier_bind(local, None, _aliases) == ["127.0.0.1"]
    with pytest.raises(NodeError, match="does not resolve"):
        nodes.barrier_bind(ns, None, lambda h: [])


# -- wording (cluster walk 10, 13) --------------------------------------------


def test_a_node_list_that_wins_over_others_says_so(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"{C}:1\n{A}:1\n")
    ns = resolve(make_settings(nodes=f"{A}:1,{B}:1", task_index=0,
                               hostfile=str(hostfile), **SLURM))
    assert ns.notes == [
        f"node list from NODES (env NODES); not used: HOSTFILE {hostfile}; "
        "Slurm job 42's node list (its key still signs the barrier unless "
        "BARRIER_SECRET is set: start every node inside the job)"]
    ns = resolve(make_settings(nodes=f"{A}:1,{B}:1", task_index=0,
                               use_slurm="no", **SLURM))
    assert ns.notes == []


def test_a_slurm_job_without_a_node_list_names_what_to_set():
    with pytest.raises(NodeError) as e:
        resolve(make_settings(slurm_job_id="42"))
    assert str(e.value) == (
        "SLURM_JOB_ID=42 is set (a Slurm job), but no SLURM_STEP_NODELIST/"
        "SLURM_JOB_NODELIST/SLURM_NODELIST gives its node list; set NODES "
        "(or HOSTFILE), or USE_SLURM=no to leave Slurm out")


def test_loopback_node_0_does_not_call_a_local_address_another_machine():
    ns = resolve_aliases(make_settings(nodes=f"box:1,{B}:1", task_index=0))
    looped = lambda h: ["127.0.0.1"] if h == "box" else _aliases(h)  # noqa
    with pytest.raises(NodeError) as e:
        nodes.barrier_bind(ns, None, looped)
    assert f"(loopback), but {B}:1 has a network address: a node on " \
        "another machine could not reach a barrier on loopback" in \
        str(e.value)
    assert "is another machine" not in str(e.value)


def test_interface_addresses_are_hosts_not_the_loopback_network(tmp_path):
    trie = tmp_path / "fib_trie"
    trie.write_text("Main:\n  +-- 0.0.0.0/0 3 0 5\n"
                    "     |-- 127.0.0.0\n        /8 host LOCAL\n"
                    "     |-- 127.0.0.1\n        /32 host LOCAL\n"
                    "     |-- 192.0.2.2\n        /32 host LOCAL\n"
                    "     |-- 192.0.2.255\n        /32 link BROADCAST\n")
    assert identity._fib_trie_addresses(str(trie)) == {"127.0.0.1",
                                                       "192.0.2.2"}
