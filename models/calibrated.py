"""A calibrated hierarchical Beta-binomial model of the oracle response over strata.

Why a second model
------------------
The Dirichlet-tree of 001 §4 is generative in the direction y → leaf: the leaf of every
unlabeled item is observed, and ψ₀ (the negatives' distribution over leaves) can absorb
it whatever the split into classes.  So the number of positives in strata with few
labels is identified only by the prior, and the data-augmentation feedback (more imputed
positives → larger θ₁ and ψ₁ → more imputed positives) has no fixed point: on abt-buy,
with the top strata fully labeled (48 of 50 positives found), the Dirichlet-tree
posterior expects about 230 unlabeled positives (the truth is 2), and its finite-pool
interval of F1 covers the truth in 0% of runs.  That is fine for *proposals* (they only
need a rough π), not for *intervals*.

This model is discriminative: the class rate of stratum k is

    π_k ~ Beta(κ μ_k, κ (1 − μ_k)),   μ_k = sigmoid(a + b z_k),

with z_k = logit of the classifier's mean probability in the stratum (for an SVM,
sigmoid(score) as in 001 §5.2, so z ≈ the mean score).  (a, b) recalibrate the
classifier — a = 0, b = 1 means its probabilities are right — and κ says how far strata
may stray from the calibration curve.  The curve carries what labeled strata teach about
unlabeled ones (the positive rate falls steeply with score), the Beta lets each stratum
follow its own labels.  Unlabeled items do not enter the likelihood (ignorability,
001 §4.2), so nothing feeds back.

"Stratum" here is the model's unit, whatever the caller groups items by (``leaf_probs``
has one row per unit).  For intervals the library's units are the design's cells
(stratum × loss pattern × weight, ``bayes_eval.cells.posterior_units``): ignorability
holds for a right model, and a rate shared by a stratum's predicted positives and
predicted negatives, which the designs label at very different rates, is not one.

Priors: a ~ N(0, 3²), b ~ N(1, 1.5²), log κ ~ N(log 20, 1.5²) (:data:`PRIOR`, the designs'
companion model); the posterior model's slope b ~ N(1, 2²) (:data:`POSTERIOR_PRIOR`, stop 85; 2.5²
from stop 83: a firmer slope pulls the posterior of an under-confident classifier's pool toward more
hidden positives, a looser one the demo pool's and abt-buy's toward too few,
``benchmarks/results/slope_prior.md``).

Band offsets (the posterior model of the registry, ``bands=BANDS``): the curve may itself
depart from the logistic, by one offset per quantile band of z,

    μ_k = sigmoid(a + b z_k + d_{band(k)}),   d ~ N(0, Q⁻¹),  Q = (I + DᵀD) / BAND_SCALE²

(a Gaussian random walk over neighbouring bands, D the first differences, each offset also
held to 0).  Why: with the two-parameter curve alone, on pools whose positive rate is no
logistic curve of the score (a staircase, a dip: ``benchmarks/interval_study/misspecified_pool.py``)
the fitted curve is off by whole bands; κ lets units depart but independently, so the
lightly-labeled units are pulled back to the curve one by one, their errors all point one
way and add up while their noise averages out -- a narrow posterior in the wrong place
(coverage 0.46-0.89 with AIS, the CLT check passing).  With the offsets a band's labels set
its level and the units of a band move together.  On the same captured runs
(``benchmarks/results/band_offsets.md``, 200 AIS runs, 500 / 1000 / 2000 labels) coverage
rose from 0.55 / 0.47 / 0.57 to 0.86 / 0.88 / 0.91 on the 0.002 / 0.02 / 0.5 staircase, from
0.84 / 0.81 / 0.89 (the record) to 0.97 / 0.95 / 0.95 on the 0.03 / 0.45 / 0.92 staircase and
from 0.75 / 0.67 / 0.52 to 0.92 / 0.88 / 0.82 on the dip, at 5-7% more width on abt-buy and
none on dblp-acm.  Scale 2 covered the staircases and the dip 3-6 points more at 18-22% more
width on abt-buy; 12 or 24 bands covered less than 6 (a band's offset rests on fewer labels).
The companion model of the designs keeps the two-parameter curve (``bands=0``, the default
here): a proposal needs a smooth rate refitted after every stage.

Inference: given (a, b, κ, d), π_k | labels ~ Beta(κμ_k + n_k1, κ(1−μ_k) + n_k0) exactly, so
only three parameters (nine with the six band offsets) need sampling.  ``sample`` does it by a Laplace approximation at
the mode with Student-t importance sampling and resampling (jit- and vmap-compatible, for
the simulation core); ``numpyro_model`` + NUTS is the check and the diagnostics route.
Binary (C = 2); with several classes the registry's ``"calibrated"`` applies this model to whether an
item's label is its unit's top class (``models/calibrated_classes.py``).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import digamma, gammaln, polygamma

from .. import _config  # noqa: F401
from . import small_linalg

__all__ = ["CalibratedState", "CalibrationCurve", "score_logit", "make_curve", "curve_eta", "BANDS", "BAND_SCALE", "GROUP_SCALE", "group_scale_grid", "band_scale_grid", "n_band_offsets", "n_group_offsets", "calibrated_model", "OffsetGrid", "offset_grid", "fit_mode_grid", "prior_state_grid", "sample_params_grid", "log_posterior", "log_posterior_derivatives", "numpyro_model", "run_nuts", "PRIOR", "POSTERIOR_PRIOR", "SLOPE_SD", "prior_rows"]

PRIOR = {"a": (0.0, 3.0), "b": (1.0, 1.5), "log_kappa": (float(jnp.log(20.0)), 1.5)}

#: the posterior model's prior (the registry's ``"calibrated"``, binary and several classes; the
#: report's NUTS and fast routes): :data:`PRIOR` with the slope's sd 2.  The slope's centre 1
#: says "the classifier's probabilities are right"; a margin's scale is arbitrary and classifiers
#: are over- or under-confident, and where the labels sit near the threshold (AIS) the prior's
#: pull on b sets how many positives the unlabeled low-score strata hold -- the labels there
#: cannot.  Pools pull opposite ways (``benchmarks/results/slope_prior.md``), coverage of F1's
#: Bayesian interval with sd 1.5 / 2 / 2.5: a pool whose log-odds are 3 × the margin
#: (under-confident), 100 AIS runs @150 / 300: 0.86 / 0.86, 0.89 / 0.88, 0.92 / 0.89; the demo
#: pool, whose log-odds are convex in the score (steep at the threshold, shallow in the negatives'
#: bulk, where AIS draws least; a steep slope hides too few positives there), 500 AIS runs @500 /
#: 1000 / 2000: 0.994 / 0.992 / 0.964, 0.980 / 0.972 / 0.944, 0.972 / 0.936 / 0.920; abt-buy under a
#: stochastic oracle, 200 runs: 0.97 / 0.97 / 0.94, 0.96 / 0.94 / 0.94, 0.915 / 0.900 / 0.930.  2 since
#: stop 85 (2.5 from stop 83, 1.5 before); on the record's other pools within 1.5 SE of both
#: (``benchmarks/results/interval_bayes_record.md``).  The designs' companion keeps :data:`PRIOR`: a
#: proposal refitted from the first few labels needs the firmer slope, and keeping it keeps every
#: design's labels and recorded estimates.
POSTERIOR_PRIOR = {**PRIOR, "b": (1.0, 2.0)}
#: the posterior model's grid of the slope prior's sd (``calibrated_model(slope_sd=...)``): None
#: keeps :data:`POSTERIOR_PRIOR`'s; a sequence learns σ_b from the labels over it (uniform).
#: Measured at stop 85 (``slope_prior.md``): the grids {1.5, 2.5} and {1, 2, 4} acted as a fixed sd of
#: about their middle on the cells above, none better than sd 2.
SLOPE_SD = None

#: the curve's bands for the posterior model (``calibrated_model(bands=...)``; the registry's
#: ``"calibrated"``): units in BANDS quantile bands of z, each band's offset d_j from the
#: logistic a random walk of scale s (logit units), each d_j also held to 0 at that scale; s
#: learned from the labels over the grid BAND_SCALE (uniform; a float fixes it: the library's
#: 1.0 until stop 59; the grid, measured at stop 59, is the default since stop 60, when the hang that
#: had held it back, jaxlib's batched LAPACK under vmap, was removed: models/small_linalg.py).
#: Measured on captured runs (``benchmarks/results/band_offsets.md``): see the module docstring.
#: The companion model of the designs keeps the two-parameter curve (bands=0).
BANDS = 6
BAND_SCALE = (0.25, 0.5, 1.0, 2.0, 4.0)

#: the scale (logit units) of the curve's group offsets e_g ~ N(0, GROUP_SCALE²): on a pool of
#: several classes one per top class (``models/calibrated_classes.py``), so that a class the
#: classifier is more (or less) confident in than it is right gets its own level; no groups
#: (binary pools) no offsets.  A tuple of scales learns τ over that grid instead (a uniform prior,
#: :func:`fit_mode_grid`, :func:`sample_params_grid`): measured at stop 58 on six pools of several
#: classes, within 2 SE of the fixed scale both ways at six fits per posterior; not the default
#: (``benchmarks/results/several_classes.md``, "Stop 58").
GROUP_SCALE = 1.0


class CalibrationCurve(NamedTuple):
    """The abscissa of the calibration curve: each unit's z, its band, the offsets' prior
    precision Q ((m_b + m_g) square: the m_b band offsets' random walk, then the m_g group
    offsets' I / GROUP_SCALE²; 0 × 0: the two-parameter logistic curve) and, with groups (the
    top class of a pool of several classes), each unit's group as a one-hot row (K, m_g); and
    the Gaussian prior of (a, b, log κ) as rows (mean, sd) (None: :data:`PRIOR`, the designs'
    companion model's; the posterior model's is :data:`POSTERIOR_PRIOR`)."""

    z: jnp.ndarray          # (K,)
    band: jnp.ndarray       # (K,) int
    precision: jnp.ndarray  # (m_b + m_g, m_b + m_g)
    group: Any = None       # (K, m_g) one-hot, or None: no group offsets
    prior: Any = None       # (3, 2): (mean, sd) of a, b, log κ; None: :data:`PRIOR`


def n_group_offsets(curve: "CalibrationCurve") -> int:
    """m_g, the curve's group offsets (0 without groups)."""
    return 0 if curve.group is None else int(curve.group.shape[1])


def n_band_offsets(curve: "CalibrationCurve") -> int:
    """m_b, the curve's band offsets (0: none)."""
    return int(curve.precision.shape[0]) - n_group_offsets(curve)


def band_precision(n_bands: int, scale: float | None = None):
    """Q = (I + DᵀD) / scale² of the band offsets (D the first differences): a Gaussian random
    walk over neighbouring bands, each offset also held to 0 at the same scale (default
    :data:`BAND_SCALE`; a grid: scale 1, the unit walk the grid rescales)."""
    m = int(n_bands)
    D = jnp.diff(jnp.eye(m), axis=0)
    grid = band_scale_grid(scale)
    return (jnp.eye(m) + D.T @ D) / (grid[0] if len(grid) == 1 else 1.0) ** 2


def _with_group_block(q_b, m_g: int, scale: float):
    """The offsets' precision: the bands' block ``q_b`` then the m_g group offsets' I / scale²."""
    m_b = q_b.shape[0]
    return jnp.block([[q_b, jnp.zeros((m_b, m_g))], [jnp.zeros((m_g, m_b)), jnp.eye(m_g) / scale ** 2]])


def make_curve(z, n_bands: int = 0, scale=None, groups=None, n_groups: int | None = None,
               group_scale: float | None = None, prior: dict | None = None) -> CalibrationCurve:
    """The curve over units with logits ``z``: ``n_bands`` quantile bands of z over the units,
    their walk of scale ``scale`` (default :data:`BAND_SCALE`; a grid: the unit walk, scale 1,
    which :func:`offset_grid` rescales); with ``groups`` (K,) int (the unit's top class on a pool of several classes, ``n_groups`` of
    them) one more offset per group, N(0, ``group_scale``²) (default :data:`GROUP_SCALE`);
    ``prior``: the prior of (a, b, log κ) as :data:`PRIOR` spells it (default :data:`PRIOR`)."""
    z = jnp.asarray(z)
    pr = None if prior is None else prior_rows(prior)
    m = int(n_bands)
    if m <= 1:
        band, q = jnp.zeros(z.shape, jnp.int32), jnp.zeros((0, 0))
    else:
        cuts = jnp.quantile(z, jnp.linspace(0.0, 1.0, m + 1)[1:-1])
        band, q = jnp.searchsorted(cuts, z, side="right").astype(jnp.int32), band_precision(m, scale)
    if groups is None:
        return CalibrationCurve(z, band, q, None, pr)
    groups = np.asarray(groups, dtype=np.int64)
    m_g = int(groups.max()) + 1 if n_groups is None else int(n_groups)
    onehot = jnp.asarray(np.eye(m_g)[groups], dtype=z.dtype)
    return CalibrationCurve(z, band, _with_group_block(q, m_g, group_scale_grid(group_scale)[0]), onehot, pr)


def _as_curve(z) -> CalibrationCurve:
    return z if isinstance(z, CalibrationCurve) else make_curve(z, 0)


def curve_eta(theta, curve: CalibrationCurve):
    """η_u = a + b z_u + d_{band(u)} [+ e_{group(u)}]: the logit of the curve at each unit
    (theta = (a, b, log κ, d[, e]))."""
    eta = theta[0] + theta[1] * curve.z
    m_b = n_band_offsets(curve)
    if m_b:
        eta = eta + theta[3:3 + m_b][curve.band]
    if curve.group is not None:
        eta = eta + curve.group @ theta[3 + m_b:]
    return eta


class CalibratedState(NamedTuple):
    """Mode of (a, b, log κ[, offsets]) and the inverse Hessian there; with a grid of the
    offsets' scales (:func:`calibrated_model`, ``band_scale`` or ``group_scale`` a sequence:
    :class:`OffsetGrid`) one of each per grid point, and ``log_weight`` (G,) the points'
    posterior weights by the Laplace approximation."""

    mode: jnp.ndarray  # (3 + m,) or (G, 3 + m)
    cov: jnp.ndarray  # (3 + m, 3 + m) or (G, 3 + m, 3 + m)
    log_weight: Any = None  # (G,): only with a grid of the offsets' scales


def score_logit(leaf_probs):
    """z_k = logit s(1|k), the calibration curve's abscissa (``001_*`` §4's score strata).

    ``leaf_probs`` (K, 2) holds each stratum's (or unit's) mean class probabilities.  The
    probability is clipped to [1e-12, 1 − 1e-12] first, so a stratum whose scores are all 0 or
    all 1 (probability scores with heavy ties) gets a large finite logit, not ±inf or NaN.
    Every place that puts strata on the curve calls this one function."""
    p = jnp.clip(jnp.asarray(leaf_probs, dtype=jnp.float64)[:, 1], 1e-12, 1 - 1e-12)
    return jnp.log(p) - jnp.log1p(-p)


#: above this argument log Γ(x + n) − log Γ(x) is taken from Stirling's series (see
#: :func:`_lgamma_diff`); below it the two log-Gammas are subtracted directly (at 1e6 each is
#: ~1e7, so the difference keeps ~1e-9 absolute accuracy, and the series' next term is ~1e-19)
_STIRLING_FROM = 1e6


def _lgamma_diff(x, n):
    """log Γ(x + n) − log Γ(x) for x > 0, n ≥ 0, accurate at any x.

    Subtracting the two log-Gammas loses everything once x is large: at κ = e⁴⁰ ≈ 2e17 each is
    ~9e18 and float64 keeps them to ~2e3, so a Beta-binomial marginal evaluated that way
    came out ~6e4 nats too high, the Laplace-t importance sampler's one far-tail proposal at
    log κ = 40 took all the weight, and the finite-pool posterior collapsed onto it: a
    Bayesian interval of [0.087, 0.092] for an F1 of 0.578 (3 of 4000 stage posteriors on a
    10%-positive pool; the same PRNG keys on other pools).  For large x Stirling's series
    gives the difference without cancellation:
    (x − ½) log1p(n/x) + n log(x + n) − n + 1/(12(x + n)) − 1/(12x)."""
    big = x > _STIRLING_FROM
    xs = jnp.where(big, x, _STIRLING_FROM)  # keeps the unused branch finite
    series = (xs - 0.5) * jnp.log1p(n / xs) + n * jnp.log(xs + n) - n + (1.0 / (12.0 * (xs + n)) - 1.0 / (12.0 * xs))
    return jnp.where(big, series, gammaln(x + n) - gammaln(x))


def _psi_diffs(x, n):
    """ψ(x + n) − ψ(x) and ψ₁(x + n) − ψ₁(x) (digamma, trigamma) for x > 0, n ≥ 0, accurate
    at any x: the derivatives' counterpart of :func:`_lgamma_diff`.  Subtracting ψ values of
    ~log x loses the difference (~n/x) once x is large (at x = 1e12 a relative error ~1e-4,
    growing as x), so above :data:`_STIRLING_FROM` the asymptotic series are differenced term
    by term without cancellation:
    ψ: log1p(n/x) + n/(2x(x+n)) + n(2x+n)/(12x²(x+n)²);
    ψ₁: −n/(x(x+n)) − n(2x+n)/(2x²(x+n)²) − n(3x²+3xn+n²)/(6x³(x+n)³)
    (the next terms are O(n/x⁵) and O(n/x⁶))."""
    big = x > _STIRLING_FROM
    xs = jnp.where(big, x, _STIRLING_FROM)  # keeps the unused branch finite
    y = xs + n
    d1 = jnp.log1p(n / xs) + n / (2.0 * xs * y) + n * (2.0 * xs + n) / (12.0 * xs**2 * y**2)
    d2 = -n / (xs * y) - n * (2.0 * xs + n) / (2.0 * xs**2 * y**2) - n * (3.0 * xs**2 + 3.0 * xs * n + n**2) / (
        6.0 * xs**3 * y**3)
    ab = jnp.stack([x + n, x])   # one digamma and one trigamma call on both arguments
    dg, tg = digamma(ab), polygamma(1, ab)
    return jnp.where(big, d1, dg[0] - dg[1]), jnp.where(big, d2, tg[0] - tg[1])


def _bb_loglik(kappa, mu, n1, n0):
    """(K,): each stratum's Beta-binomial log marginal (up to the binomial coefficient),
    log B(A + n₁, B + n₀) − log B(A, B) = D(A, n₁) + D(B, n₀) − D(κ, n) with D
    :func:`_lgamma_diff`, A = κμ, B = κ(1−μ); the three differences stacked so the special
    function compiles once."""
    d = _lgamma_diff(jnp.stack([kappa * mu, kappa * (1 - mu), jnp.broadcast_to(kappa, mu.shape)]),
                     jnp.stack([n1, n0, n1 + n0]))
    return d[0] + d[1] - d[2]


def log_posterior(theta, z, counts):
    """log p(a, b, log κ[, d] | labeled counts) up to a constant (Beta-binomial marginal);
    ``z`` the units' logits or a :class:`CalibrationCurve` (with band offsets d)."""
    curve = _as_curve(z)
    a, b, lk = theta[0], theta[1], theta[2]
    kappa = jnp.exp(lk)
    mu = jnp.clip(jax.nn.sigmoid(curve_eta(theta, curve)), 1e-12, 1 - 1e-12)
    n1, n0 = counts[:, 1], counts[:, 0]
    ll = jnp.sum(jnp.where(n1 + n0 > 0, _bb_loglik(kappa, mu, n1, n0), 0.0))
    m, s = _prior_of(curve)
    lp = -0.5 * jnp.sum(((jnp.stack([a, b, lk]) - m) / s) ** 2)
    if curve.precision.shape[0]:
        d = theta[3:]
        lp = lp - 0.5 * d @ curve.precision @ d
    return ll + lp


def prior_rows(prior: dict | None = None) -> np.ndarray:
    """(3, 2): the (mean, sd) of a, b and log κ of a prior spelled as :data:`PRIOR` (default it)."""
    prior = PRIOR if prior is None else prior
    return np.array([prior[k] for k in ("a", "b", "log_kappa")], dtype=np.float64)


def _prior_of(curve):
    """(means (3,), sds (3,)) of the curve's prior of (a, b, log κ)."""
    rows = prior_rows() if curve is None or curve.prior is None else curve.prior
    return jnp.asarray(rows[:, 0]), jnp.asarray(rows[:, 1])


def _prior_mode(n_bands: int = 0, curve=None):
    return jnp.concatenate([_prior_of(curve)[0], jnp.zeros(int(n_bands))])


def _prior_cov(precision=None, curve=None):
    c = jnp.diag(_prior_of(curve)[1] ** 2)
    if precision is None or precision.shape[0] == 0:
        return c
    m = precision.shape[0]
    return jnp.block([[c, jnp.zeros((3, m))], [jnp.zeros((m, 3)), small_linalg.spd_inverse(precision)]])


def log_posterior_derivatives(theta, z, counts):
    """:func:`log_posterior`, its gradient and its Hessian in closed form (the Newton steps
    of :func:`fit_mode`).  Per stratum the Beta-binomial marginal is a sum of log-Gammas of
    A = κμ, B = κ(1−μ) and κ, so with ψ, ψ₁ the digamma and trigamma functions,
    dA = ψ(A+n₁)−ψ(A), dB = ψ(B+n₀)−ψ(B), dK = ψ(κ)−ψ(κ+n) and hA, hB, hK the same in ψ₁;
    the chain rule through η = a + b z (∂A/∂η = κμ(1−μ) = −∂B/∂η) and log κ (∂A/∂log κ = A,
    ∂B/∂log κ = B) gives the 3 × 3 Hessian from per-stratum scalars.  Autodiff of
    ``log_posterior`` gives the same (tests/test_models.py) but compiles nested expansions
    of the log-Gammas: with the six per-stratum terms written separately a first ``fit``
    compiled for 4.1 s, with them stacked and these derivatives 1.3 s (256 strata, one core).
    The ψ and ψ₁ differences are :func:`_psi_diffs`, exact at any κ.  With band offsets
    (``z`` a :class:`CalibrationCurve`) η = x_uᵀ(a, b, d) with x_u = (1, z_u, onehot(band_u)),
    and the sums over units become Xᵀ(·) and Xᵀ diag(·) X."""
    curve = _as_curve(z)
    z = curve.z
    m_b = curve.precision.shape[0]          # every offset: the bands' and the groups'
    lk = theta[2]
    kappa = jnp.exp(lk)
    eta = curve_eta(theta, curve)
    mu = jnp.clip(jax.nn.sigmoid(eta), 1e-12, 1 - 1e-12)
    n1, n0 = counts[:, 1], counts[:, 0]
    n = n1 + n0
    seen = n > 0
    A, B = kappa * mu, kappa * (1 - mu)
    dg, tg = _psi_diffs(jnp.stack([A, B, jnp.broadcast_to(kappa, mu.shape)]), jnp.stack([n1, n0, n]))
    ll = _bb_loglik(kappa, mu, n1, n0)
    dA, dB, dK = dg[0], dg[1], -dg[2]
    hA, hB, hK = tg[0], tg[1], -tg[2]
    ks = kappa * mu * (1 - mu)  # ∂A/∂η
    g_eta = ks * (dA - dB)
    g_lk = A * dA + B * dB + kappa * dK
    h_ee = ks * ks * (hA + hB) + ks * (1 - 2 * mu) * (dA - dB)
    h_el = ks * (A * hA - B * hB) + g_eta
    h_ll = A * A * hA + B * B * hB + kappa * kappa * hK + g_lk
    w = lambda v: jnp.where(seen, v, 0.0)  # noqa: E731  (unlabeled strata do not enter)
    ll, g_eta, g_lk, h_ee, h_el, h_ll = map(w, (ll, g_eta, g_lk, h_ee, h_el, h_ll))
    f = jnp.sum(ll)
    cols = [jnp.ones_like(z)[:, None], z[:, None], jax.nn.one_hot(curve.band, n_band_offsets(curve), dtype=z.dtype)]
    X = jnp.concatenate(cols + ([] if curve.group is None else [curve.group.astype(z.dtype)]), axis=1)
    g_x = X.T @ g_eta                      # (2 + m): a, b, d
    h_xx = X.T @ (h_ee[:, None] * X)
    h_xl = X.T @ h_el
    # theta = (a, b, log κ, d): the curve's coefficients are theta[[0, 1, 3, ...]]
    order = jnp.array([0, 1, 2 + m_b] + list(range(2, 2 + m_b)))   # theta index -> (x..., log κ) index
    grad_x = jnp.concatenate([g_x, jnp.sum(g_lk)[None]])
    hess_x = jnp.block([[h_xx, h_xl[:, None]], [h_xl[None, :], jnp.sum(h_ll)[None, None]]])
    grad = grad_x[order]
    hess = hess_x[order][:, order]
    m, sd = _prior_of(curve)
    s2 = sd ** 2
    t3 = theta[:3]
    f = f - 0.5 * jnp.sum((t3 - m) ** 2 / s2)
    grad = grad.at[:3].add(-(t3 - m) / s2)
    hess = hess.at[:3, :3].add(-jnp.diag(1.0 / s2))
    if m_b:
        Q, d = curve.precision, theta[3:]
        f = f - 0.5 * d @ Q @ d
        grad = grad.at[3:].add(-Q @ d)
        hess = hess.at[3:, 3:].add(-Q)
    return f, grad, hess


def fit_mode(z, counts, init=None, n_iter: int = 40, log_post=None):
    """Damped Newton ascent to the posterior mode; returns CalibratedState.  ``log_post``:
    another ``(theta, z, counts) -> log density`` of three parameters (study models reuse
    the fit; default :func:`log_posterior`, whose derivatives are in closed form,
    :func:`log_posterior_derivatives`; another density's come from autodiff)."""
    curve = _as_curve(z)
    theta = _prior_mode(curve.precision.shape[0], curve) if init is None else init.mode
    if log_post is None:
        return _fit_mode_closed_form(curve, counts, theta, n_iter)
    f = lambda t: log_post(t, z, counts)  # noqa: E731
    grad_f, hess_f = jax.grad(f), jax.hessian(f)
    return _newton(curve, theta, n_iter, f, lambda t: (f(t), grad_f(t), hess_f(t)))


@jax.jit
def _fit_mode_closed_form(curve, counts, theta, n_iter):
    """:func:`fit_mode` with the closed-form derivatives, one traced function whatever the number
    of steps (a trip count traced, not a loop length fixed at tracing): a posterior program called
    the fit twice -- the model's ``fit`` (``fit_iters``) and ``sample``'s refit (four; gone since
    stop 71: ``sample`` takes the fit it is handed) -- and traced and lowered each Newton loop
    anew, ~1.2 s apiece of every ``session status`` that computes a posterior; then once.  (XLA
    compiles each call's loop: it inlines the calls.)"""
    return _newton(curve, theta, n_iter, lambda t: log_posterior(t, curve, counts),
                   lambda t: log_posterior_derivatives(t, curve, counts))


def _newton(curve, theta, n_iter, f, derivatives):
    """``n_iter`` damped Newton steps of ``f`` from ``theta``, then the Laplace covariance.

    The loop runs one pass more than there are steps and that last pass moves nothing: it
    only keeps the Hessian at the final ``theta`` (the covariance's), which the loop computes
    anyway, so the derivatives -- the digamma and trigamma differences, the largest part of
    the program -- are compiled once, not once in the loop and again after it: the same
    numbers, and the Newton fit compiles a quarter to a third faster at the test tier's XLA level
    0 (the AIS companion's three-parameter fit on 256 strata: 2.6 -> 2.0 s; 25 steps of the
    nine-parameter curve: 3.9 -> 2.8 s; stop 70, one core)."""
    def step(i, carry):
        t, _ = carry
        ft, g, h = derivatives(t)
        # make the Newton system negative definite (Levenberg-style damping); plain-JAX linear
        # algebra: jaxlib's batched LAPACK can hang under vmap (models/small_linalg.py)
        lam = jnp.maximum(0.0, jnp.max(small_linalg.eigvalsh(h))) + 1e-3
        delta = small_linalg.cho_solve(small_linalg.cholesky(lam * jnp.eye(t.shape[0]) - h), g)
        delta = delta * jnp.minimum(1.0, 2.0 / jnp.maximum(jnp.linalg.norm(delta), 1e-12))
        t_new = t + delta
        better = f(t_new) >= ft
        return jnp.where(i < n_iter, jnp.where(better, t_new, t + 0.25 * delta), t), h

    theta, h = jax.lax.fori_loop(0, n_iter + 1, step, (theta, jnp.zeros((theta.shape[0], theta.shape[0]), theta.dtype)))
    factor = small_linalg.cholesky(-h)
    cov = small_linalg.cho_solve(factor, jnp.eye(theta.shape[0]))
    ok = small_linalg.is_factor(factor) & jnp.all(jnp.isfinite(cov))
    fallback = _prior_cov(curve.precision, curve) if theta.shape[0] == 3 + curve.precision.shape[0] else jnp.eye(theta.shape[0])
    cov = jnp.where(ok, 0.5 * (cov + cov.T), fallback)
    return CalibratedState(mode=theta, cov=cov)


def group_scale_grid(group_scale=None):
    """The group offsets' scales as a tuple (one: a fixed scale; default :data:`GROUP_SCALE`)."""
    gs = GROUP_SCALE if group_scale is None else group_scale
    return tuple(float(v) for v in np.atleast_1d(np.asarray(gs, dtype=np.float64)))


def band_scale_grid(band_scale=None):
    """The band offsets' random-walk scales as a tuple (one: a fixed scale; default :data:`BAND_SCALE`)."""
    return group_scale_grid(BAND_SCALE if band_scale is None else band_scale)


class OffsetGrid(NamedTuple):
    """A grid of the priors' scales, each point a prior: G points of (the bands' random-walk
    scale s, the groups' scale τ, the slope's prior sd σ_b), the uniform prior over them summed
    out exactly (:func:`fit_mode_grid`, :func:`sample_params_grid`)."""

    precision: jnp.ndarray    # (G, m, m): Q_b(1) / s² ⊕ I / τ²
    log_prior: jnp.ndarray    # (G,): log p(point) + log of the point's normalisers, up to a constant
    band_scale: jnp.ndarray   # (G,) s (NaN: the curve's own band block, not a grid)
    group_scale: jnp.ndarray  # (G,) τ
    slope_sd: Any = None      # (G,) σ_b (NaN or None: the curve's own prior of the slope)


def offset_grid(curve: CalibrationCurve, band_scales=None, group_scales=None, slope_sds=None) -> OffsetGrid:
    """The grid over the band offsets' scales ``band_scales`` (None: the curve's own band block)
    times the group offsets' scales ``group_scales`` (None: :data:`GROUP_SCALE`) times the slope
    prior's sds ``slope_sds`` (None: the curve's own prior of b), uniform.  The log prior holds
    log p(point) − m_b log s − m_g log τ − log σ_b: the normalisers of N(0, Q_b(1)⁻¹ s²),
    N(0, τ² I) and N(m_b, σ_b²) that :func:`log_posterior` leaves out (they do not depend on θ),
    so that log_posterior + it is log p(θ, point | y) + const."""
    m_b, m_g = n_band_offsets(curve), n_group_offsets(curve)
    bands = [(float("nan"), curve.precision[:m_b, :m_b])] if band_scales is None else \
        [(float(s), band_precision(m_b, s) if m_b else jnp.zeros((0, 0))) for s in np.atleast_1d(band_scales)]
    slopes = [float("nan")] if slope_sds is None else [float(v) for v in np.atleast_1d(slope_sds)]
    points = [(s, q, t, v) for s, q in bands for t in group_scale_grid(group_scales) for v in slopes]
    prec = jnp.stack([_with_group_block(q, m_g, t) for _, q, t, _ in points])
    sb = np.array([s for s, _, _, _ in points])
    tg = np.array([t for _, _, t, _ in points])
    sd = np.array([v for _, _, _, v in points])
    lp = -np.log(len(points)) - m_g * np.log(tg) - (0.0 if band_scales is None else m_b * np.log(sb)) \
        - (0.0 if slope_sds is None else np.log(sd))
    return OffsetGrid(prec, jnp.asarray(lp), jnp.asarray(sb), jnp.asarray(tg), jnp.asarray(sd))


def _point_prior(curve: CalibrationCurve, slope_sd, xp=jnp):
    """(..., 3, 2): the curve's prior of (a, b, log κ) at grid points of slope sd ``slope_sd``
    (shape (...); NaN: the curve's own).  ``xp``: ``jnp`` (traced or concrete) or ``np``
    (:func:`prior_state_grid`, which compiles nothing)."""
    rows = xp.asarray(prior_rows() if curve.prior is None else curve.prior)
    sd = xp.asarray(slope_sd)[..., None, None]
    at_slope_sd = xp.asarray(np.arange(6).reshape(3, 2) == 3)        # the (b, sd) entry
    return xp.where(at_slope_sd & ~xp.isnan(sd), sd, rows)


def _slope_sds(grid: OffsetGrid):
    """(G,) the grid's slope sds, NaN where a point keeps the curve's own."""
    return jnp.full(grid.log_prior.shape, jnp.nan) if grid.slope_sd is None else grid.slope_sd


def _as_grid(curve: CalibrationCurve, grid) -> OffsetGrid:
    """An :class:`OffsetGrid`, or a sequence of group scales τ (stop 58's grid) made one."""
    return grid if isinstance(grid, OffsetGrid) else offset_grid(curve, None, grid)


def fit_mode_grid(curve: CalibrationCurve, grid, counts, init=None, n_iter: int = 40):
    """:func:`fit_mode` at every point g of the offsets' scale grid (an :class:`OffsetGrid`, or
    a sequence of group scales τ; vmapped) and the points' posterior weights by the Laplace
    approximation of p(y | g): log w_g = log p(θ̂_g, y | g) + ½ log det Σ_g + log p(g), normalised."""
    grid = _as_grid(curve, grid)
    precisions, lp = grid.precision, grid.log_prior

    def one(q, sd, st):
        c = curve._replace(precision=q, prior=_point_prior(curve, sd))
        st = fit_mode(c, counts, init=st, n_iter=n_iter)
        logdet = small_linalg.logdet_of_factor(small_linalg.cholesky(st.cov))
        return st, log_posterior(st.mode, c, counts) + 0.5 * logdet

    if init is None:
        init = CalibratedState(jnp.broadcast_to(_prior_mode(curve.precision.shape[0], curve), (lp.shape[0], curve.precision.shape[0] + 3)),
                               jax.vmap(lambda q: _prior_cov(q, curve))(precisions))
    st, log_ev = jax.vmap(one)(precisions, _slope_sds(grid), CalibratedState(init.mode, init.cov))
    return CalibratedState(st.mode, st.cov, jax.nn.log_softmax(log_ev + lp))


def prior_state_grid(curve: CalibrationCurve, grid) -> CalibratedState:
    """The state before any label of :func:`fit_mode_grid`'s model, in closed form: at every
    grid point the prior's mode (0 for every offset), the prior covariance (diag of the prior
    variances of (a, b, log κ) ⊕ Q_g⁻¹) and the Laplace weights, log w_g = ½ log det Σ_g + log p(g)
    normalised (the log prior density is 0 at its mode) -- what ``fit_mode_grid`` on no labels
    returns (its Newton step from the prior's mode moves nothing: the gradient there is 0).
    Computed once, in NumPy, from the grid's precisions (which do not depend on the scores),
    so a posterior program carries no Newton loop for it: ``model.fit(model.init_state(), ...)``
    reads only the mode, and one loop fewer in every posterior program was ~2.4 s of XLA
    compiling at the test tier's level 0 (``fit_mode_grid`` with ``n_iter=1``, 127 cells)."""
    grid = _as_grid(curve, grid)
    prec = np.asarray(grid.precision, dtype=np.float64)
    n_points, m = prec.shape[0], prec.shape[1]
    sd = np.full(n_points, np.nan) if grid.slope_sd is None else np.asarray(grid.slope_sd, dtype=np.float64)
    s2 = _point_prior(curve, sd, np)[:, :, 1] ** 2     # (G, 3): each point's prior variances, in NumPy
    covs = np.zeros((n_points, 3 + m, 3 + m))
    covs[:, [0, 1, 2], [0, 1, 2]] = s2
    logdet = np.sum(np.log(s2), axis=1)
    if m:
        inv = np.linalg.inv(prec)
        covs[:, 3:, 3:] = 0.5 * (inv + np.swapaxes(inv, 1, 2))
        logdet = logdet - np.linalg.slogdet(prec)[1]
    log_ev = 0.5 * logdet + np.asarray(grid.log_prior, dtype=np.float64)
    log_weight = log_ev - np.max(log_ev)
    log_weight = log_weight - np.log(np.sum(np.exp(log_weight)))
    mode = np.broadcast_to(np.asarray(_prior_mode(m, curve)), (n_points, 3 + m))
    return CalibratedState(jnp.asarray(mode), jnp.asarray(covs), jnp.asarray(log_weight))


#: the Student-t proposals' degrees of freedom: an integer, so that their mixing variable
#: χ²_df / df is a mean of df squared standard normals (:func:`chi2_over_df`)
T_DF = 5


def chi2_over_df(key, n: int, df: int = T_DF):
    """n draws of χ²_df / df for an integer ``df``: the mean of df squared standard normals, the
    Student-t proposal's mixing variable exactly, with no rejection loop to compile
    (``jax.random.gamma``'s cost ~0.6 s of every posterior program's compilation at the test
    tier's XLA level; stop 76)."""
    return jnp.mean(jax.random.normal(key, (n, int(df))) ** 2, axis=1)


def beta_draws(key, a, b):
    """Beta(a, b) draws, ``a`` and ``b`` broadcast together: ``jax.random.beta``'s ratio of two
    Gamma draws taken in log space (no underflow at small shapes), the two log-Gamma draws made in
    one call on the stacked shapes -- one rejection loop to compile instead of two (stop 76)."""
    a, b = jnp.broadcast_arrays(jnp.asarray(a, jnp.float64), jnp.asarray(b, jnp.float64))
    lg = jax.random.loggamma(key, jnp.stack([a, b]))
    top = jnp.maximum(lg[0], lg[1])
    ga, gb = jnp.exp(lg[0] - top), jnp.exp(lg[1] - top)
    return ga / (ga + gb)


def sample_params_grid(key, curve: CalibrationCurve, grid, counts, state: CalibratedState, n_draws: int,
                       n_proposals: int = 1024):
    """Draws of θ = (a, b, log κ, d, e) from its posterior with the offsets' scales
    integrated over the grid (an :class:`OffsetGrid`, or a sequence of group scales τ; a uniform
    prior on it): importance sampling from the mixture of the per-point Laplace-t proposals
    (each picked by its weight ``state.log_weight``), the target log Σ_g p(g) p(θ | g) p(y | θ),
    systematic resampling.  Also each draw's grid point, drawn from p(g | θ).  Returns (θ
    draws, the draws' points as indices into the grid, ESS)."""
    grid = _as_grid(curve, grid)
    precisions, lp = grid.precision, grid.log_prior
    k0, k1, k2, k3 = jax.random.split(key, 4)
    comp = jax.random.categorical(k0, state.log_weight, shape=(n_proposals,))
    chols = jax.vmap(lambda c: small_linalg.cholesky(1.5 * c + 1e-9 * jnp.eye(c.shape[0])))(state.cov)
    df, d = float(T_DF), state.mode.shape[1]
    zs = jax.random.normal(k1, (n_proposals, d))
    g = chi2_over_df(k2, n_proposals)
    x = state.mode[comp] + jnp.einsum("nij,nj->ni", chols[comp], zs) / jnp.sqrt(g)[:, None]

    def log_t(mean, chol):      # the Student-t density up to a constant common to the components
        sol = small_linalg.solve_lower(chol, (x - mean).T)
        return -0.5 * (df + d) * jnp.log1p(jnp.sum(sol ** 2, axis=0) / df) - jnp.sum(jnp.log(jnp.diag(chol)))

    logq = jax.nn.logsumexp(state.log_weight[:, None] + jax.vmap(log_t)(state.mode, chols), axis=0)
    # log p(θ, g | y) = [log p(y | θ) + log p(a, b, log κ)] + log p(d, e | g) + log p(g): the first
    # term, the costly one (a sum over the units), once per draw, not once per grid point
    shared = jax.vmap(lambda t: log_posterior(t, curve._replace(precision=jnp.zeros_like(curve.precision)), counts))(x)
    offsets = x[:, 3:]
    joint = shared[None, :] + lp[:, None] - 0.5 * jnp.einsum("ni,gij,nj->gn", offsets, precisions, offsets)  # (G, n)
    m0, s0 = _prior_of(curve)     # a point's own slope sd replaces the curve's in the shared term
    sd = jnp.where(jnp.isnan(_slope_sds(grid)), s0[1], _slope_sds(grid))
    joint = joint - 0.5 * (x[None, :, 1] - m0[1]) ** 2 * (1.0 / sd[:, None] ** 2 - 1.0 / s0[1] ** 2)
    logp = jax.nn.logsumexp(joint, axis=0)
    logw = jnp.where(jnp.isfinite(logp), logp - logq, -jnp.inf)
    w = jnp.exp(logw - jnp.max(logw))
    w = w / jnp.sum(w)
    u = (jax.random.uniform(k3) + jnp.arange(n_draws)) / n_draws
    idx = jnp.clip(jnp.searchsorted(jnp.cumsum(w), u), 0, n_proposals - 1)
    point = jax.random.categorical(jax.random.fold_in(k3, 1), joint[:, idx].T, axis=-1)
    return x[idx], point, 1.0 / jnp.sum(w ** 2)


def _student_t(key, mean, cov, n, df: int = T_DF):
    k1, k2 = jax.random.split(key)
    chol = small_linalg.cholesky(cov + 1e-9 * jnp.eye(cov.shape[0]))
    zs = jax.random.normal(k1, (n, mean.shape[0]))
    g = chi2_over_df(k2, n, df)
    x = mean + (zs @ chol.T) / jnp.sqrt(g)[:, None]
    # log density up to a constant
    sol = small_linalg.solve_lower(chol, (x - mean).T)
    maha = jnp.sum(sol**2, axis=0)
    logq = -0.5 * (df + mean.shape[0]) * jnp.log1p(maha / df)
    return x, logq


def sample_params(key, z, counts, state: CalibratedState, n_draws: int, n_proposals: int = 1024, log_post=None):
    """Draws of (a, b, log κ): Laplace-t importance sampling with systematic resampling
    (``log_post`` as in :func:`fit_mode`)."""
    log_post = log_posterior if log_post is None else log_post
    k1, k2 = jax.random.split(key)
    x, logq = _student_t(k1, state.mode, 1.5 * state.cov, n_proposals)
    logp = jax.vmap(lambda t: log_post(t, z, counts))(x)
    logw = jnp.where(jnp.isfinite(logp), logp - logq, -jnp.inf)
    w = jnp.exp(logw - jnp.max(logw))
    w = w / jnp.sum(w)
    u = (jax.random.uniform(k2) + jnp.arange(n_draws)) / n_draws
    idx = jnp.clip(jnp.searchsorted(jnp.cumsum(w), u), 0, n_proposals - 1)
    ess = 1.0 / jnp.sum(w**2)
    return x[idx], ess


def _draws_given_params(th, k_pi, k_unl, curve: CalibrationCurve, counts, unlabeled, m_b: int):
    """Given draws θ of (a, b, log κ, d[, e]): π_k | labels ~ Beta(κμ_k + n_k1, κ(1−μ_k) + n_k0)
    exactly, then each stratum's unlabeled positives ~ Binomial(unlabeled, π_k); the sampler's
    dict (both of :func:`calibrated_model`'s samplers)."""
    mu = jax.nn.sigmoid(jax.vmap(curve_eta, in_axes=(0, None))(th, curve))
    kappa = jnp.exp(th[:, 2:3])
    pi1 = beta_draws(k_pi, kappa * mu + counts[None, :, 1], kappa * (1 - mu) + counts[None, :, 0])
    m1 = jax.random.binomial(k_unl, unlabeled[None, :], pi1)
    return {"pi": jnp.stack([1 - pi1, pi1], axis=-1), "unlabeled_counts": jnp.stack([unlabeled[None, :] - m1, m1], axis=-1),
            "a": th[:, 0], "b": th[:, 1], "kappa": kappa[:, 0], "band_offset": th[:, 3:3 + m_b],
            "group_offset": th[:, 3 + m_b:]}


def _mode_posterior_predictive(mode, curve: CalibrationCurve, counts):
    """The per-stratum posterior mean at a mode of θ: (κμ_k + n_k1) / (κ + n_k) -- what the
    stratum's own labels add to the curve."""
    kappa = jnp.exp(mode[2])
    p1 = (kappa * jax.nn.sigmoid(curve_eta(mode, curve)) + counts[:, 1]) / (kappa + counts.sum(1))
    return jnp.stack([1.0 - p1, p1], axis=-1)


def calibrated_model(leaf_probs, n_proposals: int = 1024, fit_iters: int = 25, bands: int = 0,
                     band_scale=None, groups=None, n_groups: int | None = None,
                     group_scale=None, prior: dict | None = None, slope_sd=None):
    """The model behind the ``OracleModel`` interface of :mod:`bayes_eval.models`.

    ``leaf_probs`` (K, 2): the classifier's mean class probabilities per stratum;
    ``fit_iters``: damped Newton steps per ``fit`` (warm-started from the given state;
    a companion model refitted after every stage needs few); ``bands``: the curve's band
    offsets (0: the two-parameter logistic curve; the posterior model of the registry uses
    :data:`BANDS`), ``band_scale`` their random walk's scale (a sequence of scales: s learned over
    that grid, uniform; the draws gain ``band_scale``); ``groups`` (K,) int: one more offset per
    group, N(0, τ²) with τ = ``group_scale`` (default :data:`GROUP_SCALE`); a sequence of scales:
    τ learned over that grid (a uniform prior on it, :func:`fit_mode_grid`,
    :func:`sample_params_grid`; the draws gain ``group_scale``); ``prior``: of (a, b, log κ)
    (default :data:`PRIOR`, the companion's; the posterior model's is :data:`POSTERIOR_PRIOR`);
    ``slope_sd``: a sequence of the slope prior's sds, σ_b learned over that grid (a uniform prior;
    it replaces ``prior``'s sd of b; the draws gain ``slope_sd``; None or one value: fixed).
    """
    from .oracle import OracleModel

    scales = group_scale_grid(group_scale)
    slopes = None if slope_sd is None else group_scale_grid(slope_sd)
    if slopes is not None and len(slopes) == 1:   # one sd: a fixed prior on b
        base = PRIOR if prior is None else prior
        prior, slopes = {**base, "b": (base["b"][0], slopes[0])}, None
    band_scales = band_scale_grid(band_scale)
    curve = make_curve(score_logit(leaf_probs), bands, band_scales, groups=groups, n_groups=n_groups, group_scale=scales[0],
                       prior=prior)
    n_bands = curve.precision.shape[0]          # every offset: the bands' and the groups'
    m_b = n_band_offsets(curve)
    learn_bands = m_b > 0 and len(band_scales) > 1
    if (groups is not None and len(scales) > 1) or learn_bands or slopes is not None:
        grid = offset_grid(curve, band_scales if learn_bands else None, scales if groups is not None else None, slopes)
        return _calibrated_grid_model(curve, grid, n_proposals, fit_iters, learn_bands, groups is not None and len(scales) > 1,
                                      slopes is not None)

    def init_state():
        return CalibratedState(mode=_prior_mode(n_bands, curve), cov=_prior_cov(curve.precision, curve))

    def fit(state, counts, unlabeled):
        return fit_mode(curve, counts, init=state, n_iter=fit_iters)

    def predictive(state):
        mu = jax.nn.sigmoid(curve_eta(state.mode, curve))
        return jnp.stack([1 - mu, mu], axis=-1)  # refined per stratum by ``sample``

    def sample(key, counts, unlabeled, n_draws, state=None):
        st = fit_mode(curve, counts, n_iter=25) if state is None else state   # see _calibrated_grid_model
        k1, k2, k3 = jax.random.split(key, 3)
        th, ess = sample_params(k1, curve, counts, st, n_draws, n_proposals)
        return {**_draws_given_params(th, k2, k3, curve, counts, unlabeled, m_b), "importance_ess": ess}

    def posterior_predictive(state, counts):
        return _mode_posterior_predictive(state.mode, curve, counts)

    return OracleModel("calibrated-beta", init_state, fit, predictive, sample, posterior_predictive)


def _calibrated_grid_model(curve: CalibrationCurve, grid: OffsetGrid, n_proposals: int, fit_iters: int,
                           band_draws: bool = False, group_draws: bool = True, slope_draws: bool = False):
    """:func:`calibrated_model` with the offsets' scales learned over the grid ``grid``; the
    draws carry ``band_scale`` / ``group_scale`` where those are learned."""
    from .oracle import OracleModel

    m_b = n_band_offsets(curve)
    prior = prior_state_grid(curve, grid)

    def init_state():
        return prior

    def fit(state, counts, unlabeled):
        return fit_mode_grid(curve, grid, counts, init=state, n_iter=fit_iters)

    def _mode(state):       # the mode at the scale of most weight
        return state.mode[jnp.argmax(state.log_weight)]

    def predictive(state):
        mu = jax.nn.sigmoid(curve_eta(_mode(state), curve))
        return jnp.stack([1 - mu, mu], axis=-1)

    def sample(key, counts, unlabeled, n_draws, state=None):
        # ``state``: the model's fit to these counts (every posterior program fits first,
        # ``model.fit(model.init_state(), ...)``): its modes and covariances centre the Laplace-t
        # proposal as they are.  The importance weights correct for a centre a little off the
        # mode (a fit short of convergence costs ESS); a state fitted to other counts collapses
        # the sample (``importance_ess`` near 1).  (A four-step refit from it was a second Newton
        # loop in every posterior program: ~1-2 s of XLA compiling, stop 71.)
        st = fit_mode_grid(curve, grid, counts, n_iter=25) if state is None else state
        k1, k2, k3 = jax.random.split(key, 3)
        th, point, ess = sample_params_grid(k1, curve, grid, counts, st, n_draws, n_proposals)
        learned = {**({"band_scale": grid.band_scale[point]} if band_draws else {}),
                   **({"group_scale": grid.group_scale[point]} if group_draws else {}),
                   **({"slope_sd": grid.slope_sd[point]} if slope_draws else {})}
        return {**_draws_given_params(th, k2, k3, curve, counts, unlabeled, m_b), **learned, "importance_ess": ess}

    def posterior_predictive(state, counts):
        return _mode_posterior_predictive(_mode(state), curve, counts)

    return OracleModel("calibrated-beta", init_state, fit, predictive, sample, posterior_predictive)


def numpyro_model(z, counts, band=None, precision=None, group=None, band_scales=None, prior=None, slope_sds=None):
    """The same model in NumPyro (marginal over π), for NUTS and ArviZ diagnostics; with
    ``band`` / ``precision`` (a :class:`CalibrationCurve`'s, the bands' block) the band offsets
    ``band_offset``, their walk's scale ``band_scales`` (default :data:`BAND_SCALE`; a grid: s
    summed out, ``precision`` then the unit walk, as :func:`make_curve` builds it for a grid); with
    ``group`` (K, m_g) one-hot the group offsets ``group_offset``; ``prior``: of (a, b, log κ)
    as :data:`PRIOR` spells it (default :data:`PRIOR`; the posterior model's: :data:`POSTERIOR_PRIOR`);
    ``slope_sds`` several sds: the slope's prior sd over that grid, uniform, summed out."""
    import numpyro
    import numpyro.distributions as dist

    rows = prior_rows(prior)
    a = numpyro.sample("a", dist.Normal(*rows[0]))
    sds = None if slope_sds is None else group_scale_grid(slope_sds)
    if sds is None or len(sds) == 1:
        b = numpyro.sample("b", dist.Normal(rows[1][0], rows[1][1] if sds is None else sds[0]))
    else:   # p(b) = Σ_σ N(b; m, σ²) / S
        b = numpyro.sample("b", dist.ImproperUniform(dist.constraints.real, (), ()))
        numpyro.factor("b_prior", jax.nn.logsumexp(dist.Normal(rows[1][0], jnp.asarray(sds)).log_prob(b)) - jnp.log(len(sds)))
    lk = numpyro.sample("log_kappa", dist.Normal(*rows[2]))
    kappa = jnp.exp(lk)
    eta = a + b * z
    if precision is not None and precision.shape[0]:
        m, bs = precision.shape[0], band_scale_grid(band_scales)
        if len(bs) == 1:
            d = numpyro.sample("band_offset", dist.MultivariateNormal(jnp.zeros(m), precision_matrix=precision))
        else:   # the walk's scale s over the grid, uniform, summed out: p(d) = Σ_s N(d; 0, s² Q₁⁻¹) / S
            d = numpyro.sample("band_offset", dist.ImproperUniform(dist.constraints.real_vector, (), (m,)))
            q1, s = precision, jnp.asarray(bs)       # ``precision``: the unit walk (``make_curve`` of a grid)
            numpyro.factor("band_offset_prior", jax.nn.logsumexp(-0.5 * (d @ q1 @ d) / s ** 2 - m * jnp.log(s))
                           - jnp.log(s.size))
        eta = eta + d[band]
    if group is not None and group.shape[1]:
        scales = group_scale_grid(None)
        if len(scales) == 1:
            e = numpyro.sample("group_offset", dist.Normal(0.0, scales[0]).expand([group.shape[1]]).to_event(1))
        else:   # τ over the grid, uniform, summed out: p(e) = Σ_g N(e; 0, τ_g² I) / G
            e = numpyro.sample("group_offset", dist.ImproperUniform(dist.constraints.real_vector, (), (group.shape[1],)))
            t = jnp.asarray(scales)
            numpyro.factor("group_offset_prior", jax.nn.logsumexp(
                jnp.sum(dist.Normal(0.0, t[:, None]).log_prob(e[None, :]), axis=1)) - jnp.log(t.size))
        eta = eta + group @ e
    mu = jnp.clip(jax.nn.sigmoid(eta), 1e-12, 1 - 1e-12)
    n = counts.sum(-1)
    with numpyro.plate("strata", z.shape[0]):
        numpyro.sample("n_pos", dist.BetaBinomial(kappa * mu, kappa * (1 - mu), total_count=n), obs=counts[:, 1])


def run_nuts(key, leaf_probs, counts, num_warmup=500, num_samples=1000, num_chains=2, progress_bar=False,
             chain_method="sequential", extra_fields=("diverging", "num_steps"), bands=0, band_scale=None,
             groups=None, prior=None):
    """NUTS on (a, b, log κ[, band offsets]) under ``prior`` (default :data:`PRIOR`); returns the
    numpyro MCMC object.

    ``chain_method`` as in ``numpyro.infer.MCMC`` (``"sequential"``, ``"vectorized"``,
    ``"parallel"``); ``extra_fields`` are kept for diagnostics (divergences reach ArviZ's
    ``sample_stats`` through :mod:`bayes_eval.report`), as for the Dirichlet tree's
    ``run_nuts``."""
    from functools import partial

    from numpyro.infer import MCMC, NUTS

    curve = make_curve(score_logit(leaf_probs), bands, band_scale, groups=groups, prior=prior)
    m_b = n_band_offsets(curve)
    mcmc = MCMC(NUTS(partial(numpyro_model, prior=prior)), num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains,
                chain_method=chain_method, progress_bar=progress_bar)
    mcmc.run(key, curve.z, jnp.asarray(counts, dtype=jnp.float64), curve.band, curve.precision[:m_b, :m_b],
             curve.group, band_scale_grid(band_scale), extra_fields=tuple(extra_fields))
    return mcmc
