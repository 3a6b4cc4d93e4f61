"""What a simulation returns, and its summary: the records shared by the one simulation
driver (:func:`bayes_eval.simulate.run_simulation`) for both sampling kinds (with-replacement
draws and Poisson rounds); ``docs/architecture.md``.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["StageRecord", "SimResult", "schedule", "make_result", "summarize", "covers"]


class StageRecord(NamedTuple):
    n_labels: jnp.ndarray
    n_draws: jnp.ndarray
    value: jnp.ndarray  # (m_hist,) estimate after the stage (first components)
    lower: jnp.ndarray
    upper: jnp.ndarray
    kl: jnp.ndarray  # KL(q* || q_t), q* the optimal proposal (001 Prop. 1)


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
    bayes_lower: np.ndarray | None = None  # (repeats, n_ck, m) equal-tailed posterior interval
    bayes_upper: np.ndarray | None = None
    bayes_mean: np.ndarray | None = None
    bayes_seconds: float = 0.0  # finite-pool posteriors at the checkpoints (compilation included)


def make_result(hist, ck: dict, stalled, checkpoints, true_value, measure, seconds: float, compile_seconds: float,
                design_name: str, bayes: dict | None = None, bayes_seconds: float = 0.0, lower=None,
                upper=None, draws=None) -> SimResult:
    """Assemble a :class:`SimResult` from a driver's per-stage history and checkpoint
    arrays (``ck``: value, lower, upper, labels, draws), and the Bayesian intervals."""
    bayes = bayes or {}
    return SimResult(
        history=jax.tree_util.tree_map(np.asarray, hist),
        checkpoint_value=np.asarray(ck["value"]),
        checkpoint_lower=np.asarray(ck["lower"] if lower is None else lower),
        checkpoint_upper=np.asarray(ck["upper"] if upper is None else upper),
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
        bayes_seconds=bayes_seconds,
    )


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
    """Per checkpoint: labels, mean, bias, mse, coverage of the 95% CLT interval and its
    mean width (averaged over the measure's components for vector measures); runs whose
    estimate is undefined (NaN) are left out and counted in ``undefined_runs``.

    For a vector measure (a PR curve) a run is left out only if *no* component is
    defined; otherwise its undefined components (e.g. precision above the highest score
    labeled positive) are left out of the averages, and ``undefined_share`` says which
    share of (run, component) values was undefined."""
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
        entry = {"labels": int(ck), "undefined_runs": int((~ok).sum())}
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
            if res.bayes_lower is not None:
                blo = res.bayes_lower[ok, i, :]
                bhi = res.bayes_upper[ok, i, :]
                bok = np.isfinite(blo) & np.isfinite(bhi)
                entry["coverage_bayes"] = float(np.mean(covers(blo, bhi, truth)[bok])) if bok.any() else None
                entry["mean_width_bayes"] = float(np.mean((bhi - blo)[bok])) if bok.any() else None
                entry["mean_bayes"] = _scalar(_masked_mean(res.bayes_mean[ok, i, :],
                                                           np.isfinite(res.bayes_mean[ok, i, :]), axis=0))
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


def _scalar(a):
    a = np.asarray(a)
    return float(a[0]) if a.size == 1 else [float(v) for v in a]


