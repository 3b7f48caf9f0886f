#!/usr/bin/env bash
# Records on the JAX backend, on a GPU machine without TensorFlow (the
# H100/H200 of docs/backends.md): ImageNet-sized JPEGs made there
# (scripts/make_jpeg_folder.py), built into TFRecords by the project's own
# builder (official-bench-build-records, no TensorFlow), the run script on
# them and on synthetic data for each precision, the extractor, and the
# table of real against synthetic img/s (scripts/records_summary.py).
#
#   bash scripts/gpu_records_check.sh OUT_DIR [BUDGET_SECONDS]
#
# Knobs (environment): IMAGES (train JPEGs, 20000), VAL_IMAGES (500),
# IMAGE_W x IMAGE_H (500x375), CLASSES (100), TRAIN_SHARDS (64), BATCH
# (256), DTYPES ("bf16 fp16"), TEST_NUM (3), STEPS (200), LOG_STEPS (50),
# NUM_WORKERS (train_dataset.num_workers, auto), DECODE (the real runs'
# train_dataset.decode: cpu, or gpu with nvImageCodec's wheels in .whl/:
# nvidia-nvimgcodec-cu13 and nvidia-nvjpeg), DEVICE (auto; cpu runs
# the CPU smoke config), DATA_ROOT (where images and records go,
# /tmp/records_check). The same script at a CPU's scale, in about a minute:
#   IMAGES=64 VAL_IMAGES=8 TRAIN_SHARDS=4 BATCH=8 DTYPES=fp32 TEST_NUM=1 \
#     STEPS=6 LOG_STEPS=2 DEVICE=cpu bash scripts/gpu_records_check.sh OUT
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
decode=${DECODE:-cpu}
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
if '$decode' == 'gpu':
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

rm -rf "$root"; mkdir -p "$root"
stage make_jpegs 200 "$PYTHON" scripts/make_jpeg_folder.py "$root/images" \
  --train "$images" --validation "$val_images" --classes "${CLASSES:-100}" \
  --width "${IMAGE_W:-500}" --height "${IMAGE_H:-375}" || exit 1
stage build_records 200 "$PYTHON" -m official_bench.data.build.build_records \
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
if [ "$workers" = auto ] && [ "${fits#* }" -lt "${fits% *}" ]; then
  workers=${fits#* }
  say "NOTE: /dev/shm holds the slots of $workers input workers only (auto would be ${fits% *}): num_workers=$workers"
fi

cpu_line() { { head -n1 /proc/stat; } >> "$1"; nproc > "$1.cores"; }
run_case() {  # run_case real|synthetic DTYPE: TEST_NUM runs of the run script
  local data=$1 dtype=$2 extra=()
  [ "$data" = real ] && extra=(DATA_DIR="$root/records"
                               PARAMS_OVERRIDE="train_dataset.num_workers=$workers,train_dataset.decode=$decode")
  rm -f "$out/cpu_${data}_${dtype}"
  cpu_line "$out/cpu_${data}_${dtype}"
  env BACKEND=jax DEVICE="$device" TEST_NUM="$test_num" STEPS="$steps" \
    LOG_STEPS="$log_steps" LOG_DIR="$out/logs_$data" \
    MODEL_DIR="$out/model_dir_$data" "${extra[@]}" \
    bash run_single_node.sh "$batch" "$dtype"
  local rc=$?
  cpu_line "$out/cpu_${data}_${dtype}"
  return $rc
}
for dtype in $dtypes; do
  stage "real_$dtype" 120 run_case real "$dtype"
  stage "synthetic_$dtype" 100 run_case synthetic "$dtype"
done
for data in real synthetic; do
  stage "extract_$data" 20 "$PYTHON" extract_tensorflow_logs.py \
    --log_dir "$out/logs_$data/jax/resnet50/bz$batch" --window auto \
    --output_dir "$out/result_$data"
  [ -f "$out/result_$data/bz${batch}_result.md" ] && {
    echo "[$data]"; cat "$out/result_$data/bz${batch}_result.md"; } >> "$out/summary.txt"
done
"$PYTHON" scripts/records_summary.py "$out" | tee -a "$out/summary.txt"
tar -C "$out" -czf "$out/all.tar.gz" --exclude='*.tar.gz' \
  logs_real logs_synthetic result_real result_synthetic \
  $(cd "$out" && ls *.log cpu_* 2>/dev/null) 2>/dev/null
rm -rf "$out/logs_real" "$out/logs_synthetic" "$out/model_dir_real" \
  "$out/model_dir_synthetic" "$out/result_real" "$out/result_synthetic" \
  "$out"/*.log "$out"/cpu_*
say "done"
