"""Summaries of the finite-pool posterior of G, read from a fit or an InferenceData.

What both the tables of :mod:`bayes_eval.report` and the figures of
:mod:`bayes_eval.plots` read, kept below both so that neither imports the other for it:

* :func:`g_draws` — the (chain, draw, m) draws of G, the component names and the
  attributes (model, method, labels) of a :class:`~bayes_eval.report.FinitePoolFit` or of
  its :class:`arviz.InferenceData` (:func:`~bayes_eval.report.to_inference_data`);
* :func:`clt_arrays` — an importance-weighted estimate and its CLT interval (001 §3.3.2)
  as arrays of the m components, checked;
* :func:`hdi` — highest-density intervals (``arviz.hdi``), NaN-aware;
* :func:`ppc_table` — the posterior predictive check of the observed label counts per
  stratum (:data:`PPC_COLUMNS`), with the χ² posterior predictive p-value.

Both kinds of input are read by what they hold (a fit has ``observed_counts``, an
InferenceData has groups), so this module needs neither the fit's class nor ArviZ to
import.  :mod:`bayes_eval.report` re-exports :func:`hdi`, :func:`ppc_table` and
:data:`PPC_COLUMNS`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .posterior import ppc_tail_probabilities

__all__ = ["PPC_COLUMNS", "g_draws", "clt_arrays", "hdi", "ppc_table"]

#: Columns of :func:`ppc_table`.
PPC_COLUMNS = (
    "stratum", "class", "classifier_prob", "n_labeled", "observed", "pred_mean", "pred_lower", "pred_upper",
    "p_ge", "p_le", "flag",
)


def _is_fit(obj) -> bool:
    """A FinitePoolFit (arrays as attributes), not an InferenceData (groups)."""
    return hasattr(obj, "observed_counts") and hasattr(obj, "value")


def g_draws(obj):
    """(chain, draw, m) draws of G, the component names and the attributes of a fit or
    an InferenceData.

    Parameters
    ----------
    obj : FinitePoolFit or arviz.InferenceData

    Returns
    -------
    values : numpy.ndarray, shape (chain, draw, m)
    names : list of str
    attrs : dict
        ``model``, ``method``, ``labels`` (and, for an InferenceData, its other attributes).
    """
    if _is_fit(obj):
        return obj.value, list(obj.names), {"model": obj.model, "method": obj.method, "labels": obj.n_labels}
    post = obj.posterior
    g = post["G"].transpose("chain", "draw", "component")
    return np.asarray(g.values), [str(x) for x in g["component"].values], dict(post.attrs)


def clt_arrays(m: int, estimate, clt):
    """The estimate and the CLT interval (lower, upper) as float arrays of m components
    (NaN where not given); ValueError when a length differs from m."""
    est = np.full(m, np.nan) if estimate is None else np.asarray(estimate, dtype=np.float64).reshape(-1)
    if est.shape != (m,):
        raise ValueError(f"estimate has {est.size} components, G has {m}")
    if clt is None:
        lo = hi = np.full(m, np.nan)
    else:
        lo, hi = (np.asarray(x, dtype=np.float64).reshape(-1) for x in clt)
        if lo.shape != (m,) or hi.shape != (m,):
            raise ValueError(f"clt must be (lower, upper) with {m} components each")
    return est, lo, hi


def hdi(draws, level: float = 0.95) -> np.ndarray:
    """Highest-density interval of each component (``arviz.hdi``), NaN-aware.

    Parameters
    ----------
    draws : array, shape (n,) or (n, m)
    level : float

    Returns
    -------
    numpy.ndarray, shape (2,) or (m, 2)
        Lower and upper end; NaN for a component without finite draws.
    """
    import arviz as az

    x = np.asarray(draws, dtype=np.float64)
    one = x.ndim == 1
    x = x.reshape(x.shape[0], -1)
    out = np.full((x.shape[1], 2), np.nan)
    for j in range(x.shape[1]):
        v = x[:, j][np.isfinite(x[:, j])]
        if v.size >= 2:
            out[j] = np.asarray(az.hdi(v, hdi_prob=level))
        elif v.size == 1:
            out[j] = v[0]
    return out[0] if one else out


# --------------------------------------------------------------------------------------
# Posterior predictive check
# --------------------------------------------------------------------------------------
def _ppc_arrays(obj):
    if _is_fit(obj):
        return obj.observed_counts, obj.replicated_counts, obj.leaf_probs
    obs = np.asarray(obj.observed_data["label_counts"].values)
    rep = np.asarray(obj.posterior_predictive["label_counts"].transpose("chain", "draw", "stratum", "class").values)
    lp = np.asarray(obj.constant_data["classifier_probs"].values)
    return obs, rep, lp


def ppc_table(obj, alpha: float = 0.05) -> pd.DataFrame:
    """Posterior predictive check of the observed label counts per stratum.

    For every posterior draw of π the labeled items of each stratum get replicated
    classes (:func:`bayes_eval.posterior.replicate_labeled`); the observed count of a
    class (positives, for a binary pool) is compared with its replicates.

    Parameters
    ----------
    obj : FinitePoolFit or arviz.InferenceData
    alpha : float, default 0.05
        A stratum is flagged when P(rep ≥ obs) or P(rep ≤ obs) is below ``alpha / 2``.

    Returns
    -------
    pandas.DataFrame
        One row per labeled stratum (and class, for C > 2; class 1 only for binary
        pools), columns :data:`PPC_COLUMNS`: the classifier's mean probability of the
        class, labels in the stratum, observed count, predictive mean and central
        1 − alpha interval, P(rep ≥ obs), P(rep ≤ obs), flag.  ``attrs["ppp_chi2"]``
        holds the posterior predictive p-value of the discrepancy
        Σ_k (count − E rep_k)² / Var rep_k over all labeled strata (the replicates'
        moments): small values say the model misfits the labels as a whole.
    """
    obs, rep, lp = _ppc_arrays(obj)
    k, c = obs.shape
    rep = rep.reshape((-1, k, c))
    n_k = obs.sum(1)
    seen = np.flatnonzero(n_k > 0)
    classes = [1] if c == 2 else list(range(c))
    tail = ppc_tail_probabilities(obs, rep)
    rows = []
    for kk in seen:
        for y in classes:
            lo = float(np.quantile(rep[:, kk, y], alpha / 2))
            hi = float(np.quantile(rep[:, kk, y], 1 - alpha / 2))
            p_ge, p_le = float(tail["p_ge"][kk, y]), float(tail["p_le"][kk, y])
            rows.append({"stratum": int(kk), "class": int(y), "classifier_prob": float(lp[kk, y]),
                         "n_labeled": int(n_k[kk]), "observed": int(obs[kk, y]),
                         "pred_mean": float(tail["mean"][kk, y]), "pred_lower": lo, "pred_upper": hi,
                         "p_ge": p_ge, "p_le": p_le, "flag": bool(min(p_ge, p_le) < alpha / 2)})
    df = pd.DataFrame(rows, columns=list(PPC_COLUMNS))
    df.attrs["ppp_chi2"] = _ppp_chi2(obj, obs, rep, classes)
    return df


def _ppp_chi2(obj, obs, rep, classes):
    """Posterior predictive p-value of a χ² discrepancy over the labeled strata.

    T(y) = Σ_k (y_k − E y_k^rep)² / Var y_k^rep, the moments those of the replicates, so
    T depends on the data only (any model's units: the calibrated model's π is per cell,
    and a stratum's labeled items are not spread over its cells as its items are);
    p = P(T(y^rep) ≥ T(y)).
    """
    n_k = obs.sum(1)
    seen = n_k > 0
    if not seen.any():
        return float("nan")
    e = rep.mean(0)
    v = np.maximum(rep.var(0), 1e-9)
    cls = np.asarray(classes)
    t_obs = (((obs - e) ** 2 / v)[seen][..., cls]).sum()
    t_rep = (((rep - e[None]) ** 2 / v[None])[:, seen][..., cls]).sum((1, 2))
    return float(np.mean(t_rep >= t_obs))
