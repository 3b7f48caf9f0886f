"""glibc malloc thresholds after TensorFlow 2.21's GeneratorDataset patch.

Page faults are the observable: a 3 MiB buffer allocated, touched and freed
50 times costs ~768 minor faults per round when glibc serves it by mmap
(the frozen 128 KiB threshold) and ~0 once it comes back from the heap. The
size is one the process has not freed before, so no heap chunk of it exists
when the frozen threshold is measured.
"""

import json
import subprocess
import sys
import textwrap

from official_bench import trainer
from support.helpers import tiny

PROBE = textwrap.dedent("""
    import json, resource
    import numpy as np
    from official_bench.host import malloc
    from official_bench.runtime.malloc import provoke_tensorflow_patch

    def faults():
        start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(50):
            buf = np.empty(3 << 20, np.uint8)
            buf.fill(1)
            del buf
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start

    provoke_tensorflow_patch()
    out = {"after_tensorflow": faults()}
    out["set"] = malloc.set_thresholds()
    out["restored"] = faults()
    print(json.dumps(out))
""")


def test_tensorflow_freezes_the_threshold_and_restoring_ends_the_faults():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # 50 rounds x 768 pages when every round is a fresh mapping; restored,
    # only the first round grows the heap.
    assert out["after_tensorflow"] > 50 * 600, out
    assert out["restored"] < 2000, out
    assert out["set"] == {"mmap_threshold": 32 << 20,
                          "trim_threshold": 64 << 20}


def test_trainer_records_the_restore_and_can_leave_it(tmp_path):
    on = trainer.run(tiny(), model_dir=str(tmp_path / "on"))
    assert on.environment["malloc"] == {
        "restored": True, "mmap_threshold": 32 << 20,
        "trim_threshold": 64 << 20}
    data = json.load(open(tmp_path / "on" / "result.json"))
    assert data["environment"]["malloc"]["restored"] is True
    off = trainer.run(tiny(runtime={"restore_malloc_thresholds": False}))
    assert off.environment["malloc"] == {
        "restored": False,
        "reason": "runtime.restore_malloc_thresholds is false"}
