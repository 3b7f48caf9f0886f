"""The launcher's plan error: bad arguments or config (exit CONFIG).

Raised by every step that builds the plan (plan.py, gpu_assign.py,
horovodrun.py, overrides.py); its own module so those steps need not import
plan.py, which imports them.
"""


class PlanError(ValueError):
    """Bad arguments or config (exit_status.CONFIG)."""
