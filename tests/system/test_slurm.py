"""Slurm for real (issue 11, section 7): a one-node Slurm cluster from
Debian's slurm-wlm, configured here in a temporary directory, runs the
examples/slurm/*.sbatch scripts: the one-node script for real, the two-node
script as two tasks on this one machine (loopback ports), the four-node
script as a dry run of four tasks. Each real run ends with the usual log tree
and the extractor's table on it.

The cluster: slurmctld and slurmd in the foreground (-D) with our own
SLURM_CONF, unique ports, state and spool directories under the temporary
directory, AuthType=auth/none (no munge daemon, no key), one node named
after this host at 127.0.0.1 with 2 CPUs. At the end every job is
cancelled, both daemons are stopped (SIGTERM, then SIGKILL), and any process
still carrying our SLURM_CONF in its environment (a job step that outlived
its slurmd) is killed by its pid.

Needs the Slurm binaries (`apt-get install slurm-wlm`; .ci/run installs it)
and root (slurmd starts job steps as the submitting user); skips otherwise.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from official_bench.launch import settings as settings_lib
from official_bench.launch.node_list import NodeError
from official_bench.launch.slurm import slurm_nodes
from support.helpers import (
    TINY_OVERRIDE,
    consecutive_free_port,
    extract_tables,
    free_ports,
)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(REPO, "examples", "slurm")
SBATCH = {n: os.path.join(EXAMPLES, f"{n}.sbatch")
          for n in ("one_node", "two_nodes", "four_nodes")}
PY = os.environ.get("OB_TEST_PYTHON", sys.executable)
SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin",
                             "/usr/local/sbin"])
TOOLS = ("slurmctld", "slurmd", "sbatch", "srun", "sinfo", "squeue",
         "scancel")
PLUGIN_DIRS = ("/usr/lib/x86_64-linux-gnu/slurm-wlm",
               "/usr/lib/aarch64-linux-gnu/slurm-wlm", "/usr/lib/slurm",
               "/usr/lib64/slurm", "/usr/local/lib/slurm")


def find_tools():
    """{tool: path}, or pytest.skip naming what is missing and the fix."""
    found = {t: shutil.which(t, path=SBIN_PATH) for t in TOOLS}
    missing = [t for t, p in found.items() if not p]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} not on "
                    "PATH or in /usr/sbin): apt-get install slurm-wlm "
                    "(.ci/run installs it in CI)")
    if os.geteuid() != 0:
        pytest.skip("slurmd must run as root to start job steps (it "
                    "switches to the submitting user); run as root, as CI "
                    "does")
    if not any(os.path.exists(os.path.join(d, "auth_none.so"))
               for d in PLUGIN_DIRS):
        pytest.skip("this Slurm has no auth/none plugin (auth_none.so in "
                    f"{', '.join(PLUGIN_DIRS)}); the test cluster needs it "
                    "to run without munge")
    return found


def node_name():
    return socket.gethostname().split(".")[0] or "localhost"


SLURM_CONF = (
    "# Written by tests/system/test_slurm.py: a one-node test cluster, "
    "nothing global.\n"
    """\
ClusterName=obtest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
KillWait=10
# sbatch --wait polls the job every 2 s while that is under MinJobAge / 2,
# else at 8 then 32 s (src/sbatch/sbatch.c _job_wait): with the default 300
# a 15 s job was seen done at 42 s. 0 keeps every job record (no purge) and
# the 2 s poll.
MinJobAge=0
NodeName={node} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=obtest Nodes={node} Default=YES MaxTime=INFINITE State=UP
""")


class Cluster:
    """The running test cluster: its environment and a few commands."""

    def __init__(self, directory, tools):
        self.dir = directory
        self.tools = tools
        self.node = node_name()
        self.conf = os.path.join(directory, "slurm.conf")
        self.env = clean_env()
        self.env["SLURM_CONF"] = self.conf
        self.env["PATH"] = SBIN_PATH
        self.procs = []

    def run(self, tool, *args, timeout=60, **kwargs):
        return subprocess.run([self.tools[tool], *args], env=kwargs.pop(
            "env", self.env), capture_output=True, text=True,
            timeout=timeout, **kwargs)

    def node_state(self):
        out = self.run("sinfo", "-h", "-n", self.node, "-o", "%T %c")
        return out.stdout.strip()

    def logs(self):
        """The daemons' own output and logs, for failure messages."""
        parts = []
        for name in ("slurmctld.out", "slurmd.out", "slurmctld.log",
                     "slurmd.log"):
            path = os.path.join(self.dir, name)
            if os.path.exists(path):
                with open(path) as f:
                    parts.append(f"--- {name}\n" + "".join(
                        f.readlines()[-30:]))
        return "\n".join(parts)

    def jobs(self):
        out = self.run("squeue", "-h", "-o", "%i")
        return out.stdout.split()

    def sbatch(self, script, *args, options=(), env=None, out=None,
               timeout=900):
        """sbatch --wait from the repository root: (returncode, output)."""
        cmd = [self.tools["sbatch"], "--wait", f"--output={out}", *options,
               script, *args]
        done = subprocess.run(cmd, cwd=REPO, env=env or self.env,
                              capture_output=True, text=True,
                              timeout=timeout)
        text = done.stdout + done.stderr
        if out and os.path.exists(out):
            with open(out) as f:
                text += f.read()
        return done.returncode, text


def clean_env(**extra):
    """This environment without launcher knobs, TF_CONFIG or SLURM_*."""
    drop = {k.env for k in settings_lib.KNOBS} | {"TF_CONFIG"}
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith("SLURM")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def stop(proc, grace=15):
    """SIGTERM, then SIGKILL after `grace` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def leftover_pids(conf):
    """Pids whose environment holds SLURM_CONF=conf: our daemons' children
    (slurmstepd, job steps). The path is unique to this test run."""
    needle = f"SLURM_CONF={conf}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    tools = find_tools()
    d = str(tmp_path_factory.mktemp("slurm"))
    for sub in ("state", "spool"):
        os.makedirs(os.path.join(d, sub))
    cluster = Cluster(d, tools)
    ctld_port, slurmd_port = free_ports(2)
    with open(cluster.conf, "w") as f:
        f.write(SLURM_CONF.format(node=cluster.node, d=d, ctld_port=ctld_port,
                                  slurmd_port=slurmd_port))
    try:
        for name, cmd in (("slurmctld", [tools["slurmctld"], "-D", "-i"]),
                          ("slurmd", [tools["slurmd"], "-D", "-N",
                                      cluster.node])):
            with open(os.path.join(d, f"{name}.out"), "w") as out:
                cluster.procs.append(subprocess.Popen(
                    cmd, env=cluster.env, stdout=out,
                    stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + 60
        state = ""
        while time.monotonic() < deadline:
            state = cluster.node_state()
            if state.startswith("idle"):
                break
            dead = [p.args[0] for p in cluster.procs if p.poll() is not None]
            assert not dead, f"{dead} exited at start\n{cluster.logs()}"
            time.sleep(0.5)
        assert state.startswith("idle"), \
            f"node {cluster.node} not idle after 60 s (sinfo: {state!r})\n" \
            + cluster.logs()
        yield cluster
    finally:
        _teardown(cluster)


def _teardown(cluster):
    """Cancel every job, stop both daemons, kill what outlived them."""
    if all(p.poll() is None for p in cluster.procs) and cluster.procs:
        jobs = cluster.jobs()
        if jobs:
            cluster.run("scancel", "--full", *jobs)
            deadline = time.monotonic() + 30
            while cluster.jobs() and time.monotonic() < deadline:
                time.sleep(0.5)
    for proc in reversed(cluster.procs):
        stop(proc)
    stray = leftover_pids(cluster.conf)
    for pid in stray:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not leftover_pids(cluster.conf), "Slurm processes survived"


def knobs(tmp_path, **extra):
    """The launcher's knobs for a tiny CPU run, as sbatch passes them on."""
    # PYTHON_CHECK_TIMEOUT=0 as support/launch_cli.clean_env: the check
    # imports TensorFlow once per launcher and has its own tests.
    values = dict(PYTHON=PY, DEVICE="cpu", STEPS=6, LOG_STEPS=2,
                  PARAMS_OVERRIDE=TINY_OVERRIDE, LOG_DIR=tmp_path / "logs",
                  MODEL_DIR=tmp_path / "model_dir", SLEEP_SECONDS=0,
                  RUN_TIMEOUT=300, KILL_AFTER=10, PYTHON_CHECK_TIMEOUT=0)
    values.update(extra)
    return {k: str(v) for k, v in values.items()}


def tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file())


def extract(tmp_path, log_dir):
    """The extractor on a log tree: its JSON table and Markdown table."""
    return extract_tables(tmp_path, log_dir, PY)


# The mapping from Slurm's variables, without a cluster (runs everywhere;
# the cluster tests below check it against what a real Slurm sets).
STEP = {"SLURM_JOB_ID": "9", "SLURM_STEP_ID": "0",
        "SLURM_STEP_NODELIST": "gpu[1-3]",
        "SLURM_STEP_TASKS_PER_NODE": "2(x2),1", "SLURM_STEP_NUM_TASKS": "5"}


def test_one_entry_per_task_with_ports_per_task():
    """gpu1, gpu2 with 2 tasks and gpu3 with 1, 3 ports per task
    (WORKERS_PER_NODE=3): entries on port, port+3; index from the node's
    first entry plus SLURM_LOCALID, whatever SLURM_PROCID says (cyclic
    distribution numbers tasks across nodes)."""
    env = dict(STEP, SLURMD_NODENAME="gpu2", SLURM_LOCALID="1",
               SLURM_PROCID="3")
    nodes, index, where, how = slurm_nodes(env, 5000, ports_per_task=3)
    assert [n.address for n in nodes] == [
        "gpu1:5000", "gpu1:5003", "gpu2:5000", "gpu2:5003", "gpu3:5000"]
    assert index == 3 and "SLURM_LOCALID=1" in how
    assert "SLURM_STEP_NODELIST" in where
    env = dict(STEP, SLURMD_NODENAME="", SLURM_NODEID="2",
               SLURM_LOCALID="0")
    assert slurm_nodes(env, 5000)[1] == 4


def test_one_task_per_node_keeps_one_entry_per_host():
    env = {"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "gpu[1-2]",
           "SLURM_TASKS_PER_NODE": "1(x2)", "SLURMD_NODENAME": "gpu2",
           "SLURM_LOCALID": "0"}
    nodes, index, _, how = slurm_nodes(env, 11111)
    assert [n.address for n in nodes] == ["gpu1:11111", "gpu2:11111"]
    assert index == 1 and how == "SLURMD_NODENAME='gpu2'"
    # `sbatch --exclusive` without --ntasks: the job's tasks per node is
    # the CPU count (what a real Slurm 22.05 sets), not tasks: ignored.
    env.update(SLURM_TASKS_PER_NODE="64(x2)")
    assert [n.address for n in slurm_nodes(env, 11111)[0]] == \
        ["gpu1:11111", "gpu2:11111"]
    with pytest.raises(NodeError, match="places 128 tasks, but Slurm says 2"):
        slurm_nodes(dict(env, SLURM_NTASKS="2"), 11111)


def test_bad_task_layouts_are_named():
    with pytest.raises(NodeError, match=r"SLURM_LOCALID='2'.*gpu3 \(1 tasks"):
        slurm_nodes(dict(STEP, SLURMD_NODENAME="gpu3", SLURM_LOCALID="2"),
                    5000)
    with pytest.raises(NodeError, match="not one positive count per node"):
        slurm_nodes(dict(STEP, SLURM_STEP_TASKS_PER_NODE="2(x4)"), 5000)
    with pytest.raises(NodeError, match="places 6 tasks, but Slurm says 5"):
        slurm_nodes(dict(STEP, SLURM_STEP_TASKS_PER_NODE="2(x3)"), 5000)
    with pytest.raises(NodeError, match="is not Slurm's"):
        slurm_nodes(dict(STEP, SLURM_STEP_TASKS_PER_NODE="two"), 5000)


def test_examples_parse_and_say_how_to_run():
    """Each example is valid bash and starts with the comment a user needs:
    the command, the hardware, the throughput to expect, a CPU try."""
    for name, path in SBATCH.items():
        assert subprocess.run(["bash", "-n", path]).returncode == 0, path
        with open(path) as f:
            head = f.read().split("#SBATCH", 1)[0]
        assert f"sbatch examples/slurm/{name}.sbatch" in head, path
        assert "8 GPUs" in head and "img/s" in head, path
        assert "DEVICE=cpu" in head and "--gres=none" in head, path


def test_cluster_gives_the_launcher_its_slurm_variables(slurm):
    """srun --ntasks=2 on the one node: each task sees the node list, its
    node and its local id, which the launcher maps to nodes and index."""
    out = slurm.run("srun", "--ntasks=2", "--label", "env", timeout=60)
    assert out.returncode == 0, out.stderr + slurm.logs()
    seen = {}
    for line in out.stdout.splitlines():
        task, _, var = line.partition(": ")
        key, _, value = var.partition("=")
        seen.setdefault(task.strip(), {})[key] = value
    assert sorted(seen) == ["0", "1"]
    for task, env in seen.items():
        assert env["SLURM_STEP_NODELIST"] == slurm.node
        assert env["SLURMD_NODENAME"] == slurm.node
        assert env["SLURM_STEP_TASKS_PER_NODE"] == "2"
        assert env["SLURM_LOCALID"] == env["SLURM_PROCID"] == task
        assert env["SLURM_JOB_ID"].isdigit()


def test_four_nodes_dry_run_as_four_tasks(slurm, tmp_path):
    """four_nodes.sbatch on one node (--nodes=1 --overcommit: 4 tasks on 2
    CPUs)
    with --dry-run: every task's launcher takes the Slurm node list with
    consecutive ports and its own index, plans 4n1g, and runs nothing."""
    port = consecutive_free_port(5)
    env = dict(slurm.env, **knobs(tmp_path, WORKER_PORT=port))
    out = tmp_path / "job.out"
    rc, text = slurm.sbatch(
        SBATCH["four_nodes"], "4", "fp32", "1", "--dry-run",
        options=["--gres=none", "--nodes=1", "--overcommit"], env=env, out=out,
        timeout=300)
    assert rc == 0, text + slurm.logs()
    nodes = ",".join(f"{slurm.node}:{port + k}" for k in range(4))
    assert text.count(f"nodes: {nodes} (from Slurm SLURM_STEP_NODELIST="
                      f"'{slurm.node}')") == 4, text
    for k in range(4):
        assert f"this node: index {k} = {slurm.node}:{port + k} " \
            f"(SLURMD_NODENAME='{slurm.node}', SLURM_LOCALID={k})" in text
    assert f"barrier: node 0's launcher at {slurm.node}:{port + 4}" in text
    assert text.count("of each of 4n1g") == 4
    assert text.count("dry run: nothing was started") == 4
    assert not (tmp_path / "logs").exists()


@pytest.mark.slow
def test_one_node_sbatch_for_real(slurm, tmp_path):
    """one_node.sbatch, as its comment says for a CPU try: one tiny run,
    the log tree, the extractor's table."""
    env = dict(slurm.env, **knobs(tmp_path))
    rc, text = slurm.sbatch(SBATCH["one_node"], "4", "fp32", "1",
                            options=["--gres=none"], env=env,
                            out=tmp_path / "job.out")
    assert rc == 0, text + slurm.logs()
    assert "done: 1 of 1 run(s) ok" in text, text
    root = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4"
    files = tree(root)
    assert {"1n1g/rn50_b4_fp32_1.log", "1n1g/rn50_b4_fp32_1.json"} <= \
        set(files), files
    log = (root / "1n1g" / "rn50_b4_fp32_1.log").read_text()
    assert len([l for l in log.splitlines() if "TimeHistory" in l]) == 3
    record = json.loads((root / "1n1g" / "rn50_b4_fp32_1.json").read_text())
    assert record["stats"]["global_batch_size"] == 4
    table, markdown = extract(tmp_path, root)
    assert list(table) == ["1n1g"]
    assert table["1n1g"]["num_runs"] == 1 and table["1n1g"]["excluded"] == []
    assert table["1n1g"]["median_speed"] > 0
    assert "| 1 | 1 |" in markdown.replace("|1|1|", "| 1 | 1 |"), markdown


@pytest.mark.slow
@pytest.mark.multiworker
def test_two_nodes_sbatch_as_two_tasks_on_one_machine(slurm, tmp_path):
    """two_nodes.sbatch with --nodes=1 (its --ntasks=2 stays): srun starts two
    launchers, each finds the node list and its index from Slurm (ports
    WORKER_PORT and +1 on this host), they meet at the barrier, train
    2n1g together with multi_worker_mirrored, and the extractor reads it."""
    port = consecutive_free_port(3)
    env = dict(slurm.env, **knobs(tmp_path, WORKER_PORT=port,
                                  PEER_TIMEOUT=120, BARRIER_TIMEOUT=120))
    rc, text = slurm.sbatch(
        SBATCH["two_nodes"], "4", "fp32", "1",
        options=["--gres=none", "--nodes=1"],
        env=env, out=tmp_path / "job.out")
    assert rc == 0, text + slurm.logs()
    for k in (0, 1):
        assert f"this node: index {k} = {slurm.node}:{port + k} " \
            f"(SLURMD_NODENAME='{slurm.node}', SLURM_LOCALID={k})" in text
    assert text.count("done: 1 of 1 run(s) ok on every node") == 2, text
    root = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4"
    files = set(tree(root))
    assert {"2n1g/rn50_b4_fp32_1.log", "2n1g/rn50_b4_fp32_1.json",
            "2n1g/node1/rn50_b4_fp32_1.log",
            "2n1g/node1/rn50_b4_fp32_1.json"} <= files, files
    chief = json.loads((root / "2n1g" / "rn50_b4_fp32_1.json").read_text())
    worker = json.loads((root / "2n1g" / "node1" / "rn50_b4_fp32_1.json")
                        .read_text())
    assert chief["environment"]["num_workers"] == 2
    assert chief["stats"]["global_batch_size"] == 8
    assert chief["task"]["index"] == 0 and worker["task"]["index"] == 1
    assert chief["history"]["loss"] == worker["history"]["loss"]
    table, _ = extract(tmp_path, root)
    assert list(table) == ["2n1g"] and table["2n1g"]["num_runs"] == 1
    assert table["2n1g"]["excluded"] == []
