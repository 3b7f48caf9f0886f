#!/usr/bin/env bash
# DLPerf usage: bash run_single_node.sh [BATCH] [DTYPE=fp32|fp16|bf16] [TEST_NUM=5] [options]
# 1, 2, 4, 8 GPUs on this node (those it has), TEST_NUM runs each; LAUNCHER=horovod uses horovodrun.
# --help: usage, examples, options; docs/run_scripts.md: every variable. --dry-run: the plan.
source "$(dirname "${BASH_SOURCE[0]}")/scripts/lib/launch.sh" && ob_launch single "$@"
