"""Run under `horovodrun -np 2 --gloo` by
tests/system/test_data_sources_strategies.py: several trainings, one after
the other, in one pair of ranks, through `trainer.run` (the notebook API),
so the ranks pay TensorFlow's import, Horovod's init and Gloo's rendezvous
once for all of them.

    horovod_runs.py MODEL_ROOT NAME=PARAMS_OVERRIDE [NAME=PARAMS_OVERRIDE ...]

Each run trains (mode train) into MODEL_ROOT/NAME and is framed by the lines
"RUN NAME BEGIN" and "RUN NAME END", which the test splits the output by
(written to stderr, where absl logs, so they keep their order with the
run's own lines). A run that raises prints "RUN NAME FAILED" and its
traceback, and the rank exits 1 at once (horovodrun then stops the other
rank, which would wait in a collective for it).
"""
import os
import sys
import traceback

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from official_bench import trainer  # noqa: E402


def say(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def main(argv):
    root, runs = argv[0], [a.split("=", 1) for a in argv[1:]]
    for name, override in runs:
        say(f"RUN {name} BEGIN")
        try:
            trainer.run(None, params_override=override, mode="train",
                        model_dir=os.path.join(root, name))
        except Exception:  # noqa: BLE001 - reported, then the rank ends
            say(f"RUN {name} FAILED\n{traceback.format_exc()}")
            os._exit(1)
        say(f"RUN {name} END")


if __name__ == "__main__":
    main(sys.argv[1:])
