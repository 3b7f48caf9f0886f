"""Why TensorFlow sees no GPU, and what to do about it.

TensorFlow only says "Could not find cuda drivers" or silently lists no GPU;
the cause can be the machine (no driver, no GPU), the wheel (a CPU-only
build, CUDA/cuDNN libraries not installed), the driver (too old for the CUDA
the wheel was built with), the GPU (compute capability the wheel was not
built for) or the environment (CUDA_VISIBLE_DEVICES hides every GPU).

`diagnose` decides this from facts alone and imports no TensorFlow, so the
doctor (official_bench/doctor) and the trainer's "num_gpus > 0 but no GPU"
error give the same answer, and tests can feed it any machine. The facts are
gathered by the caller: `tf.sysconfig.get_build_info()`, the names from
`tf.config.list_physical_devices("GPU")`, `probe_nvidia_smi()` and
host/gpus.py's `cuda_visible_devices()` (host/gpus.py also runs
nvidia-smi for everyone).
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Callable, List, Mapping, NamedTuple, Optional, Sequence

from official_bench.host import gpus as host_gpus

# Oldest Linux driver that runs any toolkit of a CUDA major release (CUDA
# minor version compatibility; NVIDIA's "CUDA Compatibility" guide, table
# "CUDA Toolkit 11.x, 12.x, and 13.x Driver Version Ranges").
MIN_DRIVER_FOR_CUDA_MAJOR = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580,)}

SMI_QUERY = "index,name,driver_version,compute_cap"
# Drivers older than ~510 do not know compute_cap; asked again without it.
SMI_QUERY_OLD = "index,name,driver_version"


class SmiGpu(NamedTuple):
    """One GPU as nvidia-smi lists it."""
    index: int
    name: str
    driver_version: str
    compute_cap: Optional[str] = None  # "8.0"; None on old drivers


class SmiFacts(NamedTuple):
    """What nvidia-smi said: found on PATH, ran, and the GPUs it lists."""
    found: bool
    ok: bool = False
    gpus: tuple = ()
    error: Optional[str] = None  # first line of the failure when not ok

    @property
    def driver_version(self) -> Optional[str]:
        return self.gpus[0].driver_version if self.gpus else None


class Diagnosis(NamedTuple):
    """verdict: one sentence; fix: what to do, or None when nothing is wrong.

    Unpacks as ``verdict, fix = diagnose(...)``.
    """
    verdict: str
    fix: Optional[str]

    @property
    def ok(self) -> bool:
        return self.fix is None


def parse_smi_gpus(text: str) -> List[SmiGpu]:
    """Parses `nvidia-smi --query-gpu=<SMI_QUERY[_OLD]> --format=csv,noheader`.

    Raises ValueError naming the line when a line has too few fields, so a
    changed output format is reported instead of read wrongly.
    """
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 3 or not fields[0].isdigit():
            raise ValueError(f"unexpected nvidia-smi line {line!r}: want "
                             f"'{SMI_QUERY}'")
        cap = fields[3] if len(fields) > 3 and fields[3] not in (
            "", "[N/A]", "N/A") else None
        gpus.append(SmiGpu(int(fields[0]), fields[1], fields[2], cap))
    return gpus


def probe_nvidia_smi(timeout: float = 15.0,
                     run: Callable = subprocess.run,
                     which: Callable = shutil.which) -> SmiFacts:
    """Runs nvidia-smi once to list the GPUs and the driver version.

    `run` and `which` are injectable so tests can play a machine's output.
    """
    if which(host_gpus.NVIDIA_SMI) is None:
        return SmiFacts(found=False)
    error = None
    for query in (SMI_QUERY, SMI_QUERY_OLD):
        p = host_gpus.run_nvidia_smi([f"--query-gpu={query}",
                                      "--format=csv,noheader"], timeout, run)
        if isinstance(p.error, subprocess.TimeoutExpired):
            return SmiFacts(found=True, error=f"nvidia-smi did not answer "
                                              f"within {timeout:g} s")
        if p.error is not None:
            return SmiFacts(found=True, error=f"nvidia-smi: {p.error}")
        if p.returncode == 0:
            try:
                return SmiFacts(found=True, ok=True,
                                gpus=tuple(parse_smi_gpus(p.stdout)))
            except ValueError as e:
                return SmiFacts(found=True, error=str(e))
        text = (p.stdout + p.stderr).strip()
        error = (text.splitlines() or [f"exit status {p.returncode}"])[0]
    return SmiFacts(found=True, error=error)


def _version_tuple(text: Optional[str]) -> Optional[tuple]:
    try:
        return tuple(int(x) for x in str(text).split("."))
    except ValueError:
        return None


def _min_capability(build_info: Mapping) -> Optional[tuple]:
    """Lowest compute capability the wheel has kernels for
    (sm_60 -> (6, 0))."""
    caps = []
    for arch in build_info.get("cuda_compute_capabilities") or ():
        digits = arch.split("_")[-1]
        if digits.isdigit() and len(digits) >= 2:
            caps.append((int(digits[:-1]), int(digits[-1])))
    return min(caps) if caps else None


def _pip_fix(tf_version: Optional[str]) -> str:
    pin = f"=={tf_version}" if tf_version else ""
    return (f"pip install 'tensorflow[and-cuda]{pin}' (Linux x86_64/arm64: "
            "installs the CUDA and cuDNN libraries TensorFlow was built "
            "against)")


def diagnose(build_info: Mapping, gpus: Sequence[str], smi: SmiFacts,
             cuda_visible: Optional[str] = None,
             tf_version: Optional[str] = None) -> Diagnosis:
    """Whether TensorFlow can use this machine's GPUs, and the fix if not.

    build_info: `tf.sysconfig.get_build_info()` (is_cuda_build, cuda_version,
    cudnn_version, cuda_compute_capabilities). gpus: names of the GPUs
    TensorFlow lists. smi: `probe_nvidia_smi()`. cuda_visible: the value of
    CUDA_VISIBLE_DEVICES (None when unset). tf_version: pins the pip fix.
    """
    n_smi = len(smi.gpus) if smi.ok else 0
    if gpus:
        verdict = f"TensorFlow sees {len(gpus)} GPU(s)"
        if smi.ok and n_smi > len(gpus) and cuda_visible is None:
            return Diagnosis(
                f"{verdict} but nvidia-smi lists {n_smi}",
                "TensorFlow skips GPUs it has no kernels for: look for "
                "'Ignoring visible gpu device' in its log")
        return Diagnosis(verdict, None)
    problems = []
    if not smi.found:
        problems.append((
            "no NVIDIA driver: nvidia-smi is not on PATH (no NVIDIA GPU, or "
            "its driver is not installed)",
            "install the NVIDIA driver until `nvidia-smi` lists the GPUs "
            "(in a container: run it with the GPUs passed in, e.g. "
            "docker run --gpus all)"))
    elif not smi.ok:
        problems.append((
            f"nvidia-smi fails: {smi.error}",
            "the NVIDIA driver is not loaded or does not match its kernel "
            "module: reboot or reinstall the driver until `nvidia-smi` "
            "lists the GPUs"))
    elif n_smi == 0:
        problems.append((
            "nvidia-smi lists no GPU",
            "check that the GPU is attached to this machine or container "
            "(docker run --gpus all)"))
    is_cuda = bool(build_info.get("is_cuda_build"))
    if not is_cuda:
        kind = "ROCm" if build_info.get("is_rocm_build") else "CPU-only"
        problems.append((
            f"TensorFlow {tf_version or ''} is a {kind} build "
            "(is_cuda_build is false)".replace("  ", " "),
            _pip_fix(tf_version)))
    if host_gpus.hides_all(cuda_visible, n_smi or None):
        problems.append((
            f"CUDA_VISIBLE_DEVICES={cuda_visible!r} hides every GPU",
            "unset CUDA_VISIBLE_DEVICES or list GPU indices in it "
            "(e.g. 0,1)"))
    if problems:
        return _combine(problems)
    # A CUDA wheel, a working driver listing GPUs, nothing hidden: the
    # driver is too old, the GPUs too old, or the CUDA libraries are missing.
    cuda = build_info.get("cuda_version")
    cuda_v = _version_tuple(cuda)
    driver = smi.driver_version
    driver_v = _version_tuple(driver)
    needed = MIN_DRIVER_FOR_CUDA_MAJOR.get(cuda_v[0]) if cuda_v else None
    if needed and driver_v and driver_v < needed:
        need = ".".join(str(x) for x in needed)
        return Diagnosis(
            f"NVIDIA driver {driver} is too old for CUDA {cuda} (TensorFlow's "
            f"build); CUDA {cuda_v[0]}.x needs driver >= {need}",
            f"upgrade the NVIDIA driver to {need} or newer")
    min_cap = _min_capability(build_info)
    caps = [_version_tuple(g.compute_cap) for g in smi.gpus]
    if min_cap and caps and all(c and c < min_cap for c in caps):
        have = ", ".join(sorted({g.compute_cap for g in smi.gpus}))
        return Diagnosis(
            f"the GPUs' compute capability {have} is below the lowest this "
            f"TensorFlow was built for ({min_cap[0]}.{min_cap[1]})",
            "use GPUs with a supported compute capability or a TensorFlow "
            "built from source for them")
    return Diagnosis(
        f"nvidia-smi lists {n_smi} GPU(s) (driver {driver}) but TensorFlow "
        f"finds none: the CUDA {cuda} / cuDNN "
        f"{build_info.get('cudnn_version')} libraries it was built against "
        "are not installed or not found",
        _pip_fix(tf_version))


def _combine(problems) -> Diagnosis:
    verdict = "; ".join(p[0] for p in problems)
    fixes = [p[1] for p in problems]
    if len(fixes) == 1:
        return Diagnosis(verdict, fixes[0])
    return Diagnosis(verdict, " ".join(f"({i}) {f};" for i, f in
                                       enumerate(fixes, 1)).rstrip(";"))
