"""Estimators of a generalized measure and their CLT uncertainty.

* The importance-weighted (AIS) estimator R̂ = (1/n) Σ_j w_j ℓ(x_j, y_j), Ĝ = g(R̂)
  (001 eq. 1), for any measure; passive sampling is the special case w = 1.
* Its asymptotic covariance by the delta method (001 §3.3.2):
  Σ̂ = Dg(R̂) [ (1/n) Σ_j p(x_j)² ℓ ℓᵀ / (q_N(x_j) q_{j-1}(x_j)) − R̂ R̂ᵀ ] Dg(R̂)ᵀ,
  with q_N the most recent proposal; Cov(Ĝ) ≈ Σ̂ / n.
* The stratified (post-stratified) estimator with proportional allocation (001 §5,
  "Stratified"), and its variance Σ_k W_k² S_k² / n_k.
* Marginal normal intervals and the confidence ellipsoid of 001 §3.3.2.

Two levels share the formulas: *draw-level* functions take one row per draw (what a
labeling session records), *cell-level* functions take per-cell sums (what the
jit-compiled simulation keeps).  Reusing the same labels for another measure
(001 §3.3.1) is just calling the draw-level estimator with that measure's losses.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.stats import norm

from . import _config  # noqa: F401

__all__ = [
    "Estimate",
    "is_estimate",
    "is_estimate_draws",
    "stratified_estimate",
    "delta_cov",
    "delta_method_covariance",
    "normal_interval",
    "ellipsoid",
    "in_ellipsoid",
]


class Estimate(NamedTuple):
    """A point estimate of G with its CLT covariance.

    ``value`` (m,), ``cov`` (m, m) covariance of Ĝ (already divided by n), ``risk`` (d,)
    R̂, ``n`` the number of draws it rests on.  ``value`` is NaN where g is undefined
    (e.g. F1 before any positive is seen).
    """

    value: jnp.ndarray
    cov: jnp.ndarray | None
    risk: jnp.ndarray
    n: jnp.ndarray
    var: jnp.ndarray | None = None  # (m,) the diagonal of ``cov`` (marginal variances)


def delta_method_covariance(g, risk, risk_cov):
    r"""Delta method: ``Cov(g(R_hat)) ~= Dg Cov(R_hat) Dg^T`` with ``Dg = jax.jacfwd(g)``
    (001 §3.3.2; 000 eq. 22 / 67) for any ``g`` written in ``jax.numpy``.  A scalar-valued
    ``g`` gives a scalar variance, a vector-valued one a matrix.  Jit-compatible."""
    risk = jnp.asarray(risk, jnp.result_type(float))
    risk_cov = jnp.asarray(risk_cov, risk.dtype)
    J = jax.jacfwd(g)(risk)
    out_shape = J.shape[: J.ndim - risk.ndim]
    d = risk.size
    Jm = J.reshape((-1, d))
    cov = Jm @ risk_cov.reshape((d, d)) @ Jm.T
    return cov.reshape(out_shape + out_shape)


def delta_cov(g, risk, cov_risk):
    """Cov(g(R̂)) ≈ Dg(R̂) Cov(R̂) Dg(R̂)ᵀ as an (m, m) matrix for any g (001 §3.3.2):
    :func:`delta_method_covariance` of ``atleast_1d(g)``."""
    return delta_method_covariance(lambda r: jnp.atleast_1d(g(r)), risk, cov_risk)


#: vector measures with more components than this get only the diagonal of Cov(Ĝ)
FULL_COV_MAX = 64


def _jvp_rows(g, risk, rows):
    gg = lambda r: jnp.atleast_1d(g(r))  # noqa: E731
    return jax.vmap(lambda v: jax.jvp(gg, (risk,), (v,))[1])(rows)


def _diag_matrix(diag):
    m = diag.shape[0]
    return jnp.full((m, m), jnp.nan).at[jnp.diag_indices(m)].set(diag)


def _finish_rows(g, risk, loss, coef, n, full_cov: bool = True):
    """Estimate with the covariance assembled from per-row products u_j = Dg ℓ_j:
    Cov(Ĝ) = (Σ_j c_j u_j u_jᵀ − (Dg R̂)(Dg R̂)ᵀ) / n; for measures with more than
    FULL_COV_MAX components only its diagonal (the rest NaN), at O(rows × m) cost.
    ``full_cov=False`` skips the (m, m) matrix for such measures (``cov`` is None; the
    marginal variances are in ``var``): what the simulation's per-stage record needs."""
    n_safe = jnp.maximum(n, 1.0)
    value = jnp.atleast_1d(g(risk))
    m = value.shape[0]
    u = _jvp_rows(g, risk, loss)  # (J, m)
    v = _jvp_rows(g, risk, risk[None, :])[0]  # Dg R̂
    bad = n < 1
    if m <= FULL_COV_MAX:
        cov = ((u * coef[:, None]).T @ u - jnp.outer(v, v)) / n_safe
        cov = jnp.where(bad, jnp.nan, cov)
        diag = jnp.diagonal(cov)
    else:
        diag = jnp.where(bad, jnp.nan, (jnp.sum(coef[:, None] * u * u, axis=0) - v * v) / n_safe)
        cov = _diag_matrix(diag) if full_cov else None
    return Estimate(value=jnp.where(bad, jnp.nan, value), cov=cov, risk=risk, n=n, var=diag)


def is_estimate(g, loss, wsum, p_over_qn, n, full_cov: bool = True):
    """Cell-level importance-weighted estimate.

    Parameters
    ----------
    g : callable (d,) -> (m,)
    loss : (J, d) — ℓ of each cell (at its label).
    wsum : (J,) — Σ of the importance weights p/q_{j-1} of the draws that fell in the cell.
    p_over_qn : (J,) — p(x) / q_N(x) for the cell's items under the most recent proposal.
    n : scalar — number of draws (repeats included).
    full_cov : bool — see :func:`_finish_rows`.
    """
    n_safe = jnp.maximum(n, 1.0)
    risk = (wsum @ loss) / n_safe
    coef = wsum * jnp.where(wsum > 0, p_over_qn, 0.0) / n_safe
    return _finish_rows(g, risk, loss, coef, n, full_cov)


def is_estimate_draws(g, loss, w, p_over_qn):
    """Draw-level importance-weighted estimate (001 eq. 1 and §3.3.2).

    ``loss`` (n, d) losses of the draws, ``w`` (n,) their weights p/q_{j-1}, and
    ``p_over_qn`` (n,) p/q_N under the most recent proposal.
    """
    loss = jnp.asarray(loss, dtype=jnp.float64)
    w = jnp.asarray(w, dtype=jnp.float64)
    n = jnp.asarray(loss.shape[0], dtype=jnp.float64)
    return is_estimate(g, loss, w, jnp.asarray(p_over_qn, dtype=jnp.float64), n)


def stratified_estimate(g, loss, draws, stratum, stratum_mass, n_strata, full_cov: bool = True):
    """Post-stratified estimate with proportional allocation (001 §5, "Stratified").

    ``loss`` (J, d) per cell, ``draws`` (J,) draws per cell, ``stratum`` (J,) its
    stratum, ``stratum_mass`` (K,) the p-mass W_k of each stratum.  Strata not yet drawn
    are left out and the weights renormalised over the drawn ones.  Cov(Ĝ) =
    Σ_k W_k²/n_k · Var_k(Dg ℓ), from per-cell products u_j = Dg ℓ_j (diagonal only for
    measures with more than FULL_COV_MAX components).
    """
    n_k = jax.ops.segment_sum(draws, stratum, num_segments=n_strata)
    s1 = jax.ops.segment_sum(draws[:, None] * loss, stratum, num_segments=n_strata)
    seen = n_k > 0
    wk = jnp.where(seen, stratum_mass, 0.0)
    wk = wk / jnp.maximum(wk.sum(), 1e-300)
    nk = jnp.maximum(n_k, 1.0)
    risk = wk @ (s1 / nk[:, None])
    n = draws.sum()
    value = jnp.atleast_1d(g(risk))
    m = value.shape[0]
    u = _jvp_rows(g, risk, loss)  # (J, m)
    ubar = jax.ops.segment_sum(draws[:, None] * u, stratum, num_segments=n_strata) / nk[:, None]
    bessel = nk / jnp.maximum(nk - 1.0, 1.0)
    fac = wk**2 / nk * bessel  # (K,)
    cf = fac[stratum] * draws / nk[stratum]  # per-cell coefficient
    bad = n < 1
    if m <= FULL_COV_MAX:
        cov = (u * cf[:, None]).T @ u - (ubar * fac[:, None]).T @ ubar
        cov = jnp.where(bad, jnp.nan, cov)
        diag = jnp.diagonal(cov)
    else:
        diag = jnp.sum(cf[:, None] * u * u, axis=0) - jnp.sum(fac[:, None] * ubar * ubar, axis=0)
        diag = jnp.where(bad, jnp.nan, diag)
        cov = _diag_matrix(diag) if full_cov else None
    return Estimate(value=jnp.where(bad, jnp.nan, value), cov=cov, risk=risk, n=n, var=diag)


def normal_interval(value, cov, level: float = 0.95, var=None):
    """Marginal normal intervals Ĝ ± z_{(1+level)/2} sqrt(diag Cov(Ĝ)) (001 §3.3.2).

    ``var`` (the marginal variances) may be given instead of ``cov`` (pass ``cov=None``)."""
    z = norm.ppf(0.5 + level / 2.0)
    diag = var if cov is None else jnp.diagonal(cov, axis1=-2, axis2=-1)
    sd = jnp.sqrt(jnp.clip(diag, 0.0))
    return value - z * sd, value + z * sd


def ellipsoid(value, cov, n, level: float = 0.95):
    """The 100·level% confidence ellipsoid of 001 §3.3.2.

    Returns ``(center, cov, radius2)``: the region is
    {G : (G − center)ᵀ cov⁻¹ (G − center) ≤ radius2} with
    radius2 = (n−1)k / (n(n−k)) F_{level; k, n−k} · n (cov is the covariance of Ĝ, i.e.
    Σ̂/n, hence the extra factor n).
    """
    from scipy.stats import f as fdist

    value = np.asarray(value, dtype=float)
    k = value.shape[0]
    n = float(n)
    if n <= k:
        raise ValueError(f"an ellipsoid in {k} dimensions needs more than {k} draws, got {n:g}")
    crit = fdist.ppf(level, k, n - k)
    radius2 = (n - 1) * k / (n * (n - k)) * crit * n
    return value, np.asarray(cov, dtype=float), float(radius2)


def in_ellipsoid(point, center, cov, radius2) -> bool:
    """Whether ``point`` lies in the ellipsoid returned by :func:`ellipsoid`."""
    d = np.asarray(point, float) - np.asarray(center, float)
    sol = np.linalg.lstsq(np.asarray(cov, float), d, rcond=None)[0]
    return bool(d @ sol <= radius2)
