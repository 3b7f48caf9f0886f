#!/usr/bin/env bash
# The JAX backend's model-side speed candidates (the padded and the
# space-to-depth stem, one-pass and Pallas BN statistics, batch 512/384/400,
# the shifted stem max-pool, the written-out BN backward)
# each against the baseline in one process: the trainer's compiled step for
# both, timed in alternating blocks and judged by the suite's verdict
# (issue 47, item 3; benchmarks/jax_step_ab.py). bf16 and fp16, ResNet-50,
# synthetic data on the device. XLA-flag candidates need a process each:
# scripts/gpu_jax_speed_ab.sh.
#
#   bash scripts/gpu_jax_step_ab.sh OUT_DIR [BUDGET_SECONDS]
#
# OUT_DIR gets summary.txt, ab_verdicts.md (the table for BENCHMARKS.md)
# and ab.json (every block's rate). STEP_AB_ARGS adds arguments to the
# driver (--only pad4,bn_pallas; --rounds 12; --cpu with a tiny model, a
# check of the flow); BASE gives its --base, dotted overrides on both sides
# (BASE=train_dataset.batch_size=512,model.model_params.bn_statistics=one_pass).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/gpu_stage.sh
source "$root/scripts/lib/gpu_stage.sh"
gpu_usage "$0" "${1:-}" && exit 0
cd "$root"
gpu_begin gpu-step-ab "$1" "${2:-300}"
out=$gpu_out

base_args=()
[ -n "${BASE:-}" ] && base_args=(--base "$BASE")
# The driver keeps to what is left, less a margin for packing up; under
# 100 s its first candidate (two builds and the blocks) cannot fit.
stage step_ab 100 "$PYTHON" benchmarks/jax_step_ab.py --out "$out" \
  --budget "$(( $(left) - 10 ))" ${base_args[@]+"${base_args[@]}"} \
  ${STEP_AB_ARGS:-}
[ -f "$out/ab_verdicts.md" ] && tee -a "$out/summary.txt" < "$out/ab_verdicts.md"
say "done"
