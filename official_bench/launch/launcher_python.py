"""The launcher's own Python cannot import the trainer's packages.

The run scripts start the launcher with the Python the trainer will run
(scripts/lib/launch.sh); a fresh clone's python3 often lacks PyYAML, which
the plan needs (config/). This module says so in one line instead of a
traceback, and on a two/multi-node run also tells node 0 through the
barrier, so that every node stops before any run. Standard library only,
like every module it imports: it runs exactly when the rest cannot be
imported.
"""

from __future__ import annotations

import os
import sys
import uuid

from official_bench.contracts import exit_status as es
from official_bench.launch import (
    auth,
    barrier as barrier_lib,
    nodes as nodes_lib,
    preflight,
)
from official_bench.launch.barrier import BarrierError
from official_bench.launch.node_list import NodeError
from official_bench.launch.settings import Settings


def cannot_run(settings: Settings, error: ImportError) -> int:
    """The launcher's own Python lacks the trainer's packages (PyYAML at
    least): one line, exit CONFIG; on a two/multi-node run also tell node
    0 through the barrier (when the node list does not need the config)."""
    missing = preflight.missing_here(list(preflight.TRAINER_MODULES))
    problem = preflight.launcher_problem(missing) if missing else \
        f"cannot import the launcher ({error})"
    python = settings.launch_python or sys.executable or "python3"
    how = settings.launch_python_from or "launcher"
    text = preflight.cannot_run_text(
        preflight.describe_choice(how, python, preflight.REPO_ROOT), problem,
        preflight.fix_advice(how, preflight.REPO_ROOT, if_unset=(
            preflight.unset_choice(settings, preflight.REPO_ROOT))),
        role="launcher")
    if settings.mode == "single" or settings.launcher != "tf" or \
            settings.dry_run:
        print(f"error: {settings.script}: {text}", file=sys.stderr)
        return es.CONFIG
    try:
        nodeset = nodes_lib.resolve(
            settings, None, "the config file (not read: this launcher "
            "cannot import PyYAML)", None)
        host, port = nodes_lib.barrier_address(
            nodeset, settings.barrier_port, settings.workers_per_node)
    except (NodeError, ValueError) as e:
        print(f"error: {settings.script}: {text} (and the other nodes "
              f"cannot be told: {e})", file=sys.stderr)
        return es.CONFIG
    prefix = f"[launch node {nodeset.index}/{len(nodeset.nodes)}]"
    print(f"{prefix} error: this node: {text}; telling the other nodes",
          file=sys.stderr, flush=True)
    head = f"node 0 ({nodeset.nodes[0].address})"
    client = barrier_lib.Client(host, port, nodeset.index, uuid.uuid4().hex,
                                None, coordinator_name=head,
                                key=auth.key_for(settings))
    try:
        client.meet("hello", {"host": os.uname().nodename,
                              "pid": os.getpid(), "cannot_run": text},
                    settings.barrier_timeout)
        print(f"{prefix} {head} was told; no run started", flush=True)
    except BarrierError as e:
        print(f"{prefix} error: {e}", file=sys.stderr)
    return es.CONFIG
