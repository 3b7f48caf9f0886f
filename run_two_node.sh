#!/usr/bin/env bash
# DLPerf usage: bash run_two_node.sh [BATCH] [DTYPE=fp32|fp16|bf16] [TEST_NUM=5] [options]
# 2 nodes: start it the same way on both (or: srun -N2 --ntasks-per-node=1 bash run_two_node.sh).
# LAUNCHER=horovod: start it on node 0 only; its horovodrun reaches the other node over ssh.
# --help: usage, examples, options; docs/run_scripts.md: every variable. --dry-run: the plan.
source "$(dirname "${BASH_SOURCE[0]}")/scripts/lib/launch.sh" && ob_launch two "$@"
