"""extract/cases.py: the warning that a case's runs report different
environments. One rule (absent and null are the same; a key a newer
trainer only added counts only where both runs name it; the backend as
contracts/run_backend resolves it), and the warning always names a key."""

from official_bench.contracts import log_tree
from official_bench.extract import cases, speeds
from official_bench.extract.logparse import RunId
from support import logkit as kit

OLD_TF = "tensorflow/resnet50/bz16/1n1g/rn50_b16_fp32_{i}.log"


def _outcome(index, env, config=None, path="x.log"):
    nodes, gpus = log_tree.parse_case_name("1n1g")
    return speeds.RunOutcome(RunId(nodes, gpus, 16, "fp32", index), path,
                             speed=10.0, counted_steps=(10, 30),
                             num_intervals=2, global_batch_size=16,
                             environment=env, config=config)


def _warnings(*envs, configs=None, paths=None):
    outcomes = [_outcome(i + 1, env,
                         (configs or {}).get(i),
                         (paths or {}).get(i, "x.log"))
                for i, env in enumerate(envs)]
    return cases.summarize(outcomes)[1]


def test_a_key_a_newer_trainer_adds_is_no_difference():
    """The walk's two cases: cpu_kernels_note absent in the old file and
    null in the new (the warning used to name nothing), and backend only
    in the new file of two TensorFlow runs (the warning named it)."""
    old = kit.environment()
    new = kit.environment(cpu_kernels_note=None, backend="tensorflow",
                          official_bench="0.1.0 (git e92555b)",
                          cpu_model="AMD EPYC 9B14")
    assert _warnings(old, new) == [  # only the suite's own version note
        "rn50 1n1g: the case mixes suite versions: run 1 made before the "
        "suite recorded its version, run 2 by official_bench 0.1.0 (git "
        "e92555b)"]
    assert _warnings(old, kit.environment(cpu_kernels_note="bf16 on Eigen")
                     ) == []


def test_absent_and_null_are_the_same_for_every_key():
    assert _warnings(kit.environment(horovod=None), kit.environment()) == []
    assert _warnings(kit.environment(cuda_version=None),
                     {k: v for k, v in kit.environment().items()
                      if k != "cuda_version"}) == []


def test_a_key_every_trainer_writes_differs_when_one_run_lacks_it():
    with_horovod = kit.environment(horovod={"size": 2})
    assert _warnings(kit.environment(horovod=None), with_horovod) == [
        "rn50 1n1g: runs report different environments (horovod)"]
    assert _warnings(kit.environment(cuda_version=None),
                     kit.environment()) == [
        "rn50 1n1g: runs report different environments (cuda_version)"]


def test_the_suite_version_differs_where_both_runs_name_it():
    a = kit.environment(official_bench="0.1.0 (git ae94a4b)")
    b = kit.environment(official_bench="0.1.0 (git e92555b)")
    assert _warnings(a, b) == [
        "rn50 1n1g: the case mixes suite versions: run 1 by official_bench "
        "0.1.0 (git ae94a4b), run 2 by official_bench 0.1.0 (git e92555b)"]
    assert _warnings(a, dict(a)) == []


def test_the_backend_is_compared_as_resolved():
    """An old file without environment.backend is placed by its config or
    tree: TensorFlow beside TensorFlow is no difference, beside JAX it is."""
    old = kit.environment()
    tf = kit.environment(backend="tensorflow")
    jax = kit.environment(backend="jax")
    assert _warnings(old, tf, paths={0: OLD_TF.format(i=1)}) == []
    assert _warnings(old, jax, paths={0: OLD_TF.format(i=1)}) == [
        "rn50 1n1g: runs report different environments (backend)"]
    assert _warnings(old, tf, configs={
        0: {"runtime": {"backend": "jax"}}}) == [
        "rn50 1n1g: runs report different environments (backend)"]


def test_a_warning_always_names_a_key():
    """Any pair of environments: a warning, if any, names what differs."""
    envs = [kit.environment(), kit.environment(cpu_kernels_note=None),
            kit.environment(tensorflow="2.18.1", hostname="b"),
            {"python": "3.11.7"}, kit.environment(official_bench="x"),
            kit.environment(official_bench="y")]
    for a in envs:
        for b in envs:
            for line in _warnings(a, b):
                assert not line.endswith("()"), (a, b, line)
