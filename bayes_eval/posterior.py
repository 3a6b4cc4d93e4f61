"""The Bayesian finite-pool posterior of a measure (DESIGN.md §4, last bullets).

For each posterior draw of the oracle model, the unlabeled items' labels are drawn — as
class *counts* per cell (stratum × loss pattern), never per item — the pool is
completed with the observed labels of the labeled items, and G is computed exactly.  The
result is the posterior of the measure *on this pool* (001 Remark 2: the sample-based
measure), for any measure, vector measures included.

Because the design only looks at observed labels, the observation process is ignorable
(001 §4.2) and this posterior is valid whatever design chose the labeled items.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from . import _config  # noqa: F401
from .cells import CellTable

__all__ = ["leaf_counts", "complete_pool_draws", "finite_pool_posterior", "equal_tailed", "PosteriorDraws"]


class PosteriorDraws(NamedTuple):
    """Draws of the finite-pool posterior.

    ``value`` (n, m): G on the completed pool; ``risk`` (n, d); ``pi`` (n, K, C) the
    model's π(y|k); ``unlabeled_counts`` (n, K, C) the drawn classes of the unlabeled
    items per stratum.
    """

    value: jnp.ndarray
    risk: jnp.ndarray
    pi: jnp.ndarray
    unlabeled_counts: jnp.ndarray


def leaf_counts(cells: CellTable, labeled, n_strata: int):
    """(K, C) labeled items per stratum and class, (K,) unlabeled items per stratum."""
    counts = jax.ops.segment_sum(labeled, cells.stratum, num_segments=n_strata)
    unl = jax.ops.segment_sum(cells.size - labeled.sum(1), cells.stratum, num_segments=n_strata)
    return counts, unl


def _multinomial_counts(key, n, p):
    """Multinomial(n, p) by sequential binomials; ``n`` (X,), ``p`` (X, C)."""
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


def complete_pool_draws(key, g, cells: CellTable, labeled, pi_leaf):
    """G on the pool completed by drawing the unlabeled items' classes.

    ``pi_leaf`` (n, K, C) posterior draws of π(y|k).  Within a cell the unlabeled
    count is split Multinomial(U_x, π(·|k_x)) given each draw — the exact conditional of
    the model, cell by cell.
    """
    unl = jnp.maximum(cells.size - labeled.sum(1), 0.0)
    keys = jax.random.split(key, pi_leaf.shape[0])

    def one(k, pi):
        m = _multinomial_counts(k, unl, pi[cells.stratum])
        counts = labeled + m
        risk = jnp.einsum("x,xc,xcd->d", cells.weight, counts, cells.loss)
        return jnp.atleast_1d(g(risk)), risk, m

    value, risk, m = jax.vmap(one)(keys, pi_leaf)
    return value, risk, m


def finite_pool_posterior(key, model, cells: CellTable, labeled, n_strata: int, g, n_draws: int = 400,
                          state=None) -> PosteriorDraws:
    """Posterior draws of G on the pool given the labels so far.

    ``model`` is an :class:`bayes_eval.models.OracleModel`; its ``sample`` gives draws of
    π (the Dirichlet-tree: the exact conjugate Gibbs sampler, warm-started at ``state``).
    """
    counts, unl = leaf_counts(cells, labeled, n_strata)
    k1, k2 = jax.random.split(key)
    s = model.sample(k1, counts, unl, n_draws, state=state)
    pi = s["pi"]
    value, risk, m = complete_pool_draws(k2, g, cells, labeled, pi)
    m_leaf = jax.vmap(lambda mm: jax.ops.segment_sum(mm, cells.stratum, num_segments=n_strata))(m)
    return PosteriorDraws(value=value, risk=risk, pi=pi, unlabeled_counts=m_leaf)


def equal_tailed(draws, level: float = 0.95):
    """Equal-tailed posterior interval of each component: (lower, upper), NaN-aware."""
    a = (1.0 - level) / 2.0
    lo = jnp.nanquantile(draws, a, axis=0)
    hi = jnp.nanquantile(draws, 1.0 - a, axis=0)
    return lo, hi
