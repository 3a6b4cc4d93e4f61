"""The stage kernel of the with-replacement designs: one pure step that the simulation
drives with ``lax.scan`` over stages (``vmap`` over repeats) and that a session drives one
ingested batch at a time (reopening a session replays the same steps); see
``docs/architecture.md``.

A stage (001 Alg. 1): items are drawn i.i.d. from the fixed proposal q_{t-1} until the
stage's new labels are in; every draw, repeats included, enters the estimator with its
weight p/q_{t-1} (001 eq. 1), and its squared weight enters the variance (the martingale
CLT's average of per-draw conditional variances, ``bayes_eval.estimators``).  Because the
loss and the proposal are constant on a cell (``bayes_eval.cells``), what a stage adds is
summarized per (cell, class) in
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
           "estimate_final", "init", "step"]


class Tallies(NamedTuple):
    """What the labels so far say, per (cell, class): the sufficient statistics of the
    importance-weighted and post-stratified estimators."""

    labeled: jnp.ndarray  # (X, C) labeled items (label observations for a stochastic oracle)
    draws: jnp.ndarray  # (X, C) draws, repeats included
    wsum: jnp.ndarray  # (X, C) Σ p/q_{j-1} over the draws
    n_draws: jnp.ndarray  # scalar
    # (X, C) Σ (p/q_{j-1})² over the draws: the martingale variance (estimators.is_estimate).
    # The simulation and sessions tally it; None (a caller that does not) makes the estimate
    # take (Σ w)² / draws per (cell, class), the weights of a cell's draws equalized (a lower
    # bound, by Cauchy-Schwarz).
    w2sum: Any = None


class StageState(NamedTuple):
    """The state between stages: the tallies, the design's state and the proposal for the
    next stage."""

    tallies: Tallies
    design_state: Any
    proposal: Proposal


def empty_tallies(cells: CellTable) -> Tallies:
    x, c = cells.loss.shape[:2]
    zero = jnp.zeros((x, c))
    return Tallies(zero, zero, zero, jnp.asarray(0.0), zero)


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
    w2 = hits_labeled * w_a**2 + hits_unlabeled * w_b**2
    return Tallies(
        labeled=tallies.labeled + new_labels,
        draws=tallies.draws + hits_labeled + hits_unlabeled,
        wsum=tallies.wsum + hits_labeled * w_a + hits_unlabeled * w_b,
        n_draws=tallies.n_draws + hits_labeled.sum() + hits_unlabeled.sum(),
        w2sum=None if tallies.w2sum is None else tallies.w2sum + w2,
    )


def current_risk(design: Design, cells: CellTable, tallies: Tallies, n_strata: int):
    """R̂ alone (what a design's update sees), without the covariance."""
    x, c, d = cells.loss.shape
    loss = cells.loss.reshape(x * c, d)
    if design.estimator == "stratified":
        stratum = jnp.repeat(cells.stratum, c)
        mass = jax.ops.segment_sum(cells.size * cells.weight, cells.stratum, num_segments=n_strata)
        # the estimator's own R̂ (XLA drops the covariance it does not need)
        return stratified_estimate(lambda r: r, loss, tallies.draws.ravel(), stratum, mass, n_strata,
                                   full_cov=False).risk
    return (tallies.wsum.ravel() @ loss) / jnp.maximum(tallies.n_draws, 1.0)


def estimate(design: Design, g, cells: CellTable, tallies: Tallies, proposal: Proposal, n_strata: int,
             full_cov: bool = True):
    """Ĝ = g(R̂) and its delta-method covariance (001 eq. 1, §3.3.2) from every draw's own
    weight (``tallies.w2sum``; the martingale CLT, :mod:`bayes_eval.estimators`); the
    post-stratified estimator for the stratified design (001 §5).  ``proposal`` (q_N, the
    most recent one) is no longer needed by the default variance; it is kept for callers
    and for :func:`estimate_final`.  ``g`` and ``cells.loss`` may be another measure's: the
    labels serve every measure."""
    x, c, d = cells.loss.shape
    loss = cells.loss.reshape(x * c, d)
    if design.estimator == "stratified":
        stratum = jnp.repeat(cells.stratum, c)
        mass = jax.ops.segment_sum(cells.size * cells.weight, cells.stratum, num_segments=n_strata)
        return stratified_estimate(g, loss, tallies.draws.ravel(), stratum, mass, n_strata, full_cov=full_cov)
    if tallies.w2sum is None:
        w2sum = jnp.where(tallies.draws > 0, tallies.wsum**2 / jnp.maximum(tallies.draws, 1.0), 0.0)
    else:
        w2sum = tallies.w2sum
    return is_estimate(g, loss, tallies.wsum.ravel(), None, tallies.n_draws, full_cov=full_cov,
                       w2sum=w2sum.ravel())


def estimate_final(design: Design, g, cells: CellTable, tallies: Tallies, proposal: Proposal, n_strata: int,
                   full_cov: bool = True):
    """:func:`estimate` with 001 §3.3.2's covariance to the letter: p²/(q_N q_{j-1}), the
    variance under the last proposal ``proposal`` (q_N).  Kept for comparison only: it
    under-states the finite-budget variance (:mod:`bayes_eval.estimators`)."""
    x, c, d = cells.loss.shape
    if design.estimator == "stratified":
        return estimate(design, g, cells, tallies, proposal, n_strata, full_cov)
    loss = cells.loss.reshape(x * c, d)
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
