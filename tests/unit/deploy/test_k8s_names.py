"""official_bench/deploy/kubernetes.py's name checks: the image against
the distribution reference grammar, every name the manifests hold (or make
Kubernetes derive: pod host names, a TFJob replica's Service) against
Kubernetes' rule for it; a bad one is one DeployError line naming the
flag, the value and the rule. The CLI's exit 2 with nothing on stdout is
test_k8s_cli.py."""

import pytest

from official_bench.deploy import kubernetes as k8s

SHA256 = "sha256:" + "0123456789abcdef" * 4


def opts(**kw):
    base = dict(nodes=3, gpus=4, image="reg.example/ob:1")
    base.update(kw)
    return k8s.Options(**base)


@pytest.mark.parametrize("ref", [
    "ob", "ob:1", "library/ubuntu", "docker.io/library/ubuntu:22.04",
    "registry.example.com/you/official-bench:2.21",
    "localhost:5000/ob", "10.0.0.7:5000/team/ob:v1.2-rc_3",
    "[fd00::1]:5000/ob", "Registry.Example.COM/ob",  # the host any case
    "a.b_c__d-e---f/g", f"ob@{SHA256}", f"reg.example/ob:1@{SHA256}",
    "ob@sha512:" + "f" * 128, "ob:" + "t" * 128, "o" * 255,
    "ob:_tag", "ob:1.0.-x",
])
def test_image_references_the_grammar_accepts(ref):
    assert k8s.image_problem(ref) is None


@pytest.mark.parametrize("ref,words", [
    ("my image:latest", ["path component 'my image'"]),
    ("reg.example/You/ob", ["path component 'You'"]),
    ("Ob", ["path component 'Ob'"]),  # one component is a path, not a host
    ("reg.example/ob/", ["path component ''"]),
    ("a//b", ["path component ''"]),
    ("a___b", ["path component 'a___b'"]),
    ("a.-b", ["path component 'a.-b'"]),
    ("-ob", ["path component '-ob'"]),
    ("ob\n", ["path component 'ob\\n'"]),
    (" ob", ["path component ' ob'"]),
    ("ob:", ["tag ''"]),
    ("ob:-1", ["tag '-1'"]),
    ("ob:" + "t" * 129, ["tag 'ttt"]),
    ("ob:tag/x", ["path component 'ob:tag'"]),
    ("ob:\u00e9t\u00e9", ["tag"]),  # \w is ASCII, as Go's
    ("", ["no repository path"]),
    (":1", ["no repository path"]),
    ("o" * 256, ["256 characters, at most 255"]),
    ("ob@sha256:abc", ["sha256 takes 64 lower-case hex digits"]),
    ("ob@" + SHA256.upper().replace("SHA", "sha"), ["64 lower-case hex"]),
    ("ob@md5:" + "0" * 32, ["digest algorithm 'md5'", "sha256, sha384"]),
    ("ob@" + SHA256[7:], ["algorithm:hex"]),
    ("ob@latest", ["algorithm:hex"]),
])
def test_image_references_the_grammar_refuses(ref, words):
    problem = k8s.image_problem(ref)
    assert problem is not None
    assert [w for w in words if w not in problem] == [], problem


@pytest.mark.parametrize("rule,good,bad", [
    (k8s.DNS1123_LABEL, ["a", "0", "a-0", "9lives", "a" * 63],
     ["", "A", "a_b", "a.b", "-a", "a-", "a\n", "a" * 64]),
    (k8s.DNS1035_LABEL, ["a", "a-0", "a" * 63],
     ["", "0a", "9lives", "A", "a-", "a\n", "a" * 64]),
    (k8s.DNS1123_SUBDOMAIN, ["a", "a.b", "0.a-b.c", "a" * 63 + ".b",
                             ".".join(["a" * 63] * 3) + "." + "b" * 61],
     ["", "a..b", ".a", "a.", "A.b", "a_b", "a.-b", "a\n",
      ".".join(["a" * 63] * 3) + "." + "b" * 62]),
    (k8s.LABEL_VALUE, ["", "a", "A_b.c-D", "0", "a" * 63],
     ["_a", "a.", "a b", "a/b", "a\n", "a" * 64]),
])
def test_each_name_rule_takes_what_kubernetes_takes(rule, good, bad):
    assert [g for g in good if rule.problem(g)] == []
    assert [b for b in bad if not rule.problem(b)] == []
    assert rule.title in rule.problem(bad[-1])


def names_in(docs, kind):
    """Every name in the manifests, with the rule Kubernetes applies to
    it, read back from the documents (not from manifest_names)."""
    found = []
    for doc in docs:
        meta = doc["metadata"]
        # The Service, and the TFJob's and JobSet's names, which the
        # operators make Services of: DNS-1035. A Job's: a subdomain, and
        # a label value on its pods (job-name).
        found.append((meta["name"], k8s.DNS1035_LABEL
                      if doc["kind"] != "Job" else k8s.DNS1123_SUBDOMAIN))
        found.append((meta["name"], k8s.LABEL_VALUE))
        if "namespace" in meta:
            found.append((meta["namespace"], k8s.DNS1123_LABEL))
        found += [(v, k8s.LABEL_VALUE) for v in meta["labels"].values()]
        if doc["kind"] == "Service":
            found += [(v, k8s.LABEL_VALUE)
                      for v in doc["spec"]["selector"].values()]
            continue
        spec = k8s.pod_spec_of(doc)
        if "subdomain" in spec:
            found.append((spec["subdomain"], k8s.DNS1123_LABEL))
        if kind == "jobset":
            found.append((doc["spec"]["network"]["subdomain"],
                          k8s.DNS1123_LABEL))
        for volume in spec["volumes"]:
            found.append((volume["name"], k8s.DNS1123_LABEL))
            if "secret" in volume:
                found.append((volume["secret"]["secretName"],
                              k8s.DNS1123_SUBDOMAIN))
            if "persistentVolumeClaim" in volume:
                found.append((volume["persistentVolumeClaim"]["claimName"],
                              k8s.DNS1123_SUBDOMAIN))
    return found


def longest_name(kind, nodes):
    """The longest --name the check lets through for `kind` and `nodes`."""
    ok = [n for n in range(1, 70)
          if not _refused(opts(kind=kind, nodes=nodes, name="b" * n))]
    assert ok == list(range(1, len(ok) + 1))
    return len(ok)


def _refused(options):
    try:
        k8s.check(options)
    except k8s.DeployError as e:
        return str(e)
    return None


@pytest.mark.parametrize("kind", k8s.KINDS)
@pytest.mark.parametrize("nodes,first_long", [(1, 0), (12, 10)])
def test_the_longest_name_gives_63_character_host_names(kind, nodes,
                                                        first_long):
    """Every accepted name (up to the longest) gives manifests whose names
    all follow their rules and a longest pod host label of exactly 63;
    one more character is refused naming the first pod whose host name
    is then too long (pod 10: the first with a two-digit index)."""
    n = longest_name(kind, nodes)
    options = opts(kind=kind, nodes=nodes, name="b" * n, namespace="n" * 63,
                   logs_pvc="logs.claim-1", data_pvc="data." + "d" * 200,
                   secret="s.t" if nodes > 1 else None)
    docs = k8s.manifests(options)
    assert [(v, r.title) for v, r in names_in(docs, kind)
            if r.problem(v)] == []
    labels = [h.split(".")[0] for h in k8s.pod_hosts(options)]
    assert max(map(len, labels)) == 63
    assert [h for h in labels if k8s.DNS1123_LABEL.problem(h)] == []
    message = _refused(opts(kind=kind, nodes=nodes, name="b" * (n + 1)))
    assert f"pod {first_long}'s host name" in message
    assert "not a DNS-1123 label (64 characters, at most 63)" in message


@pytest.mark.parametrize("change,words", [
    (dict(image="my image:latest"),
     ["--image 'my image:latest': not an image reference",
      "path component 'my image'", k8s.IMAGE_FORM]),
    (dict(image=""), ["--image ''", "no repository path"]),
    (dict(name="9lives"), ["--name '9lives'", "a DNS-1035 label"]),
    (dict(name="b-"), ["--name 'b-'", "a DNS-1035 label"]),
    (dict(name="b" * 64, nodes=1), ["--name 'bbb", "64 characters"]),
    (dict(namespace="Prod"), ["--namespace 'Prod'", "a DNS-1123 label"]),
    (dict(namespace="ml.team"), ["--namespace 'ml.team'", "DNS-1123 label"]),
    (dict(namespace="n" * 64), ["--namespace", "64 characters"]),
    (dict(secret="Barrier"), ["--secret 'Barrier'", "DNS-1123 subdomain"]),
    (dict(secret=""), ["--secret ''", "DNS-1123 subdomain"]),
    (dict(logs_pvc="logs/1"), ["--logs-pvc 'logs/1'", "DNS-1123 subdomain"]),
    (dict(data_pvc="d" * 254), ["--data-pvc 'ddd", "254 characters"]),
    (dict(data_pvc="imagenet\n"), ["--data-pvc 'imagenet\\n'"]),
])
def test_a_bad_name_is_one_line_naming_flag_value_and_rule(change, words):
    message = _refused(opts(**change))
    assert message is not None and "\n" not in message
    assert [w for w in words if w not in message] == [], message


def test_dotted_claim_and_secret_names_are_kubernetes_names():
    """PersistentVolumeClaims and Secrets are named by DNS-1123
    subdomains: a dot is fine there, unlike in the job's name."""
    docs = k8s.manifests(opts(logs_pvc="bench.logs", data_pvc="in.v2",
                              secret="ob.barrier"))
    volumes = {v["name"]: v for v in k8s.pod_spec_of(docs[1])["volumes"]}
    assert volumes["logs"]["persistentVolumeClaim"]["claimName"] == \
        "bench.logs"
    assert volumes["barrier-secret"]["secret"]["secretName"] == "ob.barrier"
    assert "DNS-1035" in _refused(opts(name="ob.bench"))
