"""What a simulation returns, and its summary: the records shared by the one simulation
driver (:func:`bayes_eval.simulate.run_simulation`) for both sampling kinds (with-replacement
draws and Poisson rounds); ``docs/architecture.md``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["StageRecord", "SimResult", "schedule", "make_result", "summarize", "covers", "cs_bounds", "stopping",
           "STOP_INTERVALS", "STABLE_STAGES", "STOP_CHECK_MAX", "bayes_stop_rule", "check_passes", "labels_to_width",
           "labels_to_width_text"]


class StageRecord(NamedTuple):
    n_labels: jnp.ndarray
    n_draws: jnp.ndarray
    value: jnp.ndarray  # (m_hist,) estimate after the stage (first components)
    lower: jnp.ndarray
    upper: jnp.ndarray
    kl: jnp.ndarray  # KL(q* || q_t), q* the optimal proposal (001 Prop. 1)
    n_class: jnp.ndarray  # (C,) labeled items of each class after the stage
    # (m_hist,) the CLT check after the stage (estimators.model_assisted; NaN without a model);
    # None: not recorded (Poisson rounds)
    check: jnp.ndarray | None = None
    # (X, C) the labeled items after the stage -- kept only for per-stage Bayesian intervals
    # (``simulate_runs(bayes_stages=True)``)
    labeled: jnp.ndarray | None = None
    # (m_hist,) the estimate's standard deviation (the CLT interval before it is cut to what the
    # labels allow is value ± z sd; the confidence sequence is value ± cs_factor sd); None: recover it
    # from [lower, upper] (records from before the cut)
    sd: jnp.ndarray | None = None
    # (4, m_hist) the range of G over the pool's completions given the labels and the values one
    # item inside it (bayes_eval.feasible.feasible_range; ±inf where not computed); lower / upper
    # are already cut to it (feasible.cut); None: records from before the cut
    feasible: jnp.ndarray | None = None


def schedule(budget: int, batch: int) -> np.ndarray:
    """Stage sizes: ``budget // batch`` stages of ``batch`` and one remainder stage."""
    if budget <= 0:
        raise ValueError(f"the label budget must be positive, got {budget}")
    if batch <= 0:
        raise ValueError(f"the batch size must be positive, got {batch}")
    sizes = [batch] * (budget // batch)
    if budget % batch:
        sizes.append(budget % batch)
    return np.asarray(sizes, dtype=np.int64)


class SimResult(NamedTuple):
    history: StageRecord  # arrays (repeats, stages, ...)
    checkpoint_value: np.ndarray  # (repeats, n_ck, m)
    checkpoint_lower: np.ndarray
    checkpoint_upper: np.ndarray
    checkpoint_labels: np.ndarray  # (repeats, n_ck)
    checkpoint_draws: np.ndarray
    stalled: np.ndarray  # (repeats,)
    checkpoints: list
    true_value: np.ndarray  # (m,)
    names: tuple
    seconds: float
    compile_seconds: float
    design: str
    bayes_lower: np.ndarray | None = None  # (repeats, n_ck, m) the library's posterior interval: resolved_interval
    bayes_upper: np.ndarray | None = None
    bayes_mean: np.ndarray | None = None
    # (repeats, n_ck) the importance ESS behind each posterior's parameter draws (PosteriorDraws.sampler_ess)
    bayes_sampler_ess: np.ndarray | None = None
    bayes_seconds: float = 0.0  # finite-pool posteriors at the checkpoints (compilation included)
    # (repeats, n_ck, m) model-based ÷ own-weight variance of the CLT interval (estimators.model_assisted;
    # NaN where the design has no calibrated model)
    checkpoint_check: np.ndarray | None = None
    # (repeats, stages, m) the Bayesian finite-pool interval after every stage (``bayes_stages``)
    stage_bayes_lower: np.ndarray | None = None
    stage_bayes_upper: np.ndarray | None = None
    # (repeats, stages, m) whether that interval collapsed onto one completed-pool value while an
    # unlabeled item could still change G (posterior.collapsed), and was widened (posterior.resolved_interval)
    stage_bayes_collapsed: np.ndarray | None = None
    # (repeats, n_ck, m) the estimate's sd; (repeats, n_ck, 4, m) what the labels allow (StageRecord.sd, .feasible)
    checkpoint_sd: np.ndarray | None = None
    checkpoint_feasible: np.ndarray | None = None
    # (m, 2) each component's range (measures.component_range; ±inf where unbounded): the CLT
    # interval and the confidence sequence are clipped to it, as a session's are
    bounds: np.ndarray | None = None
    # posterior draws behind each Bayesian interval (None: no posterior); a session's are SESSION_BAYES_DRAWS
    bayes_draws: int | None = None


def make_result(hist, ck: dict, stalled, checkpoints, true_value, measure, seconds: float, compile_seconds: float,
                design_name: str, bayes: dict | None = None, bayes_seconds: float = 0.0, lower=None,
                upper=None, draws=None, bayes_draws: int | None = None) -> SimResult:
    """Assemble a :class:`SimResult` from a driver's per-stage history and checkpoint
    arrays (``ck``: value, lower, upper, labels, draws), and the Bayesian intervals.  The CLT
    intervals are clipped to each component's range (:func:`measure_bounds`), as
    ``Session.intervals`` clips them: macro-F1's normal interval reached above 1 at small
    budgets (a measure whose intervals are not cut to what the labels allow), which inflated
    ``mean_width`` and held back a stop on its width."""
    bayes = bayes or {}
    bounds = measure_bounds(measure)
    hist = jax.tree_util.tree_map(np.asarray, hist)
    m_hist = hist.lower.shape[-1]
    hist = hist._replace(lower=np.maximum(hist.lower, bounds[:m_hist, 0]),
                         upper=np.minimum(hist.upper, bounds[:m_hist, 1]))
    lower = np.asarray(ck["lower"] if lower is None else lower)
    upper = np.asarray(ck["upper"] if upper is None else upper)
    return SimResult(
        history=hist,
        checkpoint_value=np.asarray(ck["value"]),
        checkpoint_lower=np.maximum(lower, bounds[:, 0]),
        checkpoint_upper=np.minimum(upper, bounds[:, 1]),
        checkpoint_labels=np.asarray(ck["labels"]),
        checkpoint_draws=np.asarray(ck["draws"] if draws is None else draws),
        stalled=np.asarray(stalled),
        checkpoints=checkpoints,
        true_value=true_value,
        names=tuple(measure.names),
        seconds=seconds,
        compile_seconds=compile_seconds,
        design=design_name,
        bayes_lower=bayes.get("bayes_lower"),
        bayes_upper=bayes.get("bayes_upper"),
        bayes_mean=bayes.get("bayes_mean"),
        bayes_sampler_ess=bayes.get("bayes_sampler_ess"),
        bayes_seconds=bayes_seconds,
        checkpoint_check=None if ck.get("check") is None else np.asarray(ck["check"]),
        stage_bayes_lower=bayes.get("stage_bayes_lower"),
        stage_bayes_upper=bayes.get("stage_bayes_upper"),
        stage_bayes_collapsed=bayes.get("stage_bayes_collapsed"),
        checkpoint_sd=None if ck.get("sd") is None else np.asarray(ck["sd"]),
        checkpoint_feasible=None if ck.get("feasible") is None else np.asarray(ck["feasible"]),
        bounds=bounds,
        bayes_draws=None if bayes_draws is None else int(bayes_draws),
    )


def measure_bounds(measure) -> np.ndarray:
    """(m, 2): each component's (low, high) (:func:`bayes_eval.measures.component_range`;
    ±inf where the measure is unbounded)."""
    from .measures import component_range

    return np.array([component_range([measure], n) or (-np.inf, np.inf) for n in measure.names], float)


def clip_to_bounds(lower, upper, bounds):
    """An interval's ends clipped to ``bounds`` ((m', 2) for its last m components; None: unchanged)."""
    if bounds is None:
        return lower, upper
    b = np.asarray(bounds)[: np.shape(lower)[-1]]
    return np.maximum(lower, b[:, 0]), np.minimum(upper, b[:, 1])


def covers(lo, hi, truth, rtol: float = 1e-9):
    """Whether ``truth`` lies in ``[lo, hi]`` up to floating-point round-off: an interval
    that has collapsed onto the true value (every item that matters labeled, or a
    posterior with all its mass on the truth) must count as covering even when the two
    were summed in a different order."""
    tol = rtol * np.maximum(1.0, np.abs(truth))
    return (lo - tol <= truth) & (truth <= hi + tol)


def _masked_mean(a, mask, axis=None):
    """Mean of ``a`` over ``mask`` (NaN where nothing is masked in), without warnings."""
    a = np.where(mask, a, 0.0)
    n = np.sum(mask, axis=axis)
    tot = np.sum(a, axis=axis)
    return np.where(n > 0, tot / np.maximum(n, 1), np.nan)


def summarize(res: SimResult) -> list[dict]:
    """Per checkpoint: labels (the checkpoint's budget) and ``mean_labels`` (the labels the
    runs had actually spent there: fewer where a design stalled), mean, bias, mse, coverage
    of the 95% CLT interval and its mean width (averaged over the measure's components for
    vector measures); runs whose estimate is undefined (NaN) are left out and counted in
    ``undefined_runs``.

    For a vector measure (a PR curve) a run is left out only if *no* component is
    defined; otherwise its undefined components (e.g. precision above the highest score
    labeled positive) are left out of the averages, and ``undefined_share`` says which
    share of (run, component) values was undefined; ``coverage_by_component`` (and ``_cs_``,
    ``_bayes_``) give each component's coverage, None where it is undefined in every run."""
    out = []
    truth = res.true_value
    m = truth.shape[0]
    for i, ck in enumerate(res.checkpoints):
        v = res.checkpoint_value[:, i, :]
        lo = res.checkpoint_lower[:, i, :]
        hi = res.checkpoint_upper[:, i, :]
        fin = np.isfinite(v)
        ok = np.all(fin, axis=1) if m == 1 else np.any(fin, axis=1)
        n_ok = int(ok.sum())
        entry = {"labels": int(ck), "undefined_runs": int((~ok).sum()),
                 # labels actually spent there: fewer than ``labels`` in runs whose design stalled
                 # (a stage ended at its draw cap before finding enough unlabeled items)
                 "mean_labels": float(np.mean(res.checkpoint_labels[:, i]))}
        if m > 1:
            entry["undefined_share"] = float(1.0 - fin.mean())
        # KL(q* || q_t) of the proposal after this checkpoint's stage (001 Prop. 1, Fig. 2)
        st = int(np.searchsorted(res.history.n_labels[0], ck))
        kl = res.history.kl[:, min(st, res.history.kl.shape[1] - 1)]
        entry["kl_to_optimal"] = float(np.mean(kl)) if np.all(np.isfinite(kl)) else None
        if n_ok:
            vv = v[ok]
            mask = fin[ok]
            err = np.where(mask, vv - truth, 0.0)
            cover = covers(lo[ok], hi[ok], truth)
            width = hi[ok] - lo[ok]
            wmask = mask & np.isfinite(width)
            sd = None if res.checkpoint_sd is None else res.checkpoint_sd[ok, i, :]
            feas = None if res.checkpoint_feasible is None else res.checkpoint_feasible[ok, i]
            clo, chi = clip_to_bounds(*cs_bounds(vv, lo[ok], hi[ok], res.checkpoint_draws[ok, i][:, None], sd=sd,
                                                 feasible=feas), res.bounds)
            cmask = mask & np.isfinite(chi - clo)
            if cmask.any():
                entry["coverage_cs"] = float(np.mean(covers(clo, chi, truth)[cmask]))
                entry["mean_width_cs"] = float(np.mean((chi - clo)[cmask]))
            if m > 1:   # a curve: which of its points miss (the averages above pool them)
                entry["coverage_by_component"] = _listed(_masked_mean(cover, mask, axis=0))
                entry["coverage_cs_by_component"] = _listed(_masked_mean(covers(clo, chi, truth), cmask, axis=0))
            if res.bayes_lower is not None:
                blo = res.bayes_lower[ok, i, :]
                bhi = res.bayes_upper[ok, i, :]
                bok = np.isfinite(blo) & np.isfinite(bhi)
                entry["coverage_bayes"] = float(np.mean(covers(blo, bhi, truth)[bok])) if bok.any() else None
                entry["mean_width_bayes"] = float(np.mean((bhi - blo)[bok])) if bok.any() else None
                if m > 1:
                    entry["coverage_bayes_by_component"] = _listed(_masked_mean(covers(blo, bhi, truth), bok, axis=0))
                bmean = res.bayes_mean[ok, i, :]
                bfin = np.isfinite(bmean)
                entry["mean_bayes"] = _scalar(_masked_mean(bmean, bfin, axis=0))
                # the posterior mean as an estimate: its MSE beside the design's (``mse``)
                brun = _masked_mean(np.where(bfin, bmean - truth, 0.0) ** 2, bfin, axis=1)
                entry["mse_bayes"] = float(np.mean(brun[bfin.any(axis=1)])) if bfin.any() else None
                if res.bayes_sampler_ess is not None and np.isfinite(res.bayes_sampler_ess[ok, i]).any():
                    # the posterior sampler's health: few distinct parameter values behind a run's draws
                    # make its interval one guess (posterior.LOW_SAMPLER_ESS)
                    from .posterior import LOW_SAMPLER_ESS

                    ess = res.bayes_sampler_ess[ok, i]
                    entry["bayes_sampler_ess_min"] = float(np.nanmin(ess))
                    entry["bayes_low_ess_runs"] = int(np.sum(ess < LOW_SAMPLER_ESS))
            if res.checkpoint_check is not None and np.isfinite(res.checkpoint_check[ok, i, :]).any():
                from .estimators import MODEL_CHECK_MAX

                passed = mask & (res.checkpoint_check[ok, i, :] <= MODEL_CHECK_MAX)
                # the CLT check (estimators.model_assisted): share of runs it passes and the
                # coverage of the CLT interval among them
                entry["clt_check_passed"] = float(np.mean(passed[mask]))
                entry["coverage_checked"] = float(np.mean(cover[passed])) if passed.any() else None
            run_err2 = _masked_mean(err**2, mask, axis=1)  # per run, over its defined components
            entry.update(
                mean=_scalar(_masked_mean(vv, mask, axis=0)),
                bias=_scalar(_masked_mean(err, mask, axis=0)),
                mse=float(np.mean(run_err2)),
                mse_se=float(np.std(run_err2, ddof=1) / np.sqrt(n_ok)) if n_ok > 1 else None,
                coverage=float(np.mean(cover[mask])),
                mean_width=float(np.mean(width[wmask])) if wmask.any() else None,
                mean_draws=float(res.checkpoint_draws[ok, i].mean()),
            )
        else:
            entry.update(mean=None, bias=None, mse=None, mse_se=None, coverage=None, mean_width=None, mean_draws=None)
        out.append(entry)
    return out


#: z_{0.975}: the stored CLT intervals are 95% (``simulate``'s level)
_Z95 = 1.959963984540054
#: the interval kinds a run can stop on (:func:`stopping`)
STOP_INTERVALS = ("clt-cs", "clt", "bayes", "bayes-cs", "bayes-stable", "bayes-checked", "read-first")
#: those of them that stop on the Bayesian interval after every stage (a session's ``stopping`` kind among
#: them: the status and the report say the stopping rule reads the Bayesian interval)
BAYES_STOP_INTERVALS = ("bayes", "bayes-cs", "bayes-stable", "bayes-checked")
#: closed stages in a row whose Bayesian interval must be narrow enough (``"bayes-stable"``)
STABLE_STAGES = 3
#: posterior draws behind a session's Bayesian interval (``session status``, the report, the stopping rule).
#: A simulation draws 200 by default (``simulate --bayes-draws``): a rule that stops at the first narrow
#: interval also stops where an interval of few draws came out narrow by chance, and on a skewed posterior
#: those intervals are the ones that miss -- the demo pool, poisson-adaptive, 100 runs (stop 89,
#: ``benchmarks/results/stopping_draws_stop89.md``): at W = 0.02 ``"bayes"`` stopped 3 runs, all wrong, on
#: intervals of 200 draws and 1, wrong, on the same runs' intervals of 1000.
SESSION_BAYES_DRAWS = 1000
#: a simulation's posterior draws per Bayesian interval by default (``run_simulation``, ``simulate --bayes-draws``)
SIMULATION_BAYES_DRAWS = 200
#: largest CLT-check ratio (the calibrated model's variance of the estimate ÷ the draws' own,
#: :func:`bayes_eval.estimators.model_assisted`) at which a narrow Bayesian interval may stop a run
#: (``"bayes-checked"``).  Above it the draws have not yet seen where the model says the estimate's
#: variance lies -- on the demo pool the runs the plain Bayesian rule stopped wrongly had found 77-84
#: of its 92 positives and a ratio of ~70-95 at the stop, the right ones ~25-50
#: (``benchmarks/results/stopping_check_gate.md``; chosen there on the demo pool and dblp-acm, checked on
#: the other captures in ``stopping_stop87.md``).
STOP_CHECK_MAX = 60.0


def bayes_stop_rule(design: str, check) -> str:
    """The Bayesian half of the ``read-first`` stopping rule (:func:`stopping`,
    ``session status --target-width``): ``"bayes-checked"`` (the Bayesian interval narrow enough at
    a stage end where the CLT check's ratio is at most :data:`STOP_CHECK_MAX`) for ``ais``, whose
    check compares the calibrated model's variance with the with-replacement draws' own, where the
    design records a check (``check``: the per-stage ratios, or None); ``"bayes"`` (narrow at the
    stage end) for ``poisson-adaptive`` with its companion's check recorded (stop 88); else
    ``"bayes-stable"`` (narrow after each of the last :data:`STABLE_STAGES` stages).  Poisson
    rounds' ratio is another scale -- it grows to 10^3-10^4 on dblp-acm as the rounds' own variance
    falls, where the Bayesian stop is honest -- so no gate on it; and where the check fails (the demo pool over three seeds, dblp-acm, a heavy-tie
    pool) ``read-first`` with the plain Bayesian half held the truth at W = 0.1 and 0.05 in every
    capture, with more stops and fewer labels than ``bayes-stable`` (``benchmarks/results/stopping_stop88.md``).
    Stop 90 rechecked the choice with a session's 1000 posterior draws per interval
    (:data:`SESSION_BAYES_DRAWS`; stop 88's intervals had the simulation's 200, which stop 89 found make
    some intervals narrow by chance; ``benchmarks/results/stopping_draws_stop90.md``): ``bayes`` held
    1.00 of 215 stops on the demo pool (three seeds, 260 runs) at W = 0.05, 0.97 / 0.95 of 60 on dblp-acm
    at W = 0.1 / 0.05, 0.97 / 0.98 / 0.98 of 60 / 60 / 47 on the heavy-tie pool at W = 0.1 / 0.05 / 0.02;
    ``bayes-stable`` held too, with fewer stops and 6-70% more labels at the stop (the heavy ties'
    W = 0.02: 2 stops, not 47).  ``bayes``'s one wrong stop: a demo run at W = 0.02 (1 of 260), where
    the calibration curve's tail expects fewer low-score positives than the pool holds -- the model's,
    not the rule's.  The other designs, several classes and a stochastic oracle record no check and
    keep ``bayes-stable``, the rule measured for them (``benchmarks/results/stopping_check_gate.md``, ``stopping_stop87.md``)."""
    has_check = check is not None and bool(np.any(~np.isnan(np.asarray(check, float))))
    if not has_check:
        return "bayes-stable"
    return {"ais": "bayes-checked", "poisson-adaptive": "bayes"}.get(design, "bayes-stable")


def cs_bounds(value, lower, upper, n, level: float = 0.95, sd=None, feasible=None):
    """The confidence sequence (:func:`bayes_eval.estimators.confidence_sequence`) around
    ``value`` whose 95% CLT interval is [lower, upper] after ``n`` draws: value ± cs_factor(n) sd,
    ``sd`` given or recovered from the interval's width (valid only where that interval was not
    cut to what the labels allow); ``feasible`` (..., 4, m) the range it is cut to
    (:func:`bayes_eval.feasible.cut`)."""
    from .estimators import cs_factor
    from .feasible import cut

    se = (np.asarray(upper) - np.asarray(lower)) / (2.0 * _Z95) if sd is None else np.asarray(sd)
    half = np.asarray(cs_factor(np.asarray(n, np.float64), level)) * se
    lo, hi = value - half, value + half
    return cut(lo, hi, None if feasible is None else np.asarray(feasible))


#: labeled items of each class a CLT-based interval needs before a run may stop on it
MIN_CLASS_LABELS = 10


def labels_to_width(labels: float, width: float, target: float, then_labels: float | None = None,
                    then_width: float | None = None) -> dict:
    """How many more labels an interval of ``width`` after ``labels`` labels needs to reach
    ``target``, two ways (an extrapolation, not a promise):

    * ``more_labels``: width ∝ 1/sqrt(labels) -- a fixed design's rate;
    * ``more_labels_observed_rate``: width ∝ labels^(-b) with b the rate the interval actually
      shrank at since ``then_labels`` (``width_exponent``; None where it did not shrink, b ≤ 0.05,
      or no earlier width is given).

    The two differ where the design is adaptive: AIS's Bayesian interval shrank as labels^-0.22
    to -0.29 on abt-buy (the low-score strata stay unlabeled), and its width at 2000 labels was
    1.45 × what 1/sqrt predicted from 500 labels, 1.06 × what the observed rate did; the confidence
    sequence shrank faster than 1/sqrt on the imbalanced pools; on a 10%-positive pool both agree
    within 6% (100 saved runs per pool, ``benchmarks/interval_study/extrapolation_study.py``,
    ``benchmarks/results/extrapolation.md``).  Both are 0 once ``width < target``."""
    out = {"more_labels": 0, "width_exponent": None, "more_labels_observed_rate": None,
           "rate_from_labels": None, "rate_from_width": None}
    if width < target:
        out["more_labels_observed_rate"] = 0
        return out
    out["more_labels"] = max(int(math.ceil(labels * (width / target) ** 2 - labels)), 0)
    if (then_labels is None or then_width is None or not 0 < then_labels < labels
            or not (np.isfinite(then_width) and np.isfinite(width) and then_width > 0 and width > 0)):
        return out
    b = math.log(then_width / width) / math.log(labels / then_labels)
    out.update(width_exponent=float(b), rate_from_labels=int(then_labels), rate_from_width=float(then_width))
    if b > 0.05:
        need = math.log(labels) + math.log(width / target) / b
        out["more_labels_observed_rate"] = max(int(math.ceil(math.exp(min(need, 40.0)) - labels)), 0)
    return out


def labels_to_width_text(stop: dict) -> str:
    """One sentence for :func:`labels_to_width`'s record (``session status``, the report)."""
    b, n0, w0, more = (stop.get(k) for k in ("width_exponent", "rate_from_labels", "rate_from_width",
                                             "more_labels_observed_rate"))
    left = stop.get("unlabeled_items")   # a deterministic oracle labels each item once

    def past(n):
        return left is not None and n > left

    rate = ("" if b is None else f"; at the rate it shrank since {n0:,} labels (width {w0:.4f} then, ∝ labels^"
            f"{-b:.2f}) " + (f"more than the {left:,} unlabeled items" if past(more) else f"about {more:,}")
            if more is not None else f"; it has not shrunk since {n0:,} labels (width {w0:.4f} then): no rate to "
            f"extrapolate")
    n = stop["more_labels"]
    first = f"more labels than the {left:,} unlabeled items" if past(n) else f"about {n:,} more labels"
    return f"{first} if the width shrinks as 1/sqrt(labels){rate} (extrapolations, not promises)"


def collapsed_text(components, lvl: int) -> str:
    """What a widened, collapsed Bayesian interval (:func:`bayes_eval.posterior.resolved_interval`) means."""
    return (f"note: the {lvl}% posterior interval of {', '.join(components[:4])} is narrower than what one "
            f"unlabeled item's label can change -- the model's bet that nothing is hidden, which no label has tested "
            f"(measured on dblp-acm: width-0 intervals held the truth in 5 of 23 stages); the Bayesian interval shown "
            f"is widened to what one unlabeled item's label can change, and the stopping rule reads that width")


def blind_spot_text(bs: dict | None, names) -> str | None:
    """The sentence ``session status`` and the report print for :func:`bayes_eval.feasible.blind_spot`
    (``names``: the components, in the order of ``values_if_hidden``); None where there is none."""
    if not bs:
        return None
    vals = [f"{n} {v:.4f}" for n, v in zip(names, bs["values_if_hidden"]) if v is not None][:4]
    if bs["labels"] == 0:
        there = "; none of them is labeled"
    else:
        there = (f" ({bs['labels']} label(s) there, {bs['positives']} positive"
                 + (f"; {bs['items_without_label']:,} of the items in cells with no label" if bs["items_without_label"] else "")
                 + ")")
    rate = "a tenth of" if bs["rate"] == 0.1 else f"{bs['rate']:g} ×"
    return (f"barely labeled: {bs['items']:,} items ({bs['share']:.0%} of the pool, {bs['cells']} cell(s)) carry under "
            f"{rate} the pool's share of labels{there}. {bs['hidden']} positive(s) hidden among them at random ("
            + _hidden_count_text(bs) + ") would go unseen by labels placed like these with probability "
            f"{bs['miss_probability']:.0%}" + (f"; with them {', '.join(vals)}" if vals else "")
            + ". Unseen, no method can tell that pool from this one: every interval above bets on what those items "
              "hold (the Bayesian one through the oracle model)" + _holds_text(bs.get("headline_holds"), names))


def _hidden_count_text(bs: dict) -> str:
    """Why K positives are considered hidden (:func:`bayes_eval.feasible.blind_spot`'s ``hidden``)."""
    found, k = bs.get("found", bs["hidden"]), bs["hidden"]
    if found == k:
        return "as many as found so far"
    if found < k:
        return f"{found} found so far, so one"
    return f"every unlabeled item there; {found} found so far"


def _holds_text(holds, names) -> str:
    """Whether the interval read first holds the values with the hidden positives (status only)."""
    known = [(n, h) for n, h in zip(names, holds or []) if h is not None]
    if not known:
        return ""
    out = [n for n, h in known if not h]
    if not out:
        return "; the interval read first holds the value with them"
    return (f"; the interval read first excludes it for {', '.join(out[:4])}: there it bets that those items hold "
            f"fewer positives than that")


def _narrow(res, width: float, interval: str, min_class_labels: int, require_check: bool,
            stop_check_max: float = STOP_CHECK_MAX):
    """(narrow (runs, stages) bool, lower, upper (runs, stages, m), check applied) of one rule of
    :func:`stopping` other than ``"read-first"``."""
    h = res.history
    value, lo, hi = h.value, h.lower, h.upper  # (repeats, stages, m_hist)
    bayes = interval in BAYES_STOP_INTERVALS
    if interval in ("clt-cs", "bayes-cs"):
        cs_lo, cs_hi = clip_to_bounds(*cs_bounds(value, lo, hi, h.n_draws[..., None], sd=h.sd, feasible=h.feasible),
                                      res.bounds)
    if bayes:
        if res.stage_bayes_lower is None:
            raise ValueError("stopping on the Bayesian interval needs it after every stage: simulate with "
                             "bayes_stages=True (bayes-eval simulate --stop-interval bayes does)")
        m = value.shape[2]
        lo, hi = np.asarray(res.stage_bayes_lower)[..., :m], np.asarray(res.stage_bayes_upper)[..., :m]
        value = 0.5 * (lo + hi)
    elif interval == "clt-cs":
        lo, hi = cs_lo, cs_hi
    w = hi - lo
    if interval == "bayes-cs":
        w = np.maximum(w, np.where(np.isfinite(cs_hi - cs_lo), cs_hi - cs_lo, np.inf))
    ok = np.all(np.isfinite(value), axis=2) & np.all(np.isfinite(w), axis=2)
    if bayes:
        narrow = ok & np.all(w <= width, axis=2)
        if interval == "bayes-stable":                      # narrow after each of the last STABLE_STAGES
            run = narrow.copy()
            for k in range(1, STABLE_STAGES):
                run[:, k:] &= narrow[:, :-k]
            run[:, :STABLE_STAGES - 1] = False
            narrow = run
        elif interval == "bayes-checked" and h.check is not None:
            # and the CLT check's ratio at most stop_check_max for every component (no check: not held back)
            chk = np.asarray(h.check, float)[..., :value.shape[2]]
            narrow &= np.all(np.isnan(chk) | (chk <= stop_check_max), axis=2)
    else:
        enough = np.all(h.n_class >= min_class_labels, axis=2)
        # a zero width is a degenerate delta method (e.g. F1 = 1 where no error has been seen),
        # not a narrow interval
        narrow = ok & enough & np.all((w <= width) & (w > 0), axis=2)
    # a design without the calibrated model records no check (all NaN): the rule then holds none back
    checked = (require_check and h.check is not None and not bayes
               and bool(np.isfinite(np.asarray(h.check, float)).any()))
    if checked:
        from .estimators import MODEL_CHECK_MAX

        chk = np.asarray(h.check)
        narrow &= np.all(np.isnan(chk) | (chk <= MODEL_CHECK_MAX), axis=2)
    return narrow, lo, hi, checked


def check_passes(res):
    """(runs, stages) bool: the CLT check passes at that stage end -- computed for some component
    and over ``MODEL_CHECK_MAX`` for none (``session status``'s rule for the interval read first)."""
    from .estimators import MODEL_CHECK_MAX

    if res.history.check is None:
        return np.zeros(res.history.value.shape[:2], bool)
    chk = np.asarray(res.history.check, float)
    return np.any(np.isfinite(chk) | (chk == np.inf), axis=2) & ~np.any(chk > MODEL_CHECK_MAX, axis=2)


def stopping(res: SimResult, width: float, interval: str = "clt-cs", min_class_labels: int = MIN_CLASS_LABELS,
             require_check: bool = True, stop_check_max: float = STOP_CHECK_MAX,
             read_first_bayes: str | None = None) -> dict:
    """A scripted loop that looks at ``interval`` after every stage and stops at the first
    stage end where its width is ≤ ``width`` (every component's, for a vector measure),
    or at the budget.  Returns ``{"width", "interval", "stopped"`` (share of runs that
    stopped within the budget), ``"coverage"`` (share of the stopped runs whose interval
    at the stop holds the truth; None if none stopped), ``"mean_labels"`` (labels at the
    stop, over the stopped runs), ``"coverage_se"`` (its binomial standard error)``}``, and
    ``"bayes_draws"`` where the rule read Bayesian intervals (:attr:`SimResult.bayes_draws`).

    ``"clt"``: the fixed-n 95% interval (001 §3.3.2) -- looked at after every stage it
    does not keep 95% (the point of measuring it); ``"clt-cs"``: the asymptotic confidence
    sequence, valid uniformly over stages; ``"bayes"``: the Bayesian finite-pool interval
    after every stage (a simulation run with ``bayes_stages=True``; a posterior conditions on
    the labels whatever rule chose to stop, 001 §4.2, so it needs neither the CLT check nor
    a minimum of labels per class); ``"bayes-cs"``: both the Bayesian interval and the
    confidence sequence at most W wide (no CLT check), coverage read on the Bayesian
    interval; ``"bayes-stable"``: the Bayesian interval at most W wide after each of the last
    :data:`STABLE_STAGES` stages: one odd posterior cannot stop it;
    ``"bayes-checked"`` (stop 87): the Bayesian interval at most W wide at a stage end where the CLT
    check's ratio is at most ``stop_check_max`` (:data:`STOP_CHECK_MAX`) for every component (no check
    recorded: not held back) -- a narrow posterior whose draws have not reached where the calibrated
    model puts the estimate's variance is not a reason to stop;
    ``"read-first"``: the rule of ``session status --target-width`` for sessions with a posterior
    (every design under a deterministic oracle) -- at each stage end the interval the status
    reads first there: the confidence sequence
    (``"clt-cs"``) where the CLT check passes, else the design's Bayesian rule (``read_first_bayes``,
    default :func:`bayes_stop_rule`: ``"bayes-checked"`` for ais, ``"bayes"`` for poisson-adaptive,
    ``"bayes-stable"`` otherwise; the result's ``"bayes_rule"``), coverage read on that interval.
    Where the check passes the Bayesian interval rests on the calibration curve and
    missed on pools whose positive rate is no logistic curve of the score (0.46-0.89 with AIS at
    500-2000 labels with a two-parameter curve, 0.82-0.98 with the curve's band offsets of stop 51,
    ``benchmarks/results/misspecified.md``), the confidence sequence did not.
    (Every wrong stop measured for ``"bayes"`` and ``"bayes-cs"`` after the collapsed interval
    was widened came from a numerical defect of the calibrated model, fixed at stop 40; on the
    same runs ``"bayes"`` is now honest in every cell with 19–30% fewer labels,
    ``benchmarks/results/stopping_rules_cells.md``; issue 15, items 3 and 4.  Stop 86: under the
    slope prior N(1, 2²) not on the demo pool at W = 0.05 -- ``"bayes"`` 0.89 of 76 stops,
    ``"bayes-stable"`` 0.69 of 29, every miss above the truth; ``benchmarks/results/stopping_stop86.md``,
    and a lead in ``stopping_check_gate.md``.)  The Bayesian interval is
    :func:`bayes_eval.posterior.resolved_interval`: where it collapsed onto one completed-pool
    value while an unlabeled item can still change G (``res.stage_bayes_collapsed``) it is
    widened to what one unlabeled item's class can change, so no rule stops below the
    measure's resolution on the model's bet that nothing is hidden (before: 4 of 100
    dblp-acm runs stopped on a width-0 interval at W = 0.02, all wrong).  A CLT run may stop only once it holds
    ``min_class_labels`` labeled items of every class: before that the variance of a
    CLT interval is not estimable (a first stage whose positives were all predicted
    positive has F1 = 1 and variance 0), the rule ``session status --target-width`` keeps
    too; nor on an interval of width 0 (a degenerate delta method, not a narrow interval).
    With ``require_check`` (default) a run may stop only where the CLT check passes
    (:func:`~bayes_eval.estimators.model_assisted`: the calibrated model's variance at most
    ``MODEL_CHECK_MAX`` × the draws'; stages without a check -- designs without the model --
    are not held back): a narrow interval that rests on positives not yet found is not a
    reason to stop (issue 15, item 3).  ``"check_required"`` in the result says whether it
    applied."""
    if interval not in STOP_INTERVALS:
        raise ValueError(f"stop interval must be one of {', '.join(STOP_INTERVALS)}, got {interval!r}")
    if not (np.isfinite(width) and width > 0):
        raise ValueError(f"the stopping width must be a positive number, got {width}")
    h = res.history
    if interval == "read-first":
        # the interval session status reads first at each stage end: the confidence sequence where the
        # CLT check passes, else the design's Bayesian rule (bayes_stop_rule)
        passes = check_passes(res)
        if read_first_bayes is None:
            read_first_bayes = bayes_stop_rule(res.design, h.check)
        n_cs, lo_cs, hi_cs, _ = _narrow(res, width, "clt-cs", min_class_labels, True)
        n_b, lo_b, hi_b, _ = _narrow(res, width, read_first_bayes, min_class_labels, True, stop_check_max)
        narrow = np.where(passes, n_cs, n_b)
        lo, hi = np.where(passes[..., None], lo_cs, lo_b), np.where(passes[..., None], hi_cs, hi_b)
        checked = True
    else:
        narrow, lo, hi, checked = _narrow(res, width, interval, min_class_labels, require_check, stop_check_max)
    stopped = narrow.any(axis=1)
    first = np.argmax(narrow, axis=1)
    truth = res.true_value[: lo.shape[2]]
    r = np.arange(lo.shape[0])
    cov = np.all(covers(lo[r, first], hi[r, first], truth), axis=1)
    n_stop = int(stopped.sum())
    c = float(cov[stopped].mean()) if n_stop else None
    out = {"width": float(width), "interval": interval, "stopped": float(stopped.mean()),
           "coverage": c, "coverage_se": float(np.sqrt(c * (1 - c) / n_stop)) if n_stop else None,
           "mean_labels": float(h.n_labels[r, first][stopped].mean()) if n_stop else None,
           "stopped_runs": n_stop, "check_required": bool(checked)}
    if interval == "read-first":
        out["bayes_rule"] = read_first_bayes
    if res.stage_bayes_lower is not None and res.bayes_draws is not None and interval not in ("clt", "clt-cs"):
        # the rule read Bayesian intervals: of how many posterior draws (a session's: SESSION_BAYES_DRAWS;
        # with fewer some intervals come out narrow by chance and a rule stops on them, stop 89)
        out["bayes_draws"] = res.bayes_draws
    return out


def _scalar(a):
    a = np.asarray(a)
    return float(a[0]) if a.size == 1 else [float(v) for v in a]


def _listed(a):
    """Per component, a float or None (undefined in every run)."""
    return [float(v) if np.isfinite(v) else None for v in np.asarray(a, float)]
