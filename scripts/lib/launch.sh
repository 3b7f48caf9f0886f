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
# why, and with PYTHON set OB_LAUNCH_PYTHON_UNSET[_FROM] which one unsetting
# it would give, for its messages. The repository root goes first on PYTHONPATH so this
# checkout's package is used from any working directory.
# What the chain gives without PYTHON, in _ob_py and _ob_from (empty _ob_py:
# nothing found).
_ob_unset_choice() {
    local root="$1"
    if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "${VIRTUAL_ENV}/bin/python" ]; then
        _ob_py="${VIRTUAL_ENV}/bin/python" _ob_from="VIRTUAL_ENV"
    elif [ -x "${root}/.venv/bin/python" ]; then
        _ob_py="${root}/.venv/bin/python" _ob_from=".venv"
    else
        _ob_py="$(command -v python3 || true)" _ob_from="PATH"
    fi
}

ob_launch() {
    local root py from unset_py="" unset_from=""
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    _ob_unset_choice "${root}"
    if [ -n "${PYTHON:-}" ]; then
        py="${PYTHON}" from="PYTHON"
        unset_py="${_ob_py}" unset_from="${_ob_from}"
    else
        py="${_ob_py}" from="${_ob_from}"
        if [ -z "${py}" ]; then
            echo "error: no python3 on PATH and no ${root}/.venv: run" \
                 "\`make bench\` in ${root} to create .venv, or set PYTHON=" >&2
            return 2  # exit_status.CONFIG
        fi
    fi
    local found
    found="$(command -v -- "${py}" 2>/dev/null || true)"
    if [ -z "${found}" ] || [ -d "${found}" ] || [ ! -x "${found}" ]; then
        local instead="${root}/.venv (\`make bench\` creates it)"
        if [ "${unset_from}" = "VIRTUAL_ENV" ]; then
            instead="${unset_py} (the activated venv, VIRTUAL_ENV)"
        fi
        echo "error: ${from}='${py}' is not an executable Python" \
             "interpreter (missing, a directory or not executable): set" \
             "PYTHON= to one, or unset it to use ${instead}" >&2
        return 2  # exit_status.CONFIG
    fi
    OB_LAUNCH_PYTHON="${py}" OB_LAUNCH_PYTHON_FROM="${from}" \
    OB_LAUNCH_PYTHON_UNSET="${unset_py}" \
    OB_LAUNCH_PYTHON_UNSET_FROM="${unset_from}" \
    PYTHONPATH="${root}${PYTHONPATH:+:${PYTHONPATH}}" \
        exec "${py}" -m official_bench.launch "$@"
}
