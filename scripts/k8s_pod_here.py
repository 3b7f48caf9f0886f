"""Runs one pod of official-bench-k8s's Indexed Job on this machine, as
Kubernetes would start it: the manifest's own variables and command, plus
JOB_COMPLETION_INDEX, with the pod's mounts (logs, scratch, the barrier
secret) made folders under ROOT. A way to try a manifest's entry on a GPU
host before `kubectl apply`; scripts/gpu_jax_check.sh uses it.

  python3 scripts/k8s_pod_here.py ROOT [--index I] [official-bench-k8s flags]

e.g. `python3 scripts/k8s_pod_here.py /tmp/pod --nodes 1 --gpus 1
--image x --backend jax --dtype bf16 --batch 256 --test-num 1`. It exits
with the pod command's status; the logs land in ROOT/logs/<name>/.
"""

import argparse
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from official_bench.deploy import k8s_cli, kubernetes as k8s  # noqa: E402


def here(path, root):
    """A mount path of the pod, as a folder under root."""
    for mount in (k8s.LOGS_MOUNT, k8s.SCRATCH_MOUNT, k8s.SECRET_MOUNT):
        if path.startswith(mount):
            return os.path.join(root, mount.strip("/").replace("/", "_")) + \
                path[len(mount):]
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root")
    parser.add_argument("--index", type=int, default=0,
                        help="which pod of the Job: its "
                        "JOB_COMPLETION_INDEX (default 0)")
    args, rest = parser.parse_known_args()
    opts = k8s_cli.options(k8s_cli.build_parser().parse_args(rest))
    k8s.check(opts)
    if opts.kind != "job":
        parser.error("only --kind job runs here (its pods need no operator)")
    (container,) = k8s.pod_spec_of(k8s.manifests(opts)[-1])["containers"]
    env = {e["name"]: here(e["value"], args.root)
           for e in container["env"] if "value" in e}
    env.update(JOB_COMPLETION_INDEX=str(args.index),
               OB_POD_NAME=f"{opts.name}-{args.index}", OB_HOLD_SECONDS="0")
    secret = env["BARRIER_SECRET_FILE"]
    os.makedirs(os.path.dirname(secret), exist_ok=True)
    if not os.path.exists(secret):
        with open(os.open(secret, os.O_WRONLY | os.O_CREAT, 0o400), "w") as f:
            f.write(os.urandom(16).hex() + "\n")
    print(f"[pod] {' '.join(container['command'])} with "
          + " ".join(f"{k}={v}" for k, v in sorted(env.items())), flush=True)
    return subprocess.call(container["command"], cwd=REPO,
                           env=dict(os.environ, **env))


if __name__ == "__main__":
    sys.exit(main())
