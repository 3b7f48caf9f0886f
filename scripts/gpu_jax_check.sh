#!/usr/bin/env bash
# The JAX backend's headline flow on a GPU machine that has no TensorFlow
# (the H100/H200 of docs/backends.md): the run script for bf16, fp16 and
# fp32, the extractor's table, the trainer against a bare jitted step, and
# one pod of official-bench-k8s's Job started here (scripts/k8s_pod_here.py).
#
#   bash scripts/gpu_jax_check.sh OUT_DIR [BUDGET_SECONDS]
#
# Keras 3 arrives as wheels in .whl/ (keras, namex, optree) when the machine
# lacks it. Stages run in order of importance and each is skipped, with a
# line saying so, when less than its estimate is left of BUDGET_SECONDS.
# Everything ends in OUT_DIR: summary.txt, bench_<dtype>.json and one
# tarball of the logs, result.json files and the extractor's outputs.
set -u
# --help prints this header; no OUT_DIR is one usage line, exit 2
source "$(dirname "$0")/lib/gpu_stage.sh"
gpu_usage "$0" "${1:-}" && exit 0
out=$1
budget=${2:-480}
mkdir -p "$out"
cd "$(dirname "$0")/.."
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
say() { echo "[gpu-check +$(( $(date +%s) - start ))s] $*" | tee -a "$out/summary.txt"; }
stage() {  # stage NAME SECONDS_NEEDED COMMAND...
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then
    say "SKIP $name: $(left) s left of the budget, it needs about $need"
    return 0
  fi
  say "START $name"
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  say "END $name: exit $rc"
  tail -n 25 "$out/$name.log" | grep -v '^[IWE][0-9]\{4\} ' >> "$out/summary.txt"
}

export KERAS_BACKEND=jax
if [ -d .whl ] && ! python3 -c "import keras" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHON=${PYTHON:-python3} PYTHONUNBUFFERED=1
# Runs 2 and 3 of a case reuse the compiled step instead of compiling again.
export JAX_COMPILATION_CACHE_DIR=/tmp/jax_cache
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
say "host: $(nproc) CPUs; $(python3 --version 2>&1)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
  --format=csv,noheader | sed 's/^/[gpu] /' | tee -a "$out/summary.txt"
python3 -c "import jax, keras; print('[versions] jax', jax.__version__, 'keras', keras.__version__, jax.devices())" 2>&1 | tail -1 | tee -a "$out/summary.txt"
python3 -c "import tensorflow" 2>/dev/null && say "NOTE: TensorFlow IS importable here" \
  || say "TensorFlow is not importable here (as intended)"

steps=${STEPS:-200}
run_case() {  # the headline flow for one precision
  BACKEND=jax TEST_NUM=3 STEPS=$steps LOG_STEPS=${LOG_STEPS:-50} LOG_DIR="$out/logs" \
    MODEL_DIR="$out/model_dir" bash run_single_node.sh 256 "$1"
}
stage run_bf16 150 run_case bf16
# One pod of official-bench-k8s's Indexed Job, started as Kubernetes would
# (its variables, JOB_COMPLETION_INDEX, its mounts as folders).
stage pod_bf16 90 env STEPS=$steps LOG_STEPS=${LOG_STEPS:-50} \
  python3 scripts/k8s_pod_here.py "$out/pod" --nodes 1 --gpus 1 --image local \
  --backend jax --dtype bf16 --batch 256 --test-num 1
stage bench_bf16 150 python3 benchmarks/jax_vs_bare.py --dtype bf16 \
  --batch 256 --steps 150 --warmup 20 --log_steps 30 --rounds 2 \
  --location both --json "$out/bench_bf16.json" ${BENCH_EXTRA:-}
stage run_fp16 120 run_case fp16
stage run_fp32 140 run_case fp32
stage extract 20 python3 extract_tensorflow_logs.py \
  --log_dir "$out/logs/jax/resnet50/bz256" --window auto \
  --output_dir "$out/result"
[ -f "$out/result/bz256_result.md" ] && cat "$out/result/bz256_result.md" >> "$out/summary.txt"
stage pod_extract 20 python3 extract_tensorflow_logs.py --json_only \
  --log_dir "$out/pod/logs/official-bench/jax/resnet50/bz256" --window auto \
  --output_dir "$out/pod_result"
[ -f "$out/pod_result/bz256_result.md" ] && cat "$out/pod_result/bz256_result.md" >> "$out/summary.txt"
tar -C "$out" -czf "$out/all.tar.gz" --exclude='*.tar.gz' \
  logs result model_dir pod pod_result $(cd "$out" && ls *.log 2>/dev/null) 2>/dev/null
rm -rf "$out/logs" "$out/model_dir" "$out/result" "$out/pod" "$out/pod_result" "$out"/*.log
say "done"
