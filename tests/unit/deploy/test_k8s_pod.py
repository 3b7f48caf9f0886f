"""official_bench/deploy/pod.py: the environment Kubernetes gives a pod ->
the run script, its node index and the hosts it waits for; the DNS wait,
the hold after the sweep. The pods training together is
tests/system/test_k8s_pods.py."""

import json
import signal
import subprocess
import sys
import time

import pytest

from official_bench.contracts.exit_status import CLUSTER, CONFIG
from official_bench.deploy import kubernetes as k8s, pod
from support.helpers import REPO


def manifest_env(**kw):
    """The plain environment of the manifest's container (kubernetes.py)."""
    options = dict(nodes=2, gpus=8, image="i")
    options.update(kw)
    return k8s.environment(k8s.Options(**options))


def operator_tf_config(hosts, index, port=2222):
    """TF_CONFIG as Kubeflow's training-operator writes it."""
    return json.dumps({"cluster": {"worker": [f"{h}:{port}" for h in hosts]},
                       "task": {"type": "worker", "index": index},
                       "environment": "cloud"})


@pytest.mark.parametrize("kind", ["job", "jobset"])
def test_indexed_pod_gets_task_index_and_the_two_node_script(kind):
    options = k8s.Options(nodes=2, gpus=8, image="i", kind=kind)
    env = dict(k8s.environment(options), JOB_COMPLETION_INDEX="1")
    p = pod.plan(env)
    assert (p.script, p.nodes, p.index) == ("run_two_node.sh", 2, 1)
    assert p.env["TASK_INDEX"] == "1"
    assert p.env["NODES"] == env["NODES"]  # passed on as generated
    assert p.hosts == k8s.pod_hosts(options)
    assert p.how == "JOB_COMPLETION_INDEX=1"


@pytest.mark.parametrize("nodes,script", [(1, "run_single_node.sh"),
                                          (3, "run_multi_node.sh"),
                                          (8, "run_multi_node.sh")])
def test_the_script_follows_the_number_of_nodes(nodes, script):
    env = dict(manifest_env(nodes=nodes), JOB_COMPLETION_INDEX="0")
    p = pod.plan(env)
    assert (p.script, p.nodes) == (script, nodes)
    assert ("TASK_INDEX" in p.env) == (nodes > 1)


def test_tfjob_pod_passes_the_operators_tf_config_on():
    hosts = k8s.pod_hosts(k8s.Options(nodes=2, gpus=1, image="i",
                                      kind="tfjob", namespace="ml"))
    text = operator_tf_config(hosts, 1)
    p = pod.plan(dict(manifest_env(kind="tfjob"), TF_CONFIG=text))
    assert (p.script, p.index) == ("run_two_node.sh", 1)
    assert p.env["TF_CONFIG"] == text and "TASK_INDEX" not in p.env
    assert p.hosts == ["official-bench-worker-0.ml.svc",
                       "official-bench-worker-1.ml.svc"]


def test_a_one_task_tf_config_is_a_single_node_sweep():
    p = pod.plan({"TF_CONFIG": operator_tf_config(["a"], 0)})
    assert p.script == "run_single_node.sh" and "TF_CONFIG" not in p.env


@pytest.mark.parametrize("env,status,words", [
    (dict(NODES="a:1,b:1"), CLUSTER, ["JOB_COMPLETION_INDEX", "Indexed"]),
    (dict(NODES="a:1,b:1", JOB_COMPLETION_INDEX="2"), CLUSTER,
     ["index 2", "0..1"]),
    (dict(NODES="a:1,b:1", JOB_COMPLETION_INDEX="1", TASK_INDEX="0"),
     CLUSTER, ["disagree"]),
    (dict(NODES="a:1,b:x", JOB_COMPLETION_INDEX="0"), CLUSTER, ["b:x"]),
    (dict(NODES="a:1,,b:1", JOB_COMPLETION_INDEX="0"), CLUSTER,
     ["NODES", "position 1", "is empty"]),
    (dict(NODES="a:1,b:1", JOB_COMPLETION_INDEX="one"), CONFIG,
     ["JOB_COMPLETION_INDEX='one'"]),
    (dict(OB_HOLD_SECONDS="-5"), CONFIG, ["OB_HOLD_SECONDS"]),
    (dict(TF_CONFIG="{"), CLUSTER, ["TF_CONFIG"]),
    (dict(TF_CONFIG=json.dumps({"cluster": {"ps": ["p:1"], "worker":
                                            ["w:1"]},
                                "task": {"type": "ps", "index": 0}})),
     CLUSTER, ["ps 0", "chief and worker"]),
])
def test_bad_environments_are_one_line_with_a_status(env, status, words):
    with pytest.raises(pod.PodError) as e:
        pod.plan(env)
    assert e.value.status == status
    assert "\n" not in str(e.value)
    assert [w for w in words if w not in str(e.value)] == []


def test_wait_for_hosts_polls_until_every_name_resolves():
    now = [0.0]
    seen = {}

    def resolver(host):
        seen[host] = seen.get(host, 0) + 1
        return host == "self" or seen[host] >= 3  # the peer: 3rd lookup

    missing = pod.wait_for_hosts(["self", "peer", "peer"], 60, resolver,
                                 clock=lambda: now[0],
                                 sleep=lambda s: now.__setitem__(0,
                                                                 now[0] + s))
    assert missing == [] and seen == {"self": 1, "peer": 3}
    now[0] = 0.0
    missing = pod.wait_for_hosts(["peer2"], 10, lambda h: False,
                                 clock=lambda: now[0],
                                 sleep=lambda s: now.__setitem__(0,
                                                                 now[0] + s))
    assert missing == ["peer2"] and now[0] >= 10


def test_copy_hint_names_the_pod_and_the_log_dir():
    line = pod.copy_hint({"OB_POD_NAME": "b-0-x7", "OB_POD_NAMESPACE": "ml",
                          "LOG_DIR": "/logs/b"}, 60)
    assert "kubectl cp ml/b-0-x7:/logs/b ./b" in line and "60 s" in line


def test_run_and_hold_keeps_the_pod_then_returns_the_scripts_status(capsys):
    # Its EntrySignals become this process's SIGTERM/SIGINT handlers: put
    # back after (a later test in the same worker found SIGINT the pod's).
    old = {sig: signal.getsignal(sig) for sig in pod.SIGNALS}
    start = time.monotonic()
    try:
        status = pod.run_and_hold(["bash", "-c", "exit 3"],
                                  {"PATH": "/bin:/usr/bin"}, 1)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    assert status == 3
    assert time.monotonic() - start >= 1.0
    assert "kubectl cp" in capsys.readouterr().out


def test_the_module_refuses_a_bad_environment_in_one_line():
    p = subprocess.run([sys.executable, "-m", "official_bench.deploy.pod"],
                       cwd=REPO, env={"PATH": "/usr/bin:/bin",
                                      "NODES": "a:1,b:1"},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == CLUSTER
    assert p.stderr.count("\n") == 1 and "JOB_COMPLETION_INDEX" in p.stderr


def test_the_run_scripts_are_found_in_the_checkout():
    for name in ("run_single_node.sh", "run_two_node.sh",
                 "run_multi_node.sh"):
        assert pod.find_script(name) == f"{REPO}/{name}"


def test_the_launcher_takes_index_and_barrier_from_the_operators_tf_config(
        tmp_path):
    """The pod's plan handed to the launcher (dry run): node 1 of the TFJob
    by TF_CONFIG's task, node 0's barrier on worker 0's service name at
    port + 1, the TF_CONFIG passed to the trainer unchanged."""
    from support.launch_cli import clean_env
    hosts = k8s.pod_hosts(k8s.Options(nodes=2, gpus=1, image="i",
                                      kind="tfjob", namespace="ml"))
    p = pod.plan(dict(manifest_env(kind="tfjob", gpus=0),
                      TF_CONFIG=operator_tf_config(hosts, 1)))
    env = clean_env(tmp_path, **{k: v for k, v in p.env.items()
                                 if k not in ("LOG_DIR", "MODEL_DIR",
                                              "BARRIER_SECRET_FILE")})
    out = subprocess.run(["bash", pod.find_script(p.script), "--dry-run"],
                         cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert ("this node: index 1 = official-bench-worker-1.ml.svc:2222 "
            "(TF_CONFIG task)") in out.stdout
    assert "barrier: node 0's launcher at official-bench-worker-0.ml.svc:" \
        "2223" in out.stdout
    assert f"TF_CONFIG for the trainer: {p.env['TF_CONFIG']}" in out.stdout


def test_a_sigterm_reaches_the_sweep_without_a_hold():
    """The pod's command is the container's PID 1, which gets no signal it
    has no handler for: with --hold 0 too, it forwards kubectl delete's
    SIGTERM to the run script instead of exec'ing it."""
    import signal
    code = ("import sys; from official_bench.deploy import pod; "
            "sys.exit(pod.run_and_hold(['bash', '-c', 'trap \"echo got-term; "
            "exit 7\" TERM; echo ready; while :; do sleep 0.1; done'], "
            "{'PATH': '/usr/bin:/bin'}, 0))")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 7 and "got-term" in out
    assert "kubectl cp" not in out  # no hold, no copy hint
