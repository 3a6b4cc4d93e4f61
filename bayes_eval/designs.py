"""Sampling designs: how the next items to label are chosen.

A design is a small bundle of pure functions over a design state (optax / blackjax
style, ``docs/architecture.md``):

* ``init(cells) -> state``
* ``propose(state, cells, obs) -> Proposal`` — the per-item proposal q_t, constant on
  each cell; separate values for items still without a label and for labeled items of
  each class (under a deterministic oracle the posterior of a labeled item's response is
  a point mass, 001 Prop. 2).
* ``update(state, cells, obs) -> state`` — after a stage's labels arrive (e.g. refit the
  oracle model).

Designs never look at ``cells.truth``: what they know of the labels is ``obs.labeled``,
the number of labeled items of each class in each cell.

Built in: passive; stratified with proportional allocation (001 §5); static
variance-minimizing importance sampling (002; 000 §2 with λ-mixing, eq. 13); OASIS
(stratified AIS for F-measures); and AIS with a Bayesian oracle model (001 Alg. 1,
Prop. 2-3), in :mod:`bayes_eval.ais`.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401
from .cells import CellTable
from .models.registry import COMPANIONS  # noqa: F401  (re-exported: the companion models by name)

__all__ = [
    "resolve_oracle_model",
    "DEFAULT_ORACLE_MODEL",
    "Observed",
    "Proposal",
    "Design",
    "MixState",
    "mix",
    "passive",
    "stratified",
    "static_is",
    "oasis",
    "importance",
    "normalize",
    "model_risk",
    "sweep_share",
    "COMPANIONS",
    "resolve_companion",
]


class Observed(NamedTuple):
    """What a design knows after some stages.

    ``labeled`` (X, C): labeled items per cell and class (label observations for a
    stochastic oracle); ``risk`` (d,): the current estimate R̂ (NaN where undefined);
    ``n_draws``: draws so far.
    """

    labeled: jnp.ndarray
    risk: jnp.ndarray
    n_draws: jnp.ndarray
    budget: Any = 0.0  # rounds: the next round's budget (expected labels; the static design: cumulative)
    complete: Any = False  # rounds: the next round labels every item that can matter


class Proposal(NamedTuple):
    """Per-item proposal probabilities (normalised over the pool).

    ``unl`` (X,) for an item without a label, ``lab`` (X, C) for a labeled item of each
    class.  Σ_x [unlabeled_x unl_x + Σ_y labeled_xy lab_xy] = 1.
    """

    unl: jnp.ndarray
    lab: jnp.ndarray


class Design(NamedTuple):
    """A design: pure ``init(cells) -> state``, ``propose(state, cells, obs)`` and
    ``update(state, cells, obs) -> state`` (``docs/architecture.md``).  ``sampling`` says
    what ``propose`` returns: a :class:`Proposal` to draw from with replacement
    (``"draws"``, 001 §3) or inclusion probabilities per cell for a Poisson round
    (``"rounds"``, a :class:`~bayes_eval.poisson_designs.RoundProposal`, 000 §3), for which
    ``obs.budget`` / ``obs.complete`` describe the round."""

    name: str
    init: Callable[[CellTable], Any]
    propose: Callable[[Any, CellTable, Observed], Proposal]
    update: Callable[[Any, CellTable, Observed], Any]
    estimator: str = "is"  # "is" or "stratified"; rounds: "ht" or "difference"
    stage_size: int | None = None  # forces a batch size (OASIS: 1 label per stage)
    oracle: str = "deterministic"
    model: Any = None  # the oracle model, for designs that carry one
    sampling: str = "draws"  # "draws": with replacement from a Proposal; "rounds": Poisson, a RoundProposal
    settings: Any = None  # rounds: the PoissonDesign record (estimator, weights, variance, round sizes)
    # ``shares(state, cells, labeled) -> (X, C)``: each cell's class shares under the design's
    # calibrated model, labeled items at their labels (the model-assisted CLT variance,
    # estimators.model_assisted); None: the own-weight variance alone
    shares: Callable[[Any, CellTable, Any], Any] | None = None


def _no_update(state, cells, obs):
    return state


def normalize(cells: CellTable, labeled, unl_raw, lab_raw, delta: float = 0.0) -> Proposal:
    """Normalise raw per-item proposal values over the pool and mix in δ of p(x)
    (001 §3.3.1, sample reuse)."""
    unlabeled = cells.size - labeled.sum(axis=1)
    z = jnp.sum(unlabeled * unl_raw) + jnp.sum(labeled * lab_raw)
    z = jnp.where(z > 0, z, 1.0)
    unl = unl_raw / z
    lab = lab_raw / z
    if delta:
        unl = (1.0 - delta) * unl + delta * cells.weight
        lab = (1.0 - delta) * lab + delta * cells.weight[:, None]
    return Proposal(unl=unl, lab=lab)


#: The default share of an AIS proposal's mass kept on unlabeled items (deterministic oracle):
#: :func:`unlabeled_floor`.
AUDIT_FLOOR = 0.01
#: The most of the proposal :func:`unlabeled_floor` ever hands to its audit part.
AUDIT_FLOOR_MAX_MIX = 0.5


def unlabeled_floor(q: Proposal, cells: CellTable, labeled, floor: float = AUDIT_FLOOR) -> Proposal:
    """Keep at least ``floor`` of a deterministic-oracle proposal's mass on unlabeled items,
    by mixing in the smallest share d of the audit proposal r(x) ∝ p(x) over the items
    that can matter (ℓ(x, y) ≠ 0 for some y) that gets there (d ≤ 1/2).

    Why: where the oracle model is sure that the unlabeled items hold nothing -- a pool whose
    low scores are big ties, 30,188 items at 0.00 in ``prob_ties`` -- the variance-
    minimising proposal of 001 Prop. 2 puts almost all its mass on labeled items (free
    draws), and its ε floor (Prop. 3) is itself weighted by the model's π there.  Then

    * a stage draws millions of times for a handful of new labels and stalls (every
      run of 500 in stop 33), and the draws of labeled items shrink the CLT variance:
      on ``prob_ties`` the fixed-n interval and the confidence sequence covered F1 in 1 and
      2 of 300 runs at 2000 labels (``benchmarks/results/audit_floor.md``);
    * a positive among the low-score ties, when a run finds it, comes with a huge
      importance weight (F1 0.43 low in one run of 500).  The floor bounds such weights
      only once it binds; the RMSE stays heavy-tailed either way (about 0.02 at 2000 labels).

    With the floor every unlabeled item that can matter keeps q(x) ≥ d p(x)/P(matter)
    once it binds, so its weight is bounded, and the labels asked for after AIS has
    exhausted what its model finds worth labeling go to an audit of the rest.  The share
    d depends only on labels already seen, so the proposal is fixed before the stage and
    the estimator stays unbiased (001 Alg. 1, Thm. 1).  Where the proposal already puts
    ``floor`` of its mass on unlabeled items -- abt-buy, dblp-acm and the synthetic pools
    at every stage of 2000 labels -- nothing changes.  ``floor = 0`` turns it off.
    """
    if not floor:
        return q
    unlabeled = cells.size - labeled.sum(axis=1)
    matters = jnp.any(cells.loss != 0, axis=(1, 2))
    r = cells.weight * matters
    r = r / jnp.maximum(jnp.sum(cells.size * r), 1e-300)
    u_q = jnp.sum(unlabeled * q.unl)
    u_r = jnp.sum(unlabeled * r)
    d = jnp.where((u_q < floor) & (u_r > u_q), (floor - u_q) / jnp.maximum(u_r - u_q, 1e-300), 0.0)
    d = jnp.clip(d, 0.0, AUDIT_FLOOR_MAX_MIX)
    return Proposal(unl=(1.0 - d) * q.unl + d * r, lab=(1.0 - d) * q.lab + d * r[:, None])


def jvp_rows(g, risk, rows):
    """Dg(R) v for every row v of ``rows`` (n, d) -> (n, m), by forward-mode products:
    the cost is that of evaluating g once per row, never a dense m × d Jacobian (a PR
    curve on 1024 thresholds has m = 2048, d = 2049)."""
    gg = lambda r: jnp.atleast_1d(g(r))  # noqa: E731
    return jax.vmap(lambda v: jax.jvp(gg, (risk,), (v,))[1])(rows)


def importance(g, risk, loss):
    """a[x, y] = ‖Dg(R) ℓ(x, y)‖₂ for every cell and class (001 Prop. 1-2)."""
    x, c, d = loss.shape
    v = jvp_rows(g, risk, loss.reshape(x * c, d))
    return jnp.sqrt(jnp.sum(v * v, axis=-1)).reshape(x, c)


def model_risk(cells: CellTable, labeled, pi_cell):
    """R under the model: labeled items at their labels, the rest at the posterior
    predictive ``pi_cell`` (X, C)."""
    unlabeled = cells.size - labeled.sum(axis=1)
    per_cell = labeled[:, :, None] * cells.loss + (unlabeled[:, None] * pi_cell)[:, :, None] * cells.loss
    return jnp.einsum("x,xcd->d", cells.weight, per_cell)




def resolve_companion(companion, n_classes: int, design: str):
    """The companion model a design uses: ``"auto"`` gives ``"calibrated"`` for the
    binary pools of ``ais`` / ``poisson-adaptive`` (the calibrated Beta-binomial model
    of ``models/calibrated.py`` is binary), ``None`` otherwise; ``"none"`` / ``None``
    switches it off (the pure 001 / 000 designs)."""
    if companion in (None, "none"):
        return None
    if companion == "auto":
        return "calibrated" if n_classes == 2 and design in ("ais", "poisson-adaptive") else None
    if companion not in COMPANIONS:
        raise ValueError(f"companion must be 'auto', 'none' or one of {COMPANIONS}, got {companion!r}")
    if n_classes != 2:
        raise ValueError(f"the {companion!r} companion model is binary only (this pool has {n_classes} classes); "
                         f"use companion='none'")
    if design not in ("ais", "poisson-adaptive"):
        raise ValueError(f"a companion model applies to the adaptive designs ais and poisson-adaptive, not {design!r}")
    return companion


#: the oracle model ``"auto"`` picks unless the pool's scores fill few strata (001 §4)
DEFAULT_ORACLE_MODEL = "dirichlet-tree"
#: at most this many filled strata (a binary pool): ``"auto"`` picks a Beta per stratum
COARSE_STRATA = 10


def resolve_oracle_model(model, cells: CellTable | None, n_strata: int | None = None) -> str:
    """The oracle model a design uses: ``"auto"`` (the default since stop 81) gives the
    Dirichlet tree of 001 §4, unless the items of a binary pool fill at most
    :data:`COARSE_STRATA` strata and at most a quarter of the ``n_strata`` asked for -- a score
    with few values: the predictions themselves, or a few confidence levels -- where it gives
    ``"independent"`` (a Beta per stratum).  (Few strata asked for, ``--strata 8``, on a score of
    many values keep the tree: CSF bins leave a few of them empty, and that is no coarse score.)
    The tree pools its leaves through its prior from the scores: right for many sparse strata,
    wrong for a few big ones, where it lets the proposal leave a large low-score stratum after a few draws there find
    no positive, though 1-2% of its items are.  Measured (AIS, 1000 labels, 100 runs; MSE of F1 and
    CLT coverage, tree against a Beta per stratum; ``benchmarks/results/coarse_scores.md``): a score that is the
    prediction, 9.3e-3 / 0.63 against 2.3e-3 / 0.94 (passive 3.2e-3); the prediction plus 3, 4, 6 or
    10 confidence levels, 5.5e-3 against 2.2e-3, 8.1e-3 against 2.1e-3, 4.8e-3 against 2.0e-3,
    2.7e-3 against 1.3e-3; logistic scores rounded to 5 or 8 values, within the noise of each other;
    abt-buy (99 filled strata) at 2000 labels, 2.1e-4 against 8.9e-3 -- there the tree is the
    method.  Any other name is returned as given."""
    if model != "auto":
        return model
    if cells is None:
        return DEFAULT_ORACLE_MODEL
    filled = np.unique(np.asarray(cells.stratum)[np.asarray(cells.size) > 0])
    binary = np.asarray(cells.prior).shape[-1] == 2
    coarse = filled.size <= COARSE_STRATA and (n_strata is None or 4 * filled.size <= n_strata)
    return "independent" if binary and coarse else DEFAULT_ORACLE_MODEL


def sweep_share(cells: CellTable, labeled, pi_cell, n_next=0.0):
    """Share ρ ∈ [0, 1] of the oracle-model component in a companion mixture.

    ``ρ = min(1, (labels so far + n_next) / E[items that can matter])``, the expected
    number of items with ``ℓ(x, y) ≠ 0`` (for F1: predicted or actual positives) under
    the companion's predictive ``pi_cell`` (X, C), labeled items at their labels.

    Why (measured, ``benchmarks/README.md``): the Dirichlet-tree of 001 §4 is generative
    (y → stratum); on a pool where the relevant items are few (entity resolution: one
    positive in 10^3) its EM fit over-states the positives of the low-score tail, which
    makes its proposals sweep the likely-relevant items first and still look into the
    tail -- the best design there.  Where relevant items are many (a balanced pool) the
    unlabeled items dominate its EM and the MAP splits the classes along the score axis
    like an unsupervised mixture (π(1|k) ≈ 0.01 in strata whose true rate is 0.5), and
    designs fed by it are 20-100× worse than passive sampling.  The companion (the
    calibrated, discriminative model) is right there.  ρ moves the mixture from the
    companion to the oracle model as the labels approach the number of items that can
    matter, i.e. as sweeping them all becomes possible.  It depends only on labels
    already seen, so a design using it stays unbiased (the mixture is fixed before the
    stage is drawn).
    """
    labeled = jnp.asarray(labeled, jnp.float64)
    nz = jnp.any(cells.loss != 0, axis=-1)  # (X, C)
    unl = jnp.maximum(cells.size - labeled.sum(1), 0.0)
    rel = jnp.sum(unl * jnp.sum(pi_cell * nz, axis=1)) + jnp.sum(labeled * nz)
    return jnp.clip((labeled.sum() + n_next) / jnp.maximum(rel, 1.0), 0.0, 1.0)


class MixState(NamedTuple):
    """The states of the two designs of a :func:`mix`."""

    first: Any
    second: Any


def mix(first: Design, second: Design, share: Callable[[MixState, CellTable, Observed], Any]) -> Design:
    """The mixture design ``ρ q[first] + (1 − ρ) q[second]``, ``ρ = share(state, cells, obs)``
    in [0, 1] (a combinator, as optax chains transformations).

    Both designs see every label (``update`` refits both); ``ρ`` depends only on labels
    already seen, so the mixture is fixed before the stage is drawn and the importance
    weights p/q of the mixture keep the estimator consistent (001 Thm. 1: the support is
    the union).  The mixture keeps ``first``'s name, estimator, oracle and model.  Used
    for the companion model of AIS (:func:`sweep_share`)."""

    def init(cells):
        return MixState(first.init(cells), second.init(cells))

    def update(state, cells, obs):
        return MixState(first.update(state.first, cells, obs), second.update(state.second, cells, obs))

    def propose(state, cells, obs):
        a = first.propose(state.first, cells, obs)
        b = second.propose(state.second, cells, obs)
        rho = share(state, cells, obs)
        return jax.tree_util.tree_map(lambda u, v: rho * u + (1.0 - rho) * v, a, b)

    return first._replace(init=init, propose=propose, update=update)


def _passive_propose(state, cells, obs):
    c = cells.loss.shape[1]
    return Proposal(unl=cells.weight, lab=jnp.broadcast_to(cells.weight[:, None], (cells.weight.shape[0], c)))


def passive() -> Design:
    """Passive sampling: items drawn i.i.d. from p(x) (001 Def. 2)."""
    return Design("passive", lambda cells: (), _passive_propose, _no_update, estimator="is")


def stratified() -> Design:
    """Online stratified sampling with proportional allocation (001 §5, "Stratified"):
    one item at a time, a stratum with probability proportional to its size, an item
    uniformly inside it; estimated by the post-stratified estimator."""
    return Design("stratified", lambda cells: (), _passive_propose, _no_update, estimator="stratified")


def static_is(g, lam: float = 0.9, eps: float = 1e-3, oracle: str = "deterministic") -> Design:
    """Static variance-minimizing importance sampling from the classifier's probabilities.

    The prior p_a(y|x) = λ s(y|x) + (1−λ)/C (000 §2 eq. 13, λ = 0.9 by default) and the
    risk R_a it implies give the proposal of 001 Prop. 2 at t = 0 (001 Remark 4; 002):

    * ``oracle="deterministic"``: q(x) ∝ p(x) Σ_y p_a(y|x) ‖Dg(R_a) ℓ(x, y)‖ — the form
      for a deterministic oracle, which puts its mass on the items likely to matter;
    * ``oracle="stochastic"``: q(x) ∝ p(x) sqrt(Σ_y p_a(y|x) ‖Dg(R_a) ℓ(x, y)‖²) — the
      form of 002 and 000 §2.1 (q ∝ |h|), which spreads more mass over items whose
      label is uncertain.

    A relative floor ε keeps every item with a non-zero loss in the support.  Re-drawn
    items are answered from the store; the proposal never changes.
    """
    if oracle not in ("deterministic", "stochastic"):
        raise ValueError(f"oracle must be 'deterministic' or 'stochastic', got {oracle!r}")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], got {lam}")

    def init(cells):
        c = cells.loss.shape[1]
        pa = lam * cells.prior + (1.0 - lam) / c
        ra = jnp.einsum("x,xc,xcd->d", cells.weight * cells.size, pa, cells.loss)
        a = importance(g, ra, cells.loss)
        a = jnp.where(jnp.isfinite(a), a, 0.0)
        nz = jnp.any(cells.loss != 0, axis=-1)
        scale = jnp.sum(cells.size * cells.weight * jnp.sum(pa * a, axis=1))
        scale = jnp.where(scale > 0, scale, 1.0)
        if oracle == "deterministic":
            raw = cells.weight * jnp.sum(pa * jnp.maximum(a, eps * scale * nz), axis=1)
        else:
            a2 = jnp.maximum(a * a, (eps * scale) ** 2 * nz)
            raw = cells.weight * jnp.sqrt(jnp.sum(pa * a2, axis=1))
        return raw

    def propose(raw, cells, obs):
        c = cells.loss.shape[1]
        return normalize(cells, obs.labeled, raw, jnp.broadcast_to(raw[:, None], (raw.shape[0], c)))

    return Design("is", init, propose, _no_update, estimator="is")


class OasisState(NamedTuple):
    a: jnp.ndarray  # (K, C) Dirichlet (Beta) parameters of each stratum's class rates
    prior_risk: jnp.ndarray  # (d,) risk under the prior, used until R̂ is defined


def oasis(g, n_strata: int, eps: float = 1e-3, prior_strength: float = 2.0) -> Design:
    """OASIS: stratified adaptive importance sampling for F-measures.

    Per-stratum Beta (Dirichlet) posteriors of the class rates, seeded from the
    classifier's mean probability in the stratum with ``prior_strength`` pseudo-labels;
    the variance-minimizing stratum proposal at the current estimate,
    v_k ∝ W_k sqrt(E_k[‖Dg(R̂) ℓ‖²]) (for the F-measure this is OASIS's optimal
    instrumental distribution), mixed with ε = 10⁻³ of the stratum-size proposal W_k;
    items uniform inside the stratum; one label per stage.
    """

    def stratum_sum(v, cells):
        return jax.ops.segment_sum(v, cells.stratum, num_segments=n_strata)

    def init(cells):
        mass = cells.size * cells.weight
        wk = stratum_sum(mass, cells)
        sbar = stratum_sum(mass[:, None] * cells.prior, cells) / jnp.maximum(wk, 1e-300)[:, None]
        a = 1e-3 + prior_strength * sbar
        pi = a / a.sum(1, keepdims=True)
        prior_risk = model_risk(cells, jnp.zeros_like(cells.prior), pi[cells.stratum])
        return OasisState(a=a, prior_risk=prior_risk)

    def update(state, cells, obs):
        return state  # the posterior is recomputed from obs.labeled in propose

    def propose(state, cells, obs):
        counts = stratum_sum(obs.labeled, cells)
        post = state.a + counts
        pi = post / post.sum(1, keepdims=True)
        risk = jnp.where(jnp.all(jnp.isfinite(jnp.atleast_1d(g(obs.risk)))), obs.risk, state.prior_risk)
        a = importance(g, risk, cells.loss)
        mass = cells.size * cells.weight
        wk = stratum_sum(mass, cells)
        e = stratum_sum(mass * jnp.sum(pi[cells.stratum] * a * a, axis=1), cells)
        v = jnp.sqrt(jnp.maximum(e, 0.0) * wk)  # W_k sqrt(E_k) with E_k = e / W_k
        v = jnp.where(v.sum() > 0, v / jnp.maximum(v.sum(), 1e-300), wk)
        v = (1.0 - eps) * v + eps * wk
        per_item = v[cells.stratum] * cells.weight / jnp.maximum(wk[cells.stratum], 1e-300)
        c = cells.loss.shape[1]
        return Proposal(unl=per_item, lab=jnp.broadcast_to(per_item[:, None], (per_item.shape[0], c)))

    return Design("oasis", init, propose, update, estimator="is", stage_size=1)
