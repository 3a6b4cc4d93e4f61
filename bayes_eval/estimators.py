"""Estimators of a generalized measure and their CLT uncertainty.

* The importance-weighted (AIS) estimator R̂ = (1/n) Σ_j w_j ℓ(x_j, y_j), Ĝ = g(R̂)
  (001 eq. 1), for any measure; passive sampling is the special case w = 1.
* Its covariance by the delta method and the martingale CLT (001 Thm. 2, §3.3.2):
  Σ̂ = Dg(R̂) [ (1/n) Σ_j w_j² ℓ_j ℓ_jᵀ − R̂ R̂ᵀ ] Dg(R̂)ᵀ, w_j = p(x_j)/q_{j-1}(x_j),
  Cov(Ĝ) ≈ Σ̂ / n: every draw with its *own* weight, so Σ̂ estimates the average
  (1/n) Σ_j V_j of the per-draw conditional variances V_j under the proposal q_{j-1}
  that drew it -- the quantity the martingale CLT normalizes by.  001 §3.3.2 writes
  p²/(q_N q_{j-1}) instead, the variance under the last proposal q_N as if every draw had
  come from it (the asymptotic V_∞).  That is not the finite-budget variance: early
  proposals are worse than q_N, and under a deterministic oracle q_N of a labeled item is
  its proposal *at its known label* (001 Prop. 2), the variance of an oracle that knows
  every label.  Measured (``benchmarks/interval_study/``, F1, 200 repeats, ais): the
  q_N form estimated Var(R̂₂) at 0.01-0.17 of the empirical variance and Var(F̂1) at
  0.1-0.5; the own-weight form at 0.9-1.2 and 0.7-1.1.  The q_N form stays reachable
  (``w2sum=None`` in :func:`is_estimate`, ``variance="final"`` in
  :func:`is_estimate_draws`).
* The stratified (post-stratified) estimator with proportional allocation (001 §5,
  "Stratified"), and its variance Σ_k W_k² S_k² / n_k, with the strata that have
  fewer than two draws *collapsed* into neighbouring strata along the score axis
  (:func:`collapse_strata`): their S_k² is the pooled variance of the collapsed group
  (a stratum with one draw has no variance estimate of its own), and the mass of a
  stratum not drawn yet goes to the drawn strata of its group, not to the whole pool.
* The *model-assisted* variance of the importance-weighted estimator
  (:func:`model_assisted`, issue 15): the own-weight Σ w_j² above is the realized
  quadratic variation, unbiased but random, and its randomness is tied to the error --
  a run that has not yet drawn the heavy-weight false negatives has both an estimate
  that is too high and a variance that is too small (on a 10%-positive pool 85% of the
  CLT interval's misses were on that side).  The predictable counterpart: each stage's
  expected Σ w² ℓℓᵀ under the proposal that drew it, Σ_t n_t Σ_x q_t(x) w_t(x)² E[ℓℓᵀ],
  with the classes of the items that were unlabeled when drawn taken from the design's
  calibrated model fitted to all labels now (``kernel.Tallies.ew2_lab`` / ``ew2_unl``).
  The variance used is max(own, model) where the two agree within a factor
  :data:`MODEL_CHECK_MAX`; where the model's exceeds that, the excess is variance the
  model places on positives in cells the design hardly draws -- which no draw so far can
  confirm or refute (``benchmarks/results/interval_model_variance.md``: the twin pools) --
  and the own-weight variance is kept and the ratio reported (``Estimate.check``) so the
  user is told the CLT interval is not reliable there.
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
    "MODEL_CHECK_MAX",
    "model_assisted",
    "assisted_variance",
    "is_estimate",
    "is_estimate_draws",
    "stratified_estimate",
    "collapse_strata",
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
    # (m,) model-based ÷ own-weight variance (:func:`model_assisted`); None where not computed
    check: jnp.ndarray | None = None
    # (4, m) the lowest and highest G over the pool's completions given the labels and the values one item
    # inside them (:func:`bayes_eval.feasible.feasible_range`), the value projected onto the range; None: not computed
    feasible: jnp.ndarray | None = None


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


def is_estimate(g, loss, wsum, p_over_qn, n, full_cov: bool = True, w2sum=None):
    """Cell-level importance-weighted estimate.

    Parameters
    ----------
    g : callable (d,) -> (m,)
    loss : (J, d) — ℓ of each cell (at its label).
    wsum : (J,) — Σ of the importance weights p/q_{j-1} of the draws that fell in the cell.
    p_over_qn : (J,) — p(x) / q_N(x) for the cell's items under the most recent proposal
        (used only without ``w2sum``).
    n : scalar — number of draws (repeats included).
    full_cov : bool — see :func:`_finish_rows`.
    w2sum : (J,), optional — Σ of the squared weights (p/q_{j-1})² of the cell's draws:
        the covariance is then the martingale one, (1/n²) [Σ_j w_j² u_j u_jᵀ − n (Dg R̂)(Dg R̂)ᵀ]
        (the module docstring).  Without it, 001 §3.3.2's q_N form Σ_j w_j p/q_N.
    """
    n_safe = jnp.maximum(n, 1.0)
    risk = (wsum @ loss) / n_safe
    if w2sum is None:
        coef = wsum * jnp.where(wsum > 0, p_over_qn, 0.0) / n_safe
    else:
        coef = w2sum / n_safe
    return _finish_rows(g, risk, loss, coef, n, full_cov)


def is_estimate_draws(g, loss, w, p_over_qn=None, variance: str = "martingale", n=None):
    """Draw-level importance-weighted estimate (001 eq. 1 and §3.3.2).

    ``loss`` (n, d) losses of the draws, ``w`` (n,) their weights p/q_{j-1}.
    ``variance="martingale"`` (default): every draw's own weight, Σ w_j² (module
    docstring); ``"final"``: 001 §3.3.2's form with ``p_over_qn`` (n,) p/q_N under the most
    recent proposal.  ``n``: the number of draws the sums are divided by (default: every
    draw; a session with skipped items gives :func:`~bayes_eval.stages.effective_draws`,
    their draws' losses zero -- :mod:`bayes_eval.session_skip`).
    """
    if variance not in ("martingale", "final"):
        raise ValueError(f"variance must be 'martingale' or 'final', got {variance!r}")
    loss = jnp.asarray(loss, dtype=jnp.float64)
    w = jnp.asarray(w, dtype=jnp.float64)
    n = jnp.asarray(loss.shape[0] if n is None else n, dtype=jnp.float64)
    if variance == "martingale":
        return is_estimate(g, loss, w, None, n, w2sum=w * w)
    if p_over_qn is None:
        raise ValueError("variance='final' needs p_over_qn")
    return is_estimate(g, loss, w, jnp.asarray(p_over_qn, dtype=jnp.float64), n)


#: fewest draws a collapsed group of strata must hold for its variance (:func:`collapse_strata`)
MIN_GROUP_DRAWS = 2


def collapse_strata(n_k, min_draws: int = MIN_GROUP_DRAWS):
    """Groups of consecutive strata (in score order) holding at least ``min_draws`` draws
    each: the collapsed strata of the stratified variance estimator (Cochran, *Sampling
    Techniques*, §5A.11-12, where one unit per stratum leaves S_k² inestimable).

    Strata are scanned from the lowest score; a group closes as soon as its draws reach
    ``min_draws``, so a stratum with ``min_draws`` draws or more that starts a group is a
    group of its own; undrawn strata join the group being filled; a last group short of
    ``min_draws`` joins the one before.  ``n_k`` (K,) draws per stratum; returns (K,)
    group ids in 0..K-1.  Jit-compatible.
    """
    n_k = jnp.asarray(n_k)

    def scan(carry, nk):
        gid, cnt = carry
        cnt = cnt + nk
        close = cnt >= min_draws
        return (gid + close.astype(gid.dtype), jnp.where(close, 0.0, cnt)), gid

    (last, cnt), gid = jax.lax.scan(scan, (jnp.asarray(0, jnp.int32), jnp.asarray(0.0, n_k.dtype)), n_k)
    # the strata after the last closed group (fewer than min_draws draws) join it
    tail = (gid == last) & (last > 0)
    return jnp.where(tail, last - 1, gid)


def stratified_estimate(g, loss, draws, stratum, stratum_mass, n_strata, full_cov: bool = True,
                        min_draws: int = MIN_GROUP_DRAWS):
    """Post-stratified estimate with proportional allocation (001 §5, "Stratified").

    ``loss`` (J, d) per cell, ``draws`` (J,) draws per cell, ``stratum`` (J,) its
    stratum (strata numbered in score order), ``stratum_mass`` (K,) the p-mass W_k of each
    stratum.  R̂ = Σ_k W̃_k ȳ_k over the drawn strata, where a stratum not drawn yet hands
    its mass to the drawn strata of its collapsed group (:func:`collapse_strata`), i.e. to
    its neighbours on the score axis, in proportion to theirs (W̃_k = W_k W_g / W_g,drawn).
    (Spreading it over every drawn stratum of the pool, as before, biased R̂ toward the
    pool's middle: the undrawn strata are the small ones in the score tails; measured on
    a balanced pool with 256 strata at 500 labels, F1 biased by −13 Monte Carlo SE.)

    Cov(Ĝ) = Σ_k W̃_k²/n_k · S²_{g(k)}, S²_g the sample covariance of u = Dg ℓ over the
    draws of group g around the group's mean (Bessel-corrected): a stratum's own when it
    holds ``min_draws`` draws or more and starts its group, otherwise the pooled one of
    the collapsed neighbours (conservative: it includes their between-stratum spread).
    The diagonal only for measures with more than FULL_COV_MAX components.
    """
    n_k = jax.ops.segment_sum(draws, stratum, num_segments=n_strata)
    s1 = jax.ops.segment_sum(draws[:, None] * loss, stratum, num_segments=n_strata)
    seen = n_k > 0
    mass = jnp.asarray(stratum_mass, loss.dtype)
    mass = mass / jnp.maximum(mass.sum(), 1e-300)
    grp = collapse_strata(n_k, min_draws)  # (K,)
    w_g = jax.ops.segment_sum(mass, grp, num_segments=n_strata)
    w_g_seen = jax.ops.segment_sum(jnp.where(seen, mass, 0.0), grp, num_segments=n_strata)
    wk = jnp.where(seen, mass * w_g[grp] / jnp.maximum(w_g_seen[grp], 1e-300), 0.0)
    wk = wk / jnp.maximum(wk.sum(), 1e-300)
    nk = jnp.maximum(n_k, 1.0)
    risk = wk @ (s1 / nk[:, None])
    n = draws.sum()
    value = jnp.atleast_1d(g(risk))
    m = value.shape[0]
    u = _jvp_rows(g, risk, loss)  # (J, m)
    cell_grp = grp[stratum]
    n_g = jax.ops.segment_sum(draws, cell_grp, num_segments=n_strata)
    ng = jnp.maximum(n_g, 1.0)
    ubar = jax.ops.segment_sum(draws[:, None] * u, cell_grp, num_segments=n_strata) / ng[:, None]  # (G, m)
    f_g = jax.ops.segment_sum(wk**2 / nk, grp, num_segments=n_strata)  # Σ_{k∈g} W̃_k² / n_k
    fac = f_g / jnp.maximum(ng - 1.0, 1.0)  # (G,) with Bessel's n_g − 1
    cf = fac[cell_grp] * draws  # per-cell coefficient
    bad = n < 1
    if m <= FULL_COV_MAX:
        cov = (u * cf[:, None]).T @ u - (ubar * (fac * ng)[:, None]).T @ ubar
        cov = jnp.where(bad, jnp.nan, cov)
        diag = jnp.diagonal(cov)
    else:
        diag = jnp.sum(cf[:, None] * u * u, axis=0) - jnp.sum((fac * ng)[:, None] * ubar * ubar, axis=0)
        diag = jnp.where(bad, jnp.nan, diag)
        cov = _diag_matrix(diag) if full_cov else None
    return Estimate(value=jnp.where(bad, jnp.nan, value), cov=cov, risk=risk, n=n, var=diag)


#: largest model-based ÷ own-weight variance ratio at which the model-assisted variance is
#: used (:func:`model_assisted`); above it the CLT interval is flagged as not reliable.
#: Measured per run (F1, ais, 200 repeats, 500-2000 labels): the ratio's 90% quantile is
#: 1.3-1.5 on a 50%-positive pool and 2.5-3.7 on a 10% one; its 10% quantile 5-12 on a 1%
#: pool and 6-660 on abt-buy and dblp-acm (``benchmarks/results/interval_model_variance.md``).
MODEL_CHECK_MAX = 5.0


def assisted_variance(vo, vm, max_ratio: float = MODEL_CHECK_MAX):
    """The rule of :func:`model_assisted` on marginal variances: ``(var, check, scale)`` --
    max(own ``vo``, model ``vm``) where vm ≤ ``max_ratio`` × vo, else vo; ``check`` = vm ÷ vo
    (∞ where vo is 0 and vm is not); ``scale`` = √(var ÷ vo), the factor that rescales a
    covariance to the chosen variances (D Σ D keeps it PSD).  Shared by the draws' and the
    Poisson rounds' estimates (``kernel.round_estimate``)."""
    pos = vo > 0
    safe = jnp.where(pos, vo, 1.0)
    check = jnp.where(pos, vm / safe, jnp.where(vm > 0, jnp.inf, 1.0))
    var = jnp.where(check <= max_ratio, jnp.maximum(vo, vm), vo)  # NaN compares False: own
    return var, check, jnp.where(pos, jnp.sqrt(var / safe), 1.0)


def model_assisted(own: Estimate, model: Estimate, max_ratio: float = MODEL_CHECK_MAX) -> Estimate:
    """``own`` (the own-weight martingale estimate) with the model-assisted variance:
    per component max(own, model) where model ≤ ``max_ratio`` × own, else own (module
    docstring, :func:`assisted_variance`).  The covariance is rescaled to the chosen variances
    (D Σ D, PSD kept); ``check`` carries the ratio model ÷ own (∞ where own is 0 and model is
    not)."""
    var, check, scale = assisted_variance(own.var, model.var, max_ratio)
    cov = None if own.cov is None else own.cov * scale[:, None] * scale[None, :]
    return own._replace(var=var, cov=cov, check=check)


def normal_interval(value, cov, level: float = 0.95, var=None):
    """Marginal normal intervals Ĝ ± z_{(1+level)/2} sqrt(diag Cov(Ĝ)) (001 §3.3.2).

    ``var`` (the marginal variances) may be given instead of ``cov`` (pass ``cov=None``)."""
    z = norm.ppf(0.5 + level / 2.0)
    diag = var if cov is None else jnp.diagonal(cov, axis1=-2, axis2=-1)
    sd = jnp.sqrt(jnp.clip(diag, 0.0))
    return value - z * sd, value + z * sd


#: draws at which the confidence sequence's boundary is tightest (:func:`confidence_sequence`)
CS_HORIZON = 1000.0


def cs_factor(n, level: float = 0.95, horizon: float = CS_HORIZON):
    """√n × the normal-mixture boundary of a standardized sum after ``n`` observations:
    the confidence sequence's multiple of the standard error, in place of z_{(1+level)/2}.

    Howard, Ramdas, McAuliffe & Sekhon (2021), *Time-uniform, nonparametric, nonasymptotic
    confidence sequences*, Ann. Statist. 49(2), eq. (14) (two-sided normal mixture, with
    mixing precision ρ² tuned to be tightest at ``horizon`` observations, their
    Proposition 3 / eq. (15)):

        u(n) = sqrt( 2 (n ρ² + 1) / (n² ρ²) · log( sqrt(n ρ² + 1) / α ) ),  α = 1 − level,
        ρ² = (−2 log α + log(−2 log α + 1)) / horizon,

    so the half-width of the mean is σ̂ √n u(n) = SE × cs_factor(n) with SE = σ̂ / √n.  At level 0.95 the factor is 3.03 at the horizon (1.55 × 1.96), 3.3 at
    13 × the horizon and 3.9 at a tenth of it: the price of looking after every stage."""
    alpha = 1.0 - level
    n = jnp.maximum(jnp.asarray(n, jnp.float64), 1.0)
    rho2 = (-2.0 * jnp.log(alpha) + jnp.log(-2.0 * jnp.log(alpha) + 1.0)) / horizon
    return jnp.sqrt(2.0 * (n * rho2 + 1.0) / (n * rho2) * jnp.log(jnp.sqrt(n * rho2 + 1.0) / alpha))


def confidence_sequence(value, var, n, level: float = 0.95, horizon: float = CS_HORIZON):
    """An asymptotic confidence sequence for G: Ĝ ± cs_factor(n) · sqrt(Var Ĝ), valid
    *uniformly over stages* -- the interval to stop on when it is looked at after every
    stage (a fixed-n 95% interval checked 40 times does not keep 95%).

    Construction: Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas (2024), *Time-uniform
    central limit theory and asymptotic confidence sequences*, Ann. Statist. 52(6), Thm 2.2
    and its martingale form (§2.5, Lindeberg-type conditions): a sum whose conditional
    variances are estimated consistently is strongly approximated by a Gaussian process,
    so Howard et al.'s normal-mixture boundary applies with the estimated variance.  Here
    the sum is the importance-weighted loss Σ_j w_j ℓ_j (001 eq. 1; a martingale under the
    adaptive proposals, its conditional variances the ``w2sum`` tallies of
    :mod:`bayes_eval.kernel`), carried to G = g(R) by the delta method (its influence
    function Dg·(wℓ − R), 001 §3.3.2) -- our extension to ratio measures; ``n`` counts
    the draws (labels for Poisson rounds).  It inherits the CLT's assumptions: where the
    positives are too few for the variance to be estimated, no CLT-based interval holds
    (``docs/architecture.md``, "Intervals")."""
    half = cs_factor(n, level, horizon) * jnp.sqrt(jnp.clip(var, 0.0))
    return value - half, value + half


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
