"""The two environment rows: the backend itself (tensorflow or jax), and
the GPUs it sees.

Built from facts gathered elsewhere (tfprobe's or jaxprobe's JSON, which
list GPUs alike, the nvidia-smi probe, the diagnosis), so faked facts test
every branch. Also finds the Horovod venv, whose absence turns the Horovod
checks into SKIPs.
"""

from __future__ import annotations

import os
import subprocess
from typing import Dict, List, Optional, Tuple

from official_bench.doctor import jaxprobe
from official_bench.doctor.report import FAIL, PASS, SKIP, CheckResult
from official_bench.host import peaks
from official_bench.host.gpu_diagnosis import Diagnosis, SmiFacts


def tensorflow_row(tf_facts: Optional[Dict],
                   probe_error: Optional[str]) -> CheckResult:
    """PASS when TensorFlow and tf-keras import; their versions and build."""
    if tf_facts is None:
        return CheckResult("tensorflow", "tensorflow", "none", FAIL,
                           probe_error or "TensorFlow did not start",
                           fix="pip install 'tensorflow==2.21.0' "
                               "'tf-keras==2.21.0' (same minor release)")
    build = tf_facts.get("build") or {}
    kind = (f"CUDA {build.get('cuda_version')} / cuDNN "
            f"{build.get('cudnn_version')} build"
            if build.get("is_cuda_build") else "CPU-only build")
    tf_v, keras_v = tf_facts.get("tensorflow"), tf_facts.get("tf_keras")
    detail = f"TensorFlow {tf_v} ({kind}), tf-keras {keras_v}"
    if tf_v and keras_v and tf_v.split(".")[:2] != keras_v.split(".")[:2]:
        return CheckResult("tensorflow", "tensorflow", "none", FAIL,
                           f"{detail}: different minor releases",
                           fix="pip install 'tf-keras~="
                               f"{tf_v.rsplit('.', 1)[0]}.0'")
    return CheckResult("tensorflow", "tensorflow", "none", PASS, detail,
                       data={"build": build})


JAX_FIX = ("pip install -e '.[jax]' (JAX and Keras 3; on GPUs JAX's CUDA "
           "build: pip install 'jax[cuda13]', docs/backends.md)")
# How the rows name the backend whose view of the GPUs they report.
SEEN_BY = {"tensorflow": "TensorFlow", "jax": "JAX"}


def jax_row(facts: Optional[Dict], probe_error: Optional[str]
            ) -> CheckResult:
    """PASS when JAX and Keras 3 import; their versions, the CUDA plugin
    and JAX's devices."""
    if facts is None:
        return CheckResult("jax", "jax", "none", FAIL,
                           probe_error or "JAX did not start", fix=JAX_FIX)
    detail = jaxprobe.summary(facts)
    data = {"devices": facts.get("devices"),
            "cuda_plugins": facts.get("cuda_plugins")}
    if facts.get("keras_error"):
        return CheckResult("jax", "jax", "none", FAIL,
                           f"{detail}: Keras does not import: "
                           f"{facts['keras_error']}", fix=JAX_FIX, data=data)
    if not jaxprobe.usable(facts):
        return CheckResult("jax", "jax", "none", FAIL,
                           f"{detail}: the jax backend needs Keras 3",
                           fix="pip install 'keras>=3' (tf-keras is "
                               "TensorFlow's Keras 2 and stays apart)",
                           data=data)
    return CheckResult("jax", "jax", "none", PASS, detail, data=data)


def gpu_names(tf_facts: Optional[Dict]) -> List[str]:
    return [g.get("name", "") for g in (tf_facts or {}).get("gpus") or []]


def capabilities(tf_facts: Optional[Dict]) -> List[Optional[tuple]]:
    return [tuple(g["compute_capability"]) if g.get("compute_capability")
            else None for g in (tf_facts or {}).get("gpus") or []]


def gpus_row(tf_facts: Optional[Dict], smi: SmiFacts, diagnosis: Diagnosis,
             sampler: str, require_gpu: bool = False,
             backend: str = "tensorflow") -> CheckResult:
    """PASS: the backend (TensorFlow or JAX, whose facts list GPUs alike)
    lists every GPU; FAIL: the machine has GPUs (or --require-gpu) that it
    cannot use, with the fix; SKIP: no GPU in this machine at all."""
    gpus = (tf_facts or {}).get("gpus") or []
    driver = (f", driver {smi.driver_version} (nvidia-smi)"
              if smi.driver_version else "")
    data = {"diagnosis": diagnosis._asdict(), "sampler": sampler}
    if gpus:
        names = {}
        for g in gpus:
            cap = g.get("compute_capability")
            label = g.get("device_name") or g.get("name")
            if cap:
                label += f" (compute {cap[0]}.{cap[1]})"
            names[label] = names.get(label, 0) + 1
        listed = ", ".join(f"{n} x {k}" for k, n in names.items())
        # The MFU denominator a run on them would use (host/peaks.py).
        data["peaks"] = peaks.describe_gpus(sorted(
            {g.get("device_name") or g.get("name") for g in gpus}))
        detail = (f"{listed}{driver}; utilisation via {sampler}; peak "
                  + "; ".join(data["peaks"].values()))
        if not diagnosis.ok:
            return CheckResult("gpus", "gpus", "none", FAIL,
                               f"{diagnosis.verdict}: {detail}",
                               fix=diagnosis.fix, data=data)
        return CheckResult("gpus", "gpus", "none", PASS, detail, data=data)
    machine_has_gpus = smi.found and (not smi.ok or bool(smi.gpus))
    result = FAIL if machine_has_gpus or require_gpu else SKIP
    return CheckResult("gpus", "gpus", "none", result,
                       f"no GPU visible to {SEEN_BY[backend]}: "
                       f"{diagnosis.verdict}",
                       fix=diagnosis.fix, data=data)


def no_gpu_reason(tf_facts: Optional[Dict], probe_error: Optional[str],
                  diagnosis: Diagnosis, backend: str = "tensorflow"
                  ) -> Optional[str]:
    """Why every GPU check is skipped, or None when GPUs are usable."""
    name = SEEN_BY[backend]
    if tf_facts is None:
        return f"{name} did not start: {probe_error}"
    if not gpu_names(tf_facts):
        return f"no GPU visible to {name}: {diagnosis.verdict}"
    return None


def find_horovod_venv(repo: str, explicit: Optional[str] = None
                      ) -> Tuple[Optional[str], Optional[str]]:
    """(venv, None) when a complete Horovod venv exists, else (None, why).

    Without --horovod-venv the location and completeness come from
    scripts/install_horovod.sh (--print-venv, --check), the one place that
    knows them (OB_HOROVOD_VENV, the version marker).
    """
    if explicit:
        runner = os.path.join(explicit, "bin", "horovodrun")
        if not os.access(runner, os.X_OK):
            return None, f"no {runner} (--horovod-venv)"
        return explicit, None
    script = os.path.join(repo, "scripts", "install_horovod.sh")
    if not os.path.exists(script):
        return None, (f"no {script} (not a source checkout); pass "
                      "--horovod-venv")
    path = subprocess.run(["bash", script, "--print-venv"], text=True,
                          capture_output=True).stdout.strip()
    done = subprocess.run(["bash", script, "--check"], capture_output=True)
    if done.returncode != 0 or not os.access(
            os.path.join(path, "bin", "horovodrun"), os.X_OK):
        return None, (f"Horovod venv not built at {path}: run `make "
                      "horovod` (scripts/install_horovod.sh)")
    return path, None
