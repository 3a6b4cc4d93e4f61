"""Estimators of the Poisson designs (000 §2-3, App. D-E), on cells and on item records:
Horvitz--Thompson or model-assisted difference totals per round, their combination over
rounds with predictable weights, the round covariances, and Beta-fitted limits.  The designs
themselves (inclusion probabilities, rounds) are in :mod:`bayes_eval.poisson_designs`, whose
module docstring derives the estimator of one round and the combination.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import poisson as P
from .cells import CellTable

WEIGHTS = ("equal", "linear", "quadratic", "cubic", "precision", "last")

__all__ = [
    "RoundRecord",
    "PoissonEstimate",
    "WEIGHTS",
    "weights_power",
    "check_weights",
    "round_totals",
    "model_round_covariance",
    "round_weights",
    "combine",
    "poisson_estimate",
    "online_poisson_estimate",
    "beta_limits",
]


def weights_power(scheme: str) -> float | None:
    table = {"equal": 0.0, "linear": 1.0, "quadratic": 2.0, "cubic": 3.0}
    if scheme in table:
        return table[scheme]
    if scheme.startswith("power:"):
        try:
            k = float(scheme.split(":", 1)[1])
        except ValueError:
            raise ValueError(f"bad weight scheme {scheme!r}; 'power:k' needs a number k") from None
        if not np.isfinite(k):
            raise ValueError(f"bad weight scheme {scheme!r}; k must be finite")
        return k
    return None


def check_weights(scheme: str) -> None:
    if weights_power(scheme) is None and scheme not in ("precision", "last"):
        raise ValueError(f"weights must be one of {WEIGHTS} or 'power:k', got {scheme!r}")


# --------------------------------------------------------------------------------------
# estimators on cells
# --------------------------------------------------------------------------------------
class RoundRecord(NamedTuple):
    """What the estimator needs of one round, per cell (stack over rounds on axis 0).

    ``b`` (X,) inclusion probability of the round; ``mean`` (X, d) model prediction
    ``m_r`` (zeros for HT); ``labeled_before`` (X, C) labels before the round;
    ``sampled`` (X, C) labels the round brought, by class; ``pred_var`` () predicted
    variance (for ``weights="precision"``).
    """

    b: jnp.ndarray
    mean: jnp.ndarray
    labeled_before: jnp.ndarray
    sampled: jnp.ndarray
    pred_var: jnp.ndarray


def _inv(b):
    return jnp.where(b > 0, 1.0 / jnp.where(b > 0, b, 1.0), 0.0)


def round_totals(cells: CellTable, rec: RoundRecord):
    """Round estimate ``T_r`` (d,) of ``R`` and its HT covariance estimate (d, d).

    ``T_r = K_r + sum_x p_x U_x m_x + sum_x p_x sum_y S_xy (l_xy - m_x) / b_x`` (module
    docstring; 000 eq. 127 with ``m = 0``), and
    ``V_hat_r = sum_x p_x^2 (1/b_x)(1/b_x - 1) sum_y S_xy e e^T`` (000 eq. 28 in vector form,
    conditionally unbiased for the round's covariance).  Jit-compatible.
    """
    p = cells.weight
    lb = rec.labeled_before
    unl = jnp.maximum(cells.size - lb.sum(1), 0.0)
    e = cells.loss - rec.mean[:, None, :]  # (X, C, d)
    inv = _inv(rec.b)
    known = jnp.einsum("x,xc,xcd->d", p, lb, cells.loss)
    model = jnp.einsum("x,xd->d", p * unl, rec.mean)
    corr = jnp.einsum("x,xc,xcd->d", p * inv, rec.sampled, e)
    coef = p**2 * inv * (inv - 1.0)
    cov = jnp.einsum("x,xc,xcd,xce->de", coef, rec.sampled, e, e)
    return known + model + corr, cov


def model_round_covariance(cells: CellTable, rec: RoundRecord, labeled_now, pi_now):
    """Model-assisted estimate of round ``r``'s conditional covariance, given all labels so
    far and the current posterior predictive.

    The round's covariance is ``V_r = sum_{n in U_r} (1/b_n - 1) p_n^2 e_n e_n^T``; its
    terms are known exactly for every item of ``U_r`` labeled by now (in round ``r`` or
    later), and predicted by ``E_{pi_now}[e e^T]`` for items still unlabeled:

    .. math::  \\tilde V_r = \\sum_x (1/b_x - 1) p_x^2 \\Big[\\sum_y (L^{now}_{xy} - L^{r-1}_{xy})
               e_{xy} e_{xy}^T + U^{now}_x \\sum_y \\pi_{now}(y|x) e_{xy} e_{xy}^T\\Big].

    Unlike the HT estimate (000 eq. 28) it does not vanish when a rare relevant item
    happened not to be drawn in round ``r`` but was labeled later, and it is smooth in the
    unknown remainder; it is a predictor of the martingale's quadratic variation rather than
    a design-unbiased estimator.  Jit-compatible.
    """
    p = cells.weight
    lnow = jnp.asarray(labeled_now, jnp.float64)
    e = cells.loss - rec.mean[:, None, :]
    inv = _inv(rec.b)
    coef = p**2 * jnp.where(rec.b > 0, inv - 1.0, 0.0)
    unl_now = jnp.maximum(cells.size - lnow.sum(1), 0.0)
    wxy = jnp.maximum(lnow - rec.labeled_before, 0.0) + unl_now[:, None] * pi_now
    return jnp.einsum("x,xc,xcd,xce->de", coef, wxy, e, e)


def round_weights(t, n_rounds: int, scheme: str = "linear", pred_var=None, complete_round=None):
    """Weights ``w_r`` (r < n_rounds) of the rounds in the estimate after round ``t``
    (0-based; rounds ``> t`` get 0).  Jit-compatible in ``t``, ``pred_var`` and
    ``complete_round``.

    * ``"equal"``: ``1/(t+1)`` -- 000 eq. 128;
    * ``"linear"``, ``"quadratic"``, ``"cubic"``, ``"power:k"``: ``w_r ∝ (r+1)^k``;
    * ``"last"``: all weight on round ``t``;
    * ``"precision"``: inverse-variance weights that stay predictable.  With ``P_r`` the
      inverse of the *predicted* variance of round ``r`` (known before the round),
      ``w_r = P_r / (sum_{s<=r} P_s + (t - r) P_r)`` for ``r < t`` -- the inverse-variance
      weight ``r`` would get if every later round were as precise as round ``r`` -- and the
      last round takes the rest, ``w_t = 1 - sum_{r<t} w_r``.  Each ``w_r`` depends only on
      ``t`` and on what was known before round ``r``: unbiased.  Equal precisions give
      equal weights; rising precision moves weight to the last round.

    All schemes are deterministic given the predictable quantities, so
    ``sum_r w_r T_r`` is unbiased (000 App. E).  ``complete_round`` (int, -1 if none): a
    round that labeled every item that could matter; from then on every estimate is that
    round's ``T``, which equals ``R``.
    """
    r = jnp.arange(n_rounds)
    t = jnp.asarray(t)
    active = r <= t
    if scheme == "last":
        w = (r == t).astype(jnp.float64)
    elif scheme == "precision":
        pv = jnp.asarray(pred_var, jnp.float64)
        prec = 1.0 / jnp.maximum(pv, 1e-300)
        prec = jnp.where(jnp.isfinite(prec), prec, 1e300)
        prec = prec / jnp.max(jnp.where(active, prec, 0.0))  # scale-free, avoids overflow
        cum = jnp.cumsum(jnp.where(active, prec, 0.0))
        w = prec / (cum + (t - r) * prec)
        w = jnp.where(active & (r < t), w, 0.0)
        w = w + jnp.where(r == t, 1.0 - jnp.sum(w), 0.0)
    else:
        k = weights_power(scheme)
        a = jnp.where(active, (r + 1.0) ** k, 0.0)
        w = a / jnp.sum(a)
    if complete_round is not None:
        cr = jnp.asarray(complete_round)
        done = (cr >= 0) & (cr <= t)
        w = jnp.where(done, (r == cr).astype(jnp.float64), w)
    return w


class PoissonEstimate(NamedTuple):
    """A Poisson-design estimate: ``value`` (m,) = ``g(risk)``, ``cov`` (m, m) its
    delta-method covariance, ``risk`` (d,), ``risk_cov`` (d, d), ``weights`` (R,) of the
    rounds."""

    value: jnp.ndarray
    cov: jnp.ndarray
    risk: jnp.ndarray
    risk_cov: jnp.ndarray
    weights: jnp.ndarray
    check: jnp.ndarray | None = None  # (m,) the CLT check (kernel.round_estimate), None where not computed
    # (4, m) what the labels allow, the value projected onto it (bayes_eval.feasible); None: not computed
    feasible: jnp.ndarray | None = None


def combine(g: Callable, cells: CellTable, records: RoundRecord, t, *, weights: str = "linear",
            variance: str = "model", labeled_now=None, pi_now=None, complete_round=None) -> PoissonEstimate:
    """Estimate of ``G`` after round ``t`` from the stacked round records (rounds > t are
    ignored): ``R_hat = sum_r w_r T_r`` and ``Cov = sum_r w_r^2 V_r`` (martingale
    differences are uncorrelated, 000 App. E), then ``g`` and the delta method.

    ``V_r`` is estimated by

    * ``"ht"``: the HT estimate of :func:`round_totals` (000 eq. 28; conditionally
      unbiased, so ``sum_r w_r^2 V_hat_r`` is unbiased for ``Var(R_hat)`` with predictable
      weights) -- but very skewed: it is ~0 whenever the rare relevant items happened not
      to be drawn, which is exactly when the estimate is off;
    * ``"labeled"``: the exactly known part of ``V_r`` -- the items of round ``r``'s
      population labeled by now, in round ``r`` or later (:func:`model_round_covariance`
      without the unlabeled remainder);
    * ``"labeled+ht"`` (adaptive default): their sum, a conservative estimate (the HT
      term alone is unbiased for all of ``V_r``); it catches a relevant item that round
      ``r`` missed but a later round labeled;
    * ``"model"``: :func:`model_round_covariance` -- the known part plus the posterior
      expectation of the unlabeled remainder (``pi_now``); only as good as the model's
      calibration where ``b`` was small (on the shared pools it over-covers, with
      intervals as wide as [0, 1]).

    Jit-compatible.
    """
    n_rounds = records.b.shape[0]
    tot, vht = jax.vmap(lambda rec: round_totals(cells, rec))(records)
    w = round_weights(t, n_rounds, weights, records.pred_var, complete_round)
    risk = jnp.einsum("r,rd->d", w, tot)
    if variance in ("model", "labeled", "labeled+ht"):
        pn = pi_now if variance == "model" else jnp.zeros_like(labeled_now)
        vm = jax.vmap(lambda rec: model_round_covariance(cells, rec, labeled_now, pn))(records)
        if variance == "labeled+ht":
            vm = vm + vht
        rcov = jnp.einsum("r,rde->de", w**2, vm)
    else:
        rcov = jnp.einsum("r,rde->de", w**2, vht)
    value = jnp.atleast_1d(g(risk))
    jac = jax.jacfwd(lambda r: jnp.atleast_1d(g(r)))(risk)
    cov = jac @ rcov @ jac.T
    return PoissonEstimate(value, cov, risk, rcov, w)


# --------------------------------------------------------------------------------------
# estimators from per-item records (what a labeling session keeps)
# --------------------------------------------------------------------------------------
def poisson_estimate(g: Callable, loss_rows, b, weights_p, *, mean_rows=None, model_total=None) -> PoissonEstimate:
    """Offline Poisson estimate from the labeled items only (000 Alg. 2, eq. 18, 27--29).

    ``R_hat = M + sum_n p_n (l_n - m_n) / b_n`` over the labeled items, with
    ``M = sum_{pool} p_n m_n`` (``model_total``) and ``m_n`` (``mean_rows``) the model
    prediction fixed before sampling; without them it is the HT estimator of 000 eq. 18.
    Covariance ``sum_n p_n^2 (1/b_n)(1/b_n - 1) e_n e_n^T`` (000 eq. 28, vector form), then
    the delta method (any ``g``; e.g. micro / macro F1, 000 App. D).  Labeling every item
    with ``b = 1`` gives ``R`` exactly.

    Parameters
    ----------
    g : callable
    loss_rows : (n, d) loss of each labeled item at its label
    b : (n,) inclusion probability it was drawn with (> 0)
    weights_p : (n,) its item weight p_n (1/N for a uniform pool of N items)
    mean_rows : (n, d), optional
    model_total : (d,), optional (required with ``mean_rows``)
    """
    L = jnp.atleast_2d(jnp.asarray(loss_rows, jnp.float64))
    b = jnp.asarray(b, jnp.float64)
    p = jnp.asarray(weights_p, jnp.float64)
    if not P.is_traced(b):
        P.check_inclusion_probabilities(b)
        if np.any(np.asarray(b) <= 0):
            raise ValueError("every labeled item must have b > 0")
    if mean_rows is None:
        M = jnp.zeros(L.shape[1])
        E = L
    else:
        if model_total is None:
            raise ValueError("mean_rows needs model_total = sum over the pool of p_n m_n")
        E = L - jnp.asarray(mean_rows, jnp.float64)
        M = jnp.asarray(model_total, jnp.float64)
    risk = M + jnp.einsum("n,nd->d", p / b, E)
    coef = p**2 / b * (1.0 / b - 1.0)
    rcov = jnp.einsum("n,nd,ne->de", coef, E, E)
    value = jnp.atleast_1d(g(risk))
    jac = jax.jacfwd(lambda r: jnp.atleast_1d(g(r)))(risk)
    return PoissonEstimate(value, jac @ rcov @ jac.T, risk, rcov, jnp.ones(1))


def online_poisson_estimate(g: Callable, loss_rows, weights_p, label_round, b_drawn, num_rounds: int, *,
                            mean_rows=None, round_model_totals=None, weights: str = "linear",
                            pred_var=None) -> PoissonEstimate:
    """Multi-round estimate from per-item records (000 App. E, eq. 127--128 generalized).

    Item ``n`` was labeled in round ``r_n`` (0-based) with inclusion probability ``b_n``
    and model prediction ``m_n = m_{r_n}(x_n)``.  Round ``r``'s estimate is
    ``T_r = K_r + M_r + sum_{n: r_n = r} p_n (l_n - m_n) / b_n`` with
    ``K_r = sum_{n: r_n < r} p_n l_n`` and ``M_r`` = ``round_model_totals[r]`` =
    ``sum_{n in U_r} p_n m_r(x_n)`` (:attr:`RoundProposal.model_total`; zero for HT).  The
    estimate after ``num_rounds`` rounds is ``sum_r w_r T_r`` with the weights of
    :func:`round_weights` and covariance ``sum_r w_r^2 sum_{n: r_n=r} p_n^2 (1/b_n)(1/b_n - 1)
    e_n e_n^T``.  With ``mean_rows=None`` and ``weights="equal"`` this is
    :func:`bayes_eval.poisson.online_ht_risk` (000 eq. 128).

    Parameters
    ----------
    g : callable
    loss_rows : (n, d) labeled items' losses
    weights_p : (n,) their item weights
    label_round : (n,) int round of each item
    b_drawn : (n,) its inclusion probability in that round
    num_rounds : int (static)
    mean_rows : (n, d), optional
    round_model_totals : (R, d), optional (required with ``mean_rows``)
    weights : str, see :func:`round_weights`
    pred_var : (R,), for ``weights="precision"``
    """
    L = jnp.atleast_2d(jnp.asarray(loss_rows, jnp.float64))
    d = L.shape[1]
    p = jnp.asarray(weights_p, jnp.float64)
    rnd = jnp.asarray(label_round)
    b = jnp.asarray(b_drawn, jnp.float64)
    if not P.is_traced(b, rnd):
        P.check_inclusion_probabilities(b)
        if np.any(np.asarray(b) <= 0):
            raise ValueError("every labeled item must have b > 0")
        rr = np.asarray(rnd)
        if rr.size and (rr.min() < 0 or rr.max() >= num_rounds):
            raise ValueError(f"label_round must be in [0, {num_rounds}); got values in [{rr.min()}, {rr.max()}]")
    check_weights(weights)
    if mean_rows is None:
        E = L
        Mr = jnp.zeros((num_rounds, d))
    else:
        if round_model_totals is None:
            raise ValueError("mean_rows needs round_model_totals (R, d)")
        E = L - jnp.asarray(mean_rows, jnp.float64)
        Mr = jnp.asarray(round_model_totals, jnp.float64)
    oh = jax.nn.one_hot(rnd, num_rounds, dtype=jnp.float64)  # (n, R)
    before = jnp.cumsum(oh, axis=1) - oh  # 1 if r_n < r
    K = jnp.einsum("nr,n,nd->rd", before, p, L)
    corr = jnp.einsum("nr,n,nd->rd", oh, p / b, E)
    T = K + Mr + corr
    coef = p**2 / b * (1.0 / b - 1.0)
    V = jnp.einsum("nr,n,nd,ne->rde", oh, coef, E, E)
    pv = jnp.ones(num_rounds) if pred_var is None else jnp.asarray(pred_var, jnp.float64)
    w = round_weights(num_rounds - 1, num_rounds, weights, pv)
    risk = w @ T
    rcov = jnp.einsum("r,rde->de", w**2, V)
    value = jnp.atleast_1d(g(risk))
    jac = jax.jacfwd(lambda r: jnp.atleast_1d(g(r)))(risk)
    return PoissonEstimate(value, jac @ rcov @ jac.T, risk, rcov, w)


def beta_limits(value, var, level: float = 0.95):
    """Beta-fitted limits (000 §2.2) for measures in [0, 1]: numpy, see
    :func:`bayes_eval.poisson.beta_interval` (falls back to the clipped normal interval
    where the moment fit is invalid)."""
    return P.beta_interval(value, var, alpha=1.0 - level)

