"""Slurm's view of a job: hostlist expressions (gpu[01-03]) and the
SLURM_* variables that give the node list and this task's place in it
(one entry per Slurm task, so several tasks on one machine get their own
ports).
"""

from __future__ import annotations

import re
from typing import Dict, List

from official_bench.contracts.hostport import (
    HostListError,
    format_hostport,
    split_list,
)
from official_bench.launch.node_list import NodeError, parse_node_list


def expand_hostlist(expr: str) -> List[str]:
    """Slurm hostlist syntax: 'gpu[01-03,07],login1' -> gpu01 gpu02 ..."""
    items, depth, current = [], 0, ""
    for ch in expr.strip():
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth < 0 or depth > 1:
            raise NodeError(f"Slurm node list {expr!r} has unbalanced "
                            "brackets")
        current += ch
    if depth:
        raise NodeError(f"Slurm node list {expr!r} has unbalanced brackets")
    items.append(current)
    hosts: List[str] = []
    for item in (i.strip() for i in items):
        if item:
            hosts.extend(_expand_one(item, expr))
    return hosts


def _expand_one(item: str, expr: str) -> List[str]:
    m = re.search(r"\[([^\]]*)\]", item)
    if not m:
        return [item]
    prefix, suffix = item[:m.start()], item[m.end():]
    out = []
    for part in m.group(1).split(","):
        lo, sep, hi = part.strip().partition("-")
        if not re.fullmatch("[0-9]+", lo) or \
                (sep and not re.fullmatch("[0-9]+", hi)):
            raise NodeError(f"Slurm node list {expr!r}: bad range {part!r}")
        width = len(lo)
        rests = _expand_one(suffix, expr)
        numbers = range(int(lo), int(hi if sep else lo) + 1)
        if not numbers:
            raise NodeError(f"Slurm node list {expr!r}: range {part!r} runs "
                            f"backwards ({int(lo)} > {int(hi)}), naming no "
                            "node")
        if len(out) + len(numbers) * len(rests) > 65536:  # task_index's max
            raise NodeError(f"Slurm node list {expr!r} names more than "
                            "65536 nodes")
        for n in numbers:
            for rest in rests:
                out.append(f"{prefix}{n:0{width}d}{rest}")
    return out


def _ascii_digits(text: str) -> bool:
    """str.isdigit() also accepts '²', which int() refuses."""
    return re.fullmatch("[0-9]+", text) is not None


def slurm_task_counts(text: str, n_hosts: int, where: str) -> List[int]:
    """Slurm's tasks-per-node syntax, '2(x3),1' -> [2, 2, 2, 1]."""
    counts: List[int] = []
    try:
        parts = split_list(text)
    except HostListError as e:
        raise NodeError(f"{where}: tasks per node {e}")
    for part in parts:
        m = re.fullmatch(r"([0-9]+)(?:\(x([0-9]+)\))?", part)
        if not m:
            raise NodeError(f"{where}: tasks per node {text!r} is not "
                            "Slurm's 'N' or 'N(xM)' list")
        repeat = int(m.group(2) or 1)
        if repeat + len(counts) > n_hosts:
            raise NodeError(f"{where}: tasks per node {text!r} lists more "
                            f"counts than nodes, not one positive count per "
                            f"node ({n_hosts} nodes)")
        counts.extend([int(m.group(1))] * repeat)
    if len(counts) != n_hosts or min(counts, default=0) < 1:
        raise NodeError(f"{where}: tasks per node {text!r} gives {counts}, "
                        f"not one positive count per node ({n_hosts} nodes)")
    return counts


def slurm_nodes(slurm: Dict[str, str], default_port: int,
                ports_per_task: int = 1) -> tuple:
    """(nodes, index or None, description, how) from SLURM_* variables.

    One entry per Slurm task: a host with t tasks gives host:port,
    host:port+P, ... (P = ports_per_task, the trainer ports one task uses),
    so several tasks on one machine (srun --ntasks=2 on one node) get their
    own ports. The index is the task's place in that list, from its node
    (SLURMD_NODENAME, else SLURM_NODEID) and SLURM_LOCALID, which holds for
    any task distribution (not SLURM_PROCID, which does not).
    """
    var = next((v for v in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                            "SLURM_NODELIST") if slurm.get(v)), None)
    if var is None:
        raise NodeError(
            f"SLURM_JOB_ID={slurm.get('SLURM_JOB_ID')} is set (a Slurm job), "
            "but no SLURM_STEP_NODELIST/SLURM_JOB_NODELIST/SLURM_NODELIST "
            "gives its node list; set NODES (or HOSTFILE), or USE_SLURM=no "
            "to leave Slurm out")
    hosts = expand_hostlist(slurm[var])
    where = f"Slurm {var}={slurm[var]!r}"
    per_node_var = "SLURM_STEP_TASKS_PER_NODE" \
        if var == "SLURM_STEP_NODELIST" else "SLURM_TASKS_PER_NODE"
    tasks = slurm.get("SLURM_STEP_NUM_TASKS") or slurm.get("SLURM_NTASKS")
    # Outside a step, SLURM_TASKS_PER_NODE counts tasks only when the job
    # asked for some (--ntasks); `sbatch --exclusive` alone sets it to the
    # node's CPUs.
    if slurm.get(per_node_var) and (per_node_var.startswith("SLURM_STEP")
                                    or slurm.get("SLURM_NTASKS")):
        counts = slurm_task_counts(slurm[per_node_var], len(hosts),
                                   f"{where}, {per_node_var}")
        if tasks and _ascii_digits(tasks) and int(tasks) != sum(counts):
            raise NodeError(f"{where}: {per_node_var}="
                            f"{slurm[per_node_var]!r} places {sum(counts)} "
                            f"tasks, but Slurm says {tasks}")
    else:
        counts = [1] * len(hosts)
        if tasks and _ascii_digits(tasks) and int(tasks) > len(hosts):
            raise NodeError(
                f"{where}: {tasks} Slurm tasks on {len(hosts)} nodes and no "
                f"{per_node_var} to place them; run one task per node "
                "(srun --ntasks-per-node=1)")
    items = [format_hostport(h, default_port + j * ports_per_task)
             for h, count in zip(hosts, counts) for j in range(count)]
    nodes = parse_node_list(items, None, where)
    index = None
    how = ""
    position = None
    name = slurm.get("SLURMD_NODENAME")
    if name and name in hosts:
        position, how = hosts.index(name), f"SLURMD_NODENAME={name!r}"
    elif _ascii_digits(slurm.get("SLURM_NODEID", "")):
        position, how = int(slurm["SLURM_NODEID"]), \
            f"SLURM_NODEID={slurm['SLURM_NODEID']}"
        if position >= len(hosts):
            raise NodeError(f"{how} is outside {where}")
    if position is not None:
        local = slurm.get("SLURM_LOCALID", "0")
        if not _ascii_digits(local) or int(local) >= counts[position]:
            raise NodeError(f"SLURM_LOCALID={local!r} is not a task of node "
                            f"{hosts[position]} ({counts[position]} tasks "
                            f"there, {per_node_var})")
        index = sum(counts[:position]) + int(local)
        if counts[position] > 1:
            how += f", SLURM_LOCALID={local}"
    return nodes, index, where, how
