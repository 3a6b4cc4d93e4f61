"""The stage kernel of the with-replacement designs: one pure step that the simulation
drives with ``lax.scan`` over stages (``vmap`` over repeats) and that a session drives one
ingested batch at a time (reopening a session replays the same steps); see
``docs/architecture.md``.

A stage (001 Alg. 1): items are drawn i.i.d. from the fixed proposal q_{t-1} until the
stage's new labels are in; every draw, repeats included, enters the estimator with its
weight p/q_{t-1} (001 eq. 1).  Because the loss and the proposal are constant on a cell
(``bayes_eval.cells``), what a stage adds is summarized per (cell, class) in
:class:`Tallies`, whoever drew it -- the simulation on cells with the truth as the oracle,
or a session on items with people as the oracle.  Then R̂ is estimated with the proposal
just used, the design updates (e.g. refits its oracle model) and proposes q_t:
:func:`step`.

The Poisson designs (rounds of inclusion probabilities, ``bayes_eval.poisson_designs``)
keep their own round step for now (``docs/architecture.md``, "What is still two").
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from . import _config  # noqa: F401
from .cells import CellTable
from .designs import Design, Observed, Proposal
from .estimators import is_estimate, stratified_estimate

__all__ = ["Tallies", "StageState", "empty_tallies", "draw_weights", "add_draws", "current_risk", "estimate",
           "init", "step"]


class Tallies(NamedTuple):
    """What the labels so far say, per (cell, class): the sufficient statistics of the
    importance-weighted and post-stratified estimators."""

    labeled: jnp.ndarray  # (X, C) labeled items (label observations for a stochastic oracle)
    draws: jnp.ndarray  # (X, C) draws, repeats included
    wsum: jnp.ndarray  # (X, C) Σ p/q_{j-1} over the draws
    n_draws: jnp.ndarray  # scalar


class StageState(NamedTuple):
    """The state between stages: the tallies, the design's state and the proposal for the
    next stage."""

    tallies: Tallies
    design_state: Any
    proposal: Proposal


def empty_tallies(cells: CellTable) -> Tallies:
    x, c = cells.loss.shape[:2]
    zero = jnp.zeros((x, c))
    return Tallies(zero, zero, zero, jnp.asarray(0.0))


def draw_weights(cells: CellTable, proposal: Proposal):
    """p/q of a draw of a labeled item (X, C) and of an unlabeled one (X, C) under
    ``proposal`` (0 where q = 0: such an item cannot be drawn)."""
    x, c = cells.loss.shape[:2]
    q_b = jnp.broadcast_to(proposal.unl[:, None], (x, c))
    w_a = jnp.where(proposal.lab > 0, cells.weight[:, None] / jnp.where(proposal.lab > 0, proposal.lab, 1.0), 0.0)
    w_b = jnp.where(q_b > 0, cells.weight[:, None] / jnp.where(q_b > 0, q_b, 1.0), 0.0)
    return w_a, w_b


def add_draws(cells: CellTable, tallies: Tallies, proposal: Proposal, hits_labeled, hits_unlabeled,
              new_labels) -> Tallies:
    """The tallies after a stage drawn from ``proposal``: ``hits_labeled`` / ``hits_unlabeled``
    (X, C) draws of items labeled / not labeled when the stage began (by the class of the
    item), ``new_labels`` (X, C) the labels the stage added."""
    w_a, w_b = draw_weights(cells, proposal)
    return Tallies(
        labeled=tallies.labeled + new_labels,
        draws=tallies.draws + hits_labeled + hits_unlabeled,
        wsum=tallies.wsum + hits_labeled * w_a + hits_unlabeled * w_b,
        n_draws=tallies.n_draws + hits_labeled.sum() + hits_unlabeled.sum(),
    )


def current_risk(design: Design, cells: CellTable, tallies: Tallies, n_strata: int):
    """R̂ alone (what a design's update sees), without the covariance."""
    x, c, d = cells.loss.shape
    loss = cells.loss.reshape(x * c, d)
    if design.estimator == "stratified":
        stratum = jnp.repeat(cells.stratum, c)
        mass = jax.ops.segment_sum(cells.size * cells.weight, cells.stratum, num_segments=n_strata)
        n_k = jax.ops.segment_sum(tallies.draws.ravel(), stratum, num_segments=n_strata)
        s1 = jax.ops.segment_sum(tallies.draws.ravel()[:, None] * loss, stratum, num_segments=n_strata)
        wk = jnp.where(n_k > 0, mass, 0.0)
        wk = wk / jnp.maximum(wk.sum(), 1e-300)
        return wk @ (s1 / jnp.maximum(n_k, 1.0)[:, None])
    return (tallies.wsum.ravel() @ loss) / jnp.maximum(tallies.n_draws, 1.0)


def estimate(design: Design, g, cells: CellTable, tallies: Tallies, proposal: Proposal, n_strata: int,
             full_cov: bool = True):
    """Ĝ = g(R̂) and its delta-method covariance (001 eq. 1, §3.3.2), with q_N = ``proposal``
    (the most recent one); the post-stratified estimator for the stratified design (001 §5).
    ``g`` and ``cells.loss`` may be another measure's: the labels serve every measure."""
    x, c, d = cells.loss.shape
    loss = cells.loss.reshape(x * c, d)
    if design.estimator == "stratified":
        stratum = jnp.repeat(cells.stratum, c)
        mass = jax.ops.segment_sum(cells.size * cells.weight, cells.stratum, num_segments=n_strata)
        return stratified_estimate(g, loss, tallies.draws.ravel(), stratum, mass, n_strata, full_cov=full_cov)
    q_n = proposal.lab if design.oracle == "deterministic" else jnp.broadcast_to(proposal.unl[:, None], (x, c))
    p_over_qn = jnp.where(q_n > 0, cells.weight[:, None] / jnp.where(q_n > 0, q_n, 1.0), 0.0)
    return is_estimate(g, loss, tallies.wsum.ravel(), p_over_qn.ravel(), tallies.n_draws, full_cov=full_cov)


def init(design: Design, cells: CellTable) -> StageState:
    """The state before any label: the design's initial state and its first proposal."""
    tallies = empty_tallies(cells)
    dstate = design.init(cells)
    obs = Observed(labeled=tallies.labeled, risk=jnp.full(cells.loss.shape[2], jnp.nan), n_draws=tallies.n_draws)
    return StageState(tallies, dstate, design.propose(dstate, cells, obs))


def step(design: Design, cells: CellTable, n_strata: int, state: StageState, tallies: Tallies) -> StageState:
    """Close a stage: with the new ``tallies``, R̂ (estimated with the proposal just used),
    then the design's update (e.g. refit its oracle model) and the next proposal."""
    obs = Observed(labeled=tallies.labeled, risk=current_risk(design, cells, tallies, n_strata),
                   n_draws=tallies.n_draws)
    dstate = design.update(state.design_state, cells, obs)
    return StageState(tallies, dstate, design.propose(dstate, cells, obs))
