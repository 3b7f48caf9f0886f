"""Kubernetes manifests for N pods x G GPUs, built as plain dicts.

Three kinds, one pod template (the image, `python3 -m
official_bench.deploy.pod` as its command, GPUs as `nvidia.com/gpu`, the
logs volume, the barrier secret):
- job: a headless Service and an Indexed Job; pod i's host name is
  `<name>-<i>.<name>` (an Indexed Job's pod hostname is `<job>-<index>`,
  its `subdomain` the Service), NODES lists them all and the pod takes its
  index from JOB_COMPLETION_INDEX.
- tfjob: a Kubeflow TFJob (kubeflow.org/v1) with N Worker replicas; the
  operator injects TF_CONFIG (`<name>-worker-<i>.<namespace>.svc:<port>`,
  the port of the container `tensorflow`'s port `tfjob-port`).
- jobset: a JobSet (jobset.x-k8s.io/v1alpha2) with one replicated Job of
  N indexed pods; pod i is `<name>-node-0-<i>.<name>`.
Bad options raise DeployError naming the option and the valid values.
Every name a manifest holds is checked first against Kubernetes' grammar
for it (NameRule: DNS-1035 and DNS-1123 labels, DNS-1123 subdomains,
label values) and the image against the distribution reference grammar
(`image_problem`), since the API server takes a bad image (the pull
fails) and a too-long host name (the pod never starts).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, List, NamedTuple, Optional

KINDS = ("job", "tfjob", "jobset")
BACKENDS = ("tensorflow", "jax")
DTYPES = ("fp32", "fp16", "bf16")
APP = "official-bench"
ENTRY = ["python3", "-m", "official_bench.deploy.pod"]
LOGS_MOUNT = "/logs"
DATA_MOUNT = "/data"
SCRATCH_MOUNT = "/scratch"
SECRET_MOUNT = "/etc/official-bench/barrier"
SECRET_KEY = "secret"
RJOB = "node"  # the JobSet's replicated Job
TFJOB_CONTAINER = "tensorflow"  # the TFJob operator reads its port
TFJOB_PORT_NAME = "tfjob-port"
# s a pod waits after its sweep so that logs can be copied
HOLD_EMPTYDIR = 3600


class DeployError(ValueError):
    """A bad option: the message names it and the valid values."""


@dataclasses.dataclass(frozen=True)
class NameRule:
    """One of Kubernetes' name grammars (k8s.io/apimachinery validation):
    its name, its pattern, its longest length and the words for both."""
    title: str
    pattern: "re.Pattern[str]"
    longest: int
    says: str

    def problem(self, value: str) -> Optional[str]:
        """Why `value` breaks the rule, or None."""
        if len(value) > self.longest:
            return (f"not {self.title} ({len(value)} characters, at most "
                    f"{self.longest})")
        if not self.pattern.fullmatch(value):
            return f"not {self.title} ({self.says})"
        return None


_DNS_LABEL = "[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = NameRule(
    "a DNS-1123 label", re.compile(_DNS_LABEL), 63,
    "lower-case letters, digits and '-', starting and ending with a letter "
    "or digit, at most 63 characters")
DNS1123_SUBDOMAIN = NameRule(
    "a DNS-1123 subdomain", re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*"),
    253, "DNS-1123 labels joined by '.': lower-case letters, digits, '-' "
    "and '.', starting and ending with a letter or digit, at most 253 "
    "characters")
DNS1035_LABEL = NameRule(
    "a DNS-1035 label", re.compile("[a-z](?:[-a-z0-9]*[a-z0-9])?"), 63,
    "lower-case letters, digits and '-', starting with a letter and ending "
    "with a letter or digit, at most 63 characters")
LABEL_VALUE = NameRule(
    "a label value",
    re.compile("(?:(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"), 63,
    "empty, or letters, digits, '-', '_' and '.', starting and ending with "
    "a letter or digit, at most 63 characters")

# The distribution reference grammar (distribution/reference), which the
# kubelet's runtime parses an image with: [registry[:port]/]path[:tag]
# [@digest]. ASCII only, as Go's \w is.
IMAGE_FORM = "[registry[:port]/]path[:tag][@digest]"
_HOST_PART = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_REGISTRY = re.compile(
    rf"(?:{_HOST_PART}(?:\.{_HOST_PART})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?")
_PATH_PART = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"\w[\w.-]{0,127}", re.ASCII)
_ALGORITHM = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*")
# go-digest's algorithms and their hex lengths (lower-case hex)
DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
NAME_LONGEST = 255  # registry and path together


def image_problem(ref: str) -> Optional[str]:
    """Why `ref` is no image reference, or None."""
    rest, at, digest = ref.partition("@")
    if at:
        problem = _digest_problem(digest)
        if problem:
            return problem
    name, tag = rest, None
    if rest.rfind(":") > rest.rfind("/"):
        name, _, tag = rest.rpartition(":")
    if tag is not None and not _TAG.fullmatch(tag):
        return (f"tag {tag!r}: a letter, digit or '_', then up to 127 of "
                "those, '.' and '-'")
    if not name:
        return "no repository path"
    if len(name) > NAME_LONGEST:
        return (f"registry and path have {len(name)} characters, at most "
                f"{NAME_LONGEST}")
    parts = name.split("/")
    if len(parts) > 1 and _REGISTRY.fullmatch(parts[0]):
        parts = parts[1:]
    for part in parts:
        if not _PATH_PART.fullmatch(part):
            return (f"path component {part!r}: lower-case letters and "
                    "digits, joined by '.', '_', '__' or '-'")
    return None


def _digest_problem(digest: str) -> Optional[str]:
    algorithm, _, hex_part = digest.partition(":")
    if not _ALGORITHM.fullmatch(algorithm) or not hex_part:
        return f"digest {digest!r}: algorithm:hex, e.g. sha256:<64 hex>"
    length = DIGEST_HEX.get(algorithm)
    if length is None:
        return (f"digest algorithm {algorithm!r}: one of "
                f"{', '.join(DIGEST_HEX)}")
    if not re.fullmatch(f"[0-9a-f]{{{length}}}", hex_part):
        return (f"digest {digest!r}: {algorithm} takes {length} lower-case "
                "hex digits")
    return None


@dataclasses.dataclass(frozen=True)
class Options:
    """What to deploy (the CLI's flags)."""
    nodes: int
    gpus: int
    image: str
    kind: str = "job"
    name: str = "official-bench"
    namespace: Optional[str] = None
    batch: Optional[int] = None
    dtype: str = "fp32"
    test_num: int = 5
    backend: str = "tensorflow"
    port: int = 2222
    logs_pvc: Optional[str] = None
    data_pvc: Optional[str] = None
    data_dir: Optional[str] = None
    secret: Optional[str] = None  # default: <name>-barrier
    hold: Optional[int] = None  # default: HOLD_EMPTYDIR, 0 with a logs PVC

    @property
    def secret_name(self) -> str:
        return self.secret or f"{self.name}-barrier"

    @property
    def hold_seconds(self) -> int:
        if self.hold is not None:
            return self.hold
        return 0 if self.logs_pvc else HOLD_EMPTYDIR

    @property
    def log_dir(self) -> str:
        return f"{LOGS_MOUNT}/{self.name}"


def pod_hosts(opts: Options) -> List[str]:
    """Each pod's DNS name, as its peers reach it, pod 0 first."""
    if opts.kind == "job":
        return [f"{opts.name}-{i}.{opts.name}" for i in range(opts.nodes)]
    if opts.kind == "jobset":
        return [f"{opts.name}-{RJOB}-0-{i}.{opts.name}"
                for i in range(opts.nodes)]
    ns = opts.namespace or "default"
    return [f"{opts.name}-worker-{i}.{ns}.svc" for i in range(opts.nodes)]


def check(opts: Options) -> None:
    """DeployError for the first bad option."""
    _one_of("--kind", opts.kind, KINDS)
    _one_of("--backend", opts.backend, BACKENDS)
    _one_of("--dtype", opts.dtype, DTYPES)
    for flag, value, low in (("--nodes", opts.nodes, 1),
                             ("--gpus", opts.gpus, 0),
                             ("--test-num", opts.test_num, 1),
                             ("--batch", opts.batch, 1),
                             ("--hold", opts.hold, 0)):
        if value is not None and value < low:
            raise DeployError(f"{flag} {value}: must be {low} or more")
    if not 1 <= opts.port <= 65534:
        raise DeployError(f"--port {opts.port}: must be 1..65534 (the "
                          "barrier listens on port + 1)")
    problem = image_problem(opts.image)
    if problem:
        raise DeployError(f"--image {opts.image!r}: not an image reference "
                          f"({problem}; the form is {IMAGE_FORM}, e.g. "
                          "registry.example.com/you/official-bench:2.21)")
    for entry in manifest_names(opts):
        problem = entry.rule.problem(entry.name)
        if problem:
            said = f"{entry.what} {entry.name!r} is " if entry.what else ""
            raise DeployError(f"{entry.flag} {entry.given!r}: {said}"
                              f"{problem}")


class ManifestName(NamedTuple):
    """A name the manifests hold, or make Kubernetes derive, and its rule:
    `given` is the flag's value, `what` says what `name` is when it is
    not that value itself."""
    flag: str
    given: str
    name: str
    rule: NameRule
    what: str = ""


def manifest_names(opts: Options) -> List[ManifestName]:
    """Every name the manifests hold or make Kubernetes derive."""
    name = opts.name
    names = [ManifestName("--name", name, name, DNS1035_LABEL),  # Service
             ManifestName("--name", name, name, LABEL_VALUE)]  # instance
    if opts.namespace is not None:
        names.append(ManifestName("--namespace", opts.namespace,
                                  opts.namespace, DNS1123_LABEL))
    if opts.secret is not None:
        names.append(ManifestName("--secret", opts.secret, opts.secret,
                                  DNS1123_SUBDOMAIN))
    else:
        names.append(ManifestName("--name", name, opts.secret_name,
                                  DNS1123_SUBDOMAIN, "the Secret's name"))
    for flag, claim in (("--logs-pvc", opts.logs_pvc),
                        ("--data-pvc", opts.data_pvc)):
        if claim is not None:
            names.append(ManifestName(flag, claim, claim, DNS1123_SUBDOMAIN))
    # A pod's host name (a TFJob replica's Service name too) is one label.
    names += [ManifestName("--name", name, host.split(".")[0],
                           DNS1123_LABEL, f"pod {i}'s host name")
              for i, host in enumerate(pod_hosts(opts))]
    return names


def _one_of(flag: str, value: str, valid) -> None:
    if value not in valid:
        raise DeployError(f"{flag} {value!r}: choose from "
                          f"{', '.join(valid)}")


def manifests(opts: Options) -> List[Dict[str, Any]]:
    """The objects to apply, in order (DeployError for bad options)."""
    check(opts)
    if opts.kind == "job":
        return [_service(opts), _job(opts)]
    if opts.kind == "tfjob":
        return [_tfjob(opts)]
    return [_jobset(opts)]


def pod_spec_of(doc: Dict[str, Any]) -> Dict[str, Any]:
    """The pod template's spec inside a workload this module writes (Job,
    TFJob's Worker, JobSet's replicated Job), read back from the document."""
    if doc["kind"] == "Job":
        return doc["spec"]["template"]["spec"]
    if doc["kind"] == "TFJob":
        return doc["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    job = doc["spec"]["replicatedJobs"][0]["template"]["spec"]
    return job["template"]["spec"]


def _meta(opts: Options, name: str) -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": name, "labels": _labels(opts)}
    if opts.namespace:
        meta["namespace"] = opts.namespace
    return meta


def _labels(opts: Options) -> Dict[str, str]:
    return {"app.kubernetes.io/name": APP,
            "app.kubernetes.io/instance": opts.name}


def environment(opts: Options) -> Dict[str, str]:
    """What the pod's entry and the run script read (see pod.py)."""
    env = {"DTYPE": opts.dtype, "TEST_NUM": str(opts.test_num),
           "BACKEND": opts.backend,
           "DEVICE": "gpu" if opts.gpus else "cpu",
           "LOG_DIR": opts.log_dir, "MODEL_DIR": f"{SCRATCH_MOUNT}/model_dir",
           "BARRIER_SECRET_FILE": f"{SECRET_MOUNT}/{SECRET_KEY}",
           "OB_HOLD_SECONDS": str(opts.hold_seconds)}
    if opts.batch is not None:
        env["BATCH"] = str(opts.batch)
    if opts.data_dir or opts.data_pvc:
        env["DATA_DIR"] = opts.data_dir or DATA_MOUNT
    if opts.nodes > 1:
        env["NUM_NODES"] = str(opts.nodes)
        if opts.kind != "tfjob":  # TFJob: the operator's TF_CONFIG instead
            env["NODES"] = ",".join(f"{h}:{opts.port}"
                                    for h in pod_hosts(opts))
    return env


def _container(opts: Options) -> Dict[str, Any]:
    env: List[Dict[str, Any]] = [{"name": k, "value": v}
                                 for k, v in environment(opts).items()]
    env += [{"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
            for name, path in (("OB_POD_NAME", "metadata.name"),
                               ("OB_POD_NAMESPACE", "metadata.namespace"))]
    tf = opts.kind == "tfjob"
    mounts = [{"name": "logs", "mountPath": LOGS_MOUNT},
              {"name": "scratch", "mountPath": SCRATCH_MOUNT},
              {"name": "dshm", "mountPath": "/dev/shm"},
              {"name": "barrier-secret", "mountPath": SECRET_MOUNT,
               "readOnly": True}]
    if opts.data_pvc:
        mounts.append({"name": "data", "mountPath": DATA_MOUNT,
                       "readOnly": True})
    container: Dict[str, Any] = {
        "name": TFJOB_CONTAINER if tf else "bench", "image": opts.image,
        "command": list(ENTRY), "env": env,
        "ports": [{"name": TFJOB_PORT_NAME if tf else "worker",
                   "containerPort": opts.port},
                  {"name": "barrier", "containerPort": opts.port + 1}],
        "volumeMounts": mounts}
    if opts.gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": opts.gpus}}
    return container


def _volumes(opts: Options) -> List[Dict[str, Any]]:
    logs: Dict[str, Any] = {"name": "logs"}
    if opts.logs_pvc:
        logs["persistentVolumeClaim"] = {"claimName": opts.logs_pvc}
    else:
        logs["emptyDir"] = {}
    volumes = [logs, {"name": "scratch", "emptyDir": {}},
               {"name": "dshm", "emptyDir": {"medium": "Memory"}},
               # 0400: the launcher refuses a secret file others may read.
               {"name": "barrier-secret",
                "secret": {"secretName": opts.secret_name,
                           "defaultMode": 0o400,
                           "items": [{"key": SECRET_KEY,
                                      "path": SECRET_KEY}]}}]
    if opts.data_pvc:
        volumes.append({"name": "data", "persistentVolumeClaim": {
            "claimName": opts.data_pvc, "readOnly": True}})
    return volumes


def pod_template(opts: Options, **spec: Any) -> Dict[str, Any]:
    """The pod template every kind uses; `spec` adds pod spec fields."""
    return {"metadata": {"labels": _labels(opts)},
            "spec": dict(restartPolicy="Never", **spec,
                         containers=[_container(opts)],
                         volumes=_volumes(opts))}


def _indexed_job_spec(opts: Options, **pod_spec: Any) -> Dict[str, Any]:
    return {"completionMode": "Indexed", "completions": opts.nodes,
            "parallelism": opts.nodes, "backoffLimit": 0,
            "template": pod_template(opts, **pod_spec)}


def _service(opts: Options) -> Dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _meta(opts, opts.name),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": _labels(opts),
                     "ports": [{"name": "worker", "port": opts.port},
                               {"name": "barrier", "port": opts.port + 1}]}}


def _job(opts: Options) -> Dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": _meta(opts, opts.name),
            "spec": _indexed_job_spec(opts, subdomain=opts.name)}


def _tfjob(opts: Options) -> Dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
            "metadata": _meta(opts, opts.name),
            "spec": {"runPolicy": {"backoffLimit": 0,
                                   "cleanPodPolicy": "None"},
                     "tfReplicaSpecs": {"Worker": {
                         "replicas": opts.nodes, "restartPolicy": "Never",
                         "template": pod_template(opts)}}}}


def _jobset(opts: Options) -> Dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": _meta(opts, opts.name),
            "spec": {"network": {"enableDNSHostnames": True,
                                 "subdomain": opts.name,
                                 "publishNotReadyAddresses": True},
                     "failurePolicy": {"maxRestarts": 0},
                     "replicatedJobs": [{
                         "name": RJOB, "replicas": 1,
                         # The JobSet sets the pods' subdomain itself.
                         "template": {"spec": _indexed_job_spec(opts)}}]}}
