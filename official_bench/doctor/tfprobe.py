"""What TensorFlow sees, asked in a subprocess.

The doctor itself stays free of TensorFlow: a broken install (an import
that crashes or hangs) becomes a FAIL with its message instead of killing
the doctor, and the doctor never initialises a GPU the runs then need.

    python -m official_bench.doctor.tfprobe   # prints one JSON line

`run_child` and `parse_child` (start `python -m <probe>`, read its marked
JSON line back) serve jaxprobe.py too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Callable, Dict, Optional, Tuple

from official_bench.contracts import exit_status

MARK = "official_bench.doctor.tfprobe:"


def collect() -> Dict:
    """TensorFlow's version, build info and GPUs (runs in the child)."""
    from official_bench.runtime.keras_setup import keras, tf
    gpus = []
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            details = tf.config.experimental.get_device_details(gpu)
        except Exception:  # driver dependent
            details = {}
        cap = details.get("compute_capability")
        gpus.append({"name": gpu.name,
                     "device_name": details.get("device_name", gpu.name),
                     "compute_capability": list(cap) if cap else None})
    build = {k: (list(v) if isinstance(v, tuple) else v)
             for k, v in tf.sysconfig.get_build_info().items()}
    return {"tensorflow": tf.__version__, "tf_keras": keras.__version__,
            "build": build, "gpus": gpus}


def parse_child(stdout: str, stderr: str, returncode: int, mark: str,
                what: str) -> Tuple[Optional[Dict], Optional[str]]:
    """(facts, None) from a probe child's `mark`ed line, else (None, the
    last line of its error output), `what` naming the framework."""
    for line in stdout.splitlines():
        if line.startswith(mark):
            try:
                return json.loads(line[len(mark):]), None
            except ValueError:
                break
    text = [t for t in (stderr or stdout).strip().splitlines() if t.strip()]
    last = text[-1].strip() if text else f"exit status {returncode}"
    return None, f"{what} probe failed (exit {returncode}): {last}"


WAIT_LINE_SECONDS = 8.0  # a line at least this often while a probe runs


def run_child(module: str, mark: str, what: str, python: str, cwd: str,
              env: Dict[str, str], timeout: float,
              progress: Optional[Callable[[str], None]] = None
              ) -> Tuple[Optional[Dict], Optional[str]]:
    """Runs `python -m module` and reads its facts back (parse_child);
    says every WAIT_LINE_SECONDS through `progress` that it still waits."""
    start = time.monotonic()
    child = subprocess.Popen([python, "-m", module], cwd=cwd, env=env,
                             text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    while True:
        left = timeout - (time.monotonic() - start)
        try:
            stdout, stderr = child.communicate(
                timeout=max(0.01, min(WAIT_LINE_SECONDS, left)))
            break
        except subprocess.TimeoutExpired:
            if time.monotonic() - start >= timeout:
                child.kill()
                child.communicate()
                return None, f"{what} did not import within {timeout:g} s"
            if progress is not None:
                progress(f"    still waiting for {what} to import, "
                         f"{time.monotonic() - start:.0f} s")
    return parse_child(stdout, stderr, child.returncode, mark, what)


def probe(python: str, cwd: str, env: Dict[str, str], timeout: float,
          progress: Optional[Callable[[str], None]] = None
          ) -> Tuple[Optional[Dict], Optional[str]]:
    """(facts, None) or (None, why the probe failed)."""
    return run_child(__name__, MARK, "TensorFlow", python, cwd, env, timeout,
                     progress)


def main() -> int:
    print(MARK + json.dumps(collect()), flush=True)
    return exit_status.OK


if __name__ == "__main__":
    sys.exit(main())
