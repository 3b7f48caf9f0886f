#!/usr/bin/env bash
# The JAX backend's speed candidates, each against the baseline with the
# suite's own A/B runner and verdict (issue 47, item 3): batch 512/384/400,
# XLA flags one at a time (cuDNN conv fusion, runtime fusion, CUDA graphs),
# the stem on 4 channels; bf16 and fp16, ResNet-50, synthetic data fed from
# the host, as the run scripts train (benchmarks/jax_speed_ab.py).
#
#   bash scripts/gpu_jax_speed_ab.sh OUT_DIR [BUDGET_SECONDS]
#
# Candidates run in order of expected value while the budget holds them;
# the rest are listed as skipped. OUT_DIR gets summary.txt, ab_verdicts.md
# (the table for BENCHMARKS.md, with each A/B's command), ab.json (every
# run's interval rates) and runs.tar.gz (each run's log and result.json).
# AB_ARGS adds arguments to the driver (--only b512,pad4; --pairs 3;
# --dry-run; --cpu with a tiny model, a check of the flow); BASE gives its
# --base, dotted overrides on both sides (a previous winner).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/gpu_stage.sh
source "$root/scripts/lib/gpu_stage.sh"
gpu_usage "$0" "${1:-}" && exit 0
cd "$root"
gpu_begin gpu-ab "$1" "${2:-420}"
out=$gpu_out

base_args=()
[ -n "${BASE:-}" ] && base_args=(--base "$BASE")
# The driver keeps to what is left, less a margin for packing up.
stage ab 60 "$PYTHON" benchmarks/jax_speed_ab.py --out "$out" \
  --budget "$(( $(left) - 15 ))" ${base_args[@]+"${base_args[@]}"} \
  ${AB_ARGS:-}
[ -f "$out/ab_verdicts.md" ] && tee -a "$out/summary.txt" < "$out/ab_verdicts.md"
if [ -d "$out/logs" ]; then
  tar -C "$out" -czf "$out/runs.tar.gz" logs \
    $(cd "$out" && find work -name result.json 2>/dev/null) \
    && rm -rf "$out/logs" "$out/work"
fi
say "done"
