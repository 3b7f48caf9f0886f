"""Where `import tensorflow` fails (the GPU machines the JAX backend
borrows): the project's builder writes ImageNet-like records, and the
TensorFlow-free reader trains and evaluates on them, workers in their own
processes as the loader starts them; the TensorFlow pipeline then reads
the same records with the same labels."""

import json
import os
import subprocess
import sys
import textwrap

from official_bench.config import DatasetConfig
from official_bench.data.records import pipeline
from official_bench.runtime.keras_setup import tf
from support.helpers import REPO

SCRIPT = textwrap.dedent("""
    import json, multiprocessing, os, sys
    from official_bench.config import DatasetConfig
    from official_bench.data.records import file_verdict, host_examples
    from support.natural_images import record_set

    def worker(args):
        ds, files, training, index, count = args
        out = host_examples.worker_examples(
            ds, files, training=training, seed=1, worker_index=index,
            num_workers=count)
        n = 12 if training else None
        got = [next(out) for _ in range(n)] if training else list(out)
        assert all(i.shape == (32, 32, 3) for i, _ in got)
        return [label for _, label in got]

    if __name__ == "__main__":
        try:
            import tensorflow  # noqa: F401
        except ImportError:
            pass
        else:
            sys.exit("tensorflow imports here: the test sees nothing")
        root = record_set(sys.argv[1], classes=3, train=4, validation=2,
                          width=96, height=72)
        result = {}
        for split, training in (("train", True), ("validation", False)):
            ds = DatasetConfig(builder="records", data_dir=root, split=split,
                               image_size=32, num_classes=3,
                               shuffle_buffer_size=4)
            check = file_verdict.start_local(ds, training)
            files = host_examples.process_files(ds, 0, 1, training)
            with multiprocessing.get_context("spawn").Pool(2) as pool:
                result[split] = pool.map(worker, [
                    (ds, files, training, i, 2) for i in range(2)])
            file_verdict.finish(check, ds)
        result["tensorflow"] = [m for m in sys.modules
                                if m.split(".")[0] in ("tensorflow",
                                                       "tf_keras")]
        result["root"] = root
        print(json.dumps(result))
""")


def test_build_train_and_evaluate_where_tensorflow_is_missing(tmp_path):
    blocked = tmp_path / "blocked"
    for name in ("tensorflow", "tf_keras"):
        os.makedirs(blocked / name)
        (blocked / name / "__init__.py").write_text(
            f"raise ImportError('{name} is not installed here (test)')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(blocked), REPO, os.path.join(REPO, "tests")]))
    script = tmp_path / "no_tensorflow.py"  # a file: spawn re-imports it
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path)],
                          capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["tensorflow"] == []
    assert all(len(labels) == 12 and set(labels) <= {0, 1, 2}
               for labels in result["train"])
    ours = sorted(result["validation"][0] + result["validation"][1])
    assert ours == [0, 0, 1, 1, 2, 2]
    # The records the builder wrote without TensorFlow read on TensorFlow.
    ds = DatasetConfig(builder="records", data_dir=result["root"],
                       split="validation", image_size=32, num_classes=3,
                       one_hot=False)
    theirs = pipeline.records_dataset(ds, tf.distribute.InputContext(), 1,
                                      False)
    assert sorted(int(y) for _, ys in theirs.as_numpy_iterator()
                  for y in ys) == ours
