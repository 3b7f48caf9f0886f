# Shared by run_single_node.sh, run_two_node.sh and run_multi_node.sh:
#   source scripts/lib/launch.sh; ob_launch single|two|multi "$@"
# Everything else lives in the Python launcher (official_bench/launch/), which
# never imports TensorFlow; `bash run_single_node.sh --help` lists every knob.
# PYTHON picks the interpreter (default python3); it must have the trainer's
# dependencies installed (with LAUNCHER=horovod the ranks run the Horovod
# venv's python instead: HOROVOD_VENV, `make horovod`). The repository root goes first on PYTHONPATH so this
# checkout's package is used from any working directory.
ob_launch() {
    local root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    PYTHONPATH="${root}${PYTHONPATH:+:${PYTHONPATH}}" \
        exec "${PYTHON:-python3}" -m official_bench.launch "$@"
}
