# Shared by run_single_node.sh, run_two_node.sh and run_multi_node.sh:
#   source scripts/lib/launch.sh; ob_launch single|two|multi "$@"
# Everything else lives in the Python launcher (official_bench/launch/), which
# never imports TensorFlow; docs/run_scripts.md lists every knob.
#
# The interpreter, first found wins: PYTHON; the activated venv
# ($VIRTUAL_ENV/bin/python); the repository's own .venv/bin/python (what
# `make bench` / `make test` create); python3 from PATH. It runs the launcher
# and, unless --python says otherwise, the trainer; the launcher checks that
# it can import the trainer before the first run (with LAUNCHER=horovod the
# ranks run the Horovod venv's python instead: HOROVOD_VENV, `make horovod`).
# OB_LAUNCH_PYTHON / OB_LAUNCH_PYTHON_FROM tell the launcher which one and
# why, for its messages. The repository root goes first on PYTHONPATH so this
# checkout's package is used from any working directory.
ob_launch() {
    local root py from
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    if [ -n "${PYTHON:-}" ]; then
        py="${PYTHON}" from="PYTHON"
    elif [ -n "${VIRTUAL_ENV:-}" ] && [ -x "${VIRTUAL_ENV}/bin/python" ]; then
        py="${VIRTUAL_ENV}/bin/python" from="VIRTUAL_ENV"
    elif [ -x "${root}/.venv/bin/python" ]; then
        py="${root}/.venv/bin/python" from=".venv"
    else
        py="$(command -v python3 || true)" from="PATH"
        if [ -z "${py}" ]; then
            echo "error: no python3 on PATH and no ${root}/.venv: run" \
                 "\`make bench\` in ${root} to create .venv, or set PYTHON=" >&2
            return 2  # exit_status.CONFIG
        fi
    fi
    local found
    found="$(command -v -- "${py}" 2>/dev/null || true)"
    if [ -z "${found}" ] || [ -d "${found}" ] || [ ! -x "${found}" ]; then
        echo "error: ${from}='${py}' is not an executable Python" \
             "interpreter (missing, a directory or not executable): set" \
             "PYTHON= to one, or unset it to use ${root}/.venv (\`make" \
             "bench\` creates it)" >&2
        return 2  # exit_status.CONFIG
    fi
    OB_LAUNCH_PYTHON="${py}" OB_LAUNCH_PYTHON_FROM="${from}" \
    PYTHONPATH="${root}${PYTHONPATH:+:${PYTHONPATH}}" \
        exec "${py}" -m official_bench.launch "$@"
}
