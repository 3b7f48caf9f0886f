#!/usr/bin/env bash
# Build a Python venv with Horovod (Gloo; NCCL where CUDA and NCCL are present)
# against TensorFlow 2.18 + tf-keras, install official_bench into it, and check
# it with `horovodrun --check-build` and a 2-process CPU smoke run.
# Run with --help for the options and the environment variables.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/install_horovod.sh [options]

Creates (or reuses) a Python venv with TensorFlow + tf-keras + Horovod 0.28.1
built from source, installs official_bench into it (editable), and verifies it
with `horovodrun --check-build` and a 2-process Gloo smoke run on CPU
(scripts/horovod_smoke.py). A complete venv carries a marker file with the
exact versions; re-running on the same machine is then a no-op in seconds.

Options:
  --print-venv   print the venv path and exit (builds nothing)
  --check        exit 0 if the venv is complete for the requested versions,
                 1 otherwise (builds nothing)
  --verify       re-run the checks (check-build + smoke) even if the venv is
                 already complete
  --force        delete the venv and build it again from scratch
  -h, --help     this text

Environment:
  OB_HOROVOD_VENV         venv location
                          (default: $HOME/.cache/official_bench/venv-horovod-tf2.18)
  PYTHON                  base interpreter for the venv (default: python3;
                          TensorFlow 2.18 has wheels for Python 3.9-3.12)
  OB_HVD_TF_VERSION       tensorflow version (default: 2.18.1)
  OB_HVD_TFKERAS_VERSION  tf-keras version (default: 2.18.0; same minor as TF)
  OB_HVD_FORCE=1          try a TensorFlow version not known to work
  OB_HVD_GPU              auto (default) | nccl | cpu. auto builds NCCL GPU
                          operations when nvcc and NCCL (nccl.h + libnccl) are
                          found, otherwise CPU/Gloo only
  OB_HVD_TF_EXTRAS        pip extras for tensorflow, e.g. "and-cuda" (default:
                          "and-cuda" when building NCCL ops and nvidia-smi
                          lists a GPU, otherwise none)
  OB_HVD_BUILD_JOBS       parallel compile jobs (default: number of cores)
  OB_HVD_BUILD_TIMEOUT    seconds allowed for the Horovod build (default: 3600)
  OB_HVD_SMOKE_TIMEOUT    seconds allowed for the smoke run (default: 300)
  HOROVOD_NCCL_HOME / HOROVOD_NCCL_INCLUDE / HOROVOD_NCCL_LIB / HOROVOD_CUDA_HOME
                          passed to Horovod's build as usual

Known TensorFlow versions: Horovod 0.28.1 (its last release, 2023) builds and
runs against TensorFlow 2.18.x (measured: 2.18.1 + tf-keras 2.18.0, Python
3.11). It does not build against TensorFlow 2.21: horovod/tensorflow/
xla_mpi_ops.cc needs headers the TF wheel no longer ships (highwayhash/...,
farmhash.h, tensorflow/compiler/xla/client/xla_builder.h). The upstream fix,
horovod PR #4302, is unmerged. 2.19 and 2.20 have not been tried here.

At run time Horovod needs tf-keras, not Keras 3: set TF_USE_LEGACY_KERAS=1
before TensorFlow is imported, e.g.
  TF_USE_LEGACY_KERAS=1 "$(scripts/install_horovod.sh --print-venv)/bin/horovodrun" \
      -np 2 -H localhost:2 --gloo python -m official_bench.classifier_trainer ...
EOF
}

# ---------------------------------------------------------------- settings
HVD_VERSION=0.28.1
RECIPE=1   # bump when the build recipe changes, so cached venvs are rebuilt
TF_VERSION=${OB_HVD_TF_VERSION:-2.18.1}
TFKERAS_VERSION=${OB_HVD_TFKERAS_VERSION:-2.18.0}
BASE_PYTHON=${PYTHON:-python3}
VENV=${OB_HOROVOD_VENV:-$HOME/.cache/official_bench/venv-horovod-tf2.18}
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac
VENV=${VENV%/}
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SMOKE="$REPO_ROOT/scripts/horovod_smoke.py"
MARKER="$VENV/.official_bench_horovod_ok"
PROJECT_MARKER="$VENV/.official_bench_project"
LOG_DIR="$VENV/ob-logs"
JOBS=${OB_HVD_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
BUILD_TIMEOUT=${OB_HVD_BUILD_TIMEOUT:-3600}
SMOKE_TIMEOUT=${OB_HVD_SMOKE_TIMEOUT:-300}
NSTEPS=5

MODE=install
VERIFY=auto
FORCE_REBUILD=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --print-venv) MODE=print ;;
    --check) MODE=check ;;
    --verify) VERIFY=always ;;
    --force) FORCE_REBUILD=1 ;;
    *) echo "install_horovod.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$MODE" = print ]; then
  echo "$VENV"
  exit 0
fi

# ---------------------------------------------------------------- helpers
T0=$SECONDS
STEP_T0=$SECONDS
CHILD_PID=

say() { echo "[install_horovod] $*"; }
die() { echo "[install_horovod] ERROR: $*" >&2; exit 1; }
fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
step() {
  STEP_T0=$SECONDS
  say "step $1/$NSTEPS: $2"
}
step_done() { say "  done in $(fmt_secs $((SECONDS - STEP_T0)))${1:+ ($1)}"; }

on_exit_signal() {
  if [ -n "$CHILD_PID" ]; then
    kill -TERM -- "-$CHILD_PID" 2>/dev/null || kill -TERM "$CHILD_PID" 2>/dev/null || true
    sleep 2
    kill -KILL -- "-$CHILD_PID" 2>/dev/null || true
  fi
  echo "[install_horovod] interrupted" >&2
  exit 130
}
trap on_exit_signal INT TERM

show_log_tail() {
  local log=$1
  echo "----- last 60 lines of $log -----" >&2
  tail -n 60 "$log" >&2 || true
  if grep -q -E 'error:|Error [0-9]+' "$log"; then
    echo "----- first error lines in $log -----" >&2
    grep -n -m 15 -E 'error:|Error [0-9]+' "$log" | cut -c1-300 >&2 || true
  fi
  echo "----- full log: $log -----" >&2
}

# run_logged LOG CMD...: run CMD in its own process group with all output
# appended to LOG; print a heartbeat with the log's last line every 60 s.
run_logged() {
  local log=$1; shift
  local start=$SECONDS rc=0 n=0 last
  echo "+ $*" >>"$log"
  setsid "$@" >>"$log" 2>&1 </dev/null &
  CHILD_PID=$!
  while kill -0 "$CHILD_PID" 2>/dev/null; do
    sleep 1
    n=$((n + 1))
    if [ $((n % 60)) -eq 0 ]; then
      last=$(tail -n 1 "$log" 2>/dev/null | tr -d '\r' | cut -c1-110)
      say "  ... $(fmt_secs $((SECONDS - start))) | $last"
    fi
  done
  wait "$CHILD_PID" || rc=$?
  CHILD_PID=
  return "$rc"
}

# ---------------------------------------------------------------- checks
check_tf_version() {
  local tf_minor=${TF_VERSION%.*} tfk_minor=${TFKERAS_VERSION%.*}
  case "$TF_VERSION" in
    2.18.*) ;;
    *)
      local msg="TensorFlow $TF_VERSION is not known to work with Horovod $HVD_VERSION.
  Known to work: TensorFlow 2.18.x (measured: tensorflow 2.18.1 + tf-keras 2.18.0).
  TensorFlow 2.21 does not build: horovod/tensorflow/xla_mpi_ops.cc needs headers
  the TensorFlow wheel lacks (highwayhash/..., farmhash.h,
  tensorflow/compiler/xla/client/xla_builder.h); the upstream fix (horovod PR
  #4302) is unmerged and $HVD_VERSION is Horovod's last release. 2.19 and 2.20
  have not been tried. official_bench itself supports tensorflow>=2.18,<2.22.
  Use OB_HVD_TF_VERSION=2.18.1 OB_HVD_TFKERAS_VERSION=2.18.0 (the defaults),
  or set OB_HVD_FORCE=1 to try $TF_VERSION anyway."
      if [ "${OB_HVD_FORCE:-0}" = 1 ]; then
        say "WARNING: $msg"
        say "OB_HVD_FORCE=1: going on with TensorFlow $TF_VERSION"
      else
        die "$msg"
      fi
      ;;
  esac
  if [ "$tf_minor" != "$tfk_minor" ]; then
    die "tf-keras $TFKERAS_VERSION does not match tensorflow $TF_VERSION: they must be the same minor release (tf-keras pins tensorflow>=X.Y,<X.Y+1)."
  fi
}

check_base_python() {
  command -v "$BASE_PYTHON" >/dev/null 2>&1 || die "base Python '$BASE_PYTHON' not found (set PYTHON=/path/to/python3)"
  PY_MM=$("$BASE_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
    || die "cannot run '$BASE_PYTHON'"
  case "$PY_MM" in
    3.9|3.10|3.11|3.12) ;;
    *)
      if [ "${OB_HVD_FORCE:-0}" = 1 ]; then
        say "WARNING: Python $PY_MM: TensorFlow 2.18 ships wheels for Python 3.9-3.12 only (OB_HVD_FORCE=1: going on)"
      else
        die "Python $PY_MM ($BASE_PYTHON): TensorFlow 2.18 ships wheels for Python 3.9-3.12 only. Set PYTHON=python3.11 (or another 3.9-3.12), or OB_HVD_FORCE=1."
      fi
      ;;
  esac
}

find_nvcc() {
  if [ -n "${HOROVOD_CUDA_HOME:-}" ] && [ -x "$HOROVOD_CUDA_HOME/bin/nvcc" ]; then
    echo "$HOROVOD_CUDA_HOME/bin/nvcc"; return 0
  fi
  command -v nvcc 2>/dev/null && return 0
  [ -x /usr/local/cuda/bin/nvcc ] && { echo /usr/local/cuda/bin/nvcc; return 0; }
  return 1
}

# Sets NCCL_DESC and, when only a shared libnccl exists, NCCL_LINK=SHARED.
find_nccl() {
  NCCL_DESC= NCCL_LINK=
  if [ -n "${HOROVOD_NCCL_HOME:-}${HOROVOD_NCCL_INCLUDE:-}${HOROVOD_NCCL_LIB:-}" ]; then
    NCCL_DESC="from HOROVOD_NCCL_HOME/INCLUDE/LIB"; return 0
  fi
  local inc="" lib="" d
  for d in /usr/include /usr/local/include /usr/local/cuda/include /usr/local/nccl/include; do
    [ -f "$d/nccl.h" ] && { inc=$d; break; }
  done
  [ -n "$inc" ] || return 1
  for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib \
           /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nccl/lib /usr/local/lib; do
    if [ -f "$d/libnccl_static.a" ]; then lib="$d/libnccl_static.a"; break; fi
    if [ -e "$d/libnccl.so" ]; then lib="$d/libnccl.so"; NCCL_LINK=SHARED; break; fi
  done
  [ -n "$lib" ] || return 1
  NCCL_DESC="$inc/nccl.h, $lib"
  return 0
}

decide_gpu() {
  local want=${OB_HVD_GPU:-auto} nvcc=""
  GPU_OPS=none
  GPU_REASON=""
  if [ -n "${HOROVOD_GPU_OPERATIONS:-}" ]; then
    GPU_OPS=$HOROVOD_GPU_OPERATIONS
    GPU_REASON="HOROVOD_GPU_OPERATIONS=$HOROVOD_GPU_OPERATIONS set by the caller"
  else
    case "$want" in
      cpu) GPU_REASON="OB_HVD_GPU=cpu" ;;
      auto|nccl)
        if nvcc=$(find_nvcc) && find_nccl; then
          GPU_OPS=NCCL
          GPU_REASON="nvcc: $nvcc; NCCL: $NCCL_DESC"
        elif [ "$want" = nccl ]; then
          die "OB_HVD_GPU=nccl but nvcc${nvcc:+ ($nvcc)} and NCCL (nccl.h + libnccl_static.a or libnccl.so) were not both found; set HOROVOD_CUDA_HOME / HOROVOD_NCCL_HOME"
        else
          GPU_REASON="no CUDA+NCCL found${nvcc:+ (nvcc: $nvcc, but no NCCL)}: CPU/Gloo only"
        fi
        ;;
      *) die "OB_HVD_GPU must be auto, nccl or cpu (got '$want')" ;;
    esac
  fi
  if [ -n "${OB_HVD_TF_EXTRAS+set}" ]; then
    TF_EXTRAS=$OB_HVD_TF_EXTRAS
  elif [ "$GPU_OPS" != none ] && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    TF_EXTRAS=and-cuda
  else
    TF_EXTRAS=
  fi
}

expected_marker() {
  cat <<EOF
recipe=$RECIPE
python=$PY_MM
tensorflow=$TF_VERSION
tf-keras=$TFKERAS_VERSION
tensorflow-extras=$TF_EXTRAS
horovod=$HVD_VERSION
gpu-operations=$GPU_OPS
EOF
}

marker_matches() {
  [ -f "$MARKER" ] && [ -x "$VENV/bin/python" ] && [ -x "$VENV/bin/horovodrun" ] || return 1
  # The marker's first lines are the versions; a trailing verified= line follows.
  [ "$(grep -v '^verified=' "$MARKER")" = "$(expected_marker)" ]
}

venv_pkg_version() {
  "$VENV/bin/python" -c 'import sys, importlib.metadata as m
try: print(m.version(sys.argv[1]))
except m.PackageNotFoundError: print("none")' "$1"
}

# ---------------------------------------------------------------- main
check_tf_version
check_base_python
decide_gpu

if [ "$MODE" = check ]; then
  if marker_matches; then echo "complete: $VENV"; exit 0; fi
  echo "not complete: $VENV"; exit 1
fi

mkdir -p "$(dirname "$VENV")"
# One installer at a time per venv (CI and a developer may share the cache).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$VENV.lock"
  if ! flock -n 9; then
    say "another install_horovod.sh holds $VENV.lock; waiting for it (up to 1 h)"
    flock -w 3600 9 || die "timed out waiting for $VENV.lock"
  fi
fi

say "venv: $VENV"
say "tensorflow==$TF_VERSION${TF_EXTRAS:+ [$TF_EXTRAS]} tf-keras==$TFKERAS_VERSION horovod==$HVD_VERSION, Python $PY_MM ($BASE_PYTHON)"
say "GPU operations: $GPU_OPS ($GPU_REASON)"

# -- 1: venv
step 1 "Python venv"
COMPLETE=0
if [ "$FORCE_REBUILD" = 1 ] && [ -e "$VENV" ]; then
  [ -f "$VENV/pyvenv.cfg" ] || die "--force: $VENV exists but is not a venv (no pyvenv.cfg); not deleting it"
  say "  --force: deleting $VENV"
  rm -rf "$VENV"
fi
if marker_matches; then
  COMPLETE=1
  step_done "reusing complete venv ($(grep '^verified=' "$MARKER" || echo 'verified=?'))"
else
  if [ -e "$VENV" ]; then
    [ -f "$VENV/pyvenv.cfg" ] || die "$VENV exists but is not a venv (no pyvenv.cfg); remove it or set OB_HOROVOD_VENV"
    if [ -f "$MARKER" ] || ! "$VENV/bin/python" -c 'import sys; sys.exit(0 if "%d.%d" % sys.version_info[:2] == sys.argv[1] else 1)' "$PY_MM" 2>/dev/null; then
      # Built for other versions (Horovod must be rebuilt against the new
      # TensorFlow) or broken: start again.
      say "  $VENV was built for other versions or is broken; recreating it"
      [ -f "$MARKER" ] && sed 's/^/    was: /' "$MARKER"
      rm -rf "$VENV"
    else
      say "  reusing incomplete venv from an earlier run (pip skips what is installed)"
    fi
  fi
  if [ ! -e "$VENV" ]; then
    "$BASE_PYTHON" -m venv "$VENV" || die "'$BASE_PYTHON -m venv $VENV' failed (on Debian: apt-get install python3-venv)"
  fi
  step_done
fi
mkdir -p "$LOG_DIR"
PIP=("$VENV/bin/python" -m pip)
export PATH="$VENV/bin:$PATH"
export PIP_DISABLE_PIP_VERSION_CHECK=1

# -- 2: TensorFlow and build requirements
step 2 "tensorflow==$TF_VERSION, tf-keras==$TFKERAS_VERSION and build tools"
if [ "$COMPLETE" = 1 ]; then
  step_done "skipped: already installed"
else
  LOG="$LOG_DIR/pip-tensorflow.log"; : >"$LOG"
  reqs=("tensorflow${TF_EXTRAS:+[$TF_EXTRAS]}==$TF_VERSION" "tf-keras==$TFKERAS_VERSION"
        pyyaml absl-py numpy pytest packaging "setuptools>=64" wheel)
  if command -v cmake >/dev/null 2>&1 && [ "$(dirname "$(command -v cmake)")" != "$VENV/bin" ]; then
    say "  cmake: $(command -v cmake) ($(cmake --version | head -n 1))"
  else
    reqs+=("cmake>=3.13")
    say "  cmake: not on PATH, installing it from PyPI into the venv"
  fi
  say "  pip install ${reqs[*]}  (log: $LOG)"
  if ! run_logged "$LOG" "${PIP[@]}" install "${reqs[@]}"; then
    show_log_tail "$LOG"
    die "installing TensorFlow failed (log: $LOG)"
  fi
  got=$(venv_pkg_version tensorflow)
  [ "$got" = "$TF_VERSION" ] || die "tensorflow $got installed, expected $TF_VERSION"
  step_done "tensorflow $got, tf-keras $(venv_pkg_version tf-keras)"
fi

# -- 3: Horovod
step 3 "build horovod==$HVD_VERSION from source (takes minutes)"
if [ "$COMPLETE" = 1 ]; then
  step_done "skipped: already built"
else
  LOG="$LOG_DIR/build-horovod.log"; : >"$LOG"
  hvd_env=(HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1
           HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 "MAKEFLAGS=-j$JOBS")
  if [ "$GPU_OPS" != none ]; then
    hvd_env+=("HOROVOD_GPU_OPERATIONS=$GPU_OPS")
    [ -n "${NCCL_LINK:-}" ] && [ -z "${HOROVOD_NCCL_LINK:-}" ] && hvd_env+=("HOROVOD_NCCL_LINK=$NCCL_LINK")
  fi
  # --force-reinstall: an earlier, unverified build may be installed.
  # --no-deps here, then a plain install below for horovod's own requirements.
  say "  ${hvd_env[*]} pip install -v --no-build-isolation --no-cache-dir --no-binary horovod --force-reinstall --no-deps horovod==$HVD_VERSION"
  say "  log: $LOG"
  rc=0
  run_logged "$LOG" timeout -k 30 "$BUILD_TIMEOUT" env "${hvd_env[@]}" \
      "${PIP[@]}" install -v --no-build-isolation --no-cache-dir --no-binary horovod \
      --force-reinstall --no-deps "horovod==$HVD_VERSION" || rc=$?
  if [ "$rc" -ne 0 ]; then
    show_log_tail "$LOG"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
      die "building horovod $HVD_VERSION took more than ${BUILD_TIMEOUT}s and was stopped (raise OB_HVD_BUILD_TIMEOUT); full log: $LOG"
    fi
    die "building horovod $HVD_VERSION against tensorflow $TF_VERSION failed (exit $rc); full log: $LOG"
  fi
  # Horovod's own run-time requirements (cloudpickle, psutil, pyyaml, packaging).
  if ! run_logged "$LOG" "${PIP[@]}" install "horovod==$HVD_VERSION"; then
    show_log_tail "$LOG"
    die "installing horovod's requirements failed (log: $LOG)"
  fi
  got=$(venv_pkg_version tensorflow)
  [ "$got" = "$TF_VERSION" ] || die "installing horovod changed tensorflow to $got (expected $TF_VERSION)"
  step_done "horovod $(venv_pkg_version horovod)"
fi

# -- 4: official_bench itself
step 4 "install official_bench (editable) from $REPO_ROOT"
project_stamp() {
  echo "root=$REPO_ROOT"
  cat "$REPO_ROOT/setup.cfg" "$REPO_ROOT/pyproject.toml" 2>/dev/null | cksum
}
if [ -f "$PROJECT_MARKER" ] && [ "$(cat "$PROJECT_MARKER")" = "$(project_stamp)" ]; then
  step_done "skipped: already installed from this checkout"
else
  LOG="$LOG_DIR/pip-project.log"; : >"$LOG"
  # Pin what the Horovod build depends on, so the project's own requirements
  # (tensorflow>=2.18,<2.22, tf-keras>=2.18,<2.22) cannot move them.
  CONSTRAINTS="$VENV/ob-constraints.txt"
  printf 'tensorflow==%s\ntf-keras==%s\nhorovod==%s\n' "$TF_VERSION" "$TFKERAS_VERSION" "$HVD_VERSION" >"$CONSTRAINTS"
  if ! run_logged "$LOG" "${PIP[@]}" install --no-build-isolation -c "$CONSTRAINTS" -e "$REPO_ROOT[test]"; then
    show_log_tail "$LOG"
    die "installing official_bench into the venv failed (log: $LOG)"
  fi
  got=$(venv_pkg_version tensorflow)
  [ "$got" = "$TF_VERSION" ] || die "installing official_bench changed tensorflow to $got (expected $TF_VERSION)"
  got=$(venv_pkg_version tf-keras)
  [ "$got" = "$TFKERAS_VERSION" ] || die "installing official_bench changed tf-keras to $got (expected $TFKERAS_VERSION)"
  rm -f "$PROJECT_MARKER"
  project_stamp >"$PROJECT_MARKER"
  step_done "official_bench $(venv_pkg_version official_bench); tensorflow still $TF_VERSION"
fi

# -- 5: verify
step 5 "verify: horovodrun --check-build and a 2-process Gloo smoke run"
if [ "$COMPLETE" = 1 ] && [ "$VERIFY" != always ]; then
  step_done "skipped: verified when built (use --verify to run the checks again)"
else
  LOG="$LOG_DIR/check-build.log"; : >"$LOG"
  if ! run_logged "$LOG" timeout -k 10 300 env TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=2 \
      "$VENV/bin/horovodrun" --check-build; then
    show_log_tail "$LOG"
    die "horovodrun --check-build failed (log: $LOG)"
  fi
  sed -n '/Available Frameworks/,$p' "$LOG" | sed '/^[[:space:]]*$/d; s/^/    /'
  # Horovod 0.28.1 lists "[X] PyTorch" even when built without it: its check
  # only imports horovod.torch, which loads without torch or its library.
  say "  (check-build's PyTorch line is not meaningful: horovod was built without PyTorch)"
  missing=()
  grep -q '\[X\] TensorFlow' "$LOG" || missing+=(TensorFlow)
  grep -q '\[X\] Gloo' "$LOG" || missing+=(Gloo)
  if [ "$GPU_OPS" = NCCL ]; then grep -q '\[X\] NCCL' "$LOG" || missing+=(NCCL); fi
  [ "${#missing[@]}" -eq 0 ] || die "horovodrun --check-build does not list: ${missing[*]} (log: $LOG)"

  LOG="$LOG_DIR/smoke.log"; : >"$LOG"
  say "  horovodrun -np 2 -H localhost:2 --gloo python scripts/horovod_smoke.py  (log: $LOG)"
  # CUDA_VISIBLE_DEVICES= keeps the smoke on the CPU even on a GPU machine.
  if ! run_logged "$LOG" timeout -k 10 "$SMOKE_TIMEOUT" env TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=2 \
      CUDA_VISIBLE_DEVICES= "$VENV/bin/horovodrun" -np 2 -H localhost:2 --gloo \
      "$VENV/bin/python" "$SMOKE"; then
    show_log_tail "$LOG"
    die "the 2-process Horovod smoke run failed (log: $LOG)"
  fi
  grep -q 'horovod smoke OK' "$LOG" || { show_log_tail "$LOG"; die "smoke run printed no 'horovod smoke OK' line (log: $LOG)"; }
  grep -E 'rank [0-9]+/[0-9]+:|horovod smoke OK' "$LOG" | sed 's/^/    /'
  { expected_marker; echo "verified=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; } >"$MARKER.tmp"
  mv "$MARKER.tmp" "$MARKER"
  step_done
fi

say "complete in $(fmt_secs $((SECONDS - T0))). venv: $VENV"
say "run with: TF_USE_LEGACY_KERAS=1 $VENV/bin/horovodrun -np 2 -H localhost:2 --gloo python ..."
echo "$VENV"
