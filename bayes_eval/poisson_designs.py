"""Poisson (Bernoulli) sampling designs: offline (000 §3, Alg. 2) and adaptive in rounds
(000 App. E) fed by the Dirichlet-tree posterior (001 §4, Prop. 2), on cells.

A Poisson design labels every item ``n`` independently with its own inclusion probability
``b_n`` -- possibly 1 -- so that on a finite pool the items that matter most are labeled with
certainty and never re-drawn (000 §3).  This module holds

* the pure *round proposal*: inclusion probabilities per cell from a predictive
  ``pi(y|x)`` (the classifier's λ-mixed probabilities, 000 eq. 13, or the Dirichlet-tree
  posterior predictive), the deviations ``h`` of 000 eq. 12 / App. D generalized by the
  delta method, and the water-filling of 000 App. B.1 (:func:`round_proposal`,
  :func:`static_proposal`);
* the estimators: the Horvitz--Thompson ratio estimator (000 eq. 18) or the model-assisted
  difference estimator, per round, combined over rounds with predictable weights (000
  eq. 128 = equal weights), their covariance (000 eq. 27--29 and a model-assisted
  alternative), the delta method for any ``g`` (so micro / macro F1 of 000 App. D are just
  measures), Beta-fitted limits (000 §2.2) -- from per-cell arrays (:func:`round_totals`,
  :func:`combine`) and from per-item records (:func:`poisson_estimate`,
  :func:`online_poisson_estimate`);
* fixed-size rounds (Pareto / sequential Poisson sampling).  The estimators live in
  :mod:`bayes_eval.poisson_estimators`; the jit-compiled simulation of the rounds
  (``lax.scan`` over rounds, ``vmap`` over repeats) behind ``bayes-eval simulate POOL
  --design poisson | poisson-adaptive`` is in the one simulation module,
  :func:`bayes_eval.simulate.simulate_runs` (the stage kernel's rounds, :mod:`bayes_eval.kernel`).

Estimator of one round (000 App. E, eq. 127 made model-assisted)
------------------------------------------------------------------
Round ``r`` draws only among the items ``U_r`` not labeled before it, with probabilities
``b^r`` and a model prediction ``m_r(x) = E_{pi_r}[l(x, y)]`` both fixed *before* the round:

.. math::  T_r = K_r + \\sum_{n \\in U_r} p_n m_r(x_n)
               + \\sum_{n \\in U_r} \\frac{s^r_n}{b^r_n} p_n (\\ell_n - m_r(x_n)),
    \\qquad K_r = \\sum_{n \\notin U_r} p_n \\ell_n .

``E[T_r | past] = R`` for *any* model (``m_r = 0`` is 000 eq. 127's HT round), provided
every item of ``U_r`` whose residual ``l_n - m_r(x_n)`` can be non-zero has ``b^r_n > 0``
(the floor below guarantees it).  Its conditional covariance is
``sum_{U_r} (1/b - 1) p^2 (l - m)(l - m)^T``: the *residuals* drive it, not the losses.

Combination (000 eq. 128 generalized)
-------------------------------------
``R_hat_t = sum_{r<=t} w_r T_r`` with weights summing to one.  The ``T_r - R`` are
martingale differences, so with weights that are fixed before round ``r`` is drawn the
combination is unbiased and ``Cov(R_hat_t) = E sum_r w_r^2 V_r``.  Schemes
(:func:`round_weights`): ``"equal"`` (000 eq. 128), ``"linear"`` / ``"quadratic"`` /
``"power:k"`` (``w_r ∝ r^k``: later rounds, which know more and have fewer unknown items
left, count more), ``"precision"`` (inverse *predicted* variance, made predictable; see
:func:`round_weights`).  All are deterministic functions of ``t`` and of quantities known
before each round, hence exactly unbiased.  When the planned budget covers every item that
can still matter, the round labels all of them (``b = 1``), that round's ``T`` equals ``R``
exactly, and every later estimate puts all its weight on it: the estimate is then exact.

What was measured, and why the defaults are what they are
----------------------------------------------------------
(``benchmarks/poisson_f1.py``; F1 on the shared entity-resolution pools, 40 rounds of 50
expected labels, and synthetic pools in ``tests/test_poisson_designs.py``.)

* *Deviation form.*  For one round, ``h ∝ sqrt(E_pi a^2)`` (``"sqrt"``, 000 eq. 12) is
  optimal *if pi is calibrated*.  On the shared pools the posterior predictive over-states
  the positives in the huge low-score tail, and the sqrt form spends most of each round
  there.  Sharper forms sweep the likely-relevant strata first: on abt-buy the linearized
  expected MSE of F1 at 2000 labels is 2.2e-3 (sqrt, equal weights), 1.6e-4 (linear),
  6e-5 (``moment:0.5`` + 20% linear, the default); on dblp-acm 1e-3 (sqrt) vs 3e-9.  On a
  moderately imbalanced synthetic pool (5% positives) the ranking reverses (sqrt 6e-4,
  default 2e-3 at 800 of 5000 items): pass ``form="sqrt", defensive=0`` there.
* *Estimator.*  The difference estimator removes the model's prediction from every
  residual; its variance is driven by ``Var_pi(l)`` instead of ``E_pi[l^2]``.  For a rare
  class (``pi`` ~ 1e-3) the two coincide, and where the model over-states ``pi`` over a large
  tail the term ``sum_U m`` it has to correct adds variance (dblp-acm, default design at 2000
  labels: 2.2e-4 with the difference estimator, 5e-10 with HT; abt-buy: 1.4e-4 vs 6e-5,
  though its intervals covered better).  HT is the default; ``estimator="difference"`` is
  the better choice with a calibrated model or a balanced measure.
* *Round weights.*  Equal weights (000 eq. 128) give the first, prior-driven round (whose
  conditional variance is ~100x that of late rounds) as much weight as the last; ``w_r ∝
  r^2`` is within ~25% of the (unattainable) inverse-true-variance weights on abt-buy.
  ``"precision"`` weights from the model's *predicted* variance did worse: the predicted
  variance barely falls while the true one falls 20-fold.

Notation: cells ``x`` (stratum x loss pattern, :mod:`bayes_eval.cells`); ``labeled``
(X, C) labeled items per cell and class; per-item weight ``p_x = cells.weight``;
``U_x = size_x - sum_y labeled_xy`` unlabeled items.  Designs never look at
``cells.truth``; the simulation uses it only as the oracle.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401  (float64)
from . import poisson as P
from .cells import CellTable, leaf_counts
from .poisson_estimators import (  # noqa: F401  (re-exported: part of this module's API)
    WEIGHTS,
    PoissonEstimate,
    RoundRecord,
    beta_limits,
    check_weights,
    combine,
    model_round_covariance,
    online_poisson_estimate,
    poisson_estimate,
    round_totals,
    round_weights,
)

__all__ = [
    "PoissonDesign",
    "RoundProposal",
    "RoundRecord",
    "PoissonEstimate",
    "ESTIMATORS",
    "FORMS",
    "WEIGHTS",
    "VARIANCES",
    "FIXED_SIZE",
    "poisson_design",
    "prior_predictive",
    "support_mask",
    "design_support",
    "init_model_states",
    "fit_model_states",
    "adaptive_round",
    "cell_deviations",
    "round_proposal",
    "static_proposal",
    "poisson_round_counts",
    "fixed_size_round_counts",
    "round_totals",
    "model_round_covariance",
    "round_weights",
    "combine",
    "poisson_estimate",
    "online_poisson_estimate",
    "beta_limits",
    "as_design",
]

ESTIMATORS = ("difference", "ht")
FORMS = ("sqrt", "linear")
VARIANCES = ("model", "ht", "labeled", "labeled+ht")
FIXED_SIZE = (None, "pareto", "sequential")
#: the simulation keeps (rounds, d, d) covariances: measures with larger loss vectors are refused
MAX_SIM_LOSS_DIM = 256


# --------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------
class PoissonDesign(NamedTuple):
    """Configuration of a Poisson design (a static pytree-free description).

    Attributes
    ----------
    name : str
        ``"poisson"`` (offline / static, 000 Alg. 2) or ``"poisson-adaptive"`` (rounds
        fed by the oracle model, 000 App. E).
    adaptive : bool
    estimator : {"difference", "ht"}
        Model-assisted difference estimator (residuals ``l - m``) or the plain
        Horvitz--Thompson estimator of 000 eq. 18 / 127 (``m = 0``).
    form : {"sqrt", "linear", "moment:gamma"}
        Deviation ``h_x = p_x sqrt(E_pi ||Dg e||^2)`` (000 eq. 12: minimizes the expected
        Poisson variance, 000 §3.1), ``p_x E_pi ||Dg e||`` (the deterministic-oracle form
        of 001 Prop. 2, which favours likely-relevant items more), or
        ``p_x (E_pi ||Dg e||^gamma)^(1/gamma)`` (``gamma = 2``: sqrt, ``1``: linear;
        ``gamma < 1`` sweeps likely-relevant items first, ``∝ pi^(1/gamma)`` for a rare class).
    weights : str
        Round combination, see :func:`round_weights`.
    variance : {"labeled+ht", "ht", "labeled", "model"}
        Covariance of the combined estimate, see :func:`combine`.
    eps : float
        Relative floor of ``h`` on cells whose residual can be non-zero (keeps ``b > 0``,
        hence unbiasedness, on any pool).
    lam : float
        λ of the λ-mixing of the classifier's probabilities (000 eq. 13); used by the static
        design.
    fixed_size : {None, "pareto", "sequential"}
        ``None``: Poisson rounds of random size (mean = the round's budget).  Otherwise each
        round labels exactly its budget by Pareto / sequential Poisson sampling of the
        items with target probabilities ``b`` (approximately unbiased, see
        :func:`fixed_size_round_counts`).  Adaptive design only.
    model : OracleModel or None
        The oracle model (Dirichlet tree); required for the adaptive design and for
        ``variance="model"``.
    n_strata : int
        Leaves of the model (strata).
    defensive, defensive_form : float, str
        Defensive mixture: ``b = (1 - defensive) b_form + defensive b_defensive_form``, both
        water-filled to the round's budget; bounds ``1/b`` by ``1/(defensive b_def)``.
    variance_model : OracleModel or None
        A separate model for ``variance="model"`` (default: ``model``).
    companion, companion_form : OracleModel or None, str
        Companion model (adaptive design): each round's ``b`` is the mixture
        ``ρ_r b[model] + (1 - ρ_r) b[companion]``, the second with deviations of form
        ``companion_form`` (``"sqrt"``: 000 eq. 12, variance-optimal when the model is
        calibrated) from the companion's predictive, ``ρ_r`` =
        :func:`bayes_eval.designs.sweep_share`; with the difference estimator the round's
        model prediction is ``(1 - ρ_r) m_companion``.  See :func:`adaptive_round`.
    """

    name: str
    adaptive: bool
    estimator: str = "ht"
    form: str = "moment:0.5"
    weights: str = "quadratic"
    variance: str = "labeled+ht"
    eps: float = 1e-3
    lam: float = 0.9
    fixed_size: str | None = None
    model: Any = None
    n_strata: int = 0
    defensive: float = 0.2
    defensive_form: str = "linear"
    variance_model: Any = None
    companion: Any = None
    companion_form: str = "sqrt"


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def _form_gamma(form: str) -> float:
    if form == "sqrt":
        return 2.0
    if form == "linear":
        return 1.0
    if form.startswith("moment:"):
        try:
            gamma = float(form.split(":", 1)[1])
        except ValueError:
            gamma = float("nan")
        if np.isfinite(gamma) and gamma > 0:
            return gamma
    raise ValueError(f"form must be one of {FORMS} or 'moment:gamma' with gamma > 0, got {form!r}")


def poisson_design(name: str, *, estimator: str | None = None, form: str | None = None, weights: str = "quadratic",
                   variance: str | None = None, eps: float = 1e-3, lam: float = 0.9,
                   fixed_size: str | None = None, model=None, n_strata: int = 0, defensive: float | None = None,
                   defensive_form: str = "linear", variance_model=None, companion=None,
                   companion_form: str = "sqrt") -> PoissonDesign:
    """Build and validate a :class:`PoissonDesign`.

    Defaults (chosen by the measurements reported in ``benchmarks/poisson_f1.py``):

    * ``"poisson"`` (static) is 000 Alg. 2: λ-mixed classifier probabilities, the
      ``sqrt`` deviations of 000 eq. 12, HT estimator (000 eq. 18) and HT variance
      (000 eq. 28);
    * ``"poisson-adaptive"``: HT rounds (``estimator="ht"``), deviations
      ``form="moment:0.5"`` (``h ∝ E_pi[a^{1/2}]^2``, i.e. ``∝ pi^2`` for a rare class: it
      sweeps the likely-relevant items first) mixed with 20% of the ``"linear"`` design
      (``defensive=0.2``: a defensive mixture that bounds ``1/b`` where the model is too
      sure), ``weights="quadratic"`` and the conservative ``variance="labeled+ht"``;
      with a ``companion`` model (the calibrated model: the default of sessions and of
      ``bayes-eval simulate`` for binary pools) the rounds mix in the companion's
      ``sqrt`` design (see :func:`adaptive_round`).  The estimator stays ``"ht"``:
      ``estimator="difference"`` (the companion's prediction, scaled by its share, as the
      model-assisted part) is 3.6x better on a balanced pool (F1 MSE at 2000 labels
      7.2e-5 vs 2.6e-4, passive 1.8e-4) but unstable in the first rounds where the
      companion is still its prior and far off: on the demo pool (0.2% positive, scores
      miscalibrated) its F1 estimates at 50-100 labels ranged from -1900 to 19 (MSE 5.2 at
      100 labels; HT 0.05).  A ratio of HT totals cannot do that (its totals are >= 0).
    """
    _check_choice("design", name, ("poisson", "poisson-adaptive"))
    adaptive = name == "poisson-adaptive"
    if form is None:
        form = "moment:0.5" if adaptive else "sqrt"
    if defensive is None:
        defensive = 0.2 if adaptive else 0.0
    if companion is not None and not adaptive:
        raise ValueError("a companion model applies to the adaptive design only")
    if estimator is None:
        estimator = "ht"
    _form_gamma(companion_form)
    if variance is None:
        variance = "labeled+ht" if adaptive else "ht"
    _check_choice("estimator", estimator, ESTIMATORS)
    _form_gamma(form)
    _form_gamma(defensive_form)
    if not 0.0 <= defensive <= 1.0:
        raise ValueError(f"defensive must be in [0, 1], got {defensive}")
    _check_choice("variance", variance, VARIANCES)
    _check_choice("fixed_size", fixed_size, FIXED_SIZE)
    check_weights(weights)
    if not (np.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be finite and >= 0, got {eps}")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    if adaptive and model is None:
        raise ValueError("the adaptive Poisson design needs an oracle model (bayes_eval.models.make_oracle_model)")
    if variance == "model" and model is None and variance_model is None:
        raise ValueError("variance='model' needs an oracle model")
    if fixed_size is not None and not adaptive:
        raise ValueError("fixed-size rounds are offered for the adaptive design only; the static design's "
                         "nested samples are Poisson")
    return PoissonDesign(name, adaptive, estimator, form, weights, variance, float(eps), float(lam), fixed_size,
                         model, int(n_strata), float(defensive), defensive_form, variance_model, companion,
                         companion_form)


# --------------------------------------------------------------------------------------
# proposal: deviations and water-filling (000 §3.1, App. B.1, App. D)
# --------------------------------------------------------------------------------------
class RoundProposal(NamedTuple):
    """Inclusion probabilities of one round, per cell.

    ``b`` (X,): inclusion probability of each *unlabeled* item of the cell; ``mean`` (X, d):
    the model prediction ``m(x)`` of the difference estimator (zeros for HT); ``h`` (X,):
    the floored deviations that were water-filled; ``risk`` (d,): the plug-in risk at which
    ``Dg`` was taken; ``pred_var``: the round's variance of ``G`` predicted by the model,
    ``sum_x U_x (1/b_x - 1) p_x^2 E_pi ||Dg (l - m)||^2``; ``model_total`` (d,):
    ``sum_x p_x U_x m(x)``, the term ``sum_{n in U_r} p_n m_r(x_n)`` of the round estimator;
    ``pi_mean`` (X, C): the predictive behind ``mean`` (what a second measure's model
    prediction is taken from; set by the designs of :func:`as_design`).
    """

    b: jnp.ndarray
    mean: jnp.ndarray
    h: jnp.ndarray
    risk: jnp.ndarray
    pred_var: jnp.ndarray
    model_total: jnp.ndarray
    pi_mean: Any = None


def prior_predictive(cells: CellTable, lam: float = 0.9) -> jnp.ndarray:
    """λ-mixed classifier probabilities ``lam s(y|x) + (1 - lam) / C`` (000 eq. 13, 93)."""
    c = cells.loss.shape[1]
    return P.lambda_mix(cells.prior, lam, 1.0 / c)


def support_mask(loss, estimator: str = "difference") -> jnp.ndarray:
    """(X,) cells whose items need ``b > 0`` for the estimator to stay unbiased.

    HT: cells with ``l(x, y) != 0`` for some ``y``.  Difference estimator: cells whose loss
    depends on ``y`` (if ``l(x, .)`` is constant, ``m(x) = l(x, .)`` and the residual is 0
    whatever the label).
    """
    loss = jnp.asarray(loss)
    if estimator == "ht":
        return jnp.any(loss != 0, axis=(1, 2))
    return jnp.any(loss != loss[:, :1, :], axis=(1, 2))


def cell_deviations(g: Callable, loss, pi, risk, weight=None, estimator: str = "difference",
                    form: str = "sqrt"):
    """Deviations ``h_x`` of 000 eq. 12 (App. D.2/D.4 for multi-class) by the delta method.

    With ``e(x, y) = l(x, y) - m(x)`` (``m = E_pi l`` for the difference estimator, 0 for
    HT) and ``a(x, y) = ||Dg(R) e(x, y)||_2`` (``Dg`` from ``jax.jacfwd``; for a scalar
    ``g`` this is ``|f - F g| / mu_y`` of 000 eq. 12), the expected variance of a Poisson
    round is ``sum_x U_x (1/b_x - 1) p_x^2 E_pi a^2`` (000 eq. 25--26); it is minimized by
    ``b_x ∝ h_x = p_x sqrt(E_pi a^2)`` (``form="sqrt"``, 000 §3.1).  ``form="linear"``
    gives ``p_x E_pi a`` (001 Prop. 2, deterministic oracle).

    Parameters
    ----------
    g : callable (d,) -> (m,)
    loss : (X, C, d)
    pi : (X, C) predictive class probabilities
    risk : (d,) plug-in risk for ``Dg``
    weight : (X,) per-item p(x), optional (1)
    estimator, form : str

    Returns
    -------
    h : (X,) deviations (not floored; NaN / inf mapped to 0)
    h2 : (X,) ``p_x^2 E_pi a^2`` (for the predicted variance)
    mean : (X, d) ``m(x)``
    """
    loss = jnp.asarray(loss, jnp.float64)
    pi = jnp.asarray(pi, jnp.float64)
    if estimator == "difference":
        mean = jnp.einsum("xc,xcd->xd", pi, loss)
    else:
        mean = jnp.zeros(loss.shape[::2], loss.dtype)
    e = loss - mean[:, None, :]
    jac = jax.jacfwd(lambda r: jnp.atleast_1d(g(r)))(jnp.asarray(risk, jnp.float64))
    v = jnp.einsum("md,xcd->xcm", jac, e)
    a = jnp.sqrt(jnp.sum(v * v, axis=-1))
    a = jnp.where(jnp.isfinite(a), a, 0.0)
    w = jnp.ones(loss.shape[0]) if weight is None else jnp.asarray(weight, jnp.float64)
    h2 = w**2 * jnp.sum(pi * a * a, axis=1)
    gamma = _form_gamma(form)
    if gamma == 2.0:
        h = jnp.sqrt(h2)
    elif gamma == 1.0:
        h = w * jnp.sum(pi * a, axis=1)
    else:
        h = w * jnp.sum(pi * a**gamma, axis=1) ** (1.0 / gamma)
    return h, h2, mean


def _floor(h, support, unl, eps):
    """``max(h, eps * mean_h)`` on supported cells, ``mean_h`` the average deviation of the
    unlabeled supported items (1 if there is none)."""
    mass = jnp.sum(unl * support)
    scale = jnp.sum(unl * support * h) / jnp.where(mass > 0, mass, 1.0)
    scale = jnp.where(scale > 0, scale, 1.0)
    return jnp.where(support, jnp.maximum(h, eps * scale), 0.0)


def round_proposal(g: Callable, cells: CellTable, labeled, pi_cell, budget, *, estimator: str = "difference",
                   form: str = "sqrt", eps: float = 1e-3, complete=False, risk=None, defensive: float = 0.0,
                   defensive_form: str = "linear") -> RoundProposal:
    """Inclusion probabilities of the next Poisson round (000 App. E, with 000 §3.1 and
    001 Prop. 2): the pure function a session calls with its model state.

    Only the items not labeled yet are candidates.  ``h`` from :func:`cell_deviations` at
    the model-based plug-in risk (labeled items at their labels, the rest at ``pi_cell``:
    :func:`bayes_eval.designs.model_risk`), floored on supported cells at ``eps`` times the
    mean deviation of the unlabeled supported items, then water-filled over the unlabeled
    counts (:func:`bayes_eval.poisson.water_fill_groups`): ``b_x = min(1, h_x / c)`` with
    ``sum_x U_x b_x = budget``.  ``complete=True`` labels every supported unlabeled item
    (``b = 1``), which makes the round's estimate exact.  Jit-compatible (``g``, strings
    static).

    Parameters
    ----------
    g : callable
    cells : CellTable
    labeled : (X, C) labeled items per cell and class
    pi_cell : (X, C) predictive ``pi(y|x)`` for unlabeled items (Dirichlet-tree posterior
        predictive ``model.predictive(state)[cells.stratum]``, or :func:`prior_predictive`)
    budget : float, expected number of items to label in the round
    estimator, form, eps : see :class:`PoissonDesign`
    complete : bool (may be traced)
    risk : (d,), optional plug-in risk (default: model-based)

    Returns
    -------
    RoundProposal
    """
    from .designs import model_risk

    labeled = jnp.asarray(labeled, jnp.float64)
    pi_cell = jnp.asarray(pi_cell, jnp.float64)
    unl = jnp.maximum(cells.size - labeled.sum(1), 0.0)
    if risk is None:
        risk = model_risk(cells, labeled, pi_cell)
    h, h2, mean = cell_deviations(g, cells.loss, pi_cell, risk, cells.weight, estimator, form)
    sup = support_mask(cells.loss, estimator) & (unl > 0)
    hf = _floor(h, sup, unl, eps)
    bud = jnp.maximum(jnp.asarray(budget, jnp.float64), 1e-300)
    b = P.water_fill_groups(hf, unl, bud, validate=False)
    if defensive > 0.0:
        hd, _, _ = cell_deviations(g, cells.loss, pi_cell, risk, cells.weight, estimator, defensive_form)
        bd = P.water_fill_groups(_floor(hd, sup, unl, eps), unl, bud, validate=False)
        b = (1.0 - defensive) * b + defensive * bd
    b = jnp.where(complete, jnp.where(sup, 1.0, 0.0), b)
    b = jnp.where(unl > 0, b, 0.0)
    # h2 of the floored deviations would overstate the model's belief; predicted variance
    # uses the model's own E_pi a^2
    inv = jnp.where(b > 0, 1.0 / jnp.where(b > 0, b, 1.0) - 1.0, jnp.where(h2 > 0, jnp.inf, 0.0))
    pred_var = jnp.sum(jnp.where(unl > 0, unl * inv * h2, 0.0))
    model_total = jnp.einsum("x,xd->d", cells.weight * unl, mean)
    return RoundProposal(b=b, mean=mean, h=hf, risk=risk, pred_var=pred_var, model_total=model_total)


def static_proposal(g: Callable, cells: CellTable, budget, *, lam: float = 0.9, estimator: str = "ht",
                    form: str = "sqrt", eps: float = 1e-3) -> RoundProposal:
    """Offline Poisson design from the classifier's probabilities (000 Alg. 2).

    ``p_a = lam s(y|x) + (1 - lam)/C`` (000 eq. 13), the predicted risk ``R_a`` under
    ``p_a`` (000 eq. 14), deviations ``h`` (000 eq. 12) and water-filling with expected
    size ``budget`` over the whole pool.  Nested in the budget: ``b`` only grows with
    ``budget`` (``b = min(1, h / c)`` with ``c`` decreasing), so the samples for increasing
    budgets can be coupled, ``s_n(M) = 1[u_n < b_n(M)]``, which is how the simulation
    labels a static design stage by stage.  Jit-compatible.
    """
    pa = prior_predictive(cells, lam)
    ra = jnp.einsum("x,xc,xcd->d", cells.weight * cells.size, pa, cells.loss)
    return round_proposal(g, cells, jnp.zeros_like(pa), pa, budget, estimator=estimator, form=form, eps=eps,
                          risk=ra)


def design_support(design: PoissonDesign, loss) -> jnp.ndarray:
    """(X,) cells whose items need ``b > 0`` under ``design`` (:func:`support_mask` of its
    estimator; with a companion the HT support, since the scaled model prediction leaves
    a residual wherever the loss is non-zero)."""
    return support_mask(loss, "ht" if design.companion is not None else design.estimator)


def init_model_states(design: PoissonDesign):
    """(oracle model state, companion state), ``()`` for a missing model."""
    om, cm = design.model, design.companion
    return (om.init_state() if om is not None else (), cm.init_state() if cm is not None else ())


def fit_model_states(design: PoissonDesign, states, cells: CellTable, labeled):
    """Both models refitted to the labels ``labeled`` (X, C) (warm-started).  Jit-compatible."""
    counts, unl = leaf_counts(cells, labeled, design.n_strata)
    ms, cs = states
    if design.model is not None:
        ms = design.model.fit(ms, counts, unl)
    if design.companion is not None:
        cs = design.companion.fit(cs, counts, unl)
    return ms, cs


def adaptive_round(design: PoissonDesign, g: Callable, cells: CellTable, labeled, states, budget, complete):
    """The next round of the adaptive design: ``(RoundProposal, pi_mean)``.

    Without a companion: :func:`round_proposal` fed by the oracle model's predictive, and
    ``pi_mean`` that predictive.  With one: ``b = ρ b[model] + (1 - ρ) b[companion]``, the
    first with HT deviations of ``design.form`` (+ the defensive mixture), the second
    with the companion's predictive and ``companion_form`` deviations of the residuals
    (000 eq. 12 for the difference estimator), ``ρ`` = :func:`bayes_eval.designs.sweep_share`
    counting this round's budget; for the difference estimator the round's model
    prediction is ``m = (1 - ρ) E_companion[l]`` (``pi_mean = (1 - ρ) pi_companion``), any
    fixed ``m`` keeping the round unbiased.  A *complete* round labels every item of the
    support (:func:`design_support`), so its estimate is exact.  Jit-compatible.

    Measured (F1, 40 rounds of 50, HT rounds; ``benchmarks/results/suite_f1_*.md``): MSE at
    2000 labels on a balanced synthetic pool 2.0e-2 without the companion, 3.1e-4 with it
    (passive 1.8e-4, static IS 1.6e-4); on a 10% pool 1.9e-2 vs 6.7e-4 (IS 4.2e-4);
    abt-buy 6.9e-5 vs 7.6e-5; dblp-acm 4.5e-10 vs 1.2e-9 (200 / 500 repeats).
    """
    from .designs import sweep_share

    ms, cs = states
    counts = leaf_counts(cells, labeled, design.n_strata)[0]
    pi = design.model.posterior_predictive(ms, counts)[cells.stratum]
    cm = design.companion
    prop = round_proposal(g, cells, labeled, pi, budget, estimator="ht" if cm is not None else design.estimator,
                          form=design.form, eps=design.eps, complete=complete, defensive=design.defensive,
                          defensive_form=design.defensive_form)
    if cm is None:
        return prop, pi
    pic = cm.posterior_predictive(cs, counts)[cells.stratum]
    propc = round_proposal(g, cells, labeled, pic, budget, estimator="difference", form=design.companion_form,
                           eps=design.eps)
    rho = sweep_share(cells, labeled, pic, budget)
    b = jnp.where(complete, prop.b, rho * prop.b + (1.0 - rho) * propc.b)
    if design.estimator == "difference":
        pim = (1.0 - rho) * pic
        mean, total = (1.0 - rho) * propc.mean, (1.0 - rho) * propc.model_total
    else:
        pim, mean, total = jnp.zeros_like(pic), prop.mean, prop.model_total
    return RoundProposal(b=b, mean=mean, h=prop.h, risk=prop.risk, pred_var=prop.pred_var, model_total=total), pim


# --------------------------------------------------------------------------------------
# sampling on cells
# --------------------------------------------------------------------------------------
def poisson_round_counts(key, unlabeled_true, b):
    """Poisson sampling on cells: ``Binomial(U_xy, b_x)`` sampled items per cell and true
    class -- exactly item-level Bernoulli sampling (000 §3) with the labels as the oracle.
    Returns float (X, C).  Jit-compatible."""
    u = jnp.asarray(unlabeled_true, jnp.float64)
    bb = jnp.broadcast_to(jnp.clip(b, 0.0, 1.0)[:, None], u.shape)
    return P.poisson_sample_counts(key, bb, u).astype(jnp.float64)


def _first_order_stats(key, n_items, k: int):
    """The ``k`` smallest of ``n_items`` i.i.d. U(0,1) per cell, ascending (X, k); entries
    beyond ``n_items`` are +inf.  By the Rényi representation: successive minima."""
    x = n_items.shape[0]
    v = jax.random.uniform(key, (x, k), minval=1e-300, maxval=1.0)
    j = jnp.arange(k)
    m = jnp.maximum(n_items[:, None] - j[None, :], 1.0)
    # 1 - u_(j) = prod_{i<=j} v_i^{1/(n - i + 1)}
    log_surv = jnp.cumsum(jnp.log(v) / m, axis=1)
    u = -jnp.expm1(log_surv)
    return jnp.where(j[None, :] < n_items[:, None], u, jnp.inf)


def fixed_size_round_counts(key, unlabeled_true, b, n, n_max: int, method: str = "pareto"):
    """A round of exactly ``n`` labels (``n <= n_max``, ``n_max`` static) on cells.

    Order sampling with target probabilities ``b`` (Rosén's Pareto sampling,
    ``method="pareto"``: rank items by ``[u/(1-u)] / [b/(1-b)]``; Ohlsson's sequential
    Poisson sampling, ``"sequential"``: by ``u / b``, as
    :func:`bayes_eval.poisson.sequential_poisson_sample`) and take the ``n`` smallest
    ranks; items with ``b = 1`` come first.  On cells the ranks of a cell's items are
    monotone in its uniforms, so only the ``n_max`` smallest uniforms of each cell are
    needed (:func:`_first_order_stats`); which items of a cell are taken is uniform, so the
    class split is multivariate hypergeometric, drawn one item at a time.

    The realized inclusion probabilities are close to ``b`` but not equal (Pareto is the
    closer of the two; both are exact in the limit of many small ``b``); the estimators use
    ``b`` as if the design were Poisson, so the estimate is *approximately* unbiased --
    the price of an exact sample size.  ``n`` larger than the supported unlabeled items
    takes them all.

    Returns
    -------
    counts : (X, C) float
    """
    u_true = jnp.asarray(unlabeled_true, jnp.float64)
    unl = u_true.sum(1)
    b = jnp.clip(jnp.asarray(b, jnp.float64), 0.0, 1.0)
    k1, k2 = jax.random.split(key)
    sure = (b >= 1.0) & (unl > 0)
    n_sure = jnp.sum(jnp.where(sure, unl, 0.0))
    n_rest = jnp.maximum(jnp.asarray(n, jnp.float64) - n_sure, 0.0)
    us = _first_order_stats(k1, jnp.where(sure | (b <= 0), 0.0, unl), n_max)  # (X, k)
    bb = jnp.where((b > 0) & (b < 1), b, 0.5)[:, None]
    if method == "pareto":
        xi = (us / (1.0 - us)) / (bb / (1.0 - bb))
    else:
        xi = us / bb
    xi = jnp.where(jnp.isfinite(us), xi, jnp.inf)
    flat = xi.ravel()
    k = min(n_max, flat.shape[0])
    neg, idx = jax.lax.top_k(-flat, k)
    take = (jnp.arange(k) < n_rest) & jnp.isfinite(neg)
    cnt = jnp.zeros(flat.shape[0]).at[idx].add(take.astype(jnp.float64)).reshape(xi.shape).sum(1)
    cnt = jnp.where(sure, unl, cnt)

    # class split: hypergeometric, one item at a time (only for cells not taken whole)
    def one(carry, kk):
        rem, got, left = carry  # rem (X, C) remaining by class, got (X, C), left (X,) draws still to make
        tot = rem.sum(1)
        u = jax.random.uniform(kk, tot.shape) * tot
        cls = jnp.sum(u[:, None] >= jnp.cumsum(rem, axis=1)[:, :-1], axis=1)  # class of a uniform item
        act = (left > 0) & (tot > 0)
        oh = jax.nn.one_hot(cls, rem.shape[1]) * act[:, None]
        return (rem - oh, got + oh, left - act), None

    partial_cnt = jnp.where(sure, 0.0, cnt)
    keys = jax.random.split(k2, n_max)
    (_, got, _), _ = jax.lax.scan(one, (u_true, jnp.zeros_like(u_true), partial_cnt), keys)
    return jnp.where(sure[:, None], u_true, got)


def as_design(design: PoissonDesign, g: Callable):
    """The Poisson design as a :class:`~bayes_eval.designs.Design` (``sampling="rounds"``):
    ``init`` the models' states, ``propose`` the round's :class:`RoundProposal` for
    ``obs.budget`` (:func:`adaptive_round`; the static design: :func:`static_proposal` at
    the cumulative budget), ``update`` the models refitted to ``obs.labeled``
    (:func:`fit_model_states`).  ``settings`` keeps the record for the estimator."""
    from .designs import Design

    def init(cells):
        return init_model_states(design)

    def update(state, cells, obs):
        return fit_model_states(design, state, cells, obs.labeled)

    if design.adaptive:
        def propose(state, cells, obs):
            prop, pi_mean = adaptive_round(design, g, cells, obs.labeled, state, obs.budget, obs.complete)
            return prop._replace(pi_mean=pi_mean)
    else:
        def propose(state, cells, obs):
            prop = static_proposal(g, cells, obs.budget, lam=design.lam, estimator=design.estimator,
                                   form=design.form, eps=design.eps)
            return prop._replace(pi_mean=prior_predictive(cells, design.lam))

    return Design(design.name, init, propose, update, estimator=design.estimator, model=design.model,
                  sampling="rounds", settings=design)
