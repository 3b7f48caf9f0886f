#!/usr/bin/env bash
# DLPerf usage: bash run_multi_node.sh [BATCH] [DTYPE=fp32|fp16|bf16] [TEST_NUM=5] [options]
# N nodes (4 in DLPerf): start it the same way on every node (or with srun).
# LAUNCHER=horovod: start it on node 0 only; its horovodrun reaches the other nodes over ssh.
# --help: usage, examples, options; docs/run_scripts.md: every variable. --dry-run: the plan.
source "$(dirname "${BASH_SOURCE[0]}")/scripts/lib/launch.sh" && ob_launch multi "$@"
