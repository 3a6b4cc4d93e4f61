"""The Bayesian finite-pool posterior of a measure (001 §4; ``docs/architecture.md``, "Intervals").

For each posterior draw of the oracle model, the unlabeled items' labels are drawn — as
class *counts* per cell (stratum × loss pattern), never per item — the pool is
completed with the observed labels of the labeled items, and G is computed exactly.  The
result is the posterior of the measure *on this pool* (001 Remark 2: the sample-based
measure), for any measure, vector measures included.

Because the design only looks at observed labels, the observation process is ignorable
(001 §4.2) and this posterior is valid whatever design chose the labeled items -- provided
the model does not pool items the design draws at different rates.  The model's units
(its "leaves") are therefore the design's cells where the model allows it
(:func:`bayes_eval.cells.posterior_units`, :func:`units_for_model`): the calibrated
model's class rate is per cell, the Dirichlet tree's per stratum.

Pieces:

* :func:`finite_pool_posterior` — draws of π from an ``OracleModel`` (the simulation
  core's route), then :func:`pool_posterior_from_pi`, which completes the pool for any
  draws of π (e.g. from NUTS) with :func:`complete_pool_draws`;
* :func:`calibrated_pi` — π given draws of (a, b, κ) of the calibrated model (its exact
  Beta conditional), for NUTS draws of those three parameters;
* :func:`replicate_labeled`, :func:`ppc_tail_probabilities` — the posterior predictive
  check of the labeled items' classes;
* :func:`labeled_table` — the (X, C) table of labeled items from item rows and labels;
* :func:`equal_tailed` — central posterior intervals; :func:`highest_density` — the
  shortest ones; :func:`collapsed` — whether one holds a single completed-pool value while
  an unlabeled item can still change G;
  :func:`bayesian_interval` — which of the two the library reports (highest-density on
  binary pools, equal-tailed with several classes); :func:`resolved_interval` — the interval
  every caller reports: that one, never narrower than what one unlabeled item's label can
  change (:func:`one_item_range`, :func:`widen_to_resolution`).

Reporting (ArviZ, tables, plots) lives in :mod:`bayes_eval.report`; the CLT interval it
is compared with is 001 §3.3.2.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401
from ._config import jit_run_often
from .cells import CellTable, leaf_counts  # noqa: F401  (leaf_counts re-exported)

__all__ = [
    "leaf_counts",
    "intervals_at_checkpoints",
    "complete_pool_draws",
    "multinomial_counts",
    "finite_pool_posterior",
    "equal_tailed",
    "highest_density",
    "bayesian_interval",
    "collapsed",
    "resolved_interval",
    "widen_to_resolution",
    "one_item_range",
    "PosteriorDraws",
    "pool_posterior_from_pi",
    "calibrated_pi",
    "replicate_labeled",
    "ppc_tail_probabilities",
    "labeled_table",
    "units_for_model",
    "LOW_SAMPLER_ESS",
]

#: the posterior models whose units are the cells rather than the strata
#: (:func:`bayes_eval.cells.posterior_units`): a model with no structure over the strata
#: (the calibrated one: a curve in the score and a departure per unit) can follow the
#: design's cells; the Dirichlet tree's leaves are the strata in score order.
CELL_UNIT_MODELS = ("calibrated",)


def units_for_model(name: str) -> str:
    """``"cell"`` or ``"stratum"``: the units :func:`bayes_eval.cells.posterior_units`
    builds for the posterior model ``name``."""
    return "cell" if name in CELL_UNIT_MODELS else "stratum"


class PosteriorDraws(NamedTuple):
    """Draws of the finite-pool posterior.

    ``value`` (n, m): G on the completed pool; ``risk`` (n, d); ``pi`` (n, K, C) the
    model's π(y|k); ``unlabeled_counts`` (n, K, C) the drawn classes of the unlabeled
    items per stratum; ``one_item`` (2, m): the lowest and highest G one unlabeled item's
    class away from the median completion (:func:`one_item_range`; None where not computed);
    ``sampler_ess`` (): the importance ESS behind the parameter draws where the model draws
    them by importance resampling (the calibrated model: Laplace-t over 1,024 proposals,
    ``models/calibrated.py``), NaN where its sampler is exact (the tree's conjugate Gibbs)
    -- few distinct parameter values behind the draws make the interval one guess
    (:data:`LOW_SAMPLER_ESS`).
    """

    value: jnp.ndarray
    risk: jnp.ndarray
    pi: jnp.ndarray
    unlabeled_counts: jnp.ndarray
    one_item: jnp.ndarray | None = None
    sampler_ess: jnp.ndarray | None = None


#: below this importance ESS (:attr:`PosteriorDraws.sampler_ess`) the parameter draws rest on
#: a handful of proposals: the calibrated model's sampler gave at least 675 in every run measured
#: (20 runs per pool and design, ais and poisson-adaptive on the demo pool, abt-buy, dblp-acm and
#: the heavy tie, 500 / 1000 / 2000 labels), and 1.0 in the float64 failure of its marginal fixed at stop 40 (one proposal, an interval
#: [0.087, 0.092] for a true F1 of 0.578) -- the session's status and the simulation's JSON flag it.
LOW_SAMPLER_ESS = 20.0


def multinomial_counts(key, n, p):
    """Multinomial(n, p) by sequential binomials of the renormalised shares; ``n`` (…,), ``p`` (…, C)
    (also the several-class model's split of a unit's unlabeled items, ``calibrated_classes``)."""
    c = p.shape[-1]
    out = []
    remaining = n
    rest = jnp.ones(p.shape[:-1])
    keys = jax.random.split(key, c)
    for j in range(c - 1):
        pj = jnp.clip(p[..., j] / jnp.maximum(rest, 1e-300), 0.0, 1.0)
        draw = jax.random.binomial(keys[j], remaining, pj)
        out.append(draw)
        remaining = remaining - draw
        rest = rest - p[..., j]
    out.append(remaining)
    return jnp.stack(out, axis=-1)


def complete_pool_draws(key, g, cells: CellTable, labeled, pi_leaf, observations: bool = False):
    """G on the pool completed by drawing the unlabeled items' classes (001 §4).

    ``observations`` (a stochastic oracle, 001 §2.1: y ~ p(y|x), every draw a label): ``labeled``
    counts label *observations*, not items, and the measure is of the oracle's expected answer,
    R = Σ_x p(x) Σ_y N_x π(y|x) ℓ(x, y) (001 eq. 2 over the pool) -- nothing to complete: G is
    that of each draw's π, and ``unlabeled_counts`` are zeros.  Every design draws an item
    uniformly within a cell (its proposal is constant there, :mod:`bayes_eval.cells`), so a
    cell's observations are Binomial(draws, the mean of p(1|x) over its items) -- the rate
    the cell's π stands for.

    Within a cell the unlabeled count is split Multinomial(U_x, π(·|k_x)) given each
    draw — the exact conditional of the model, cell by cell; the labeled items keep their
    labels; then R = Σ_x p(x) Σ_y N_{x,y} ℓ(x, y) and G = g(R) exactly (001 §2.2).

    Parameters
    ----------
    key : PRNG key
    g : callable
        ``g(R) -> (m,)``.
    cells : CellTable
    labeled : array, shape (X, C)
    pi_leaf : array, shape (n, K, C)
        Posterior draws of π(y|k).

    Returns
    -------
    value : array, shape (n, m)
    risk : array, shape (n, d)
    unlabeled_counts : array, shape (n, X, C)
        The drawn classes of the unlabeled items, per cell.
    """
    if observations:
        def expected(pi):
            risk = jnp.einsum("x,xc,xcd->d", cells.weight * cells.size, pi[cells.stratum], cells.loss)
            return jnp.atleast_1d(g(risk)), risk

        value, risk = jax.vmap(expected)(pi_leaf)
        return value, risk, jnp.zeros((pi_leaf.shape[0],) + tuple(labeled.shape), pi_leaf.dtype)

    unl = jnp.maximum(cells.size - labeled.sum(1), 0.0)
    keys = jax.random.split(key, pi_leaf.shape[0])

    def one(k, pi):
        m = multinomial_counts(k, unl, pi[cells.stratum])
        counts = labeled + m
        risk = jnp.einsum("x,xc,xcd->d", cells.weight, counts, cells.loss)
        return jnp.atleast_1d(g(risk)), risk, m

    value, risk, m = jax.vmap(one)(keys, pi_leaf)
    return value, risk, m


def finite_pool_posterior(key, model, cells: CellTable, labeled, n_strata: int, g, n_draws: int = 400,
                          state=None, observations: bool = False) -> PosteriorDraws:
    """Posterior draws of G on the pool given the labels so far (001 §4).

    Parameters
    ----------
    key : PRNG key
    model : OracleModel
        Its ``sample`` gives draws of π (the Dirichlet-tree: the exact conjugate Gibbs
        sampler, warm-started at ``state``; the calibrated model: Laplace-t importance
        resampling).
    cells : CellTable
    labeled : array, shape (X, C)
    n_strata : int
    g : callable
    n_draws : int, default 400
    state : optional
        Warm start for ``model.sample``.
    observations : bool, default False
        A stochastic oracle: ``labeled`` counts label observations (:func:`complete_pool_draws`).

    Returns
    -------
    PosteriorDraws
    """
    counts, unl = leaf_counts(cells, labeled, n_strata, observations)
    k1, k2 = jax.random.split(key)
    s = model.sample(k1, counts, unl, n_draws, state=state)
    post = pool_posterior_from_pi(k2, g, cells, labeled, s["pi"], n_strata, observations=observations)
    return post._replace(sampler_ess=jnp.asarray(s.get("importance_ess", jnp.nan), dtype=jnp.float64))


def pool_posterior_from_pi(key, g, cells: CellTable, labeled, pi_leaf, n_strata: int,
                           observations: bool = False) -> PosteriorDraws:
    """Finite-pool posterior of G from given draws of π(y|k) (001 §4).

    The second half of :func:`finite_pool_posterior`, for draws of π that come from
    elsewhere — NUTS chains of either oracle model (:mod:`bayes_eval.report`).

    Parameters
    ----------
    key : PRNG key
    g : callable
        ``g(R) -> (m,)`` of the measure (001 §2.2).
    cells : CellTable
    labeled : array, shape (X, C)
        Labeled items per cell and class; they keep their labels.
    pi_leaf : array, shape (n, K, C)
        Posterior draws of π(y|k).
    n_strata : int
        K.
    observations : bool, default False
        A stochastic oracle (:func:`complete_pool_draws`): no completion, and no one-item
        resolution (``one_item`` None: G moves continuously with π).

    Returns
    -------
    PosteriorDraws
        ``unlabeled_counts`` summed per stratum, (n, K, C).
    """
    value, risk, m = complete_pool_draws(key, g, cells, labeled, pi_leaf, observations=observations)
    m_leaf = jax.vmap(lambda mm: jax.ops.segment_sum(mm, cells.stratum, num_segments=n_strata))(m)
    return PosteriorDraws(value=value, risk=risk, pi=pi_leaf, unlabeled_counts=m_leaf,
                          one_item=None if observations else one_item_range(value, risk, m, cells, g))


def one_item_range(value, risk, unlabeled_cells, cells: CellTable, g):
    """(2, m): the lowest and highest G over the completions one unlabeled item's class away
    from the posterior's median completion (the draw nearest the componentwise median),
    that completion's own value included.

    An item of cell x that the completion gives class c, relabeled c', moves the risk by
    p(x) (ℓ(x, c') − ℓ(x, c)) (001 §2.2); every cell and class pair the completion allows
    (at least one unlabeled item of class c in x) is tried.  This is the measure's
    resolution at that completion: how far one label nobody has seen yet can move G.
    ``unlabeled_cells`` (n, X, C): the draws' classes of the unlabeled items per cell.
    """
    med = jnp.nanmedian(value, axis=0)
    j = jnp.argmin(jnp.nansum(jnp.abs(value - med), axis=1))
    m, r, v = unlabeled_cells[j], risk[j], value[j]
    loss = jnp.asarray(cells.loss)                                   # (X, C, d)
    x, c, d = loss.shape
    step = loss[:, None, :, :] - loss[:, :, None, :]                 # (X, from, to, d)
    moved = r + jnp.asarray(cells.weight)[:, None, None, None] * step
    ok = (m[:, :, None] >= 0.5) & jnp.any(step != 0, axis=-1)        # (X, from, to)
    gv = jax.vmap(lambda rr: jnp.atleast_1d(g(rr)))(moved.reshape(-1, d))   # (X·C·C, m)
    ok = ok.reshape(-1, 1) & jnp.isfinite(gv)
    lo = jnp.minimum(v, jnp.min(jnp.where(ok, gv, jnp.inf), axis=0))
    hi = jnp.maximum(v, jnp.max(jnp.where(ok, gv, -jnp.inf), axis=0))
    return jnp.stack([lo, hi])


def resolved_interval(post: PosteriorDraws, labeled, cells: CellTable, level: float = 0.95):
    """The library's Bayesian interval: the ``level`` interval of each component
    (:func:`bayesian_interval`: highest-density on binary pools), never narrower than what one unlabeled item's label
    can change (:func:`widen_to_resolution`).  Returns (lower, upper, widened), each (m,);
    ``widened`` is the ``bayes_collapsed`` of the simulation's and the session's JSON.

    Why the floor: an interval narrower than the measure's resolution while an unlabeled item
    can still change G -- width 0 where 95% of the draws sit on one completion, or a
    highest-density interval that leaves out the completion one hidden positive away because
    that completion holds under 5% of the draws -- is the model's bet that nothing is hidden.
    On dblp-acm (20 positives; one hidden positive moves F1 by 0.026) 23 width-0 stage intervals
    in 100 AIS runs held the truth 5 times, and a stopping rule that took them for narrow
    stopped 4 runs at W = 0.02, all wrong (``benchmarks/results/stopping_rules_cells.md``); the
    unfloored highest-density interval stopped 15 of 100 runs there, 7 of them wrong
    (``benchmarks/results/interval_hdi.md``).  With the floor, a width below the resolution is
    never reached while an item that matters is unlabeled.
    """
    lo, hi = bayesian_interval(post.value, level, cells.loss.shape[1])
    matter = unlabeled_items_matter(cells, labeled)
    if post.one_item is None:
        return lo, hi, _on_one_value(_tails(post.value, level), COLLAPSE_RTOL) & matter
    return widen_to_resolution(lo, hi, post.one_item, matter)


def widen_to_resolution(lower, upper, one_item, matter):
    """(lower, upper, widened): the interval widened to hold ``one_item`` (2, m), the values one
    unlabeled item's class away from the posterior's median completion
    (:func:`one_item_range`), where it does not hold them and ``matter`` (an unlabeled item can
    still change G: :func:`unlabeled_items_matter`)."""
    tol = COLLAPSE_RTOL * jnp.maximum(1.0, jnp.abs(one_item))
    short = matter & ((lower > one_item[0] + tol[0]) | (upper < one_item[1] - tol[1]))
    return (jnp.where(short, jnp.minimum(lower, one_item[0]), lower),
            jnp.where(short, jnp.maximum(upper, one_item[1]), upper), short)


def calibrated_pi(key, leaf_probs, counts, a, b, kappa, band_offset=None, group_offset=None, groups=None):
    """Draws of π(y|k) of the calibrated Beta-binomial model given draws of (a, b, κ) (and
    of the curve's band offsets, ``band_offset`` (n, m): ``models.calibrated.make_curve``'s
    m quantile bands of z; and of its group offsets ``group_offset`` (n, m_g) with each unit's
    group ``groups`` (K,) int: the top classes of a pool of several classes).

    Given the calibration parameters, the class rate of stratum k has the exact
    conditional posterior π_k | labels ~ Beta(κ μ_k + n_k1, κ (1 − μ_k) + n_k0),
    μ_k = sigmoid(a + b z_k), z_k = logit s(1|k) (``models/calibrated.py``).  With NUTS
    draws of (a, b, log κ) this completes an exact posterior draw of every π_k.

    Parameters
    ----------
    key : PRNG key
    leaf_probs : array, shape (K, 2)
        s(y|k), the classifier's mean class probabilities per stratum.
    counts : array, shape (K, 2)
        Labeled items per stratum and class.
    a, b, kappa : arrays, shape (n,)
        Draws of the calibration intercept, slope and concentration.

    Returns
    -------
    array, shape (n, K, 2)
    """
    from .models.calibrated import beta_draws, make_curve, score_logit

    z = score_logit(leaf_probs)
    counts = jnp.asarray(counts, dtype=jnp.float64)
    eta = a[:, None] + b[:, None] * z[None, :]
    if band_offset is not None and band_offset.shape[-1] > 1:
        eta = eta + band_offset[:, make_curve(z, band_offset.shape[-1]).band]
    if group_offset is not None and group_offset.shape[-1]:
        eta = eta + group_offset[:, jnp.asarray(groups)]
    mu = jnp.clip(jax.nn.sigmoid(eta), 1e-12, 1 - 1e-12)
    al = kappa[:, None] * mu + counts[None, :, 1]
    be = kappa[:, None] * (1 - mu) + counts[None, :, 0]
    pi1 = beta_draws(key, al, be)
    return jnp.stack([1 - pi1, pi1], axis=-1)


def replicate_labeled(key, counts, pi_leaf):
    """Posterior predictive replicates of the labeled items' classes, per stratum.

    For every posterior draw of π, the n_k labeled items of stratum k get fresh classes
    Multinomial(n_k, π(·|k)) — the replicated data of a posterior predictive check of
    the observed label counts (001 §4).

    Parameters
    ----------
    key : PRNG key
    counts : array, shape (K, C)
        Observed labeled items per stratum and class.
    pi_leaf : array, shape (n, K, C)

    Returns
    -------
    array, shape (n, K, C)
    """
    n_k = jnp.asarray(counts, dtype=jnp.float64).sum(-1)
    keys = jax.random.split(key, pi_leaf.shape[0])
    return jax.vmap(lambda k, p: multinomial_counts(k, n_k, p))(keys, pi_leaf)


def ppc_tail_probabilities(observed, replicated):
    """Tail probabilities of observed counts under their posterior predictive.

    Parameters
    ----------
    observed : array, shape (...)
    replicated : array, shape (n, ...)

    Returns
    -------
    dict
        ``mean``, ``sd``, ``lower``/``upper`` (2.5% and 97.5% quantiles) of the
        replicates, ``p_ge`` = P(rep ≥ obs) and ``p_le`` = P(rep ≤ obs); an observation
        with either probability near 0 is one the model does not reproduce.
    """
    rep = np.asarray(replicated, dtype=np.float64)
    obs = np.asarray(observed, dtype=np.float64)
    return {
        "mean": rep.mean(0),
        "sd": rep.std(0),
        "lower": np.quantile(rep, 0.025, axis=0),
        "upper": np.quantile(rep, 0.975, axis=0),
        "p_ge": (rep >= obs[None]).mean(0),
        "p_le": (rep <= obs[None]).mean(0),
    }


def labeled_table(item_cell, n_cells: int, n_classes: int, rows, labels, observations: bool = False) -> np.ndarray:
    """The (X, C) table of labeled items per cell and class from item rows and labels.

    Parameters
    ----------
    item_cell : array, shape (N,)
        Cell of every item of the pool (:func:`bayes_eval.cells.build_cells`).
    n_cells, n_classes : int
    rows : array, shape (n,)
        Row positions of the labeled items.
    labels : array, shape (n,)
        Their labels, integers in 0..C-1.  An item listed twice must carry the same label
        both times (deterministic oracle, 001 Remark 1); it counts once.
    observations : bool, default False
        A stochastic oracle's labeled draws: every entry counts, an item's labels may differ
        (:func:`complete_pool_draws`).

    Returns
    -------
    numpy.ndarray, shape (X, C), float64

    Raises
    ------
    ValueError
        Naming the first offending position: a row outside the pool, a label outside
        0..C-1, or one item with two different labels.
    """
    item_cell = np.asarray(item_cell)
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    if rows.shape != labels.shape:
        raise ValueError(f"{rows.size} labeled items but {labels.size} labels")
    bad = np.flatnonzero((rows < 0) | (rows >= item_cell.shape[0]))
    if bad.size:
        raise ValueError(f"labeled item at position {bad[0]}: row {rows[bad[0]]} is outside the pool "
                         f"of {item_cell.shape[0]} items")
    if labels.size and not np.issubdtype(labels.dtype, np.integer):
        as_int = labels.astype(np.int64)
        bad = np.flatnonzero(as_int != labels)
        if bad.size:
            raise ValueError(f"label at position {bad[0]} is {labels[bad[0]]!r}, not an integer class")
        labels = as_int
    bad = np.flatnonzero((labels < 0) | (labels >= n_classes))
    if bad.size:
        raise ValueError(f"label at position {bad[0]} is {labels[bad[0]]}, outside 0..{n_classes - 1}")
    first = {}
    keep = np.ones(rows.size, bool)
    for i, (r, y) in enumerate(zip(rows.tolist(), labels.tolist()) if not observations else ()):
        if r in first:
            if first[r] != y:
                raise ValueError(f"item at row {r} is labeled {first[r]} and, at position {i}, {y}: a deterministic "
                                 "oracle gives one label per item")
            keep[i] = False
        else:
            first[r] = y
    out = np.zeros((int(n_cells), int(n_classes)))
    np.add.at(out, (item_cell[rows[keep]], labels[keep]), 1.0)
    return out


#: relative tolerance within which two order statistics count as one completed-pool value
COLLAPSE_RTOL = 1e-9


class _Tails(NamedTuple):
    """The order statistics around the two tail quantiles of an equal-tailed interval, per
    component: x_(⌊h⌋), x_(⌊h⌋+1) and the weight h − ⌊h⌋ for the lower (``lo*``) and the
    upper (``hi*``) tail (:func:`_tails`)."""

    lo0: jnp.ndarray
    lo1: jnp.ndarray
    lo_frac: jnp.ndarray
    hi0: jnp.ndarray
    hi1: jnp.ndarray
    hi_frac: jnp.ndarray


def _tails(draws, level: float) -> _Tails:
    """The two order statistics around the (1 ∓ level)/2 quantiles of each column of
    ``draws`` (n, m), from one sort, at the plotting position h = p (n' + 1), n' the
    column's non-NaN draws, and the interpolation weights; positions clipped to 1..n'
    (Hyndman & Fan 1996, definition 6).

    Why this position: for n independent draws from a continuous posterior F,
    E F(X_(k)) = k / (n + 1), so the interval between the quantiles at positions
    (1 ∓ level)/2 · (n + 1) holds on average exactly ``level`` of the posterior's mass
    whatever n is.  numpy's default position, (n − 1) p + 1, holds 94.0% at n = 200 and
    94.8% at n = 1000 for a 95% interval (checked on 20,000 uniform draw sets), so a
    perfectly calibrated posterior would read 0.94 in a coverage table of 200-draw
    intervals.  A column of NaN draws only gives NaN.
    """
    draws = jnp.asarray(draws)
    x = jnp.sort(draws, axis=0)                                   # NaN sorts last
    n = jnp.sum(~jnp.isnan(draws), axis=0)
    top = jnp.maximum(n, 1)
    empty = n == 0

    def around(p):
        h = p * (n + 1.0)
        j = jnp.clip(jnp.floor(h), 1, top).astype(jnp.int32)
        x0 = jnp.take_along_axis(x, (j - 1)[None, :], axis=0)[0]
        x1 = jnp.take_along_axis(x, (jnp.minimum(j + 1, top) - 1)[None, :], axis=0)[0]
        return jnp.where(empty, jnp.nan, x0), jnp.where(empty, jnp.nan, x1), jnp.clip(h - j, 0.0, 1.0)

    a = (1.0 - level) / 2.0
    return _Tails(*around(a), *around(1.0 - a))


def _interpolated(t: _Tails):
    """The equal-tailed interval from its tails: x0 + f (x1 − x0), without inf − inf where
    the two order statistics are equal."""
    lo = jnp.where(t.lo_frac > 0, t.lo0 + t.lo_frac * (t.lo1 - t.lo0), t.lo0)
    hi = jnp.where(t.hi_frac > 0, t.hi0 + t.hi_frac * (t.hi1 - t.hi0), t.hi0)
    return lo, hi


def _on_one_value(t: _Tails, rtol: float):
    """Whether the two tails' outer order statistics (the ones :func:`_interpolated` moves
    towards) coincide: at least the interval's level of the draws on one value."""
    lo = t.lo0
    hi = jnp.where(t.hi_frac > 0, t.hi1, t.hi0)
    return (hi - lo) <= rtol * jnp.maximum(1.0, jnp.abs(lo))


def equal_tailed(draws, level: float = 0.95):
    """Equal-tailed posterior interval of each component, NaN-aware.

    Parameters
    ----------
    draws : array, shape (n, m)
    level : float, default 0.95

    Returns
    -------
    lower, upper : arrays, shape (m,)
        The (1 − level)/2 and (1 + level)/2 quantiles over the draws, at the plotting
        position p (n + 1) (:func:`_tails`), so the interval holds on average ``level`` of
        the posterior's mass for any number of draws: a calibrated posterior's interval
        covers at the nominal level in a simulation with 200 draws as in a session with 1000.
    """
    return _interpolated(_tails(draws, level))


def bayesian_interval(draws, level: float = 0.95, n_classes: int = 2):
    """The library's ``level`` posterior interval of each component of ``draws`` (n, m) on a
    pool of ``n_classes`` classes: :func:`highest_density` on binary pools, :func:`equal_tailed`
    with several classes (stop 63).

    Why two: on binary pools F1's finite-pool posterior has a long low tail the truth seldom
    reaches (positives not yet ruled out among the unlabeled low-score items), and the
    highest-density interval is narrower there at the same or more coverage
    (``benchmarks/results/interval_hdi.md``).  With several classes the low tail of macro-F1
    or accuracy is the top split's Beta skew near ρ = 1, and the truth falls in it more often
    than the highest-density interval allows: on the 300-run record of
    ``benchmarks/results/several_classes.md`` ("Stop 63") the equal-tailed interval of the same
    draws covered more on every 4-class pool at 200-500 labels for 2-6% more width, the misses still
    mostly above the truth."""
    return (equal_tailed if int(n_classes) > 2 else highest_density)(draws, level)


def highest_density(draws, level: float = 0.95):
    """Highest-density (shortest) posterior interval of each component, NaN-aware: the
    narrowest window of k consecutive sorted draws, k − 1 = ⌈level (n + 1)⌉ spacings, so that
    on average it holds ``level`` of the posterior's mass as :func:`equal_tailed` does (the
    plotting position of :func:`_tails`; the shortest of the windows holds a little less: at
    200 draws 94.7-94.8% of a skewed posterior, 94.3% of a normal one,
    ``benchmarks/results/hdi_mass.md``).  Among windows of equal width (a discrete posterior
    on a lattice) the middle one.

    Why it is the library's interval on binary pools (:func:`bayesian_interval`; equal-tailed
    with several classes): the finite-pool posterior
    of F1 on an imbalanced pool is skewed -- a long tail of positives the labels have not
    ruled out in the unlabeled low-score strata -- and the equal-tailed interval spends
    2.5% of its mass on each side, reaching far into that tail.  The highest-density interval
    is the shortest set of the same posterior mass (001 §4's posterior; ArviZ's default
    summary, ``az.hdi``).  Measured on the same 500 runs per pool and design
    (``benchmarks/results/interval_hdi.md``).

    Parameters
    ----------
    draws : array, shape (n, m)
    level : float, default 0.95

    Returns
    -------
    lower, upper : arrays, shape (m,); NaN for a column without a finite draw.
    """
    draws = jnp.asarray(draws)
    x = jnp.sort(draws, axis=0)                                    # NaN sorts last
    n_all, m = x.shape
    n = jnp.sum(~jnp.isnan(draws), axis=0)
    k = jnp.clip(jnp.ceil(level * (n + 1.0) - 1e-9).astype(jnp.int32) + 1, 1, jnp.maximum(n, 1))
    start = jnp.arange(n_all)[:, None]
    end = start + k[None, :] - 1
    top = jnp.take_along_axis(x, jnp.clip(end, 0, n_all - 1), axis=0)
    width = jnp.where(end < n[None, :], top - x, jnp.inf)
    least = jnp.min(width, axis=0)
    tied = width <= least + 1e-12 * jnp.maximum(1.0, jnp.abs(least))
    rank = jnp.cumsum(tied, axis=0)
    best = jnp.argmax(rank >= (rank[-1] + 1) // 2, axis=0)        # the middle of the tied windows
    col = jnp.arange(m)
    empty = n == 0
    return jnp.where(empty, jnp.nan, x[best, col]), jnp.where(empty, jnp.nan, top[best, col])


def collapsed(draws, labeled, cells: CellTable, level: float = 0.95, rtol: float = COLLAPSE_RTOL):
    """Whether the ``level`` equal-tailed interval of each component has collapsed onto one
    completed-pool value while some unlabeled item can still change G.

    The finite-pool posterior is discrete: G takes one value per completion of the pool.
    When at least ``level`` of the draws sit on one value -- the outer order statistics of
    the two tails (the ones :func:`equal_tailed` interpolates towards the tails, so a tail
    that just reaches the next value counts) are equal -- the interval has width 0.  Where
    every item whose class changes its loss is labeled that is the exact answer; otherwise
    it is the model's bet that none of the unlabeled items changes G, which rests wholly on
    its tail beyond the labels: :func:`resolved_interval` widens it.

    ``draws`` (n, m); ``labeled`` (X, C) over ``cells``; returns (m,) bool.
    """
    return _on_one_value(_tails(draws, level), rtol) & unlabeled_items_matter(cells, labeled)


def unlabeled_items_matter(cells: CellTable, labeled):
    """Whether some unlabeled item's class changes its loss (so G is not yet known exactly).
    ``labeled`` (X, C): labeled items per cell and class."""
    unl = jnp.asarray(cells.size) - jnp.sum(labeled, axis=-1)
    loss = jnp.asarray(cells.loss)
    depends = jnp.any(jnp.abs(loss - loss[:, :1, :]) > 0, axis=(1, 2))
    return jnp.any((unl > 0.5) & depends)


#: posteriors per vectorized batch of :func:`intervals_at_checkpoints`'s map
_MAP_BATCH = 16


def intervals_at_checkpoints(cells, model, g, n_strata, labeled, seed, n_draws, level=0.95, observations=False):
    """Finite-pool posterior of G at every checkpoint of every run, one compiled vmapped
    function over (repeats × checkpoints) labeled tables: ``bayes_lower`` / ``bayes_upper``
    (the library's ``level`` interval, :func:`resolved_interval`), ``bayes_mean``, and
    ``bayes_collapsed`` (where it was widened to the resolution), each (repeats, checkpoints, m);
    ``bayes_sampler_ess`` (repeats, checkpoints): :attr:`PosteriorDraws.sampler_ess`.
    ``observations``: a stochastic oracle's tables of label observations (:func:`complete_pool_draws`)."""
    r, n_ck = labeled.shape[:2]
    flat = labeled.reshape((r * n_ck,) + labeled.shape[2:])

    # the cells are an argument of the compiled program, not a closure constant: XLA constant-folds
    # operations on a captured loss table (a PR curve's (cells, 2, 2049): a "constant folding is
    # taking > 1s" alarm and 19 s of XLA for the demo's interval, stop 79), as simulate_runs found
    def one(key, lab, cells):
        mstate = model.fit(model.init_state(), *leaf_counts(cells, lab, n_strata, observations))
        post = finite_pool_posterior(key, model, cells, lab, n_strata, g, n_draws=n_draws, state=mstate,
                                     observations=observations)
        lo, hi, col = resolved_interval(post, lab, cells, level)
        return lo, hi, jnp.nanmean(post.value, axis=0), col, post.sampler_ess

    n = r * n_ck
    keys = jax.random.split(jax.random.PRNGKey(seed + 7919), n)
    if n == 1:
        # one table (the demo, a single run's one checkpoint): the posterior as it is, not a map
        # of a vmap over one -- the batched program compiled ~5 s longer (36 -> 31 s of XLA for
        # `bayes-eval demo`'s interval, the same numbers; stop 71)
        out = jax.tree_util.tree_map(lambda a: a[None], jax.jit(one)(keys[0], flat[0], cells))
        return _checkpoint_intervals(out, n, r, n_ck)
    # A batched map, not one big vmap: each posterior holds (proposals × strata) temporaries.
    # The tables are padded (with copies of the first, dropped after) to whole batches: a map
    # whose length is not a multiple of its batch compiles the remainder as a second copy of
    # the whole posterior program (twice the compile: 48 s of XLA for 200 tables on a
    # 100-cell pool before, ~half after; same values).
    batch = min(_MAP_BATCH, n)
    pad = -n % batch
    if pad:
        keys = jnp.concatenate([keys, jnp.repeat(keys[:1], pad, axis=0)])
        flat = jnp.concatenate([flat, jnp.repeat(flat[:1], pad, axis=0)])
    # hundreds of posteriors: compiled to run (at least XLA's level 1, :func:`bayes_eval._config.jit_run_often`)
    out = jit_run_often(lambda k, f, c: jax.lax.map(lambda a: one(*a, c), (k, f), batch_size=batch))(keys, flat, cells)
    return _checkpoint_intervals(out, n, r, n_ck)


def _checkpoint_intervals(out, n, r, n_ck):
    """:func:`intervals_at_checkpoints`' dict from its program's outputs (the first ``n`` rows)."""
    lo, hi, mean, flat_collapsed, ess = (np.asarray(a)[:n] for a in out)
    shape = (r, n_ck, -1)
    return {"bayes_lower": lo.reshape(shape), "bayes_upper": hi.reshape(shape),
            "bayes_mean": mean.reshape(shape), "bayes_collapsed": flat_collapsed.reshape(shape),
            "bayes_sampler_ess": ess.reshape(r, n_ck)}
