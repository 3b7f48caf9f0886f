"""Scaling model: the speedup the measured communication predicts.

Bounds for each multi-device case from its 1n1g compute time T1 and its
all-reduce benchmark (gradient all-reduce A, k small collectives of latency
L, compute-after-wait penalty p): no overlap, step = p T1 + A + k L; full
overlap, step = max(T1, A) + k L. The measured speedup is placed against
them, within the runs' own spread, and the gap is put in words. The model,
its reasons and its validation: docs/scaling_model.md.
"""

from official_bench.extract import allreduce_logs, cases

TOLERANCE = 0.03  # relative: within this of a bound counts as at the bound
# Relative: a device's step back to back beside the all-reduce this far
# from the 1n1g step is named where a case misses its bounds.
SPEED_DIFFERENCE = 0.2


def gradient_allreduce(rows):
    """The row of the model's gradient all-reduce to use, or None."""
    model = [r for r in rows if r.get("model")]
    for r in model:
        if r["dtype"] == "float32":
            return r
    return model[0] if model else None


def latency_row(rows):
    """The row of the small all-reduce's latency with its per-step count,
    or None (float32 preferred, as for the gradient)."""
    rows = [r for r in rows if r.get("latency") and
            r.get("per_step") is not None]
    for r in rows:
        if r["dtype"] == "float32":
            return r
    return rows[0] if rows else None


def charged_penalty(measured):
    """p as the model charges it: never below 1 (module docstring)."""
    return max(1.0, measured)


def no_overlap_step(t1, allreduce, tail, penalty):
    """The slowest step the model allows: p T1 + A + k L."""
    return penalty * t1 + allreduce + tail


def bounds(t1, allreduce, devices, tail=0.0, penalty=1.0):
    """(lower, upper) speedup against one device; tail: the step's small
    collectives (k x L), paid after compute in either case; penalty: p,
    the no-overlap step's compute is p T1."""
    lower = devices * t1 / no_overlap_step(t1, allreduce, tail, penalty)
    upper = min(float(devices), devices * t1 / (max(t1, allreduce) + tail))
    return lower, upper


def spread(case_cv, base_cv, t1, wait):
    """The run-to-run spread the verdict allows twice (module docstring):
    case_cv, base_cv: the case's and the 1n1g speed's coefficients of
    variation across runs (None with one run); wait: the case's
    compute_waits entry, whose per_run give each benchmark run's
    no-overlap step with the 1n1g T1."""
    steps = [no_overlap_step(t1, r["in_step"]["gradient_seconds"],
                             r["in_step"]["small_seconds"],
                             charged_penalty(r["penalty"]))
             for r in (wait or {}).get("per_run") or () if r.get("in_step")]
    parts = [case_cv or 0.0, base_cv or 0.0, cases.spread(steps)["cv"] or 0.0]
    return sum(x * x for x in parts) ** 0.5


def rate_text(gbps):
    """9.3 -> '9.3 GB/s', 0.0117 -> '11.7 MB/s' (1e9 and 1e6 bytes)."""
    return "%.3g GB/s" % gbps if gbps >= 1 else "%.3g MB/s" % (gbps * 1e3)


# The communication's share of the 1-device step (c / T1) from which each
# label applies, highest first; below the last, "compute-bound".
# docs/scaling_model.md, "The label".
SHARE_LABELS = ((1.0, "{}-dominated"), (0.5, "{}-heavy"),
                (0.05, "mostly compute"))


def _weight(fraction, latency_bound):
    """The label for the communication's share of the 1-device step
    (SHARE_LABELS); latency_bound names the round trips, not the
    gradient, as the larger part of it."""
    kind = "latency" if latency_bound else "communication"
    for share, words in SHARE_LABELS:
        if fraction >= share:
            return words.format(kind)
    return "compute-bound"


def _communication_text(row, a, small, latency, tail, t1, in_step):
    """What the step spends communicating, in words; in_step: a and tail
    were timed in training's pattern (else a is the row's time alone and
    tail is small x latency)."""
    gradient = ("all-reduce of %s at %s bus bandwidth takes %.1f ms"
                % (allreduce_logs.size_text(row["nbytes"]),
                   rate_text(row["busbw_gbps"]), row["seconds"] * 1e3))
    if in_step:
        gradient += (" alone, %.1f ms on average between compute steps as "
                     "in training" % (a * 1e3))
    if not small:
        return "%s: %s, %.0f%% of the 1-device step (%.1f ms)" % (
            _weight(a / t1, False), gradient, 100 * a / t1, t1 * 1e3)
    latency_bound = tail > a
    each = ("(%.2f ms each alone)" % (latency * 1e3) if in_step else
            "x %.2f ms" % (latency * 1e3))
    where = " in training's pattern" if in_step else ""
    parts = ("%d collectives %s = %.1f ms per step%s (the step's small "
             "all-reduces, such as metric results), and the gradient's %s"
             % (small, each, tail * 1e3, where, gradient)
             if latency_bound else
             "%s, and %d small collectives %s add %.1f ms%s" % (
                 gradient, small, each, tail * 1e3, where))
    return "%s: %s; together %.0f%% of the 1-device step (%.1f ms)" % (
        _weight((a + tail) / t1, latency_bound), parts,
        100 * (a + tail) / t1, t1 * 1e3)


def _wait_text(wait, penalty, t1):
    """The compute-after-a-wait measurement in words ('' without one)."""
    if not wait:
        return ""
    text = ("; compute after a %.1f ms wait took %.2fx the back-to-back "
            "step (measured beside the all-reduce)" % (
                wait["gap_seconds"] * 1e3, wait["penalty"]))
    if penalty > 1:
        return text + ", so no overlap charges %.1f ms of compute" % (
            penalty * t1 * 1e3)
    return text + ", so no overlap charges the 1n1g step's compute"


def _speed_text(wait, t1, verdict):
    """Where a case misses its bounds and the device's own step beside the
    all-reduce (the chief's, back to back) is more than SPEED_DIFFERENCE
    from the 1n1g step the bounds use, the two in words ('' otherwise)."""
    back = (wait or {}).get("back_to_back_seconds")
    if not back:
        return ""
    ratio = back / t1
    if verdict == "below" and ratio > 1 + SPEED_DIFFERENCE:
        why = ("the devices computed slower here than in the 1n1g run "
               "(other load, clocks, or processes sharing a machine), "
               "which the bounds do not charge")
    elif verdict == "above" and ratio < 1 - SPEED_DIFFERENCE:
        why = ("the 1n1g step is longer than the device's compute (input "
               "or host overhead the 1n1g run paid, or a slower machine "
               "then)")
    else:
        return ""
    return ("; beside the all-reduce a device computed the step back to "
            "back in %.1f ms, %.2fx the 1n1g step (%.1f ms): %s"
            % (back * 1e3, ratio, t1 * 1e3, why))


def explain(case, measured, t1, row, devices, latency=None, wait=None,
            run_spread=0.0):
    """The model's numbers and a sentence for one case; latency: the
    small all-reduce's row (seconds each, per_step of them), or None;
    wait: the case's compute-after-a-wait measurement (penalty,
    gap_seconds), or None; run_spread: spread(), relative."""
    small = latency["per_step"] if latency else 0
    lat = latency["seconds"] if latency else 0.0
    in_step = (wait or {}).get("in_step")
    if in_step:  # timed as training runs it (allreduce/in_step.py)
        a, tail = in_step["gradient_seconds"], in_step["small_seconds"]
    else:
        a, tail = row["seconds"], small * lat
    penalty = charged_penalty(wait["penalty"]) if wait else 1.0
    lower, upper = bounds(t1, a, devices, tail, penalty)
    slowest = no_overlap_step(t1, a, tail, penalty)
    text = ("%s%s; predicted speedup %.2f (no overlap) to %.2f (full "
            "overlap)" % (_communication_text(row, a, small, lat, tail, t1,
                                              bool(in_step)),
                          _wait_text(wait, penalty, t1), lower, upper))
    verdict = None
    tolerance = max(TOLERANCE, 2 * run_spread)
    within = ("within %.0f%%, twice the runs' spread" % (100 * tolerance)
              if tolerance > TOLERANCE else
              "within %.0f%%" % (100 * TOLERANCE))
    if measured is not None:
        step = devices * t1 / measured  # the N-device step the speed implies
        if measured < lower * (1 - tolerance):
            verdict = "below"
            text += ("; measured %.2f is below (not %s): the step takes "
                     "%.1f ms, "
                     "%.1f ms more than compute plus all the communication "
                     "(input pipeline, host overhead, stragglers or "
                     "contention)" % (measured, within, step * 1e3,
                                      (step - slowest) * 1e3))
        elif measured > upper * (1 + tolerance):
            verdict = "above"
            text += ("; measured %.2f is above (not %s): the step (%.1f ms) "
                     "is shorter than the model allows, so the 1n1g "
                     "baseline ran slower per device than this case" % (
                         measured, within, step * 1e3))
        else:
            verdict = "inside"
            hidden = (slowest - step) / min(a, t1) if a > 0 else 1.0
            if hidden <= 0 or measured <= lower * (1 + tolerance):
                # as close to the bound as the measurements can tell
                text += ("; measured %.2f is at the no-overlap bound (%s): "
                         "no measurable part of the all-reduce is hidden "
                         "behind compute" % (measured, within))
            else:
                text += ("; measured %.2f is inside: about %.0f%% of the "
                         "all-reduce is hidden behind compute" % (
                             measured, 100 * min(1.0, hidden)))
    text += _speed_text(wait, t1, verdict)
    return {"compute_ms": t1 * 1e3, "allreduce_ms": row["seconds"] * 1e3,
            "allreduce_in_step_ms": a * 1e3 if in_step else None,
            "small_in_step_ms": tail * 1e3 if in_step else None,
            "allreduce_bytes": row["nbytes"], "allreduce_dtype": row["dtype"],
            "busbw_gbps": row["busbw_gbps"], "small_collectives": small,
            "latency_ms": lat * 1e3, "compute_penalty": penalty,
            "compute_wait": {"gap_ms": wait["gap_seconds"] * 1e3,
                             "measured_penalty": wait["penalty"],
                             "back_to_back_ms": _ms(
                                 wait.get("back_to_back_seconds")),
                             "runs": wait.get("runs")} if wait else None,
            "lower": lower, "upper": upper,
            "measured": measured, "verdict": verdict,
            "run_spread": run_spread, "tolerance": tolerance,
            "explanation": "%s %s" % (case, text)}


def _ms(seconds):
    return None if seconds is None else seconds * 1e3


def apply(result, table, waits=None):
    """Adds the model to every multi-device case of every section that has
    a 1n1g median and an all-reduce of the model's gradient in the case;
    waits: case -> compute-after-a-wait (allreduce_logs.compute_waits).
    Returns the explanations (also under each entry's scaling_model)."""
    texts = []
    for model_result in result.values():
        base = model_result.get("1n1g")
        if not base or not base.get("median_speed_unrounded"):
            continue
        t1 = base["batch_size_per_device"] / base["median_speed_unrounded"]
        for case, entry in model_result.items():
            devices = entry.get("num_devices") or 0
            rows = table.get(case) or []
            row = gradient_allreduce(rows)
            if devices < 2 or row is None:
                continue
            measured = entry.get("speedup_unrounded") \
                if entry.get("speedup_baseline") == "1n1g" else None
            wait = (waits or {}).get(case)
            model = explain(case, measured, t1, row, devices,
                            latency_row(rows), wait,
                            spread(entry.get("cv"), base.get("cv"), t1, wait))
            entry["scaling_model"] = model
            entry["speedup_bounds"] = {"lower": round(model["lower"], 4),
                                       "upper": round(model["upper"], 4)}
            texts.append(model["explanation"])
        if any("speedup_bounds" in e for e in model_result.values()):
            base["speedup_bounds"] = {"lower": 1.0, "upper": 1.0}
    return texts
