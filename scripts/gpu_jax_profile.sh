#!/usr/bin/env bash
# Where the JAX backend's ResNet-50 train step spends its GPU time (issue 47,
# item 2): a profiler trace and XLA's optimised HLO of the trainer's own
# step, bf16 and fp16, batch 256, 224x224, read into Markdown tables by
# benchmarks/jax_profile.py (official_bench/measure/kernel_profile.py).
#
#   bash scripts/gpu_jax_profile.sh OUT_DIR [BUDGET_SECONDS]
#
# OUT_DIR gets summary.txt, tables.md (fp16 as A, bf16 as B: where bf16's
# time goes) and per run <name>/: profile.md, profile.json, meta.json, the
# trace (trace/.../perfetto_trace.json.gz) and the train step's optimised
# HLO (hlo/*replica_train*after_optimizations.txt.gz); the rest of XLA's
# dump and the profiler's xplane.pb are deleted (large, not read). Stages
# run in order of importance, each skipped with a line when less than its
# estimate is left. BATCH changes the batch; PROFILE_ARGS adds arguments to
# benchmarks/jax_profile.py (--cpu: a tiny model, a check of the flow).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/gpu_stage.sh
source "$root/scripts/lib/gpu_stage.sh"
gpu_usage "$0" "${1:-}" && exit 0
cd "$root"
gpu_begin gpu-profile "$1" "${2:-240}"
out=$gpu_out
batch=${BATCH:-256}

profile() {  # profile NAME DTYPE BATCH: capture, read, keep what is read
  local dir="$out/$1"
  "$PYTHON" benchmarks/jax_profile.py --dtype "$2" --batch "$3" \
    --out "$dir" ${PROFILE_ARGS:-}
  local rc=$?
  find "$dir/hlo" -type f ! -name '*replica_train*after_optimizations.txt' \
    -delete 2>/dev/null
  gzip -f "$dir"/hlo/*after_optimizations.txt 2>/dev/null
  find "$dir/trace" -type f ! -name 'perfetto_trace.json.gz' -delete \
    2>/dev/null
  return $rc
}

stage profile_bf16 70 profile bf16 bf16 "$batch"
stage profile_fp16 70 profile fp16 fp16 "$batch"
if [ -f "$out/bf16/profile.json" ] && [ -f "$out/fp16/profile.json" ]; then
  "$PYTHON" benchmarks/jax_profile.py --tables "$out/fp16" "$out/bf16" \
    > "$out/tables.md" 2> "$out/tables.log" \
    && tee -a "$out/summary.txt" < "$out/tables.md"
fi
# The candidate batch of the A/B (scripts/gpu_jax_speed_ab.sh), if time is left.
stage profile_bf16_b512 70 profile bf16_b512 bf16 512
say "done"
