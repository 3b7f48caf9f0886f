#!/usr/bin/env bash
# Can the GPU's JPEG decoder feed the step (issue 46's GPU decode option)?
# ImageNet-like JPEGs made here (scripts/make_jpeg_folder.py), then
# benchmarks/gpu_decode_probe.py: nvImageCodec's hardware and CUDA
# decoders on batches of train-crop windows against simplejpeg on one core
# (img/s, CPU ms per image, failures, pixel difference). About 2 minutes.
#
#   bash scripts/gpu_decode_probe.sh OUT_DIR [BUDGET_SECONDS]
#
# The wheels arrive in .whl/ (nvidia-nvimgcodec-cu13 and nvidia-nvjpeg for
# CUDA 13, simplejpeg; cp312 manylinux, as for scripts/gpu_jax_check.sh).
# IMAGES (2000), BATCH (256), PROBE_SECONDS (8), DECODERS (hw,cuda; cpu
# runs without a GPU and checks the flow), WORKER_DECODERS (simplejpeg,
# nvimgcodec: an input worker's per-image work with each, a window
# decoder one image and 32 a call; nvimgcodec_cpu without a GPU).
# OUT_DIR gets summary.txt and probe.json.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/gpu_stage.sh
source "$root/scripts/lib/gpu_stage.sh"
gpu_usage "$0" "${1:-}" && exit 0
cd "$root"
gpu_begin gpu-decode "$1" "${2:-150}"
out=$gpu_out
if ! "$PYTHON" -c "from nvidia import nvimgcodec" 2>/dev/null \
    && ls .whl/*.whl >/dev/null 2>&1; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
images=/tmp/decode_probe_images
rm -rf "$images"
stage make_jpegs 60 "$PYTHON" scripts/make_jpeg_folder.py "$images" \
  --train "${IMAGES:-2000}" --validation 1 --classes 10
stage probe 40 "$PYTHON" benchmarks/gpu_decode_probe.py --image_dir "$images" \
  --images "${IMAGES:-2000}" --batch "${BATCH:-256}" \
  --seconds "${PROBE_SECONDS:-8}" --decoders "${DECODERS:-hw,cuda}" \
  --worker_decoders "${WORKER_DECODERS:-simplejpeg,nvimgcodec}" \
  --json "$out/probe.json"
rm -rf "$images"
say "done"
