#!/usr/bin/env python3
"""Model Garden r2.3's ``classifier_trainer.py`` entry, at the repository root.

DLPerf's TensorFlow scripts run, from Model Garden's
``official/vision/image_classification`` folder::

    python3 classifier_trainer.py --mode=train_and_eval \\
        --model_type='resnet' --dataset=imagenet --model_dir=../output \\
        --data_dir=$DATA_DIR \\
        --config_file=configs/examples/resnet/imagenet/gpu.yaml \\
        --params_override=runtime.num_gpus=$num_gpu

Copied into this repository's root, they run unchanged: this file is that
``classifier_trainer.py`` (the same flags as ``python -m
official_bench.classifier_trainer``), and ``configs/examples/resnet/imagenet/``
is here too. See docs/dlperf.md.

It works without installing the package: the directory this file really lives
in (symbolic links resolved) goes first on ``sys.path``, so this checkout's
``official_bench`` is the one used.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from official_bench.classifier_trainer import run_main  # noqa: E402

if __name__ == "__main__":
    run_main()
