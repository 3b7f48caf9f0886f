"""Every manifest of official-bench-k8s against the Kubernetes 1.37 API
schema, offline, with kubernetes-validate (strict: unknown fields fail).

What is validated: the Service and the Job whole; for the TFJob its Worker
pod template, and for the JobSet its replicated Job, each wrapped in the
core kind whose schema covers it (PodTemplate, Job).
What is not: the TFJob and JobSet wrappers themselves (tfReplicaSpecs,
runPolicy, replicatedJobs, network, failurePolicy). kubernetes-validate
ships only the core API's schemas; for a custom resource it raises
SchemaNotFoundError (its command line prints a WARN and exits 0), so those
fields are checked by test_k8s_manifests.py against the operators' APIs
(kubeflow training-operator v1, JobSet v1alpha2) instead.
"""

import copy

import pytest

from official_bench.deploy import kubernetes as k8s

kv = pytest.importorskip(
    "kubernetes_validate",
    reason="kubernetes-validate not installed (pip install -e .[test])")
VERSION = "1.37.0"


def validate(doc):
    kv.validate(doc, VERSION, strict=True)


def core_objects(doc):
    """The parts of one manifest that a core schema covers."""
    if doc["kind"] in ("Service", "Job"):
        return [doc]
    meta = {"name": doc["metadata"]["name"]}
    if doc["kind"] == "TFJob":
        return [{"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta,
                 "template": spec["template"]}
                for spec in doc["spec"]["tfReplicaSpecs"].values()]
    return [{"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
             "spec": rjob["template"]["spec"]}
            for rjob in doc["spec"]["replicatedJobs"]]


CASES = [dict(), dict(nodes=1, gpus=0), dict(nodes=4, gpus=8, batch=128,
                                             dtype="bf16", backend="jax"),
         dict(logs_pvc="logs", data_pvc="imagenet", namespace="ml",
              secret="s", hold=60)]


@pytest.mark.parametrize("kind", k8s.KINDS)
@pytest.mark.parametrize("change", CASES, ids=range(len(CASES)))
def test_every_manifest_validates(kind, change):
    options = dict(nodes=2, gpus=1, image="reg.example/ob:1", kind=kind)
    options.update(change)
    checked = 0
    for doc in k8s.manifests(k8s.Options(**options)):
        for part in core_objects(doc):
            validate(part)
            checked += 1
    assert checked == (2 if kind == "job" else 1)


@pytest.mark.parametrize("kind", ["tfjob", "jobset"])
def test_custom_resources_have_no_schema_here(kind):
    (doc,) = k8s.manifests(k8s.Options(nodes=2, gpus=1, image="i",
                                       kind=kind))
    with pytest.raises(kv.SchemaNotFoundError):
        validate(doc)


def test_the_validation_catches_a_broken_manifest():
    _, job = k8s.manifests(k8s.Options(nodes=2, gpus=1, image="i"))
    bad_type = copy.deepcopy(job)
    bad_type["spec"]["completions"] = "two"
    unknown = copy.deepcopy(job)
    unknown["spec"]["template"]["spec"]["containers"][0]["gpus"] = 1
    for doc in (bad_type, unknown):
        with pytest.raises(kv.ValidationError):
            validate(doc)
