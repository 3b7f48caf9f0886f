# Shared by the GPU stage scripts (gpu_decode_probe.sh, gpu_jax_profile.sh,
# gpu_jax_speed_ab.sh, gpu_jax_step_ab.sh; the pattern of
# scripts/gpu_jax_check.sh): a budget in seconds, stages skipped
# with a line when less than their estimate is left, Keras 3 from .whl/
# when the machine lacks it, JAX's compilation cache across processes.
#   source scripts/lib/gpu_stage.sh; gpu_usage "$0" "${1:-}" && exit 0
#   gpu_begin TAG OUT_DIR BUDGET_SECONDS
# then `stage NAME SECONDS COMMAND...` writes OUT_DIR/NAME.log and a START /
# END (or SKIP) line in OUT_DIR/summary.txt. PYTHON picks the interpreter
# (default python3). Run from the repository's root. mps_start DIR and
# mps_stop run CUDA's MPS control daemon (its pipe folder: mps_pipe).
gpu_usage() {  # gpu_usage SCRIPT FIRST_ARG: its header comment for --help,
  # the one-line usage and exit 2 without OUT_DIR
  case "$2" in
    -h|--help)
      sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$1"
      echo "  -h, --help  this text"
      return 0 ;;
    "")
      echo "usage: $(basename "$1") OUT_DIR [BUDGET_SECONDS]" >&2
      exit 2 ;;
  esac
  return 1
}
gpu_begin() {
  gpu_tag=$1 gpu_budget=$3
  gpu_out=$(mkdir -p "$2" && cd "$2" && pwd) || exit 5
  gpu_start=$(date +%s)
  export KERAS_BACKEND=jax PYTHONUNBUFFERED=1
  export PYTHON=${PYTHON:-python3}
  if [ -d .whl ] && ! "$PYTHON" -c "import keras" 2>/dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile \
      --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  # Runs after a side's first reuse its compiled step (3-5 s, not 17-21).
  export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/jax_cache}
  export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
  say "host: $(nproc) CPUs; $("$PYTHON" --version 2>&1); budget ${gpu_budget} s"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
      --format=csv,noheader | sed 's/^/[gpu] /' | tee -a "$gpu_out/summary.txt"
  else
    say "no nvidia-smi here"
  fi
  "$PYTHON" -c "import jax, keras; print('[versions] jax', jax.__version__, 'keras', keras.__version__, jax.devices())" 2>&1 \
    | tail -1 | tee -a "$gpu_out/summary.txt"
}
left() { echo $(( gpu_budget - ($(date +%s) - gpu_start) )); }
say() {
  echo "[$gpu_tag +$(( $(date +%s) - gpu_start ))s] $*" | tee -a "$gpu_out/summary.txt"
}
stage() {  # stage NAME SECONDS_NEEDED COMMAND...
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then
    say "SKIP $name: $(left) s left of the budget, it needs about $need"
    return 0
  fi
  say "START $name"
  "$@" > "$gpu_out/$name.log" 2>&1
  local rc=$?
  say "END $name: exit $rc"
  tail -n 25 "$gpu_out/$name.log" | grep -v '^[IWE][0-9]\{4\} ' >> "$gpu_out/summary.txt"
}

# MPS (CUDA's multi-process service): a control daemon with its pipes and
# logs in DIR; processes started with CUDA_MPS_PIPE_DIRECTORY=$mps_pipe
# share the GPU through one server (one context) instead of one context
# each. Others, without it, use the default pipe folder and no MPS. Both
# set mps_line, what happened in one line, for the caller to say.
mps_start() {  # mps_start DIR: 0 when the daemon runs
  if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
    mps_line="MPS: nvidia-cuda-mps-control is absent here (no MPS runs)"
    return 1
  fi
  mkdir -p "$1/pipe" "$1/log"
  if ! CUDA_MPS_PIPE_DIRECTORY=$1/pipe CUDA_MPS_LOG_DIRECTORY=$1/log \
      nvidia-cuda-mps-control -d >/dev/null 2>&1; then
    mps_line="MPS: the control daemon did not start (its log: $1/log)"
    return 1
  fi
  mps_pipe=$1/pipe
  mps_line="MPS: control daemon started, pipes in $mps_pipe"
}
mps_stop() {  # stops mps_start's daemon; nothing when none runs
  [ -n "${mps_pipe:-}" ] || return 0
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$mps_pipe nvidia-cuda-mps-control \
    >/dev/null 2>&1
  mps_line="MPS: control daemon stopped"
  mps_pipe=
}
