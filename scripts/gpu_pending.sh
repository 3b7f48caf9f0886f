#!/usr/bin/env bash
# What still waits for a GPU (issues 46 and 47) on an H100/H200, in order
# of value, each part's estimate from the 2026-11-30 H200 call (16 vCPUs,
# fp16). PARTS picks them (default: all five, "step trust records probe
# xla"); the plan is two calls, each standing alone: PARTS="step trust"
# (~420 s), then PARTS="records probe xla" with the rest.
#  0. step, ~240 s: the fp16 candidates built since that call (STEP_AB:
#     ls_select, bn_vjp_relu, bn_vjp, bn_pallas) against its winner (BASE:
#     batch 512, one-pass BN statistics) in one process
#     (gpu_jax_step_ab.sh); benchmarks/ab_winner.py takes the candidate
#     judged faster by the widest margin, if any, for the trust runs.
#  1. trust runs, ~150 s: the winner (7,906.8 img/s in one run on
#     2026-11-30 against issue 47's 7,951; with part 0's winner on top
#     where it ran) through the run script, 3 runs of 200 steps (the first
#     ~65 s with its compile, then ~40 s each from JAX's cache), and the
#     extractor's table, written into OUT_DIR. The goal is 0.6% away;
#     three runs settle it.
#  2. records, ~300 s (gpu_records_check.sh, fp16, one run a case):
#     synthetic first (the denominator of issue 46's real/synthetic >=
#     0.95, skipped last time), then real on 15 input workers with decode:
#     gpu_trainer (one decoder in the trainer's process; never run on a GPU
#     yet), gpu_trainer:0.5 (the workers decode every other JPEG on the
#     CPU, worker_decode_share: CPU and GPU rates add up), decode: gpu
#     (the 5,155 img/s ceiling of 15 workers with a context each), and gpu
#     under CUDA's MPS (one context for all workers). Make JPEGs 43 s,
#     build 6, synthetic ~55, real 70 then ~45 a case: 264 s to gpu, so
#     MPS's case is the first a short budget skips (DECODES, WORKERS set
#     them). Last, cpu_window (nvImageCodec's CPU decoder on the window,
#     in the workers) where the budget still holds a case, else a line.
#  3. decode probe, 90 s (gpu_decode_probe.sh; its knobs pass through:
#     PROCESSES, TRAINER_THREADS, WORKER_SHARES, BLOCKING...; MPS is 1 here
#     unless set, as for the records): the decoders alone, in N processes
#     (with CUDA's waits blocking, and under MPS), and in one trainer
#     process.
#  4. xla, what is left, when at least 160 s: the XLA flags, a process
#     each, on the winner (gpu_jax_speed_ab.sh: conv_fusion,
#     runtime_fusion, cmdbuf_cond, cmdbuf_off; a baseline and one
#     candidate need ~160 s), else a line.
# OUT_DIR gets at most seven files, as the device tool brings back eight:
# summary.txt (every part's lines; the A/B tables), step_verdicts.md,
# trust_result.md, records_summary.md and .json, probe.json, all.tar.gz
# (logs, results, ab.json).
#
#   bash scripts/gpu_pending.sh OUT_DIR [BUDGET_SECONDS]
#
# .whl/ holds the cp312 wheels (docs/gpu_speed.md, "Wheels"): keras, namex,
# optree, google-crc32c, simplejpeg, nvidia-nvimgcodec-cu13, nvidia-nvjpeg.
# Knobs: PARTS; STEP_AB (the step A/B's candidates), STEP_ARGS (more of
# its driver's arguments); TRUST_BATCH and TRUST_OVERRIDE (the base's
# batch 512 and model key, with part 0's winner where it ran; set, they
# win), TRUST_RUNS (3), TRUST_STEPS (200), TRUST_LOG_STEPS (50); BASE (both
# A/Bs': the winner's batch and key), AB_ARGS; the records check's DECODES
# ("gpu_trainer gpu_trainer:0.5 gpu cpu_window"; DECODE alone where set), DTYPES
# (fp16), TEST_NUM (1), WORKERS (15), MPS (1, also the
# probe's), STEPS...; the probe's. A CPU check of the flow, all five parts, about
# 3 minutes on 2 cores (2 min 51 s on 2026-11-30, another job beside it):
#   DECODE=cpu DTYPES=fp32 IMAGES=64 VAL_IMAGES=8 TRAIN_SHARDS=4 BATCH=8 \
#   STEPS=6 LOG_STEPS=2 DEVICE=cpu WORKERS="1 2" TRUST_BATCH=8 TRUST_RUNS=1 \
#   TRUST_STEPS=6 TRUST_LOG_STEPS=2 DECODERS=cpu PROBE_SECONDS=2 \
#   WORKER_DECODERS=simplejpeg,nvimgcodec_cpu PROCESSES=1,2 \
#   TRAINER_THREADS=2 AB_ARGS="--cpu --only cmdbuf_off --steps 4 --log_steps 2" \
#   STEP_ARGS="--cpu --steps 2 --rounds 2 --warmup 1" \
#   PYTHON=.venv/bin/python bash scripts/gpu_pending.sh OUT 900
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
cap() { local l; l=$(left); echo $(( l < $1 ? l : $1 )); }
work=$out/work
mkdir -p "$work/trust"
cd "$root"
note() { echo "[gpu-pending +$(( $(date +%s) - start ))s] $*" | tee -a "$work/pending.txt"; }
PARTS=${PARTS:-step trust records probe xla}
for part in $PARTS; do
  case $part in
    step|trust|records|probe|xla) ;;
    *) echo "gpu_pending.sh: unknown part '$part' in PARTS; valid: step," \
         "trust, records, probe, xla" >&2; rm -rf "$work"; exit 2 ;;
  esac
done
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
export PYTHON=${PYTHON:-python3} KERAS_BACKEND=jax PYTHONUNBUFFERED=1
export MPS=${MPS:-1}
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/jax_cache}
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
if [ -d .whl ] && ! "$PYTHON" -c "import keras" 2>/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
BASE=${BASE:-train_dataset.batch_size=512,model.model_params.bn_statistics=one_pass}
# The trust runs' batch and override: the base's, or part 0's winner on it.
if ! split=$("$PYTHON" benchmarks/ab_winner.py --base "$BASE"); then
  echo "gpu_pending.sh: BASE cannot be read (above)" >&2; rm -rf "$work"; exit 2
fi
read -r trust_batch trust_override <<< "$split"

# 0. The step A/B on the base, and its winner for the trust runs.
step() {
  BASE=$BASE STEP_AB_ARGS="--dtypes fp16 --only ${STEP_AB:-ls_select,bn_vjp_relu,bn_vjp,bn_pallas} ${STEP_ARGS:-}" \
    bash scripts/gpu_jax_step_ab.sh "$work/step" "$1"
  [ -f "$work/step/ab_verdicts.md" ] && cp "$work/step/ab_verdicts.md" "$out/step_verdicts.md"
  local won
  if won=$("$PYTHON" benchmarks/ab_winner.py "$work/step/ab.json" --dtype fp16 \
             --base "$BASE" 2> "$work/step/winner.txt"); then
    read -r trust_batch trust_override <<< "$won"
    note "$(cat "$work/step/winner.txt")"
  else
    note "$(cat "$work/step/winner.txt"); the trust runs train the base"
  fi
}

# 1. The trust runs: the run script as BENCHMARKS.md quotes it, its logs
# and the extractor's tables under OUT_DIR (not ./result).
trust() {
  local dir=$work/trust batch=${TRUST_BATCH:-$trust_batch}
  env BACKEND=jax TEST_NUM="${TRUST_RUNS:-3}" STEPS="${TRUST_STEPS:-200}" \
    LOG_STEPS="${TRUST_LOG_STEPS:-50}" LOG_DIR="$dir/logs" \
    MODEL_DIR="$dir/model_dir" PARAMS_OVERRIDE="${TRUST_OVERRIDE:-$trust_override}" \
    timeout -k 10 "$1" bash run_single_node.sh "$batch" fp16
  echo "run script: exit $?"
  "$PYTHON" extract_tensorflow_logs.py --log_dir "$dir/logs/jax/resnet50/bz$batch" \
    --window auto --output_dir "$dir/result" | tail -n 3
  cp "$dir/result/bz${batch}_result.md" "$out/trust_result.md"
}
if want step; then
  if [ "$(left)" -ge 100 ]; then
    step "$(cap 240)"
  else
    note "SKIP the step A/B: $(left) s left, it needs 100"
  fi
fi
if want trust; then
  if [ "$(left)" -ge 60 ]; then
    note "START trust runs: batch ${TRUST_BATCH:-$trust_batch}, ${TRUST_OVERRIDE:-$trust_override}"
    trust "$(cap 200)" > "$work/trust/trust.log" 2>&1
    note "END trust runs: $(grep -c '^\[launch\] 1n1g run [0-9]*: ok' "$work/trust/trust.log") ok"
    grep '^\[launch\]\|^run script' "$work/trust/trust.log" | tee -a "$work/pending.txt"
    [ -f "$out/trust_result.md" ] && cat "$out/trust_result.md" >> "$work/pending.txt"
  else
    note "SKIP the trust runs: $(left) s left"
  fi
fi

# 2. Records, decode on the GPU: synthetic, real for each of DECODES on
# each WORKERS count, MPS (decode: gpu's).
want records && DECODES=${DECODES:-${DECODE:-gpu_trainer gpu_trainer:0.5 gpu cpu_window}} \
  DTYPES=${DTYPES:-fp16} TEST_NUM=${TEST_NUM:-1} WORKERS=${WORKERS:-15} \
  bash scripts/gpu_records_check.sh "$work/rec" "$(cap 300)"

# 3. The decode probe, its knobs as they come.
want probe && bash scripts/gpu_decode_probe.sh "$work/probe" "$(cap 90)"

# 4. The XLA flags on the winner, a process each, with what is left.
ab=$(( $(left) - 20 ))
if ! want xla; then
  :
elif [ "$ab" -ge 160 ]; then
  BASE=$BASE \
    AB_ARGS=${AB_ARGS:---dtypes fp16 --rate 7900 --only conv_fusion,runtime_fusion,cmdbuf_cond,cmdbuf_off} \
    bash scripts/gpu_jax_speed_ab.sh "$work/ab" "$ab"
else
  note "SKIP the XLA-flag A/B: $(left) s left, it needs 180"
fi
cat "$work/pending.txt" "$work"/step/summary.txt "$work"/rec/summary.txt \
  "$work"/probe/summary.txt "$work"/ab/summary.txt > "$out/summary.txt" 2>/dev/null
for f in rec/records_summary.md rec/records_summary.json probe/probe.json; do
  [ -f "$work/$f" ] && cp "$work/$f" "$out/"
done
rm -rf "$work/trust/model_dir"
tar -C "$out" -czf "$out/all.tar.gz" work && rm -rf "$work"
echo "[gpu-pending] done after $(( $(date +%s) - start )) s: $(ls "$out" | tr '\n' ' ')"
