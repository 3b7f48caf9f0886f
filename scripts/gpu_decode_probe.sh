#!/usr/bin/env bash
# Can the GPU's JPEG decoder feed the step (issue 46's GPU decode option),
# and why did 15 `decode: gpu` workers stall at 5,155 img/s? ImageNet-like
# JPEGs made here (scripts/make_jpeg_folder.py), then
# benchmarks/gpu_decode_probe.py in stages, the open questions first:
# processes (the worker path, nvimgcodec 32 a call and simplejpeg beside
# it, in 1, 8 and 15 processes at once, each its own CUDA context, and a
# JAX stand-in for the trainer's step timed alone and beside them),
# trainer (one process, one decoder, BATCH windows a call resized by 4 and
# 8 threads; then decode: gpu_trainer's TrainerDecode, pipelined, against
# the same work on one thread as before, on packed batches in memory, 8
# threads, at each of WORKER_SHARES: the share of each batch's JPEGs
# worker_decode_share leaves to the workers), processes_block
# (nvimgcodec's processes at the largest count again, each with CUDA's
# waits set to block instead of spin: host/cuda_driver.py), with MPS=1
# processes again under MPS (nvimgcodec at the largest count; the daemon
# from scripts/lib/gpu_stage.sh, stopped on any exit, its log in
# OUT_DIR/mps_log), then probe (the hardware and CUDA decoders against
# simplejpeg on one core, the worker path in one process). About 1.9
# minutes, estimated (not yet run on a GPU): 17 s to start and make
# JPEGs, 31 s, 20 s, 11 s, 11 s and 21 s.
#
#   bash scripts/gpu_decode_probe.sh OUT_DIR [BUDGET_SECONDS]
#
# The wheels arrive in .whl/ (nvidia-nvimgcodec-cu13 and nvidia-nvjpeg for
# CUDA 13, simplejpeg; cp312 manylinux, as for scripts/gpu_jax_check.sh).
# IMAGES (2000), BATCH (256), PROBE_SECONDS (3; 8 until 2026-11-30),
# DECODERS (hw,cuda; cpu runs without a GPU and checks the flow),
# WORKER_SHARES (0,0.5), BLOCKING (1; 0: no processes_block stage),
# WORKER_DECODERS (simplejpeg,nvimgcodec: an input worker's per-image work
# with each, a window decoder one image and 32 a call; nvimgcodec_cpu
# without a GPU), PROCESSES (1,8,15), TRAINER_THREADS (4,8),
# SWEEP_SECONDS (2: each process and thread count), JAX_STEP (1; 0: no
# JAX step), MPS (0; 1: the MPS stage, where nvidia-cuda-mps-control is
# on PATH; MPS_PROCESSES, default PROCESSES's last). OUT_DIR gets
# summary.txt, probe.json (every stage's rows) and the stages' logs.
# A CPU check of the flow, about 46 s on 2 cores:
#   IMAGES=200 DECODERS=cpu WORKER_DECODERS=simplejpeg,nvimgcodec_cpu \
#   PROBE_SECONDS=2 PROCESSES=1,2 TRAINER_THREADS=2 \
#   PYTHON=.venv/bin/python bash scripts/gpu_decode_probe.sh OUT 110
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/gpu_stage.sh
source "$root/scripts/lib/gpu_stage.sh"
gpu_usage "$0" "${1:-}" && exit 0
cd "$root"
gpu_begin gpu-decode "$1" "${2:-150}"
out=$gpu_out
say "cpus: $(lscpu 2>/dev/null | grep -E '^(Thread|Core|Socket)' \
  | tr -s ' ' | paste -sd ';')"
if ! "$PYTHON" -c "from nvidia import nvimgcodec" 2>/dev/null \
    && ls .whl/*.whl >/dev/null 2>&1; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
images=/tmp/decode_probe_images.$$  # one per run: two probes at once share nothing
rm -rf "$images" "$out/probe.json"
stage make_jpegs 60 "$PYTHON" scripts/make_jpeg_folder.py "$images" \
  --train "${IMAGES:-2000}" --validation 1 --classes 10
if [ ! -d "$images" ]; then
  say "SKIP the probe's stages: no JPEGs were made"; exit 0
fi
worker_decoders=${WORKER_DECODERS:-simplejpeg,nvimgcodec}
processes=${PROCESSES-1,8,15}
probe() {  # probe STAGES ARGS...: the probe's stages, rows into probe.json
  local stages=$1; shift
  "$PYTHON" benchmarks/gpu_decode_probe.py --image_dir "$images" \
    --images "${IMAGES:-2000}" --batch "${BATCH:-256}" \
    --seconds "${PROBE_SECONDS:-3}" --decoders "${DECODERS:-hw,cuda}" \
    --worker_decoders "$worker_decoders" --processes "$processes" \
    --trainer_threads "${TRAINER_THREADS-4,8}" \
    --sweep_seconds "${SWEEP_SECONDS:-2}" --stages "$stages" \
    --json "$out/probe.json" --append "$@"
}
step=--jax_step
[ "${JAX_STEP:-1}" = 1 ] || step=
stage processes 35 probe processes $step
stage trainer 22 probe trainer,trainer_decode \
  --worker_shares "${WORKER_SHARES:-0,0.5}"
nv_decoders=$(tr , '\n' <<< "$worker_decoders" | grep nvimgcodec | paste -sd ,)
if [ "${BLOCKING:-1}" = 1 ] && [ -n "$nv_decoders" ] && [ -n "$processes" ]; then
  stage processes_block 12 probe processes $step --label "blocking sync" \
    --blocking_sync --processes "${processes##*,}" --worker_decoders "$nv_decoders"
fi
if [ "${MPS:-0}" = 1 ]; then  # scripts/lib/gpu_stage.sh's mps_start/stop
  mps_dir=/tmp/probe_mps.$$  # its pipes (sockets) stay out of OUT_DIR
  trap 'mps_stop; cp -r "$mps_dir/log" "$out/mps_log" 2>/dev/null
    rm -rf "$mps_dir"' EXIT
  trap 'exit 130' INT; trap 'exit 143' TERM
  if mps_start "$mps_dir"; then
    say "$mps_line"
    CUDA_MPS_PIPE_DIRECTORY=$mps_pipe stage processes_mps 15 probe processes \
      $step --label MPS --processes "${MPS_PROCESSES:-${processes##*,}}" \
      --worker_decoders "$nv_decoders"
    mps_stop
  fi
  say "$mps_line"
fi
stage probe 25 probe decoders,worker
rm -rf "$images"
say "done"
