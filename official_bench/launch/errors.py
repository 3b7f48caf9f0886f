"""The launcher's plan error: bad arguments or config (exit CONFIG), and
a dry run's note for a problem that stops a real run.

Raised by every step that builds the plan (plan.py, gpu_assign.py,
horovodrun.py, overrides.py); its own module so those steps need not import
plan.py, which imports them.
"""


class PlanError(ValueError):
    """Bad arguments or config (exit_status.CONFIG)."""


def dry_run_note(problem: str, status: int) -> str:
    """A dry run's note for a problem that stops a real run with `status`
    (the dry run shows the plan anyway)."""
    return f"{problem}; a real run stops here (exit {status})"
