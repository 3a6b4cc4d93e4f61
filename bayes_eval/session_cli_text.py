"""The text helpers the session commands share (``session status``, ``session report``, the
team commands): numbers as the user reads them, the CLT check's line, the sentences on the
estimate outside its interval and on the allowed range, JSON output, and opening the session
named on the command line.  Importing this module is cheap (no JAX).
"""
from __future__ import annotations

import json
import math

__all__ = ["outside_note", "clt_check_line", "fmt", "jsonable", "print_json", "open_session", "allowed_line"]


def outside_note(rows, median_ref: str = "") -> str | None:
    """Where the design's estimate of a component lies outside its Bayesian interval (rows
    with ``component``, ``estimate``, ``bayes_lower``, ``bayes_upper``, ``bayes_median``:
    ``session status``'s components or summary.csv's records), the sentence that says so
    for the first such component, naming the posterior median; None where none does.  Outside by
    less than the printed digits is not outside (an estimate 0.0000 beside a bound 8e-246 was)."""
    def num(v):
        return v is not None and math.isfinite(v)

    away = [r for r in rows if num(r.get("estimate")) and num(r.get("bayes_lower")) and num(r.get("bayes_upper"))
            and not r["bayes_lower"] - 5e-5 <= r["estimate"] <= r["bayes_upper"] + 5e-5]   # as printed (4 digits)
    if not away:
        return None
    r = away[0]
    return (f"the design's estimate of {r['component']} ({fmt(r['estimate'])}) lies outside its Bayesian interval; "
            f"the posterior median is {fmt(r.get('bayes_median'))}{median_ref}. The estimate rests on the items "
            f"drawn, the interval also on the items nobody labeled"
            + (f" ({len(away) - 1} more component(s) alike)" if len(away) > 1 else ""))


def few_labels_line(st) -> str | None:
    """Why the confidence sequence is undefined, where a class has fewer than
    ``results.MIN_CLASS_LABELS`` labels (a rare class: its name from the session's label map;
    on a binary pool without one, negatives / positives); None where it is shown or no class is short."""
    from .results import MIN_CLASS_LABELS

    per_class = st.get("labels_per_class") or []
    if not per_class or min(per_class) >= MIN_CLASS_LABELS:
        return None
    if not any(c.get("cs_lower") is None for c in st.get("estimates", [])):
        return None
    names = {int(v): str(k) for k, v in ((st.get("pool") or {}).get("read") or {}).get("label_map", {}).items()}
    if not names and len(per_class) == 2:
        names = {0: "negatives", 1: "positives"}
    few = ", ".join(f"{names.get(c, f'class {c}')} {n}" for c, n in enumerate(per_class) if n < MIN_CLASS_LABELS)
    return (f"the confidence sequence waits for at least {MIN_CLASS_LABELS} labels of every class (so far: {few}) "
            "and is undefined until then")


def posterior_reads(oracle: str = "deterministic") -> str:
    """What the Bayesian interval is, in the status's and the report's words: the finite-pool
    posterior under a deterministic oracle; under a stochastic one the posterior of the oracle's
    expected answer, every label an observation (``posterior.complete_pool_draws``)."""
    if oracle == "stochastic":
        return ("the posterior of the oracle's expected answer, every label an observation of its stratum: it "
                "accounts for the strata the draws have barely reached")
    return "the finite-pool posterior: it accounts for the items nobody labeled"


def clt_check_line(comps, bayes_shown: bool | None = None, labels: int | None = None, posterior: bool = True,
                   oracle: str = "deterministic") -> str:
    """The CLT check of ``session status`` (estimators.model_assisted): whether the design's
    calibrated model and the draws agree on the variance; ``bayes_shown``: the Bayesian interval
    is shown first beside it (default: whether ``comps`` carry it); ``labels``: the labels in
    the estimate (0: nothing to check yet); ``posterior``: whether the session offers a
    Bayesian interval at all (``posterior_available``); ``oracle``: the session's (a stochastic
    oracle's designs have no check, :func:`posterior_reads`)."""
    checked = [c for c in comps if "clt_reliable" in c and not c.get("unreached")]
    if bayes_shown is None:
        bayes_shown = any("bayes_lower" in x for x in comps)
    if not checked and labels == 0:
        return "CLT check: nothing to check before the first stage is labeled"
    if not checked:
        sees = ("what the draws have barely reached" if oracle == "stochastic" else "the unlabeled items")
        return ("CLT check: not available here (it needs the calibrated companion's class shares, which ais and "
                "poisson-adaptive have on a binary pool under a deterministic oracle only); the CLT-based intervals "
                "rest on the labels found so far, and on imbalanced pools the designs without a check held the truth "
                "in 0-90% of simulated runs (benchmarks/results/baseline_designs_bayes.md"
                + ("; under a stochastic oracle AIS's CLT interval in 0.12-0.96, docs/intervals.md" if oracle == "stochastic"
                   else "") + ")"
                + ((f": read them with the Bayesian interval (shown first), which accounts for {sees}"
                    if bayes_shown else f": read them with the --bayesian interval, which accounts for {sees}")
                   if posterior else
                   "; no Bayesian interval is offered here, so read them "
                   "as CLT intervals that may miss where few labels have been spent"))
    bad = [c for c in checked if not c["clt_reliable"]]
    if bad:
        c = bad[0]
        # a ratio over 10^6 means the draws' own variance is ~0 (e.g. every draw so far the same): say so
        r = ("an unbounded multiple of" if c["clt_check"] is None else
             "over 10^6 ×" if c["clt_check"] > 1e6 else f"{c['clt_check']:.3g}×")
        read = "read the Bayesian interval (shown first)" if bayes_shown else "read the --bayesian interval"
        return (f"CLT check: NOT RELIABLE for {', '.join(b['component'] for b in bad[:4])}: the calibrated model "
                f"expects {r} the variance the draws show ({c['component']}) — positives may hide where the design "
                f"draws few items, which no draw so far can confirm or refute; the CLT-based intervals (own-weight "
                f"variance) miss more often than 5% there: {read}")
    worst = max(c["clt_check"] for c in checked)
    return (f"CLT check: passed (the calibrated model's variance is at most {worst:.3g}× the draws'; the CLT "
            f"interval uses the larger of the two; measured on nine pools, a passed check with an interval that "
            f"misses the truth: at most 7% of runs — benchmarks/results/interval_model_variance.md)")


def unreached_line(st) -> str | None:
    """The line on a session's further measures that count items its design never draws
    (``Session.unreached``; sessions made before stop 82: creation refuses them now)."""
    far = st.get("unreached_measures")
    if not far:
        return None
    names = ", ".join(f"{u['measure']} ({u['items']:,} items)" for u in far)
    return (f"NOT ESTIMATES: {names}: the {st['design']} design for {st['measures'][0]} never draws items these "
            f"measures count (001 §3.3.1), so their estimates, confidence sequences and CLT intervals leave those "
            f"items out and are biased; read their Bayesian interval (it completes the unlabeled items from the "
            f"model), or label them in a session that lists them first")


def fmt(v, digits=4):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "undefined"
    return f"{v:.{digits}f}"


def jsonable(o):
    """``o`` with NumPy scalars and arrays as Python numbers and lists, non-finite floats as
    None: what the commands print as JSON."""
    import numpy as np

    if hasattr(o, "_asdict"):   # a NamedTuple (e.g. an ingest's or a pull's result)
        return jsonable(o._asdict())
    if isinstance(o, dict):
        return {k: jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [jsonable(v) for v in o]
    if isinstance(o, np.ndarray):
        return jsonable(o.tolist())
    if isinstance(o, np.generic):   # NumPy scalars: floats, integers, booleans
        o = o.item()
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def print_json(obj):
    print(json.dumps(jsonable(obj), indent=2))


def open_session(args, bar):
    """The session ``args.db`` (``--pool``, ``--engine``, ``--scheduler`` as given), with ``bar`` as its progress."""
    from .session import Session

    engine = getattr(args, "engine", "auto")
    return Session.open(args.db, pool=args.pool, progress=bar, engine=None if engine in (None, "auto") else engine,
                        scheduler=getattr(args, "scheduler", None))


def ingest_counts(r, rule) -> list[str]:
    """The counts ``session ingest`` and ``session pull`` both print of one ingest (an
    :class:`~bayes_eval.session_files.IngestResult`): labels already known, disagreements resolved by
    ``rule``, annotations beyond the item's draws."""
    parts = []
    if r.n_duplicate:
        parts.append(f"{r.n_duplicate} already known")
    if r.n_resolved:
        parts.append(f"{r.n_resolved} disagreement(s) resolved by rule {rule!r}")
    if r.n_unused:
        parts.append(f"{r.n_unused} annotation(s) beyond the item's draws not used")
    return parts


def resolve_unused_line(rule, oracle) -> str | None:
    """``--resolve`` on a stochastic-oracle session (ingest, pull): no rule applies there, every
    annotation is a label of its own (a line saying so, rather than taking the rule silently)."""
    if oracle != "stochastic" or str(rule).strip() == "error":
        return None
    return (f"note: --resolve {str(rule).strip()} was not used: a stochastic-oracle session takes every annotation as "
            f"a label (disagreements are what it measures)")


def skipped_by_everyone_line(db, items, skip, verb: str) -> str | None:
    """The line on the open batch's items every annotator skipped (Label Studio's cancelled
    annotations) after ``session ingest`` / ``pull`` (``verb``): recorded as skipped (``skip``, a
    :class:`~bayes_eval.session_skip.SkipResult`), else the command that records them; None if none."""
    import shlex

    if skip is not None:
        return (f"recorded {skip.n_new} item(s) every annotator skipped as impossible to label "
                f"({skip.skipped} in the session)")
    if not items:
        return None
    shown = ", ".join(map(str, items[:10])) + (" ..." if len(items) > 10 else "")
    return (f"every annotator skipped item(s) {shown}: if nobody can label them, record it: bayes-eval session skip "
            f"{shlex.join([db, *map(str, items[:10])])} (or {verb} with --skip-cancelled)")


def check_skip_cancelled(args, session) -> None:
    """``--skip-cancelled`` (ingest, pull) on a Poisson session: refused before anything is ingested
    (the design refuses skips, and the labels would land before the refusal)."""
    from .errors import UsageError
    from .registry import design_spec

    if getattr(args, "skip_cancelled", False) and design_spec(session.design_name).kind == "rounds":
        raise UsageError(f"--skip-cancelled: the Poisson design {session.design_name!r} cannot leave an item out "
                         f"of a round (its Horvitz–Thompson estimate needs every drawn item's label); nothing was "
                         f"ingested: drop --skip-cancelled and label the items every annotator skipped")


def allowed_line(st) -> str | None:
    """What the labels allow (:mod:`bayes_eval.feasible`) per component, from ``Session.status()``."""
    allowed = [c for c in st["estimates"] if c.get("feasible_lower") is not None]
    rng_ = ", ".join(f"{c['component']} in [{fmt(c['feasible_lower'])}, {fmt(c['feasible_upper'])}]" for c in allowed[:4])
    return None if not allowed or st.get("fully_labeled") else (
        f"what the labels allow, whatever the unlabeled items are: {rng_} — the estimate is kept inside and the "
        f"CLT-based intervals are cut to it")


_KIND = {"clt": "CLT", "clt-cs": "confidence-sequence", "bayes": "Bayesian", "bayes-stable": "Bayesian",
         "bayes-checked": "Bayesian"}


def stopping_line(stop: dict, lvl: int) -> str:
    """The stopping rule's line of ``session status`` and of the report (``Session.stopping``):
    which interval, its width against the target, whether reached, and what is left."""
    from .results import labels_to_width_text

    tw = stop["target_width"]
    if stop.get("exact"):
        return f"stopping rule (width < {tw:g}): reached — {stop['note']}"
    if stop["width"] is None or (not stop["reached"] and stop["more_labels"] is None):
        return f"stopping rule (width < {tw:g}): {stop['note']}"
    head = f"stopping rule: the {lvl}% {_KIND[stop['kind']]} interval of {stop['component']} has width {stop['width']:.4f}"
    if stop["reached"]:
        stable = (" after each of the last 3 stages" if stop["kind"] == "bayes-stable" else
                  f" and the CLT check's ratio {stop['check_ratio']:.3g} ≤ {stop['check_max']:g}"
                  if stop["kind"] == "bayes-checked" and stop.get("check_ratio") is not None else "")
        return f"{head} < {tw:g}{stable}: reached — you can stop"
    return f"{head} ≥ {tw:g}: not reached; {labels_to_width_text(stop)}"
