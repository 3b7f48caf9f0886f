"""`official-bench-k8s` (also `python -m official_bench.deploy.k8s_cli`):
flags -> kubernetes.Options -> the manifests as multi-document YAML on
stdout, headed by comments saying how to create the barrier's Secret and
apply them. A bad flag is one line naming it and the valid values,
nothing on stdout, and the status contracts/exit_status.CONFIG; so is a
name or an image Kubernetes would refuse or not pull (kubernetes.check:
its grammars).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import List, Optional, Sequence

import yaml

from official_bench.contracts.exit_status import CONFIG, OK, help_text
from official_bench.deploy import kubernetes as k8s
from official_bench.host.flag_errors import OneLineParser

PROG = "official-bench-k8s"
EXAMPLES = """\
examples:
  official-bench-k8s --nodes 2 --gpus 8 --image REG/official-bench:latest \\
      --batch 256 --dtype fp16 | kubectl apply -f -
  official-bench-k8s --nodes 4 --gpus 8 --image IMG --kind jobset \\
      --logs-pvc bench-logs > bench.yaml
  official-bench-k8s --nodes 2 --gpus 0 --image IMG --kind tfjob \\
      --test-num 1          # a CPU smoke run on a cluster without GPUs

Create the barrier's Secret once per namespace first (the YAML's first
lines show the command). kinds: job = an Indexed Job and a headless
Service (no operator needed); tfjob = Kubeflow's TFJob (training-operator
installed); jobset = a JobSet (JobSet controller installed).
docs/kubernetes.md: logs, kubectl cp, the extractor.
"""


# --help's exit statuses (contracts/exit_status.help_text).
EXIT_STATUSES = {
    OK: "the manifests printed",
    CONFIG: "a bad flag, or a name or image Kubernetes would refuse (one "
            "line, nothing on stdout)",
}


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog=PROG, epilog=EXAMPLES + "\n" + textwrap.fill(
            help_text(EXIT_STATUSES), 79),
        formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(
            prog, width=79),
        description="Prints Kubernetes manifests (YAML, stdout) that run "
        "the benchmark's\nrun scripts on N pods with G GPUs each.")
    p.add_argument("--nodes", type=int, required=True, metavar="N",
                   help="pods (nodes) taking part")
    p.add_argument("--gpus", type=int, required=True, metavar="G",
                   help="GPUs per pod (nvidia.com/gpu); 0: CPU smoke run")
    p.add_argument("--image", required=True,
                   help="the image the pods run (make image, then push)")
    p.add_argument("--kind", default="job", choices=k8s.KINDS,
                   help="job (default), tfjob or jobset")
    p.add_argument("--name", default="official-bench",
                   help="name of the Job/TFJob/JobSet and Service")
    p.add_argument("--namespace", help="namespace (default: kubectl's)")
    p.add_argument("--batch", type=int,
                   help="images per GPU (default: the config's)")
    p.add_argument("--dtype", default="fp32", choices=k8s.DTYPES,
                   help="precision, as the run scripts' (default fp32)")
    p.add_argument("--test-num", type=int, default=5, metavar="N",
                   help="runs of each case (default 5)")
    p.add_argument("--backend", default="tensorflow", choices=k8s.BACKENDS,
                   help="runtime.backend of the runs (default tensorflow)")
    p.add_argument("--port", type=int, default=2222,
                   help="trainer port; the barrier uses port + 1")
    p.add_argument("--logs-pvc", metavar="CLAIM",
                   help="PersistentVolumeClaim for the logs (default: an "
                   "emptyDir per pod, kept --hold s for kubectl cp)")
    p.add_argument("--hold", type=int, metavar="S",
                   help="seconds a pod waits after its sweep (default: "
                   f"{k8s.HOLD_EMPTYDIR} with emptyDir, 0 with --logs-pvc)")
    p.add_argument("--data-pvc", metavar="CLAIM",
                   help=f"PersistentVolumeClaim mounted at {k8s.DATA_MOUNT}"
                   " (read-only) for DATA_DIR")
    p.add_argument("--data-dir", metavar="DIR",
                   help="DATA_DIR in the pod (default: "
                   f"{k8s.DATA_MOUNT} with --data-pvc, else synthetic data)")
    p.add_argument("--secret", metavar="NAME",
                   help="Secret holding the barrier's key "
                   f"'{k8s.SECRET_KEY}' (default: NAME-barrier)")
    return p


def options(ns: argparse.Namespace) -> k8s.Options:
    return k8s.Options(
        nodes=ns.nodes, gpus=ns.gpus, image=ns.image, kind=ns.kind,
        name=ns.name, namespace=ns.namespace, batch=ns.batch,
        dtype=ns.dtype, test_num=ns.test_num, backend=ns.backend,
        port=ns.port, logs_pvc=ns.logs_pvc, data_pvc=ns.data_pvc,
        data_dir=ns.data_dir, secret=ns.secret, hold=ns.hold)


def header(opts: k8s.Options) -> List[str]:
    """Comment lines above the manifests: the Secret, then apply."""
    ns = f" -n {opts.namespace}" if opts.namespace else ""
    need = {"tfjob": "Kubeflow's training-operator (TFJob)",
            "jobset": "the JobSet controller"}.get(opts.kind)
    lines = [f"# official-bench: {opts.nodes} pod(s) x {opts.gpus} GPU(s), "
             f"kind {opts.kind}, image {opts.image}",
             "# 1. the barrier's secret, once per namespace:",
             f"#    kubectl{ns} create secret generic {opts.secret_name} "
             f"--from-literal={k8s.SECRET_KEY}=\"$(openssl rand -hex 32)\"",
             "# 2. kubectl apply -f THIS_FILE (or pipe it to kubectl apply "
             "-f -)"]
    if need:
        lines.append(f"# needs {need} installed in the cluster")
    lines.append("# logs: docs/kubernetes.md (kubectl cp, the extractor)")
    return lines


def render(opts: k8s.Options) -> str:
    docs = k8s.manifests(opts)
    body = yaml.safe_dump_all(docs, sort_keys=False,
                              default_flow_style=False, explicit_start=True)
    return "\n".join(header(opts)) + "\n" + body


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        text = render(options(ns))
    except k8s.DeployError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return CONFIG
    sys.stdout.write(text)
    return OK


def run_main() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run_main()
