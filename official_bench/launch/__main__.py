"""CLI:
python -m official_bench.launch {single,two,multi} [BATCH] [DTYPE] [TEST_NUM].

See `--help` (settings.py lists every knob) and the package docstring. The
command line only: the settings are read here, the sweep's start-up is
sweep_start.py's.

Only standard-library modules are imported before the launcher knows its
own Python can import the rest (plan needs PyYAML through config): a fresh
clone's python3 then gets one clear line instead of a traceback, and on a
two/multi-node run that node still tells node 0 through the barrier
(launcher_python.py).
"""

from __future__ import annotations

import sys
from typing import Mapping, Optional, Sequence

from official_bench.launch import launcher_python, settings as settings_lib


def main(argv: Optional[Sequence[str]] = None,
         environ: Optional[Mapping[str, str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        settings = settings_lib.parse(argv, environ)
    except settings_lib.SettingsError as e:
        print(f"error: {e.script + ': ' if e.script else ''}{e}",
              file=sys.stderr)
        return e.status
    try:
        from official_bench.launch import sweep_start
    except ImportError as e:
        return launcher_python.cannot_run(settings, e)
    return sweep_start.start(settings)


if __name__ == "__main__":
    sys.exit(main())
