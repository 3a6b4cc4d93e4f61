"""Instances nobody can verify in an on-demand evaluation (seed ``003``): precision on the
instances that can be verified (domain estimation), for :mod:`bayes_eval.ondemand`'s estimators.

An instance may be beyond any annotator (a record nobody can judge).  Being unverifiable is a
property of the instance, not of the draw: the candidates split into D, the instances that can be
verified, and U, those that cannot (known only once drawn and skipped).  As a labeling session's
skips (:mod:`bayes_eval.session_skip`), the estimates then describe D: precision π_D = Σ_{x∈D} pᵢ f /
pᵢ(D); the pooled recall's target is uniform over the correct instances of D (a skipped draw adds to
neither of its sums).  Every estimator here reduces to its plain form, number for number, when no
draw was skipped.  Pure NumPy; no files.
"""
from __future__ import annotations

import numpy as np

__all__ = ["domain_precision", "with_skipped", "pad_labels", "post_domain"]


#: 1 − Û below this is none: every draw of the system skipped (98 × 1/98 leaves 1e-16, not 0)
KEEP_MIN = 1e-9


def _ratio(a, b):
    return np.where(b > 0, a / np.where(b > 0, b, 1.0), 0.0)


def domain_precision(psi_p, T, skipped=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(π̂, ψ, T): a precision estimator Σ over draws of ψᵢ = bᵢ f (``psi_p[..., i, j, c, f]``,
    :func:`~bayes_eval.ondemand.precision_influence` or :func:`~bayes_eval.ondemand.simple_precision_influence`) on the instances that can
    be verified, D, when some cannot (U: an instance every annotator skips).

    The target is the precision on D, π_D = Σ_{x∈D} pᵢ f / pᵢ(D), pᵢ(D) = 1 − pᵢ(U).  The draws
    of U (``skipped[..., j, c]``, counted in their stratum's nⱼ: they were drawn like the others)
    give Ûᵢ = Σ bᵢ 1[x ∈ U], unbiased for pᵢ(U) as N̂ᵢ = Σ bᵢ f is for Σ_{x∈D} pᵢ f; π̂ᵢ = N̂ᵢ / (1 − Ûᵢ)
    is consistent (a ratio: domain estimation, as a session's skips, :mod:`bayes_eval.session_skip`), its
    influence bᵢ (1[f = 1] + π̂ᵢ 1[x ∈ U]) / (1 − Ûᵢ) (delta method).  ``T`` gains a third label column,
    the skipped draws, for :func:`~bayes_eval.ondemand.stratified_cov`.  Without a skipped draw (or ``skipped`` None) Û = 0 and
    π̂, ψ and T are the plain estimator's; where 1 − Ûᵢ ≤ :data:`KEEP_MIN` π̂ᵢ is NaN (the draws say all, or
    more than all, of Xᵢ is unverifiable: no estimate)."""
    T = np.asarray(T, dtype=np.float64)
    pi = np.einsum("...jcf,...ijcf->...i", T, psi_p)
    if skipped is None:
        return pi, psi_p, T
    base = psi_p[..., 1]                                      # bᵢ per (stratum, cell)
    keep = 1.0 - np.einsum("...jc,...ijc->...i", np.asarray(skipped, dtype=np.float64), base)
    ok = keep > KEEP_MIN
    pi = np.where(ok, pi / np.where(ok, keep, 1.0), np.nan)
    third = np.where(ok, pi, 0.0)[..., :, None, None] * base
    psi = np.stack(np.broadcast_arrays(np.zeros_like(base), base, third), -1)
    return pi, psi * _ratio(1.0, keep)[..., :, None, None, None], with_skipped(T, skipped)


def with_skipped(T, skipped) -> np.ndarray:
    """T[..., j, c, f] with the skipped draws as a third label column (T as it is when None)."""
    T = np.asarray(T, dtype=np.float64)
    if skipped is None:
        return T
    U = np.broadcast_to(np.asarray(skipped, dtype=np.float64), T.shape[:-1])
    return np.concatenate([T, U[..., None]], -1)


def pad_labels(psi, k: int) -> np.ndarray:
    """ψ[..., f] padded with zeros to ``k`` label columns (a skipped draw adds nothing to ν̂)."""
    return psi if psi.shape[-1] == k else np.concatenate(
        [psi, np.zeros(psi.shape[:-1] + (k - psi.shape[-1],))], -1)


def post_domain(est, v, A):
    """(π̂, Cov π̂, 1/(1 − Û)) of the post-stratified precision from ``ondemand._post_rates``' ``est`` and ``v``,
    plain (``v[..., g]``) or on the verifiable instances (``est`` a pair (e_g, e_g of the skipped),
    ``v[..., g, i, k]`` the per-system values' covariances: :func:`~bayes_eval.ondemand.post_precision`)."""
    if not isinstance(est, tuple):
        pi = np.einsum("...g,gi->...i", est, A)
        return pi, np.einsum("gi,...g,gk->...ik", A, v, A), np.ones_like(pi)
    keep = 1.0 - np.einsum("...g,gi->...i", est[1], A)
    ok = keep > KEEP_MIN
    pi = np.where(ok, np.einsum("...g,gi->...i", est[0], A) / np.where(ok, keep, 1.0), np.nan)
    s = _ratio(1.0, keep)
    return pi, np.einsum("gi,...gik,gk->...ik", A, v(np.where(ok, pi, 0.0)), A) * s[..., :, None] * s[..., None, :], s
