#!/usr/bin/env bash
# Records on the JAX backend, on a GPU machine without TensorFlow (the
# H100/H200 of docs/backends.md): ImageNet-sized JPEGs made there
# (scripts/make_jpeg_folder.py), built into TFRecords by the project's own
# builder (official-bench-build-records, no TensorFlow), the run script on
# synthetic data and then on them for each precision (the ratio's
# denominator first), the extractor, and the table of real against
# synthetic img/s (scripts/records_summary.py).
#
#   bash scripts/gpu_records_check.sh OUT_DIR [BUDGET_SECONDS]
#
# Knobs (environment): IMAGES (train JPEGs, 20000), VAL_IMAGES (500),
# IMAGE_W x IMAGE_H (500x375), CLASSES (100), TRAIN_SHARDS (64), BATCH
# (256), DTYPES ("bf16 fp16"), TEST_NUM (3, runs per case), STEPS (200),
# LOG_STEPS (50), NUM_WORKERS (train_dataset.num_workers, auto), WORKERS
# (a sweep, "8 15": a real case per count, named real_w8, real_w15, instead
# of the one NUM_WORKERS case), DECODE (the real runs' train_dataset.decode:
# cpu, or cpu_window, gpu or gpu_trainer with nvImageCodec's wheels in .whl/:
# nvidia-nvimgcodec-cu13 and nvidia-nvjpeg; gpu_trainer:SHARE, SHARE 0.01 to
# 0.99, sets train_dataset.worker_decode_share too, the workers decoding
# that share of each batch), DECODES (several, "gpu_trainer gpu": the real
# cases for each, named by it, real_gpu_trainer_w15, real_gpu_w8, and
# gpu_trainer:0.5's real_gpu_trainer_s50_w15 (a share's case is named so
# alone too); default DECODE alone, names as above), WORKERS_<decode>
# (that decode's counts instead of WORKERS: WORKERS_gpu_trainer=15, for
# its shares too unless WORKERS_gpu_trainer_s50 gives theirs), MPS
# (1: with decode gpu, one more real case per count in MPS_WORKERS,
# default the last count, under CUDA's MPS daemon, started for those runs
# and stopped on every exit: real_w15_mps; a line instead where
# nvidia-cuda-mps-control is absent), DEVICE (auto; cpu runs
# the CPU smoke config), DATA_ROOT (where images and records go,
# /tmp/records_check). The same script at a CPU's scale, in about a minute:
#   IMAGES=64 VAL_IMAGES=8 TRAIN_SHARDS=4 BATCH=8 DTYPES=fp32 TEST_NUM=1 \
#     STEPS=6 LOG_STEPS=2 DEVICE=cpu WORKERS="1 2" \
#     bash scripts/gpu_records_check.sh OUT
# Wheels the machine lacks arrive in .whl/ as for scripts/gpu_jax_check.sh
# (keras, namex, optree; the records reader's google-crc32c and simplejpeg,
# cp312 manylinux); PYTHON (python3) runs everything. Stages run in order and
# each is skipped, with a line saying so, when less than its estimate is
# left of BUDGET_SECONDS. OUT_DIR gets summary.txt, records_summary.md and
# .json, the extractor's tables and one tarball of the logs.
set -u
# --help prints this header; no OUT_DIR is one usage line, exit 2
source "$(dirname "$0")/lib/gpu_stage.sh"
gpu_usage "$0" "${1:-}" && exit 0
decodes=${DECODES:-${DECODE:-cpu}}
decode_name() {  # decode_name DECODE: gpu_trainer:0.5 -> gpu_trainer_s50
  local share=${1#*:} pct
  [ "$share" = "$1" ] && { echo "$1"; return; }
  pct=${share#0.}; [ ${#pct} = 1 ] && pct=${pct}0
  echo "${1%%:*}_s$pct"
}
decode_counts() {  # decode_counts DECODE: its WORKERS_<name> or _<decode>
  local by_name=WORKERS_$(decode_name "$1") by_decode=WORKERS_${1%%:*}
  echo "${!by_name:-${!by_decode:-}}"
}
for d in $decodes; do
  bad_share=
  case $d in
    cpu|cpu_window|gpu|gpu_trainer) ;;
    gpu_trainer:0.[0-9]|gpu_trainer:0.[0-9][0-9])
      case ${d#*:} in
        0.0|0.00) bad_share=1 ;;
      esac ;;
    gpu_trainer:*) bad_share=1 ;;
    *) echo "gpu_records_check.sh: DECODES/DECODE: '$d' is not a decode (cpu, cpu_window, gpu, gpu_trainer or gpu_trainer:SHARE, space-separated: DECODES=\"gpu_trainer gpu gpu_trainer:0.5\")" >&2
       exit 2 ;;
  esac
  if [ -n "$bad_share" ]; then
    echo "gpu_records_check.sh: DECODES/DECODE: '$d': the share is not 0.01 to 0.99 with at most two decimals (gpu_trainer:0.5: train_dataset.worker_decode_share=0.5)" >&2
    exit 2
  fi
  sweeps="${sweeps:-} $(decode_counts "$d")"
done
for n in ${WORKERS:-} ${MPS_WORKERS:-} ${sweeps:-}; do
  case $n in
    auto|[1-9]|[1-9][0-9]|[1-9][0-9][0-9]) ;;
    *) echo "gpu_records_check.sh: WORKERS/MPS_WORKERS: '$n' is not a worker count (a positive integer or auto, space-separated: WORKERS=\"8 15\")" >&2
       exit 2 ;;
  esac
done
out=$1
budget=${2:-540}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
say() { echo "[records-check +$(( $(date +%s) - start ))s] $*" | tee -a "$out/summary.txt"; }
stage() {  # stage NAME SECONDS_NEEDED COMMAND...
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then
    say "SKIP $name: $(left) s left of the budget, it needs about $need"
    return 1
  fi
  say "START $name"
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  say "END $name: exit $rc"
  tail -n 15 "$out/$name.log" | grep -v '^[IWE][0-9]\{4\} ' >> "$out/summary.txt"
  return $rc
}

export KERAS_BACKEND=jax PYTHONUNBUFFERED=1
export PYTHON=${PYTHON:-python3}
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export JAX_COMPILATION_CACHE_DIR=/tmp/jax_cache
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
images=${IMAGES:-20000}; val_images=${VAL_IMAGES:-500}
batch=${BATCH:-256}; dtypes=${DTYPES:-bf16 fp16}; test_num=${TEST_NUM:-3}
steps=${STEPS:-200}; log_steps=${LOG_STEPS:-50}; workers=${NUM_WORKERS:-auto}
device=${DEVICE:-auto}; root=${DATA_ROOT:-/tmp/records_check}
# nvImageCodec: every decode but cpu uses it (cpu_window its CPU decoder)
uses_nv=$(for d in $decodes; do [ "$d" = cpu ] || echo 1; done | head -n1)
say "host: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')); $("$PYTHON" --version 2>&1); /dev/shm $(df -h /dev/shm | awk 'NR==2 {print $2}')"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv,noheader | sed 's/^/[gpu] /' | tee -a "$out/summary.txt"
"$PYTHON" -c "import tensorflow" 2>/dev/null && say "NOTE: TensorFlow IS importable here" \
  || say "TensorFlow is not importable here (as intended)"

# The records reader's wheels (setup.cfg's jax extra): without them every
# run would fail, so stop here and say which.
if ! missing=$("$PYTHON" -c "
import importlib.util as u
need = ['simplejpeg', 'google_crc32c', 'cv2', 'PIL']
if '$uses_nv':
    need.append('nvidia.nvimgcodec')
def found(m):
    try:
        return u.find_spec(m) is not None
    except ImportError:  # its parent package is missing
        return False
print(' '.join(m for m in need if not found(m)))") || [ -n "$missing" ]; then
  say "STOP: the records reader needs $missing (put their wheels in .whl/)"
  exit 1
fi

# Stage estimates (seconds) from the 2026-11-30 H200 call (16 vCPUs, fp16,
# batch 256, 200 steps): make_jpegs took 43 s, build_records 6; a real run
# 68 s the first time (start-up ~10, records pipeline 14.3, compile 34.1,
# training 9.9) and 37-45 s after it (3.7, 13 from JAX's cache, 10.4);
# synthetic's first is taken as the same start-up, compile and 8 s of
# training. Other sizes and steps do not scale these.
first_real=70 next_run=45 first_synthetic=55
runs_need() {  # runs_need FIRST: TEST_NUM runs, the first FIRST seconds
  echo $(( $1 + next_run * (test_num - 1) ))
}
rm -rf "$root"; mkdir -p "$root"
stage make_jpegs 60 "$PYTHON" scripts/make_jpeg_folder.py "$root/images" \
  --train "$images" --validation "$val_images" --classes "${CLASSES:-100}" \
  --width "${IMAGE_W:-500}" --height "${IMAGE_H:-375}" || exit 1
stage build_records 20 "$PYTHON" -m official_bench.data.build.build_records \
  --input_dir "$root/images" --output_dir "$root/records" \
  --train_shards "${TRAIN_SHARDS:-64}" --validation_shards 4 \
  --num_workers "$(nproc)" || exit 1
say "records: $(du -sh "$root/records" | cut -f1) in $(ls "$root/records" | grep -c '^train-') train shards"
rm -rf "$root/images"

# The input workers' slots live in /dev/shm (2 batches each): a container's
# small default would refuse the pool, so fewer workers where it is small.
fits=$("$PYTHON" -c "
import os
from official_bench.data.feeds.shm_workers import auto_workers
st = os.statvfs('/dev/shm')
slots = (st.f_bavail * st.f_frsize) // (2 * $batch * 224 * 224 * 3 + 1)
print(auto_workers(), max(1, slots - 1))")
fitted() {  # fitted COUNT: the count, or the workers /dev/shm holds
  local n=$1 auto=${fits% *} room=${fits#* }
  if { [ "$n" = auto ] && [ "$room" -lt "$auto" ]; } ||
     { [ "$n" != auto ] && [ "$n" -gt "$room" ]; }; then
    say "NOTE: /dev/shm holds the slots of $room input workers only (asked $n, auto would be $auto): num_workers=$room" >&2
    n=$room
  fi
  echo "$n"
}

# The real cases, "NAME COUNT MPS DECODE" each, for each of DECODES (its
# name in the case's when there are several): one per WORKERS count (or
# the one NUM_WORKERS case, named real), then MPS=1's under the MPS daemon.
cases=()
several=$(echo $decodes | wc -w)
for d in $decodes; do
  tag=real; { [ "$several" -gt 1 ] || [ "${d#*:}" != "$d" ]; } &&
    tag=real_$(decode_name "$d")
  counts=$(decode_counts "$d"); counts=${counts:-${WORKERS:-}}
  if [ -n "$counts" ]; then
    for n in $counts; do cases+=("${tag}_w$n $(fitted "$n") 0 $d"); done
  else
    cases+=("$tag $(fitted "$workers") 0 $d")
  fi
  if [ "${MPS:-0}" = 1 ] && [ "$d" = gpu ]; then
    last=${counts:-$workers}
    for n in ${MPS_WORKERS:-${last##* }}; do
      cases+=("${tag}_w${n}_mps $(fitted "$n") 1 $d")
    done
  fi
done
if [ "${MPS:-0}" = 1 ] && ! [[ " $decodes " == *" gpu "* ]]; then
  say "MPS=1 is for decode gpu (each worker's CUDA context): no MPS case with DECODES=$decodes"
fi

cpu_line() { { head -n1 /proc/stat; } >> "$1"; nproc > "$1.cores"; }
run_case() {  # run_case NAME DTYPE [COUNT MPS DECODE]: TEST_NUM runs of the
  # run script; NAME synthetic, or a real case on COUNT workers (under MPS)
  local name=$1 dtype=$2 extra=() dec=${5:-} share=
  [ "${dec#*:}" != "$dec" ] &&
    share=",train_dataset.worker_decode_share=${dec#*:}"
  [ "$name" != synthetic ] && extra=(DATA_DIR="$root/records"
    PARAMS_OVERRIDE="train_dataset.num_workers=$3,train_dataset.decode=${dec%%:*}$share")
  [ "${4:-0}" = 1 ] && extra+=(CUDA_MPS_PIPE_DIRECTORY="$mps_pipe")
  rm -f "$out/cpu_${name}_${dtype}"
  cpu_line "$out/cpu_${name}_${dtype}"
  env BACKEND=jax DEVICE="$device" TEST_NUM="$test_num" STEPS="$steps" \
    LOG_STEPS="$log_steps" LOG_DIR="$out/logs_$name" \
    MODEL_DIR="$out/model_dir_$name" "${extra[@]}" \
    bash run_single_node.sh "$batch" "$dtype"
  local rc=$?
  cpu_line "$out/cpu_${name}_${dtype}"
  return $rc
}
real_case() {  # real_case "NAME COUNT MPS DECODE" DTYPE: its stage, under
  # MPS when asked (the daemon started at the first such case)
  local name count mps dec need=$next_run
  read -r name count mps dec <<< "$1"
  if [ "$mps" = 1 ] && [ -z "${mps_pipe:-}" ]; then
    mps_start "$root/mps"; say "$mps_line"
    [ -n "${mps_pipe:-}" ] || { say "SKIP ${name}_$2: no MPS"; return; }
  fi
  [ -z "$ran_real" ] && need=$first_real
  stage "${name}_$2" "$(runs_need "$need")" run_case "$name" "$2" "$count" \
    "$mps" "$dec" && ran_real=1
}
trap 'mps_stop; [ -n "${mps_line:-}" ] && say "$mps_line"' EXIT
trap 'exit 130' INT TERM
ran_real= ran_synthetic=
for dtype in $dtypes; do
  need=$next_run
  [ -z "$ran_synthetic" ] && need=$first_synthetic
  stage "synthetic_$dtype" "$(runs_need "$need")" run_case synthetic \
    "$dtype" && ran_synthetic=1
  for c in "${cases[@]}"; do real_case "$c" "$dtype"; done
  [ -n "${mps_pipe:-}" ] && { mps_stop; say "$mps_line"; mps_line=; }
done
names="synthetic $(for c in "${cases[@]}"; do echo "${c%% *}"; done)"
for name in $names; do
  [ -d "$out/logs_$name" ] || continue
  stage "extract_$name" 10 "$PYTHON" extract_tensorflow_logs.py \
    --log_dir "$out/logs_$name/jax/resnet50/bz$batch" --window auto \
    --output_dir "$out/result_$name"
  [ -f "$out/result_$name/bz${batch}_result.md" ] && {
    echo "[$name]"; cat "$out/result_$name/bz${batch}_result.md"; } >> "$out/summary.txt"
done
"$PYTHON" scripts/records_summary.py "$out" | tee -a "$out/summary.txt"
(cd "$out" && tar -czf all.tar.gz --exclude='*.tar.gz' \
  $(ls -d logs_* result_* *.log cpu_* 2>/dev/null))
rm -rf "$out"/logs_* "$out"/model_dir_* "$out"/result_* "$out"/*.log \
  "$out"/cpu_*
say "done"
