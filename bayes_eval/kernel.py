"""The stage kernel: one pure ``init`` / ``step`` for every design, that the simulation
drives with ``lax.scan`` over stages (``vmap`` over repeats) and that a session drives one
ingested batch at a time (reopening a session replays the same steps); see
``docs/architecture.md``.  What a stage draws and how the estimator reads it depend on the
design's sampling kind (``design.sampling``), one pair per kind:

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

A Poisson round (``"rounds"``, 000 §3 and App. E): the design proposes inclusion
probabilities per cell for the round's budget (:func:`open_round`; the static design's
round draws the increment of its nested samples), each unlabeled item is included
independently, and :func:`step` turns what the round brought into its
:class:`~bayes_eval.poisson_estimators.RoundRecord` (the :class:`RoundInfo` the caller
stacks) and refits the oracle model.  The estimate after round t combines the stacked
records (:func:`round_estimate`, Horvitz-Thompson rounds with predictable weights).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from . import _config  # noqa: F401
from .cells import CellTable
from .designs import Design, Observed, Proposal
from .cells import leaf_counts
from .estimators import assisted_variance, is_estimate, model_assisted, stratified_estimate
from .feasible import feasible_range, project
from .poisson_estimators import RoundRecord, combine

__all__ = ["Tallies", "StageState", "RoundTallies", "RoundDraw", "RoundInfo", "empty_tallies", "draw_weights",
           "add_draws", "expected_w2", "current_risk", "estimate", "estimate_final", "init", "step", "open_round",
           "round_estimate"]


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
    # the model-assisted variance (estimators.model_assisted): each stage's expected Σ w²
    # under the proposal that drew it, Σ_t n_t q_t w_t², split into the items labeled when
    # drawn (class known; (X, C)) and the unlabeled ones ((X,); their classes from the
    # design's model at estimate time: Design.shares).  None: not tallied.
    ew2_lab: Any = None
    ew2_unl: Any = None


class StageState(NamedTuple):
    """The state between stages: the tallies (:class:`Tallies`; rounds:
    :class:`RoundTallies`), the design's state and the proposal for the next stage (rounds:
    ``()``, a round's proposal depends on its budget: :func:`open_round`)."""

    tallies: Any
    design_state: Any
    proposal: Any


class RoundTallies(NamedTuple):
    """What the rounds so far say: labels per (cell, class), the last round's inclusion
    probabilities (the static design's next round draws the increment from them) and the
    state of a separate variance model (``()`` when there is none)."""

    labeled: jnp.ndarray  # (X, C)
    b: jnp.ndarray  # (X,)
    variance_state: Any = ()


class RoundDraw(NamedTuple):
    """What a round brought: its proposal (:func:`open_round`) and the labels it added per
    (cell, class)."""

    proposal: Any  # poisson_designs.RoundProposal
    sampled: jnp.ndarray  # (X, C)


class RoundInfo(NamedTuple):
    """A closed round, for the estimator: its record, the predictive behind its model
    prediction (what a further measure's prediction is taken from) and the variance
    model's predictive after the round's labels (zeros unless ``variance="model"``)."""

    record: RoundRecord
    pi_mean: jnp.ndarray  # (X, C)
    pi_after: jnp.ndarray  # (X, C)
    # (X, C) the companion's predictive after the round (the CLT check of the round estimate,
    # :func:`round_estimate`); zeros without a companion
    pi_check: Any = None


def empty_tallies(cells: CellTable) -> Tallies:
    x, c = cells.loss.shape[:2]
    zero = jnp.zeros((x, c))
    return Tallies(zero, zero, zero, jnp.asarray(0.0), zero, zero, jnp.zeros(x))


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
    ew2_lab, ew2_unl = tallies.ew2_lab, tallies.ew2_unl
    if ew2_lab is not None:
        ew2_lab, ew2_unl = expected_w2(cells, tallies.labeled, ew2_lab, ew2_unl, proposal,
                                       hits_labeled.sum() + hits_unlabeled.sum(), (w_a, w_b))
    return Tallies(
        labeled=tallies.labeled + new_labels,
        draws=tallies.draws + hits_labeled + hits_unlabeled,
        wsum=tallies.wsum + hits_labeled * w_a + hits_unlabeled * w_b,
        n_draws=tallies.n_draws + hits_labeled.sum() + hits_unlabeled.sum(),
        w2sum=None if tallies.w2sum is None else tallies.w2sum + w2,
        ew2_lab=ew2_lab,
        ew2_unl=ew2_unl,
    )


def expected_w2(cells: CellTable, labeled, ew2_lab, ew2_unl, proposal: Proposal, n_stage, weights=None):
    """``(ew2_lab, ew2_unl)`` after a stage of ``n_stage`` draws from ``proposal``: + n_t L q_lab
    w_a² per (cell, class) for the items labeled when the stage began (L = ``labeled``), + n_t U
    q_unl w_b² per cell for the U unlabeled ones (the expected Σ w² of the stage's draws,
    :class:`Tallies`).  ``weights``: :func:`draw_weights` of ``proposal`` if already at hand."""
    w_a, w_b = draw_weights(cells, proposal) if weights is None else weights
    unlabeled = cells.size - labeled.sum(axis=1)
    return (ew2_lab + n_stage * labeled * proposal.lab * w_a**2,
            ew2_unl + n_stage * unlabeled * proposal.unl * w_b[:, 0] ** 2)


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
             full_cov: bool = True, design_state=None, fractional: bool = False):
    """Ĝ = g(R̂) and its delta-method covariance (001 eq. 1, §3.3.2) from every draw's own
    weight (``tallies.w2sum``; the martingale CLT, :mod:`bayes_eval.estimators`); the
    post-stratified estimator for the stratified design (001 §5).  ``proposal`` (q_N, the
    most recent one) is no longer needed by the default variance; it is kept for callers
    and for :func:`estimate_final`.  ``g`` and ``cells.loss`` may be another measure's: the
    labels serve every measure.  With ``design_state`` (the state after the last stage),
    a design that gives class shares (``Design.shares``: AIS with its calibrated companion)
    and tallies that carry ``ew2_*``, the variance is the model-assisted one
    (:func:`~bayes_eval.estimators.model_assisted`; ``Estimate.check`` the ratio).
    ``fractional`` (``Measure.fractional``; a deterministic oracle): the value is projected
    onto what the labels allow (:mod:`bayes_eval.feasible`; ``Estimate.feasible``)."""
    est = _estimate(design, g, cells, tallies, n_strata, full_cov, design_state)
    if fractional and design.oracle == "deterministic":
        est = project(est, feasible_range(g, cells, tallies.labeled))
    return est


def _estimate(design: Design, g, cells: CellTable, tallies: Tallies, n_strata: int, full_cov: bool, design_state):
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
    own = is_estimate(g, loss, tallies.wsum.ravel(), None, tallies.n_draws, full_cov=full_cov,
                      w2sum=w2sum.ravel())
    if design_state is None or design.shares is None or tallies.ew2_lab is None:
        return own
    phi = design.shares(design_state, cells, tallies.labeled)
    mw2 = tallies.ew2_lab + tallies.ew2_unl[:, None] * phi
    model = is_estimate(g, loss, tallies.wsum.ravel(), None, tallies.n_draws, full_cov=full_cov, w2sum=mw2.ravel())
    return model_assisted(own, model)


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


def _variance_model(settings):
    """The model behind ``variance="model"`` (None when the variance does not use one)."""
    if settings.variance != "model":
        return None
    return settings.variance_model if settings.variance_model is not None else settings.model


def init(design: Design, cells: CellTable) -> StageState:
    """The state before any label: the design's initial state and its first proposal."""
    if design.sampling == "rounds":
        pd = design.settings
        x, c = cells.loss.shape[:2]
        vm = _variance_model(pd)
        vstate = vm.init_state() if vm is not None and vm is not pd.model else ()
        dstate = design.init(cells) if pd.model is not None else ()
        return StageState(RoundTallies(jnp.zeros((x, c)), jnp.zeros(x), vstate), dstate, ())
    tallies = empty_tallies(cells)
    dstate = design.init(cells)
    obs = Observed(labeled=tallies.labeled, risk=jnp.full(cells.loss.shape[2], jnp.nan), n_draws=tallies.n_draws)
    return StageState(tallies, dstate, design.propose(dstate, cells, obs))


def step(design: Design, cells: CellTable, n_strata: int, state: StageState, drawn):
    """Close a stage: ``(StageState, info)``.

    With-replacement draws: ``drawn`` the new :class:`Tallies` (:func:`add_draws`); R̂
    (estimated with the proposal just used), then the design's update (e.g. refit its
    oracle model) and the next proposal; ``info`` is ``()`` (the tallies are the state).

    Rounds: ``drawn`` a :class:`RoundDraw`; the round's record (adaptive: the round's own
    inclusion probabilities over the items unlabeled before it; static: the nested sample
    of the cumulative budget, one Poisson sample over the pool), the models refitted to
    all labels, and ``info`` the :class:`RoundInfo` the estimator combines."""
    if design.sampling == "rounds":
        return _close_round(design, cells, n_strata, state, drawn)
    tallies = drawn
    obs = Observed(labeled=tallies.labeled, risk=current_risk(design, cells, tallies, n_strata),
                   n_draws=tallies.n_draws)
    dstate = design.update(state.design_state, cells, obs)
    return StageState(tallies, dstate, design.propose(dstate, cells, obs)), ()


def open_round(design: Design, cells: CellTable, state: StageState, budget, complete=False):
    """The next round's :class:`~bayes_eval.poisson_designs.RoundProposal` for ``budget``
    (expected labels; the static design: the cumulative budget) and the inclusion
    probabilities to draw the unlabeled items with: the proposal's ``b`` (adaptive) or the
    increment ``(b_t - b_{t-1}) / (1 - b_{t-1})`` of the static design's nested samples
    (000 Alg. 2: ``b`` only grows with the budget).  ``complete``: the round labels every
    item that can matter (adaptive)."""
    rt = state.tallies
    d = cells.loss.shape[2]
    obs = Observed(rt.labeled, jnp.full(d, jnp.nan), 0.0, budget=budget, complete=complete)
    prop = design.propose(state.design_state, cells, obs)
    if design.settings.adaptive:
        return prop, prop.b
    still = rt.b < 1.0
    inc = jnp.where(still, (prop.b - rt.b) / jnp.where(still, 1.0 - rt.b, 1.0), 0.0)
    return prop, jnp.clip(inc, 0.0, 1.0)


def _close_round(design: Design, cells: CellTable, n_strata: int, state: StageState, drawn: RoundDraw):
    pd = design.settings
    rt = state.tallies
    prop = drawn.proposal
    x, c = rt.labeled.shape
    new = rt.labeled + drawn.sampled
    if pd.adaptive:
        rec = RoundRecord(prop.b, prop.mean, rt.labeled, drawn.sampled, prop.pred_var)
    else:
        rec = RoundRecord(prop.b, prop.mean, jnp.zeros((x, c)), new, prop.pred_var)
    dstate = state.design_state
    if pd.model is not None:
        dstate = design.update(dstate, cells, Observed(new, jnp.full(cells.loss.shape[2], jnp.nan), 0.0))
    vm = _variance_model(pd)
    vstate = rt.variance_state
    pi_after = jnp.zeros((x, c))
    if vm is not None:
        counts, unl = leaf_counts(cells, new, n_strata)
        if vm is pd.model:
            pi_after = vm.posterior_predictive(dstate[0], counts)[cells.stratum]
        else:
            vstate = vm.fit(vstate, counts, unl)
            pi_after = vm.posterior_predictive(vstate, counts)[cells.stratum]
    pi_mean = prop.pi_mean if prop.pi_mean is not None else jnp.zeros((x, c))
    pi_check = jnp.zeros((x, c))
    if pd.adaptive and pd.companion is not None:
        counts = leaf_counts(cells, new, n_strata)[0]
        pi_check = pd.companion.posterior_predictive(dstate[1], counts)[cells.stratum]
    return (StageState(RoundTallies(new, prop.b, vstate), dstate, state.proposal),
            RoundInfo(rec, pi_mean, pi_after, pi_check))


def round_estimate(design: Design, g, cells: CellTable, records: RoundRecord, t, labeled_now, pi_now,
                   complete_round=-1, pi_check=None, fractional: bool = False):
    """Ĝ after round ``t`` from the stacked round records (rounds after ``t`` are ignored;
    zero-padded records may follow): Horvitz-Thompson rounds combined with predictable
    weights (:func:`~bayes_eval.poisson_estimators.combine`, 000 App. E) for the adaptive
    design; for the static one the estimate after round ``t`` is the single nested
    Poisson sample of the cumulative budget (record ``t`` alone, 000 eq. 18).
    ``labeled_now`` (X, C) the labels so far, ``pi_now`` the variance model's predictive
    after them, ``complete_round`` the round that labeled every item that can matter (-1:
    none yet).  With ``pi_check`` (the adaptive design's companion predictive after round
    ``t``, :class:`RoundInfo`) the variance is model-assisted as for draws
    (:func:`~bayes_eval.estimators.model_assisted`): the round variance with the unlabeled
    items' classes from the companion (``variance="model"``) beside the design's own, the
    larger where they agree within ``MODEL_CHECK_MAX``; ``check`` their ratio.
    ``fractional``: the value projected onto what the labels allow, as :func:`estimate`."""
    est = _round_estimate(design, g, cells, records, t, labeled_now, pi_now, complete_round, pi_check)
    if fractional:
        est = project(est, feasible_range(g, cells, labeled_now))
    return est


def _round_estimate(design: Design, g, cells: CellTable, records: RoundRecord, t, labeled_now, pi_now,
                    complete_round, pi_check):
    pd = design.settings
    if pd.adaptive:
        est = combine(g, cells, records, t, weights=pd.weights, variance=pd.variance, labeled_now=labeled_now,
                      pi_now=pi_now, complete_round=complete_round)
        if pi_check is None or pd.companion is None:
            return est
        mod = combine(g, cells, records, t, weights=pd.weights, variance="model", labeled_now=labeled_now,
                      pi_now=pi_check, complete_round=complete_round)
        _, check, scale = assisted_variance(jnp.diagonal(est.cov), jnp.diagonal(mod.cov))
        return est._replace(cov=est.cov * scale[:, None] * scale[None, :], check=check)
    rec = jax.tree_util.tree_map(lambda a: jax.lax.dynamic_index_in_dim(a, t, 0, keepdims=True), records)
    return combine(g, cells, rec, 0, weights="equal", variance=pd.variance, labeled_now=labeled_now,
                   pi_now=pi_now, complete_round=None)
