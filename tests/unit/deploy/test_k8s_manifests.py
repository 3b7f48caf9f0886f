"""official_bench/deploy/kubernetes.py: what each kind's manifests hold
for N pods x G GPUs, and that the names agree (the Service, the Job, the
pods' host names in NODES, the secret's volume and BARRIER_SECRET_FILE).
Schema validation is test_k8s_schema.py; the pod side test_k8s_pod.py."""

import pytest

from official_bench.deploy import kubernetes as k8s


def opts(**kw):
    base = dict(nodes=3, gpus=4, image="reg.example/ob:1")
    base.update(kw)
    return k8s.Options(**base)


pod_spec = k8s.pod_spec_of


def env_of(doc):
    container = pod_spec(doc)["containers"][0]
    return {e["name"]: e.get("value") for e in container["env"]}


def test_job_is_a_headless_service_and_an_indexed_job_whose_names_agree():
    service, job = k8s.manifests(opts(name="rn50", port=3000))
    assert (service["kind"], job["kind"]) == ("Service", "Job")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == 3
    template = spec["template"]
    # The Service selects the Job's pods and is their subdomain.
    assert service["spec"]["selector"].items() <= \
        template["metadata"]["labels"].items()
    assert template["spec"]["subdomain"] == service["metadata"]["name"]
    # An Indexed Job's pod i is host <job>-<i>; with the subdomain its peers
    # reach it as <job>-<i>.<service>: exactly NODES, on the trainer port.
    nodes = env_of(job)["NODES"].split(",")
    assert nodes == [f"{job['metadata']['name']}-{i}."
                     f"{service['metadata']['name']}:3000" for i in range(3)]
    assert env_of(job)["NUM_NODES"] == "3"
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports == {"worker": 3000, "barrier": 3001}


def test_the_container_runs_the_pod_entry_with_gpus_logs_and_secret():
    (_, job) = k8s.manifests(opts(batch=256, dtype="fp16", test_num=2,
                                  backend="jax"))
    spec = pod_spec(job)
    (container,) = spec["containers"]
    assert container["command"] == ["python3", "-m",
                                    "official_bench.deploy.pod"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 4}}
    env = env_of(job)
    assert {k: env[k] for k in ("BATCH", "DTYPE", "TEST_NUM", "BACKEND",
                                "DEVICE")} == {
        "BATCH": "256", "DTYPE": "fp16", "TEST_NUM": "2", "BACKEND": "jax",
        "DEVICE": "gpu"}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert set(mounts) == set(volumes)
    assert env["LOG_DIR"].startswith(mounts["logs"] + "/")
    assert volumes["logs"]["emptyDir"] == {}
    secret = volumes["barrier-secret"]["secret"]
    assert secret["secretName"] == "official-bench-barrier"
    # The launcher refuses a secret file group or others may read.
    assert secret["defaultMode"] == 0o400
    (item,) = secret["items"]
    assert env["BARRIER_SECRET_FILE"] == \
        f"{mounts['barrier-secret']}/{item['path']}"
    assert env["OB_HOLD_SECONDS"] == str(k8s.HOLD_EMPTYDIR)
    names = [e["name"] for e in container["env"]]
    assert len(names) == len(set(names))
    assert "TF_CONFIG" not in names and "TASK_INDEX" not in names
    assert spec["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] == 0


def test_no_gpus_is_a_cpu_run_without_a_gpu_limit():
    (_, job) = k8s.manifests(opts(gpus=0))
    assert "resources" not in pod_spec(job)["containers"][0]
    assert env_of(job)["DEVICE"] == "cpu"


def test_one_node_has_no_node_list():
    (_, job) = k8s.manifests(opts(nodes=1))
    assert "NODES" not in env_of(job) and "NUM_NODES" not in env_of(job)
    assert job["spec"]["completions"] == 1


def test_tfjob_leaves_tf_config_to_the_operator():
    (tfjob,) = k8s.manifests(opts(kind="tfjob", nodes=2, port=2345))
    assert (tfjob["apiVersion"], tfjob["kind"]) == ("kubeflow.org/v1",
                                                    "TFJob")
    worker = tfjob["spec"]["tfReplicaSpecs"]["Worker"]
    assert list(tfjob["spec"]["tfReplicaSpecs"]) == ["Worker"]
    assert worker["replicas"] == 2 and worker["restartPolicy"] == "Never"
    (container,) = pod_spec(tfjob)["containers"]
    # The operator writes TF_CONFIG's port from this container and port.
    assert container["name"] == "tensorflow"
    assert {"name": "tfjob-port", "containerPort": 2345} in \
        container["ports"]
    env = env_of(tfjob)
    assert "TF_CONFIG" not in env and "NODES" not in env
    assert env["NUM_NODES"] == "2"


def test_tfjob_pod_hosts_are_the_operators_service_names():
    assert k8s.pod_hosts(opts(kind="tfjob", nodes=2, name="b",
                              namespace="ml")) == [
        "b-worker-0.ml.svc", "b-worker-1.ml.svc"]


def test_jobset_is_one_replicated_indexed_job_reached_by_its_subdomain():
    (js,) = k8s.manifests(opts(kind="jobset", name="rn"))
    assert (js["apiVersion"], js["kind"]) == ("jobset.x-k8s.io/v1alpha2",
                                              "JobSet")
    network = js["spec"]["network"]
    assert network["enableDNSHostnames"] is True
    (rjob,) = js["spec"]["replicatedJobs"]
    assert rjob["replicas"] == 1
    job = rjob["template"]["spec"]
    assert job["completionMode"] == "Indexed"
    assert job["completions"] == job["parallelism"] == 3
    # <jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>
    assert env_of(js)["NODES"].split(",") == [
        f"rn-{rjob['name']}-0-{i}.{network['subdomain']}:2222"
        for i in range(3)]
    assert "subdomain" not in job["template"]["spec"]  # JobSet sets it


def test_pvcs_namespace_and_secret_name():
    docs = k8s.manifests(opts(logs_pvc="bench-logs", data_pvc="imagenet",
                              namespace="ml", secret="s1"))
    assert {d["metadata"]["namespace"] for d in docs} == {"ml"}
    spec = pod_spec(docs[1])
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["logs"]["persistentVolumeClaim"] == {
        "claimName": "bench-logs"}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == \
        "imagenet"
    assert volumes["barrier-secret"]["secret"]["secretName"] == "s1"
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["data"]["readOnly"] is True
    env = env_of(docs[1])
    assert env["DATA_DIR"] == mounts["data"]["mountPath"]
    assert env["OB_HOLD_SECONDS"] == "0"  # a PVC keeps the logs
    assert env_of(k8s.manifests(opts(data_pvc="d", data_dir="/data/in"))[1]
                  )["DATA_DIR"] == "/data/in"


@pytest.mark.parametrize("change,words", [
    (dict(kind="mpijob"), ["--kind", "job, tfjob, jobset"]),
    (dict(dtype="fp8"), ["--dtype", "fp32, fp16, bf16"]),
    (dict(backend="torch"), ["--backend", "tensorflow, jax"]),
    (dict(nodes=0), ["--nodes 0", "1 or more"]),
    (dict(gpus=-1), ["--gpus -1", "0 or more"]),
    (dict(port=65535), ["--port 65535", "port + 1"]),
    (dict(name="Bench_1"), ["--name 'Bench_1'", "DNS-1035 label"]),
    (dict(logs_pvc="-x"), ["--logs-pvc '-x'", "DNS-1123 subdomain"]),
    (dict(image=" "), ["--image ' '", "not an image reference"]),
    (dict(name="b" * 60, kind="tfjob"), ["pod 0's host name 'bbb",
                                         "69 characters, at most 63"]),
])
def test_bad_options_name_the_flag_and_the_valid_values(change, words):
    with pytest.raises(k8s.DeployError) as e:
        k8s.manifests(opts(**change))
    message = str(e.value)
    assert "\n" not in message
    assert [w for w in words if w not in message] == []
