#!/usr/bin/env bash
# What still waits for a GPU (issues 46 and 47), in one call of about 9.5
# minutes on an H100/H200: the card's JPEG decoders (gpu_decode_probe.sh),
# real records decoded on the GPU (`decode: gpu`) against synthetic data,
# fp16 (gpu_records_check.sh), then the speed A/B with what is left
# (gpu_jax_step_ab.sh, in one process: batch 512, the written-out BN
# backward, the shifted max-pool, Pallas and one-pass BN statistics).
# Everything is packed into six files, as the device tool brings back at
# most eight.
#
#   bash scripts/gpu_pending.sh OUT_DIR [BUDGET_SECONDS]
#
# .whl/ holds the cp312 wheels (docs/gpu_speed.md, "Wheels"): keras, namex,
# optree, google-crc32c, simplejpeg, nvidia-nvimgcodec-cu13, nvidia-nvjpeg.
# OUT_DIR gets summary.txt (every stage's lines), records_summary.md and
# .json, ab_verdicts.md, probe.json and all.tar.gz (the logs and results).
# The stages' own knobs pass through (DECODE, DTYPES, DECODERS,
# STEP_AB_ARGS...);
# a CPU check of the flow, about 70 s on 2 cores:
#   DECODE=cpu DTYPES=fp32 IMAGES=64 VAL_IMAGES=8 TRAIN_SHARDS=4 BATCH=8 \
#   TEST_NUM=1 STEPS=6 LOG_STEPS=2 DEVICE=cpu DECODERS=cpu PROBE_SECONDS=2 \
#   WORKER_DECODERS=simplejpeg,nvimgcodec_cpu STEP_AB_ARGS="--cpu --only pad4" \
#   PYTHON=.venv/bin/python bash scripts/gpu_pending.sh OUT 560
set -u
case "${1:-}" in
  -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
  "") echo "usage: gpu_pending.sh OUT_DIR [BUDGET_SECONDS]" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd) || exit 5
budget=${2:-560}
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
work=$out/work
mkdir -p "$work"
cd "$root"
bash scripts/gpu_decode_probe.sh "$work/probe" 110
DECODE=${DECODE:-gpu} DTYPES=${DTYPES:-fp16} bash scripts/gpu_records_check.sh "$work/rec" \
  "$(( $(left) < 260 ? $(left) : 260 ))"
ab=$(( $(left) - 20 ))
if [ "$ab" -ge 120 ]; then  # gpu_jax_step_ab.sh's start-up and 100 s
  # fp16 only (the faster precision, the goal's): a baseline and about
  # three candidates fit, the likeliest gain first (batch 512 gave bf16
  # +6%; the BN backward and the max-pool aim at the profile's 57% and
  # 3.5%); the stems aim at bf16 and go to the follow-up
  # (docs/gpu_speed.md).
  STEP_AB_ARGS=${STEP_AB_ARGS:---dtypes fp16 --only b512,bn_vjp,pool_shifted,bn_pallas,bn_one_pass} \
    bash scripts/gpu_jax_step_ab.sh "$work/ab" "$ab"
else
  echo "[gpu-pending] SKIP the A/B: $(left) s left" | tee "$work/ab_skipped.txt"
fi
cat "$work"/probe/summary.txt "$work"/rec/summary.txt \
  "$work"/ab/summary.txt "$work"/ab_skipped.txt > "$out/summary.txt" 2>/dev/null
for f in rec/records_summary.md rec/records_summary.json ab/ab_verdicts.md \
         probe/probe.json; do
  [ -f "$work/$f" ] && cp "$work/$f" "$out/"
done
tar -C "$out" -czf "$out/all.tar.gz" work && rm -rf "$work"
echo "[gpu-pending] done after $(( $(date +%s) - start )) s: $(ls "$out" | tr '\n' ' ')"
