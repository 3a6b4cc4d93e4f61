"""On-demand evaluation of several systems (seed ``003``): the numerical core.

Pure NumPy functions over small arrays; no files, no printing (the session lives in
:mod:`bayes_eval.ondemand_session`, the simulation in :mod:`bayes_eval.ondemand_sim`).

The setting (003 §"Problem statement"): a universe of candidate instances, an unknown set
𝒴 of correct ones (f(x) = 1[x ∈ 𝒴]), systems i = 1..m with prediction sets X_i and known
sampling distributions p_i over X_i (uniform by default).  Two kinds of label: a
*verification* of one drawn x (f(x)), and an *exhaustive* sample from 𝒴 itself.

**Cells.**  Every quantity below depends on an instance only through its vector
(p_1(x), ..., p_m(x)) and its label, so instances with the same vector are
interchangeable: a *cell* (the same idea as :mod:`bayes_eval.cells`).  With uniform p_i a
cell is a membership pattern (which systems predicted x); at most 2^m of them, usually a
few hundred, so the estimators and the variance bound cost O(cells × systems), not
O(universe).  Draws are tallied per (stratum j = the system they were drawn for, cell,
label): ``T[..., j, c, f]``.  Every function takes optional leading batch axes (repeats of
a simulation).

**Estimators** (003 §"Simple estimator", §"Joint estimator"):

* simple precision π̂ᵢ⁽ˢ⁾ = mean of f over X̂ᵢ; simple recall ρ̂ᵢ⁽ˢ⁾ = share of the
  exhaustive sample Ŷ₀ inside Xᵢ;
* joint precision π̂ᵢ = Σⱼ (wᵢⱼ/nⱼ) Σ_{x∈X̂ⱼ} pᵢ(x) f(x) / qᵢ(x), qᵢ = Σⱼ wᵢⱼ pⱼ,
  wᵢⱼ ∝ nⱼ Σₓ pⱼ(x) pᵢ(x) (:func:`mixture_weights`) — unbiased for fixed n whenever
  qᵢ > 0 on Xᵢ, which wᵢᵢ > 0 (nᵢ ≥ 1) guarantees;
* joint recall ρ̂ᵢ = θ̂ ν̂ᵢ: θ̂ the pool recall (share of Ŷ₀ inside the pool X), ν̂ᵢ the
  pooled recall, self-normalized over *all* verification draws.  One deviation from the
  letter of 003 §"Estimating recall jointly", on purpose: ν̂ᵢ's target is uniform over
  Y = X ∩ 𝒴 (the whole pool), so its proposal must be positive on all of X; 003's qᵢ
  vanishes on the systems that do not overlap Xᵢ (wᵢⱼ = 0 there) and would leave those
  correct instances out of the denominator (a bias upward).  We use the mixture the draws
  were actually drawn from, q₀ = Σⱼ (nⱼ/N) pⱼ, and write 003's u(x) as f(x) (the
  exhaustive sample is uniform over 𝒴, so p'(x) ∝ f(x)).

**Variances** (delta method): each estimator is linearized into a sum of per-draw
*influence* values ψ; draws of different strata are independent and draws within a
stratum i.i.d., so Cov(k, l) = Σⱼ nⱼ/(nⱼ−1) [Σ_{s∈j} ψₖψₗ − (Σψₖ)(Σψₗ)/nⱼ]
(:func:`stratified_cov`); the exhaustive sample is a cluster sample of units (documents),
linearized per unit (:func:`exhaustive_stats`).  F1 = 2πρ/(π+ρ) and the paired
differences then follow by the delta method from the joint covariance of (π, ν, θ)
(:func:`assemble`), so "is B better than A?" uses the shared labels' covariance.  Wald
intervals: with few draws and a precision near 0 or 1 a Wilson (score) or Beta-posterior
interval covers better — the simple estimator's Wilson interval is :func:`wilson`.

**Adaptive sample size** (003 §"Adaptively choosing the number of samples"):
:func:`variance_bound` is the variance of π̂ₘ as a function of nₘ with every label known so
far and each unverified instance counted as a coin flip (f̃ = ½, the worst case of one
Bernoulli), exact over the cells; :func:`required_draws` bisects on it for the smallest nₘ
with half-width z·√V ≤ ε.  The simple estimator gets the same rule with wᵢⱼ = 1[i = j].
:func:`required_exhaustive` does the same for the exhaustive sample size of recall.
:func:`top_up` sizes the draws still missing when the realized half-width is above ε after
the sized rounds (the simulation's fair comparison of costs to reach ε, issue 17).

**Other proposals** (issue 17, measured in ``benchmarks/results/ondemand.md``): the joint
estimators take the proposal each stratum was actually drawn from, ``Rp[..., j, c]``
(003's estimator generalizes to any per-stratum rⱼ: qᵢ = Σⱼ wᵢⱼ rⱼ, unbiased for fixed sizes
and proposals), and ``rule="balance"`` weights wᵢⱼ ∝ nⱼ (the balance heuristic).  Measured
and removed (their code is at commit 50942ac): a water-filling proposal over the cells earlier
strata under-sample, and a known-part + remainder estimator (the labeled instances exactly,
the rest drawn); neither beat 003's protocol on the synthetic setting.

**Post-stratified joint precision** (our extension beyond 003's estimator; issue 17):
:func:`post_parts` pools every verified draw by *post-stratum* — the cell pattern over the
systems submitted so far (:func:`post_strata`) — and weights the strata's correct rates by
their known sizes, π̂ᵢ = Σ_{g⊆Xᵢ} (N_g/|Xᵢ|) r̂_g (the pooled recall's variance sees the
post-strata too); :func:`post_variance_bound` /
:func:`post_required_draws` size a new system by it.  The strata may be drawn from any
per-stratum proposal ``Rp`` that is constant on the post-strata of the systems submitted when
it is used (a draw that lands in a post-stratum is then uniform on it); :func:`post_fill` is
such a proposal for a new system: it tops up the post-strata of Xₘ that the earlier strata
under-sample (our extension, issue 17; ``benchmarks/results/ondemand.md``).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .ondemand_domain import domain_precision, pad_labels, post_domain, with_skipped

__all__ = [
    "Z95", "FILL", "Cells", "cells_of", "overlaps", "mixture_weights", "proposals", "pooled_proposal",
    "tally", "precision_influence", "simple_precision_influence", "pooled_recall_influence",
    "stratified_cov", "exhaustive_stats", "Estimates", "assemble", "joint_parts", "joint_estimates", "simple_estimates",
    "differences", "cell_fill", "round_size", "variance_bound", "required_draws", "required_exhaustive", "wilson", "f1_of",
    "precision_half_width", "top_up",
    "post_strata", "nonempty_prob", "post_precision", "post_parts", "post_variance_bound", "post_required_draws",
    "stratum_mass", "post_fill", "post_variance_bounds",
]

#: two-sided 95% normal quantile
Z95 = 1.959963984540054
#: the value an unverified instance's label is counted as in the variance bound
FILL = 0.5


class Cells(NamedTuple):
    """Instances grouped by their sampling probabilities (module docstring, "Cells").

    ``P[c, j]`` is p_j(x) of one instance x of cell c; ``size[c]`` the number of instances."""

    P: np.ndarray
    size: np.ndarray


def cells_of(P_items) -> tuple[Cells, np.ndarray]:
    """Group instances with identical rows of ``P_items`` (instances × systems) into cells;
    returns the cells and the cell of every instance."""
    P_items = np.asarray(P_items, dtype=np.float64)
    if P_items.ndim != 2:
        raise ValueError(f"P_items must be instances × systems, got shape {P_items.shape}")
    uniq, inv, counts = np.unique(P_items, axis=0, return_inverse=True, return_counts=True)
    return Cells(uniq, counts.astype(np.float64)), inv.reshape(-1)


def overlaps(cells: Cells) -> np.ndarray:
    """O[i, j] = Σₓ pᵢ(x) pⱼ(x) (003 §"Estimating precision jointly")."""
    return np.einsum("c,ci,cj->ij", cells.size, cells.P, cells.P)


def stratum_overlaps(cells: Cells, Rp) -> np.ndarray:
    """O[..., i, j] = Σₓ pᵢ(x) rⱼ(x) for per-stratum proposals ``Rp[..., j, c]`` (the
    probability of one instance of cell c under stratum j's proposal)."""
    return np.einsum("c,ci,...jc->...ij", cells.size, cells.P, Rp)


def mixture_weights(cells: Cells, n, O=None, Rp=None, rule: str = "overlap") -> np.ndarray:
    """wᵢⱼ ∝ nⱼ Σₓ rⱼ(x) pᵢ(x), rows summing to one (003 §"Estimating precision jointly",
    rⱼ = pⱼ unless per-stratum proposals ``Rp`` are given); a row with no draw overlapping
    system i is all zero.  ``n``: (..., M) draws per stratum.  ``rule="balance"``:
    wᵢⱼ ∝ nⱼ 1[Oᵢⱼ > 0] (the balance heuristic: every draw reaching Xᵢ weighs pᵢ/D with D
    the density of all draws)."""
    if O is None:
        O = overlaps(cells) if Rp is None else stratum_overlaps(cells, Rp)
    n = np.asarray(n, dtype=np.float64)
    w = n[..., None, :] * (O if rule == "overlap" else (O > 0))
    s = w.sum(-1, keepdims=True)
    return np.where(s > 0, w / np.where(s > 0, s, 1.0), 0.0)


def proposals(cells: Cells, W, Rp=None) -> np.ndarray:
    """qᵢ on every cell: Q[..., c, i] = Σⱼ wᵢⱼ rⱼ(c) (003 eq. for π̂ᵢ⁽ʲ⁾; rⱼ = pⱼ unless
    per-stratum proposals ``Rp[..., j, c]`` are given: the proposal each stratum was
    actually drawn from)."""
    if Rp is None:
        return np.einsum("...ij,cj->...ci", W, cells.P)
    return np.einsum("...ij,...jc->...ci", W, Rp)


def pooled_proposal(cells: Cells, n, Rp=None) -> np.ndarray:
    """q₀ = Σⱼ (nⱼ/N) rⱼ, the mixture all verification draws come from (module docstring)."""
    n = np.asarray(n, dtype=np.float64)
    N = n.sum(-1, keepdims=True)
    if Rp is None:
        return np.einsum("...j,cj->...c", n / np.where(N > 0, N, 1.0), cells.P)
    return np.einsum("...j,...jc->...c", n / np.where(N > 0, N, 1.0), Rp)


def tally(n_strata: int, n_cells: int, stratum, cell, label, mask=None) -> np.ndarray:
    """Counts T[..., j, c, f] of draws (stratum, cell, label); leading axes of the inputs
    beyond the last are batch axes; ``mask`` selects the draws that count."""
    stratum, cell, label = (np.asarray(a, dtype=np.int64) for a in (stratum, cell, label))
    stratum, cell, label = np.broadcast_arrays(stratum, cell, label)
    batch = stratum.shape[:-1]
    nb = int(np.prod(batch)) if batch else 1
    flat = (np.arange(nb).reshape(batch + (1,)) * (n_strata * n_cells * 2) if batch else 0) \
        + (stratum * n_cells + cell) * 2 + label
    wts = None if mask is None else np.broadcast_to(mask, flat.shape).astype(np.float64).ravel()
    T = np.bincount(flat.ravel(), weights=wts, minlength=nb * n_strata * n_cells * 2)
    return T.reshape(batch + (n_strata, n_cells, 2))


def _ratio(a, b):
    return np.where(b > 0, a / np.where(b > 0, b, 1.0), 0.0)


def precision_influence(cells: Cells, n, W=None, Rp=None, rule: str = "overlap") -> np.ndarray:
    """ψ[..., i, j, c, f] = (wᵢⱼ/nⱼ) pᵢ(c) f / qᵢ(c): the joint precision estimator is
    π̂ᵢ = Σ over draws of ψᵢ (003 §"Estimating precision jointly"); with ``Rp`` the strata's
    actual proposals (unbiased for fixed n and proposals: E = Σⱼ wᵢⱼ Σₓ rⱼ pᵢ f/qᵢ = πᵢ)."""
    W = mixture_weights(cells, n, Rp=Rp, rule=rule) if W is None else W
    Q = proposals(cells, W, Rp)                               # (..., C, M)
    H = _ratio(cells.P, Q)                                    # pᵢ/qᵢ, 0 off Xᵢ
    coef = _ratio(W, np.asarray(n, dtype=np.float64)[..., None, :])   # wᵢⱼ/nⱼ
    f = np.array([0.0, 1.0])
    return np.einsum("...ij,...ci,f->...ijcf", coef, H, f)


def simple_precision_influence(cells: Cells, n, Rp=None) -> np.ndarray:
    """ψ[..., i, j, c, f] = 1[i = j] f / nᵢ: the simple estimator (003 §"Simple estimator").
    ``Rp[..., j, c]``: the proposal each stratum was drawn from, when not pⱼ — then each own
    draw is importance weighted, ψ = 1[i = j] pᵢ(c) f / (nᵢ rᵢ(c)) (unbiased for fixed nᵢ)."""
    n = np.asarray(n, dtype=np.float64)
    M, C = cells.P.shape[1], cells.P.shape[0]
    coef = np.eye(M) * _ratio(1.0, n)[..., None, :]
    H = np.ones(C) if Rp is None else np.swapaxes(_ratio(cells.P.T, np.asarray(Rp, dtype=np.float64)), -1, -2)
    if Rp is None:
        return np.einsum("...ij,c,f->...ijcf", coef, H, np.array([0.0, 1.0]))
    return np.einsum("...ij,...ci,f->...ijcf", coef, H, np.array([0.0, 1.0]))


def pooled_recall_influence(cells: Cells, T, n, Rp=None) -> tuple[np.ndarray, np.ndarray]:
    """(ν̂, ψ): the pooled recall ν̂ᵢ = Σ f gᵢ/q₀ / Σ f/q₀ over every verification draw and
    its linearization ψᵢ = (a − ν̂ᵢ b)/(N B̂), a = f gᵢ/q₀, b = f/q₀
    (003 §"Estimating recall jointly", with q₀ as in the module docstring)."""
    n = np.asarray(n, dtype=np.float64)
    N = n.sum(-1)
    q0 = pooled_proposal(cells, n, Rp)                        # (..., C)
    G = (cells.P > 0).astype(np.float64)                      # (C, M)
    inv_q = _ratio(1.0, q0)
    T1 = T[..., 1]                                            # (..., M, C)
    B = np.einsum("...jc,...c->...", T1, inv_q) / np.where(N > 0, N, 1.0)
    A = np.einsum("...jc,...c,ci->...i", T1, inv_q, G) / np.where(N > 0, N, 1.0)[..., None]
    nu = _ratio(A, B[..., None])
    scale = _ratio(1.0, N * B)                                # 1/(N B̂)
    a_minus = (G - nu[..., None, :]) * inv_q[..., :, None]    # (..., C, M): (gᵢ − ν̂ᵢ)/q₀
    f = np.array([0.0, 1.0])
    psi = np.einsum("...,...ci,j,f->...ijcf", scale, a_minus, np.ones(T.shape[-3]), f)   # every stratum
    return nu, psi


def stratified_cov(T, psi) -> np.ndarray:
    """Cov(k, l) = Σⱼ nⱼ/(nⱼ−1) [Σ_{s∈j} ψₖψₗ − (Σ_{s∈j}ψₖ)(Σ_{s∈j}ψₗ)/nⱼ] for influence
    values ψ[..., k, j, c, f] of draws tallied in T[..., j, c, f] (strata independent,
    draws i.i.d. within a stratum).  A stratum with one draw adds nothing (no spread to
    estimate from)."""
    nj = T.sum((-1, -2))                                      # (..., M)
    s1 = np.einsum("...jcf,...kjcf->...kj", T, psi)
    s2 = np.einsum("...jcf,...kjcf,...ljcf->...klj", T, psi, psi)
    inner = s2 - s1[..., :, None, :] * s1[..., None, :, :] * _ratio(1.0, nj)[..., None, None, :]
    fac = np.where(nj > 1, nj / np.where(nj > 1, nj - 1, 1.0), 0.0)
    return np.einsum("...klj,...j->...kl", inner, fac)


def exhaustive_stats(t, m, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """Ratio estimates and their covariance from a cluster sample of units (003 §"Problem
    statement": annotating a random document completely).  ``t[..., u, k]``: instances of
    unit u counted by quantity k (in the pool, in Xᵢ); ``m[..., u]``: instances found in
    unit u; ``mask[..., u]`` selects the units.  est_k = Σ t / Σ m; Cov by the per-unit
    linearization (t_uk − est_k m_u)/Σm, scaled by n_u/(n_u − 1)."""
    t = np.asarray(t, dtype=np.float64)
    m = np.asarray(m, dtype=np.float64)
    if mask is not None:
        mask = np.asarray(mask, dtype=np.float64)
        t = t * mask[..., None]
        m = m * mask
        nu = mask.sum(-1)
    else:
        nu = np.full(m.shape[:-1], float(m.shape[-1]))
    tot = m.sum(-1)
    est = _ratio(t.sum(-2), tot[..., None])
    psi = (t - est[..., None, :] * m[..., None]) * _ratio(1.0, tot)[..., None, None]
    fac = np.where(nu > 1, nu / np.where(nu > 1, nu - 1, 1.0), 0.0)
    cov = np.einsum("...uk,...ul->...kl", psi, psi) * fac[..., None, None]
    return est, cov


def f1_of(p, r):
    """F1 = 2πρ/(π+ρ) (0 where both are 0)."""
    return _ratio(2 * p * r, p + r)


class Estimates(NamedTuple):
    """Per system: ``value[..., 3M]`` = (precision (M), recall (M), F1 (M)) and their
    covariance ``cov[..., 3M, 3M]``; ``half_width`` = z √diag."""

    value: np.ndarray
    cov: np.ndarray

    @property
    def half_width(self):
        return Z95 * np.sqrt(np.maximum(np.diagonal(self.cov, axis1=-2, axis2=-1), 0.0))


def assemble(pi, rho_parts, cov_in, joint: bool) -> Estimates:
    """(π, ρ, F1) and their covariance by the delta method.

    joint: inputs v = (π (M), ν (M), θ), ρᵢ = θ νᵢ; simple: v = (π (M), ρ (M)).
    ``cov_in`` is the covariance of v.  ∂F1/∂π = 2ρ²/(π+ρ)², ∂F1/∂ρ = 2π²/(π+ρ)²."""
    pi = np.asarray(pi, dtype=np.float64)
    M = pi.shape[-1]
    batch = pi.shape[:-1]
    if joint:
        nu, theta = rho_parts
        rho = theta[..., None] * nu
    else:
        (rho,) = rho_parts
    f1 = f1_of(pi, rho)
    s2 = (pi + rho) ** 2
    dF_dp = _ratio(2 * rho ** 2, s2)
    dF_dr = _ratio(2 * pi ** 2, s2)
    K = 2 * M + (1 if joint else 0)
    J = np.zeros(batch + (3 * M, K))
    eye = np.eye(M)
    J[..., :M, :M] = eye
    if joint:
        J[..., M:2 * M, M:2 * M] = eye * theta[..., None, None]
        J[..., M:2 * M, 2 * M] = nu
        drho_dnu = eye * theta[..., None, None]
        J[..., 2 * M:, :M] = eye * dF_dp[..., None, :]
        J[..., 2 * M:, M:2 * M] = dF_dr[..., :, None] * drho_dnu
        J[..., 2 * M:, 2 * M] = dF_dr * nu
    else:
        J[..., M:2 * M, M:2 * M] = eye
        J[..., 2 * M:, :M] = eye * dF_dp[..., None, :]
        J[..., 2 * M:, M:2 * M] = eye * dF_dr[..., None, :]
    value = np.concatenate([pi, rho, f1], axis=-1)
    cov = np.einsum("...ak,...kl,...bl->...ab", J, cov_in, J)
    return Estimates(value, cov)


def joint_parts(cells: Cells, T, n, Rp=None, rule: str = "overlap", skipped=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(π̂, ν̂, Cov of (π̂, ν̂)) from the verification draws alone (003 §"Joint estimator");
    ``Rp[..., j, c]``: the proposal stratum j was drawn from (pⱼ when not given); ``skipped[..., j, c]``:
    draws of instances nobody can verify (:func:`~bayes_eval.ondemand_domain.domain_precision`; ``n`` counts them)."""
    n = np.asarray(n, dtype=np.float64)
    pi, psi_p, T = domain_precision(precision_influence(cells, n, Rp=Rp, rule=rule), T, skipped)
    nu, psi_n = pooled_recall_influence(cells, T, n, Rp)
    psi_n = pad_labels(psi_n, T.shape[-1])
    batch = np.broadcast_shapes(T.shape[:-3], psi_p.shape[:-4], psi_n.shape[:-4])
    psi = np.concatenate([np.broadcast_to(psi_p, batch + psi_p.shape[-4:]),
                          np.broadcast_to(psi_n, batch + psi_n.shape[-4:])], axis=-4)
    return pi, nu, stratified_cov(T, psi)


def joint_estimates(cells: Cells, T, n, theta, var_theta, parts=None) -> Estimates:
    """The joint estimators of every system (003 §"Joint estimator") from the verification
    tallies ``T`` with draws ``n`` per system and the pool recall θ̂ (its variance);
    ``parts``: :func:`joint_parts` already computed."""
    M = cells.P.shape[1]
    pi, nu, cov_v = joint_parts(cells, T, n) if parts is None else parts
    batch = pi.shape[:-1]
    cov_in = np.zeros(batch + (2 * M + 1, 2 * M + 1))
    cov_in[..., :2 * M, :2 * M] = cov_v
    cov_in[..., 2 * M, 2 * M] = var_theta
    return assemble(pi, (nu, np.asarray(theta, dtype=np.float64)), cov_in, joint=True)


def simple_estimates(cells: Cells, T, n, rho, cov_rho, Rp=None, skipped=None) -> Estimates:
    """The simple estimators (003 §"Simple estimator"): π̂ᵢ from X̂ᵢ alone, ρ̂ᵢ from Ŷ₀
    (``rho``, ``cov_rho`` from :func:`exhaustive_stats`); ``Rp``: the strata's proposals when
    they are not the pⱼ (:func:`simple_precision_influence`); ``skipped``: :func:`~bayes_eval.ondemand_domain.domain_precision`."""
    n = np.asarray(n, dtype=np.float64)
    M = cells.P.shape[1]
    pi, psi, T = domain_precision(simple_precision_influence(cells, n, Rp), T, skipped)
    cov_p = stratified_cov(T, psi)
    batch = pi.shape[:-1]
    cov_in = np.zeros(batch + (2 * M, 2 * M))
    cov_in[..., :M, :M] = cov_p
    cov_in[..., M:, M:] = cov_rho
    return assemble(pi, (np.asarray(rho, dtype=np.float64),), cov_in, joint=False)


def differences(est: Estimates, a: int, b: int, M: int) -> tuple[np.ndarray, np.ndarray]:
    """Paired differences system b − system a of (precision, recall, F1) and their 95%
    half-widths, from the shared labels' covariance: Var = C_bb + C_aa − 2 C_ab."""
    ia = np.array([a, M + a, 2 * M + a])
    ib = np.array([b, M + b, 2 * M + b])
    v = est.value[..., ib] - est.value[..., ia]
    C = est.cov
    var = C[..., ib, ib] + C[..., ia, ia] - 2 * C[..., ia, ib]
    return v, Z95 * np.sqrt(np.maximum(var, 0.0))


def wilson(k, n, z: float = Z95):
    """Wilson score interval (lo, hi) for k successes in n: better than Wald for small n or
    a proportion near 0 or 1 (the simple precision estimator's small-sample interval)."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    p = _ratio(k, n)
    den = 1 + z * z / np.where(n > 0, n, 1.0)
    mid = (p + z * z / (2 * np.where(n > 0, n, 1.0))) / den
    half = z * np.sqrt(np.maximum(p * (1 - p) / np.where(n > 0, n, 1.0)
                                  + z * z / (4 * np.where(n > 0, n, 1.0) ** 2), 0)) / den
    return np.where(n > 0, mid - half, 0.0), np.where(n > 0, mid + half, 1.0)


# ------------------------------------------------------------------ realized widths, top-ups
def precision_half_width(T, psi) -> np.ndarray:
    """z √Var π̂ᵢ for every system from the influence values of precision alone."""
    var = np.diagonal(stratified_cov(T, psi), axis1=-2, axis2=-1)
    return Z95 * np.sqrt(np.maximum(var, 0.0))


def top_up(hw, n, epsilon: float, n_max: int) -> np.ndarray:
    """Draws to add when the realized half-width ``hw`` (after the sized rounds) is still
    above ε: the half-width falls like 1/√n, so n((hw/ε)² − 1) more, at least one, at most
    up to ``n_max``; 0 where ε is reached."""
    hw = np.asarray(hw, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    add = np.maximum(np.ceil(n * ((hw / epsilon) ** 2 - 1) - 1e-9), 1.0)
    return np.where((hw > epsilon) & (n < n_max), np.minimum(add, n_max - n), 0.0)


# ------------------------------------------------------------------ adaptive sample size
def cell_fill(size, pos, ver):
    """f̃ per cell for the variance bound: the known labels, and for each unverified
    instance the cell's posterior mean (pos + 1)/(ver + 2) under a uniform prior — ``FILL``
    = ½ in a cell with no label yet (the worst case of one Bernoulli)."""
    size = np.asarray(size, dtype=np.float64)
    return (pos + (size - ver) * (pos + 2 * FILL) / (ver + 2)) / np.where(size > 0, size, 1.0)


def round_size(required, have, last: bool, frac: float = 0.5):
    """Draws to add in one sizing round (003 §"Summary", done in rounds so that the bound
    learns the new system's labels): half the shortfall (``frac`` of it), at least one, all of
    it in the last round."""
    short = np.maximum(np.asarray(required, dtype=np.float64) - have, 0.0)
    return short if last else np.where(short > 0, np.maximum(np.ceil(short * frac), 1.0), 0.0)


def variance_bound(cells: Cells, n, m: int, fill, joint: bool = True, O=None, Rp=None,
                   rule: str = "overlap") -> np.ndarray:
    """The variance of π̂ₘ with ``n[..., :]`` draws per stratum (nₘ the candidate), each
    stratum's variance Var_{rⱼ}[pₘ f/qₘ] computed exactly over the cells with f replaced by
    ``fill[..., c]`` — the mean over the cell of the known labels and ``FILL`` for the
    unverified (003 §"Adaptively choosing the number of samples").  ``Rp[..., j, c]``: the
    strata's proposals (rⱼ = pⱼ when not given).  ``inf`` where qₘ = 0 on part of Xₘ
    (nothing drawn could reach it: the estimator would be biased)."""
    n = np.asarray(n, dtype=np.float64)
    fill = np.asarray(fill, dtype=np.float64)
    pm = cells.P[:, m]
    if not joint:
        pit = np.einsum("c,...c->...", cells.size * pm, fill)
        return _ratio(pit * (1 - pit), n[..., m])
    if Rp is None:
        O = overlaps(cells) if O is None else O
        Om = O[m]
        Rp = np.swapaxes(np.broadcast_to(cells.P, fill.shape[:-1] + cells.P.shape), -1, -2)
    else:
        Om = stratum_overlaps(cells, Rp)[..., m, :]
    w = n * (Om if rule == "overlap" else (Om > 0))
    s = w.sum(-1, keepdims=True)
    w = _ratio(w, s)                                          # (..., M)
    q = np.einsum("...j,...jc->...c", w, Rp)
    support = (pm > 0) & (cells.size > 0)
    uncovered = np.any(support & (q <= 0), axis=-1)
    h = np.where(pm > 0, pm / np.where(q > 0, q, 1.0), 0.0)
    mass = cells.size * Rp                                    # (..., M, C): Σ over a cell of rⱼ
    e1 = np.einsum("...jc,...c->...j", mass, h * fill)
    e2 = np.einsum("...jc,...c->...j", mass, h * h * fill)
    var_j = np.maximum(e2 - e1 * e1, 0.0)
    V = np.sum(np.where(n > 0, _ratio(w * w, n) * var_j, 0.0), axis=-1)
    return np.where(uncovered, np.inf, V)


def required_draws(cells: Cells, n, m: int, fill, epsilon: float, n_max: int, joint: bool = True,
                   z: float = Z95, Rp=None, rule: str = "overlap", fill_prop=None) -> np.ndarray:
    """The smallest nₘ in [0, n_max] whose bound gives half-width z√V ≤ ε, by bisection
    (the bound decreases in nₘ; 003 §"Adaptively choosing the number of samples"); n_max
    where even n_max does not reach ε.  ``n[..., m]`` is ignored."""
    O = overlaps(cells) if Rp is None else None
    return _bisect_draws(lambda nn, R: variance_bound(cells, nn, m, fill, joint, O, Rp=R, rule=rule),
                         n, m, epsilon, n_max, z, Rp, fill_prop)


def _bisect_draws(bound, n, m: int, epsilon: float, n_max: int, z: float, Rp=None, fill_prop=None) -> np.ndarray:
    """The smallest nₘ in [0, n_max] with z √bound(n, Rp) ≤ ε, by bisection (``bound`` falls
    in nₘ); ``fill_prop(nₘ)``, when given, is stratum m's proposal at that size.  Shared by
    :func:`required_draws` and :func:`post_required_draws`."""
    n = np.array(n, dtype=np.float64)
    target = (epsilon / z) ** 2
    lo = np.zeros(n.shape[:-1])
    hi = np.full(n.shape[:-1], float(n_max))
    while np.any(lo < hi):
        mid = np.floor((lo + hi) / 2)
        n[..., m] = mid
        R = Rp
        if fill_prop is not None:                            # stratum m's proposal depends on nₘ
            R = np.array(Rp, dtype=np.float64, copy=True)
            R[..., m, :] = fill_prop(mid)
        ok = bound(n, R) <= target
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid + 1)
    return lo.astype(np.int64)


def required_exhaustive(theta, nu, var_nu, rho, epsilon: float, n_max: int, joint: bool = True,
                        z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """Exhaustive-sample size for every system's recall half-width to reach ε (the analogue
    of :func:`required_draws` for recall, where the exhaustive sample is the limit).

    joint: Var ρ̂ᵢ ≈ νᵢ² θ(1−θ)/n₀ + θ² Var ν̂ᵢ — only the first term falls with n₀;
    simple: Var ρ̂ᵢ = ρᵢ(1−ρᵢ)/n₀.  Plug-in values (smoothed by the caller).  Returns
    (n₀ capped at n_max, reachable: whether ε can be reached by exhaustive samples alone;
    where not, more verifications are what is missing)."""
    t = (epsilon / z) ** 2
    if joint:
        room = t - theta[..., None] ** 2 * var_nu
        need = _ratio(nu ** 2 * (theta * (1 - theta))[..., None], np.maximum(room, 1e-300))
        reach = np.all(room > 0, axis=-1)
    else:
        need = rho * (1 - rho) / t
        reach = np.ones(np.shape(rho)[:-1], dtype=bool)
    n0 = np.ceil(np.max(need, axis=-1))
    return np.minimum(np.where(reach, n0, n_max), n_max).astype(np.int64), reach


# ------------------------------------------------------------------ post-stratified precision
# Our extension beyond 003 §"Estimating precision jointly" (issue 17): 003's estimator is
# importance sampling (a Hansen–Hurwitz sum over draws), so the random number of draws landing
# in each cell is part of its variance.  With uniform pⱼ, a draw of stratum j that lands in a
# cell is, given that, a uniform draw from the cell — whatever j is — so every draw in a cell
# estimates the cell's correct rate, and precision is a known-size-weighted sum of those rates.
class PostStrata(NamedTuple):
    """Post-strata: the cells merged by their pattern over the ``active`` systems.

    ``group[c]``: the post-stratum of cell c; ``P[g, j]`` = pⱼ(x) of an instance of g (the
    same for every instance: uniform pⱼ, g inside or outside Xⱼ); ``size[g]`` = N_g."""

    group: np.ndarray
    P: np.ndarray
    size: np.ndarray


def post_strata(cells: Cells, active=None) -> PostStrata:
    """The post-strata of the systems submitted so far (``active[j]``; all when None): cells
    with the same membership in the active Xⱼ are merged — a later system's cells are not known
    when an earlier one is evaluated, and finer strata only empty out.  When system m arrives
    the strata split by membership in Xₘ; draws made earlier stay uniform within the parts."""
    M = cells.P.shape[1]
    active = np.ones(M, dtype=bool) if active is None else np.asarray(active, dtype=bool)
    key = np.where(active[None, :], cells.P, 0.0)
    uniq, group = np.unique(key, axis=0, return_inverse=True)
    group = group.reshape(-1)
    size = np.bincount(group, weights=cells.size, minlength=len(uniq))
    return PostStrata(group, uniq, size)


def _to_strata(x, ps: PostStrata) -> np.ndarray:
    """Sum a per-cell array ``x[..., c]`` into post-strata ``[..., g]``."""
    ind = np.zeros((len(ps.group), len(ps.size)))
    ind[np.arange(len(ps.group)), ps.group] = 1.0
    return np.asarray(x, dtype=np.float64) @ ind


def stratum_mass(cells: Cells, ps: PostStrata, Rp=None) -> np.ndarray:
    """s[..., g, j] = the probability that one draw of stratum j lands in post-stratum g: the
    mass of rⱼ on g, Σ_{c∈g} size_c rⱼ(c) (``Rp[..., j, c]``, the per-instance probability of
    cell c under stratum j's proposal); N_g pⱼ(g) when ``Rp`` is None (uniform pⱼ)."""
    if Rp is None:
        return ps.size[:, None] * ps.P
    mass = _to_strata(cells.size * np.asarray(Rp, dtype=np.float64), ps)    # (..., M, G)
    return np.swapaxes(mass, -1, -2)


def _check_constant(cells: Cells, ps: PostStrata, Rp, n) -> None:
    """Raise unless every stratum with draws has a proposal constant on each post-stratum (else
    a draw in g is not uniform on g and the post-stratified estimator is biased)."""
    Rp = np.asarray(Rp, dtype=np.float64)
    mean = _ratio(_to_strata(cells.size * Rp, ps), ps.size)[..., ps.group]   # (..., M, C)
    dev = np.abs(Rp - mean) * (cells.size > 0)
    used = np.asarray(n, dtype=np.float64)[..., :, None] > 0
    if np.any(used & (dev > 1e-9 * np.maximum(np.abs(Rp).max(-1, keepdims=True), 1e-300))):
        raise ValueError("a stratum's proposal Rp is not constant on the post-strata of the active systems")


def nonempty_prob(ps: PostStrata, n, mass=None) -> tuple[np.ndarray, np.ndarray]:
    """(P(n_g ≥ 1), λ_g) for fixed stratum sizes ``n[..., j]``: a draw of stratum j lands in g
    with probability s_jg (``mass[..., g, j]`` from :func:`stratum_mass`; N_g pⱼ(g) for uniform
    pⱼ when None), so P(n_g = 0) = Πⱼ (1 − s_jg)^{nⱼ}; λ_g = Σⱼ nⱼ s_jg is the expected number
    of draws in g."""
    n = np.asarray(n, dtype=np.float64)
    s = ps.size[:, None] * ps.P if mass is None else mass
    s = np.clip(s, 0.0, 1.0)                                  # (..., G, M)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_keep = np.where(s < 1, np.log1p(-np.minimum(s, 1.0)), -np.inf)
        terms = np.where(n[..., None, :] > 0, n[..., None, :] * log_keep, 0.0)
    p_empty = np.exp(terms.sum(-1))
    lam = np.einsum("...j,...gj->...g", n, s)
    return 1.0 - p_empty, lam


def post_precision(cells: Cells, T, n, active=None, prior: float = 0.5, Rp=None,
                   check: bool = True, skipped=None) -> tuple[np.ndarray, np.ndarray, PostStrata]:
    """(π̂, Cov π̂, strata): the post-stratified precision of every system from the tallies
    ``T[..., j, c, f]`` of draws made with fixed sizes ``n[..., j]``.

    Post-strata (:func:`post_strata`) of the ``active`` systems — the systems submitted so far,
    all by default; every system with draws must be active (or its draws are not uniform within
    a stratum), and so must every system estimated (a system with no draws of its own — Xₘ
    covered by earlier draws — is estimated from the strata it splits).
    π̂ᵢ = Σ_g a_ig r̂_g 1[n_g ≥ 1] / P(n_g ≥ 1), a_ig = N_g pᵢ(g) (N_g/|Xᵢ| on g ⊆ Xᵢ), r̂_g the
    mean label of the n_g draws in g from every stratum.  Given n_g ≥ 1 the draws in g are
    uniform on g, so E[r̂_g 1[n_g ≥ 1]] = r_g P(n_g ≥ 1) and π̂ᵢ is exactly unbiased for fixed n
    — no collapsing of empty strata is needed; a stratum the draws are unlikely to reach
    (small λ_g) is weighted up like an importance-sampling term (for large λ_g, P ≈ 1 and π̂ᵢ
    is the plain post-stratified mean).  Variance, per stratum and conditionally independent
    across strata given the counts (the counts' covariance across strata is neglected):
    v_g = 1[n_g ≥ 1]/P² [r̃(1−r̃)/n_g + r̃²(1−P)], an unbiased estimate of
    Var(r̂_g 1[n_g ≥ 1]/P) with r̃ = (k_g + ``prior``)/(n_g + 2·``prior``) in place of r_g (the
    +½ continuity prior: a stratum of one or two agreeing draws is not given zero variance);
    Cov(π̂ᵢ, π̂ₖ) = Σ_g a_ig a_kg v_g.

    ``Rp[..., j, c]``: the proposal stratum j was drawn from (uniform pⱼ when None), which must
    be constant on every post-stratum (``check`` raises otherwise): a draw landing in g is then
    still uniform on g, P(n_g ≥ 1) uses s_jg = the mass of rⱼ on g (:func:`stratum_mass`), and
    π̂ᵢ stays exactly unbiased for fixed sizes and proposals (our extension, issue 17).

    ``skipped[..., j, c]``: draws of instances nobody can verify (counted in ``n`` and in n_g):
    the precision on the verifiable instances D, π̂ᵢ = N̂ᵢ / (1 − Ûᵢ) with Ûᵢ = Σ_g a_ig u_g 1[n_g ≥ 1] /
    (n_g P(n_g ≥ 1)), u_g the skipped draws in g (:func:`~bayes_eval.ondemand_domain.domain_precision`); its variance per stratum
    that of the draws' values y = 1[f = 1] + π̂ᵢ 1[skipped] in place of f (:func:`_post_rates`)."""
    ps, est, v, _, _, _ = _post_rates(cells, T, n, active, prior, Rp, check, skipped)
    A = ps.size[:, None] * ps.P                               # a_ig, (G, M)
    pi, cov, _ = post_domain(est, v, A)
    return pi, cov, ps


def _post_rates(cells: Cells, T, n, active, prior: float, Rp, check: bool = True, skipped=None):
    """(strata, e_g, v_g, k_g, n_g, P(n_g ≥ 1)): each post-stratum's weighted correct rate
    e_g = r̂_g 1[n_g ≥ 1]/P(n_g ≥ 1) and its variance estimate v_g (:func:`post_precision`'s
    docstring), with the correct draws, the draws and the chance of a draw they come from.
    With ``skipped`` draws: n_g counts them, e_g is the pair (e_g, the same of the skipped draws) and
    v_g a function of π̂ (per system) giving v_g[..., g, i, k], the covariance of the values
    y_i = 1[f = 1] + π̂ᵢ 1[skipped] by the same formula (the +``prior`` on the correct rate r̃, the
    skipped share ũ = u_g/(n_g + 2 ``prior``)); without a skipped draw it is v_g on the diagonal."""
    ps = post_strata(cells, active)
    T = with_skipped(T, skipped)
    if Rp is not None and check:
        _check_constant(cells, ps, Rp, n)
    kg = _to_strata(T[..., 1].sum(-2), ps)                    # (..., G) correct draws
    ng = _to_strata(T.sum((-1, -3)), ps)                      # (..., G) draws
    P1, _ = nonempty_prob(ps, n, stratum_mass(cells, ps, Rp))
    hit = ng > 0
    Pd = np.where(P1 > 0, P1, 1.0)
    est = np.where(hit, _ratio(kg, ng) / Pd, 0.0)
    rt = _ratio(kg + prior, ng + 2 * prior)
    if skipped is None:
        v = np.where(hit, (rt * (1 - rt) / np.where(hit, ng, 1.0) + rt * rt * (1 - P1)) / Pd ** 2, 0.0)
        return ps, est, v, kg, ng, P1
    ug = _to_strata(T[..., 2].sum(-2), ps)
    ut = _ratio(ug, ng + 2 * prior)

    def v(pi):   # the values' mean m_i = r̃ + π̂ᵢ ũ and cross moment r̃ + π̂ᵢ π̂ₖ ũ per stratum
        m = rt[..., :, None] + ut[..., :, None] * pi[..., None, :]                      # (..., G, M)
        c = rt[..., :, None, None] + ut[..., :, None, None] * pi[..., None, :, None] * pi[..., None, None, :]
        mm = m[..., :, :, None] * m[..., :, None, :]
        out = ((c - mm) / np.where(hit, ng, 1.0)[..., None, None] + mm * (1 - P1)[..., None, None]) \
            / (Pd ** 2)[..., None, None]
        return np.where(hit[..., None, None], out, 0.0)

    return ps, (est, np.where(hit, _ratio(ug, ng) / Pd, 0.0)), v, kg, ng, P1


def post_parts(cells: Cells, T, n, active=None, prior: float = 0.5, Rp=None,
               skipped=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(π̂, ν̂, Cov of (π̂, ν̂)) with the post-stratified precision (:func:`post_precision`) and
    003's pooled recall (:func:`pooled_recall_influence`), the drop-in for :func:`joint_parts`.
    The π block of the covariance is :func:`post_precision`'s; the π–ν̂ block is the stratified
    covariance of the linearizations, π̂ᵢ's per draw in g being a_ig [(f − r̃_g)/(n_g P_g) + r̃_g (1 − P_g)/P_g]:
    the ratio r̂_g's, centred on the rate r̃_g = (k_g + ``prior``)/(n_g + 2 ``prior``) that v_g uses (centred on
    r̂_g a post-stratum of one draw has no influence at all), and the draw's share in 1[n_g ≥ 1]/P_g -- its
    linear projection on the count, 1 + (1 − P_g)/P_g (n_g − λ_g) for Poisson counts (Cov(1[n ≥ 1], n) =
    λ(1 − P), Var n = λ): the Horvitz–Thompson term n_g/λ_g where draws rarely reach g, nothing where they
    always do.  Without these two (stop 92) the π–ν̂ covariance was 0.23-0.79 × its spread over samples
    for systems of 8-60 draws (with them 0.71-0.97; at 200-2000 draws both ~1), and the F1 intervals of the
    ``post-fill`` sessions held 0.934 on average, 0.912 for the lowest of ten systems (0.942 and 0.924 with them;
    ``benchmarks/results/ondemand.md``, 500 runs).

    ν̂'s variance is the larger of two estimates: its linearization over the draws, and the
    post-strata's, Σ_g (N_g 1[g ⊆ Xᵢ] − ν̃ᵢ N_g)² v_g / (Σ_g N_g e_g)², the delta method of
    ν̃ᵢ = Σ_{g⊆Xᵢ} N_g e_g / Σ_g N_g e_g with e_g = r̂_g 1[n_g ≥ 1]/P(n_g ≥ 1) and v_g the
    variances of :func:`post_precision` — added to the diagonal where it is
    the larger, so the matrix stays positive semi-definite.  Why (issue 17, measured on
    abt-buy): where Xᵢ holds all but one or two of the pool's correct instances the draws often
    miss those few; ν̂ is then exactly 1 and its linearized variance exactly 0 (ν̂'s interval
    covered 0.34 for systems with ν = 0.977, the recall interval 0.76), whereas a post-stratum
    outside Xᵢ whose few draws were all incorrect keeps a variance through r̃.  ν̃ itself is
    not the point estimate: its ratio of totals weighted by 1/P(n_g ≥ 1) was biased on
    dblp-acm (Σz +25 over ten systems), 003's ν̂ is not.
    ``Rp``: the strata's proposals (:func:`post_precision`); ``skipped``: draws of instances nobody
    can verify (:func:`post_precision`; a skipped draw adds nothing to ν̂)."""
    n = np.asarray(n, dtype=np.float64)
    ps, est, v, kg, ng, P1 = _post_rates(cells, T, n, active, prior, Rp, skipped=skipped)
    A = ps.size[:, None] * ps.P                               # a_ig, (G, M)
    pi, cov_p, keep = post_domain(est, v, A)                 # keep: 1 / (1 − Ûᵢ)
    T = with_skipped(T, skipped)
    nu, psi_n = pooled_recall_influence(cells, T, n, Rp)
    scale = _ratio(1.0, ng * P1)[..., ps.group]               # (..., C)
    A_c = A[ps.group]                                         # (C, M)
    M = cells.P.shape[1]
    # per draw in g: a_ig [(y_i − ȳ_ig)/(n_g P_g) + ȳ_ig (1 − P_g)/P_g] / (1 − Ûᵢ), y_i = (0, 1, π̂ᵢ)[f]
    rt = _ratio(kg + prior, ng + 2 * prior)                   # the rate v_g uses (the +prior)
    if skipped is None:
        y, ybar = np.array([0.0, 1.0]), rt[..., None, ps.group]                           # (f), (..., 1, C)
    else:
        est, v = est[0], v(np.zeros_like(pi))[..., 0, 0]     # the correct rate's, for ν̃ below
        pz = np.where(np.isfinite(pi), pi, 0.0)
        y = np.stack(np.broadcast_arrays(np.zeros_like(pz), np.ones_like(pz), pz), -1)     # (..., M, f)
        ut = _ratio(_to_strata(T[..., 2].sum(-2), ps), ng + 2 * prior)
        ybar = rt[..., None, ps.group] + ut[..., None, ps.group] * pz[..., :, None]       # (..., M, C)
        y = y[..., :, None, :]
    count = np.where(P1 > 0, (1 - P1) / np.where(P1 > 0, P1, 1.0), 0.0)[..., ps.group]   # (1 − P_g)/P_g
    dev = ((y - ybar[..., None]) * scale[..., None, :, None] + (ybar * count[..., None, :])[..., None]) \
        * keep[..., :, None, None]                                                          # (..., M, C, f)
    psi_p = np.einsum("ci,...icf,j->...ijcf", A_c, dev, np.ones(T.shape[-3]))
    psi_n = pad_labels(psi_n, T.shape[-1])
    batch = np.broadcast_shapes(T.shape[:-3], psi_p.shape[:-4], psi_n.shape[:-4])
    psi = np.concatenate([np.broadcast_to(psi_p, batch + psi_p.shape[-4:]),
                          np.broadcast_to(psi_n, batch + psi_n.shape[-4:])], axis=-4)
    cov = stratified_cov(T, psi)
    cov[..., :M, :M] = cov_p                                  # post_precision's
    # the post-strata's variance of the pooled recall
    B = ps.size[:, None] * (ps.P > 0)                         # N_g 1[g ⊆ Xᵢ]
    D = np.einsum("...g,g->...", est, ps.size)                # the pool's correct instances
    nu_t = _ratio(np.einsum("...g,gi->...i", est, B), D[..., None])
    grad = (B - nu_t[..., None, :] * ps.size[:, None]) * _ratio(1.0, D)[..., None, None]
    var_post = np.einsum("...gi,...g->...i", grad ** 2, v)
    idx = np.arange(M, 2 * M)
    cov[..., idx, idx] += np.maximum(var_post - cov[..., idx, idx], 0.0)
    return pi, nu, cov


def _inv_count_factor(lam) -> np.ndarray:
    """h(λ) = λ E[1[n ≥ 1]/n] / P(n ≥ 1) for n ~ Poisson(λ) (→ 1 for small and large λ, ≤ 1.4
    between): tabulated once by its series, interpolated in log λ; 1 + 1/λ past the table."""
    global _H_TABLE
    if _H_TABLE is None:
        grid = np.logspace(-4, 3, 400)
        k = np.arange(1, 2000)
        logpmf = -grid[:, None] + k[None, :] * np.log(grid[:, None]) - np.cumsum(np.log(k))[None, :]
        e = np.sum(np.exp(logpmf) / k, axis=1)
        _H_TABLE = (np.log(grid), grid * e / -np.expm1(-grid))
    lam = np.asarray(lam, dtype=np.float64)
    x, h = _H_TABLE
    inside = np.interp(np.log(np.maximum(lam, 1e-300)), x, h)
    return np.where(lam > 1e3, 1 + 1 / np.maximum(lam, 1.0), np.where(lam < 1e-4, 1.0, inside))


_H_TABLE = None


def post_variance_bound(cells: Cells, n, m: int, fill, active=None, Rp=None) -> np.ndarray:
    """Var π̂ₘ of the post-stratified estimator (:func:`post_precision`) as a function of the
    stratum sizes ``n[..., :]`` (nₘ the candidate), the sizing rule of 003 §"Adaptively choosing
    the number of samples" for our estimator: per post-stratum g ⊆ Xₘ with r_g = the mean over g
    of ``fill`` (known labels, ``FILL``-based fill for the unverified — :func:`cell_fill`),
    a²_mg [r_g(1−r_g) E[1[n_g ≥ 1]/n_g]/P² + r_g²(1−P)/P], n_g taken as Poisson(λ_g)
    (conservative for the binomial counts of fixed strata).  ``Rp``: the strata's proposals
    (:func:`post_precision`)."""
    return post_variance_bounds(cells, n, fill, active, Rp)[..., m]


def post_variance_bounds(cells: Cells, n, fill, active=None, Rp=None) -> np.ndarray:
    """:func:`post_variance_bound` of every system at once, ``[..., i]`` (one pass over the
    post-strata): the bound of a system with no post-stratum reachable is ``inf``, that of a
    system outside the ``active`` ones is meaningless (its cells are merged with others)."""
    ps = post_strata(cells, active)
    fill = np.asarray(fill, dtype=np.float64)
    r = _ratio(_to_strata(fill * cells.size, ps), ps.size)    # (..., G)
    P1, lam = nonempty_prob(ps, n, stratum_mass(cells, ps, Rp))
    a = ps.size[:, None] * ps.P                               # (G, M)
    inv_n = _inv_count_factor(lam) * _ratio(P1, lam)          # E[1[n ≥ 1]/n]
    Pz = np.where(P1 > 0, P1, 1.0)
    v = r * (1 - r) * inv_n / Pz ** 2 + r * r * (1 - P1) / Pz
    V = np.einsum("gi,...g->...i", a * a, np.where(P1 > 0, v, 0.0))
    dead = np.einsum("gi,...g->...i", (a > 0).astype(np.float64), (P1 <= 0).astype(np.float64)) > 0
    return np.where(dead, np.inf, V)


def post_required_draws(cells: Cells, n, m: int, fill, epsilon: float, n_max: int, active=None,
                        z: float = Z95, Rp=None, fill_prop=None) -> np.ndarray:
    """The smallest nₘ in [0, n_max] with z √(:func:`post_variance_bound`) ≤ ε, by bisection
    (the bound falls in nₘ); ``n[..., m]`` is ignored.  ``Rp``: the strata's proposals;
    ``fill_prop(nₘ)``: stratum m's proposal as a function of its size (:func:`post_fill`)."""
    return _bisect_draws(lambda nn, R: post_variance_bound(cells, nn, m, fill, active, R),
                         n, m, epsilon, n_max, z, Rp, fill_prop)


#: The share of pₘ mixed into :func:`post_fill_proposal` (defensive: every instance of Xₘ keeps
#: probability ≥ 0.3 pₘ).  Measured on the synthetic setting (issue 17, 500 repeats): cost ÷ simple
#: 0.499 at 0.1, 0.504 at 0.3; at 0.3 the intervals of earlier systems drift less after later
#: submissions (benchmarks/results/ondemand.md).
POST_FILL_DEFENSIVE = 0.3


def post_fill_proposal(cells: Cells, D_prev, m: int, n_new, active=None, defensive: float = POST_FILL_DEFENSIVE,
                       weight=None) -> np.ndarray:
    """System m's stratum proposal of the ``post-fill`` protocol: :func:`post_fill` mixed with
    pₘ in share ``defensive``.  Both parts are constant on the post-strata of the ``active``
    systems, so the mixture is too (:func:`post_precision` stays exactly unbiased)."""
    r = post_fill(cells, D_prev, m, n_new, active, weight=weight)
    return (1 - defensive) * r + defensive * cells.P[:, m]


def post_fill(cells: Cells, D_prev, m: int, n_new, active=None, weight=None, iters: int = 60) -> np.ndarray:
    """A proposal for system m's stratum, constant on the post-strata of the ``active`` systems
    (so the post-stratified estimator stays exactly unbiased; :func:`post_precision`), that
    tops up the post-strata of Xₘ the earlier strata under-sample (our extension of 003
    §"Adaptively choosing the number of samples", issue 17).  ``D_prev[..., c]`` = Σⱼ nⱼ rⱼ(c),
    the expected draws per instance so far; Λ_g = Σ_{c∈g} size_c D_prev(c).  The nₘ = ``n_new``
    draws are split as x_g = max(λ N_g w_g − Λ_g, 0) with λ such that Σ x_g = nₘ: water-filling
    the expected draws towards N_g w_g — for precision's variance Σ_g a²_mg σ²_g/n_g with
    a_mg = N_g/|Xₘ| the optimum has n_g ∝ N_g σ_g, so ``weight[..., g]`` = σ_g gives that
    (Neyman) allocation and the default w_g = 1 the proportional one.  Returns r[..., c] per
    instance, Σ_c size_c r(c) = 1 (pₘ where nothing is to be drawn).  It depends only on the
    sizes and the proposals so far, not on labels."""
    ps = post_strata(cells, active)
    pm = cells.P[:, m]
    D_prev = np.asarray(D_prev, dtype=np.float64)
    n_new = np.asarray(n_new, dtype=np.float64)
    lam_prev = _to_strata(cells.size * D_prev, ps)            # (..., G)
    w = np.ones(len(ps.size)) if weight is None else np.asarray(weight, dtype=np.float64)
    in_m = ps.P[:, m] > 0                                     # post-strata of Xₘ
    target = np.where(in_m, ps.size * w, 0.0)                 # (..., G)
    prev = np.where(in_m, lam_prev, 0.0)
    tot = target.sum(-1)
    lo = np.zeros(np.broadcast_shapes(n_new.shape, tot.shape))
    hi = (n_new + prev.sum(-1)) / np.where(tot > 0, tot, 1.0) + 1e-12
    for _ in range(iters):
        mid = (lo + hi) / 2
        big = np.maximum(mid[..., None] * target - prev, 0.0).sum(-1) >= n_new
        hi = np.where(big, mid, hi)
        lo = np.where(big, lo, mid)
    x = np.maximum(hi[..., None] * target - prev, 0.0)        # (..., G) draws per post-stratum
    z = x.sum(-1, keepdims=True)
    r = _ratio(x, ps.size)[..., ps.group]                     # per instance, constant on g
    return np.where(z > 0, r / np.where(z > 0, z, 1.0), pm)
