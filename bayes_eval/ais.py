"""Adaptive importance sampling with a Bayesian oracle model (001 Alg. 1, Prop. 2-3).

At every stage the oracle model (by default the Dirichlet-tree of 001 §4 over the
score strata, :mod:`bayes_eval.models`) is refitted to the labels so far, and the next
proposal is the variance-minimizing one of 001 Prop. 2 fed by its posterior predictive
π_t(y|x) and the current risk R̂_t:

deterministic oracle
    q_t(x) ∝ p(x) Σ_y max(‖Dg(R̂_t) ℓ(x, y)‖, ε_t 1[ℓ(x, y) ≠ 0]) π_t(y|x),
    with π_t a point mass at the observed label for labeled items;
stochastic oracle
    q_t(x) ∝ p(x) [Σ_y max(‖Dg(R̂_t) ℓ(x, y)‖², ε_t 1[ℓ(x, y) ≠ 0]) p̂_t(y|x)]^{1/2},

with ε_t = ε_0 (1 − share of the pool labeled) (001 Prop. 3) and, optionally, δ of
p(x) mixed in for sample reuse (001 §3.3.1).  The first stage uses the prior.

Two departures from the letter of 001, both keeping every guarantee:

* ε is relative: the floor is ε_t times the pool average of ‖Dg ℓ‖ under π_t, so the
  same ε_0 means the same thing for F1 (‖Dg ℓ‖ ~ 1/R₂, large) and accuracy (~1).
* The plug-in R̂_t for Dg defaults to the *model-based* risk (labeled items at their
  labels, the rest at π_t) rather than the noisy importance-weighted estimate; both
  converge to R (Prop. 2's condition) and ``plugin="estimate"`` gives the latter.

And one addition: a *companion model* (``companion="calibrated"``, the default for binary
pools in the CLI and sessions).  The proposal is the mixture ρ_t q_t[Dirichlet tree] +
(1 − ρ_t) q_t[calibrated model], ρ_t = :func:`bayes_eval.designs.sweep_share`: on pools
with few relevant items it is 001's proposal after the first stages; on balanced pools,
where the generative Dirichlet tree's EM fit collapses (see ``sweep_share``), it is the
proposal of the discriminative calibrated model.
"""
from __future__ import annotations


import jax.numpy as jnp

from . import _config  # noqa: F401
from .cells import CellTable, leaf_counts, leaf_probs, posterior_units
from .designs import (AUDIT_FLOOR, Design, Observed, importance, mix, model_risk, normalize, sweep_share,
                      unlabeled_floor)
from .models.registry import make_companion_model, make_oracle_model

__all__ = ["ais_design", "model_design", "ais_proposal"]


def ais_proposal(g, cells: CellTable, labeled, pi_cell, risk, eps0: float, delta: float, oracle: str):
    """The proposal of 001 Prop. 2 on cells, given π (X, C) and the plug-in risk."""
    a = importance(g, risk, cells.loss)
    a = jnp.where(jnp.isfinite(a), a, 0.0)
    nz = jnp.any(cells.loss != 0, axis=-1)
    share = jnp.clip(labeled.sum() / cells.size.sum(), 0.0, 1.0)
    eps_t = eps0 * (1.0 - share)
    mass = cells.size * cells.weight
    scale = jnp.sum(mass * jnp.sum(pi_cell * a, axis=1))
    scale = jnp.where(scale > 0, scale, 1.0)
    floor = eps_t * scale * nz
    if oracle == "deterministic":
        lab_raw = cells.weight[:, None] * jnp.maximum(a, floor)
        unl_raw = jnp.sum(lab_raw * pi_cell, axis=1)
        return normalize(cells, labeled, unl_raw, lab_raw, delta)
    unl_raw = cells.weight * jnp.sqrt(jnp.sum(jnp.maximum(a * a, floor**2) * pi_cell, axis=1))
    lab_raw = jnp.broadcast_to(unl_raw[:, None], pi_cell.shape)
    return normalize(cells, jnp.zeros_like(labeled), unl_raw, lab_raw, delta)


def ais_design(g, cells: CellTable, n_strata: int, model: str = "dirichlet-tree", depth: int = 8,
               branching: int | None = None, strength: float = 1.0, eps0: float = 1e-3, delta: float = 0.0,
               oracle: str = "deterministic", plugin: str = "model", em_iters: int = 10, companion: str | None = None,
               companion_units: str = "stratum", check_units: str | None = None, audit_floor: float = AUDIT_FLOOR):
    """Build the AIS design for a cell table.  Returns ``(design, n_strata)``.

    ``audit_floor`` (deterministic oracle): the least share of every proposal's mass kept on
    unlabeled items, :func:`bayes_eval.designs.unlabeled_floor` (0 turns it off).

    ``companion="calibrated"`` makes every stage's proposal the mixture
    ``ρ_t q_t[oracle model] + (1 − ρ_t) q_t[companion]`` of the 001 Prop. 2 proposals fed
    by the two models' predictives, with ``ρ_t`` = :func:`bayes_eval.designs.sweep_share`
    (labels so far over the expected number of items that can matter).  Both components
    are fixed before the stage, so the importance weights ``p/q`` of the mixture keep the
    estimator consistent (001 Thm. 1: the mixture's support is the union).  Measured
    (F1, 2000 labels; ``benchmarks/results/suite_f1_*.md``, 200 / 500 repeats): on a
    balanced synthetic pool the depth-8 tree alone gives MSE 3.6e-3 (passive: 1.8e-4),
    with the companion 1.8e-4; on a 10% pool 1.1e-2 → 7.9e-4; on abt-buy 2.0e-4 both, on
    dblp-acm 3.1e-4 → 6.8e-5.

    ``companion_units`` / ``check_units`` (``"stratum"`` or ``"cell"``; ``check_units``
    None: as ``companion_units``): the units the companion is fitted on for the proposal,
    and for ``Design.shares`` -- the class shares behind the model-assisted variance and the
    CLT check (``docs/architecture.md``).  A stratum that straddles the decision threshold is
    drawn unevenly (for F1 its predicted positives far more than its predicted negatives),
    so a per-stratum fit lends the labeled predicted positives' rate to the unlabeled
    predicted negatives -- the reason the finite-pool posterior is fitted per cell
    (``cells.posterior_units``).  Both stay per stratum by default; measured on the same
    seeds (``benchmarks/results/companion_units.md``, F1, 2000 runs on dblp-acm, the one
    shared pool with a straddling stratum):

    * ``check_units="cell"`` (the curve (a, b, κ) refitted on the cells for the check,
      warm-started from the proposal's fit; the proposals, hence the estimates, unchanged):
      the check passes at 500 labels in 0.89 of runs instead of 0.78, every one of them
      covering; but where it passes at 1000 labels the CLT interval covers 0.92 instead of
      0.94 (binomial SE 0.006) -- the per-stratum shares over-state the straddling
      stratum's hidden positives, and that over-statement was holding coverage up -- and
      the refit is one more fit per stage: 40% more time per simulated run.
    * ``companion_units="cell"``: the same check gain, but the MSE of F1 on dblp-acm is
      6-9% larger (1.4-1.7 Monte Carlo SE at each checkpoint) while on the 10% synthetic
      pool it is 5-10% smaller (1-1.5 SE): no consistent gain for changing every proposal.
    """
    if oracle not in ("deterministic", "stochastic"):
        raise ValueError(f"oracle must be 'deterministic' or 'stochastic', got {oracle!r}")
    if plugin not in ("model", "estimate"):
        raise ValueError(f"plugin must be 'model' or 'estimate', got {plugin!r}")
    if not 0.0 <= delta <= 1.0:
        raise ValueError(f"delta must be in [0, 1], got {delta}")
    if not 0.0 <= audit_floor < 1.0:
        raise ValueError(f"audit_floor must be in [0, 1), got {audit_floor}")
    probs_k = leaf_probs(cells, n_strata)
    om = make_oracle_model(model, probs_k, depth=depth, branching=branching, strength=strength, em_iters=em_iters)
    name = "ais" if oracle == "deterministic" else "ais-stochastic"
    kw = dict(eps0=eps0, delta=delta, oracle=oracle, plugin=plugin)
    design = model_design(name, g, om, n_strata, predictive="point", **kw)
    if companion in (None, "none"):
        return _floored(design, oracle, audit_floor), n_strata
    if companion_units == "stratum":
        n_units, unit_probs, unit_of = n_strata, probs_k, None
    elif companion_units == "cell":
        units = posterior_units(cells, n_strata, "cell")
        n_units, unit_probs, unit_of = units.n_units, units.probs, units.cells.stratum
    else:
        raise ValueError(f"companion_units must be 'stratum' or 'cell', got {companion_units!r}")

    def on_units(c):
        # the companion's units: the strata, or (by cell) posterior_units' cells
        return c if unit_of is None else c._replace(stratum=unit_of)

    cm = make_companion_model(companion, unit_probs)
    per_unit = model_design(name, g, cm, n_units, predictive="posterior", **kw)
    mate = per_unit._replace(init=lambda c: per_unit.init(on_units(c)),
                             propose=lambda st, c, o: per_unit.propose(st, on_units(c), o),
                             update=lambda st, c, o: per_unit.update(st, on_units(c), o))

    def companion_pi(state, cells, labeled):
        # the companion's posterior predictive per cell, from the labels per unit
        u = on_units(cells)
        counts = leaf_counts(u, labeled, n_units)[0]
        return cm.posterior_predictive(state.second, counts)[u.stratum]

    def share(state, cells, obs: Observed):
        # ρ_t from the companion's predictive, before the stage is drawn
        return sweep_share(cells, obs.labeled, companion_pi(state, cells, obs.labeled))

    check_units = companion_units if check_units is None else check_units
    if check_units not in ("stratum", "cell"):
        raise ValueError(f"check_units must be 'stratum' or 'cell', got {check_units!r}")
    if check_units == companion_units:
        share_pi = companion_pi
    else:
        cu = posterior_units(cells, n_strata, check_units)
        cm_check = make_companion_model(companion, cu.probs)

        def share_pi(state, cells, labeled):
            # the companion's calibration curve (a, b, κ), each check unit at its own score and labels
            u = cells._replace(stratum=cu.cells.stratum)
            counts, unl = leaf_counts(u, labeled, cu.n_units)
            return cm_check.posterior_predictive(cm_check.fit(state.second, counts, unl), counts)[u.stratum]

    def shares(state, cells, labeled):
        # the companion's class shares per cell, labeled items at their labels (Design.shares)
        pi = share_pi(state, cells, labeled)
        unlabeled = cells.size - labeled.sum(axis=1)
        return (labeled + unlabeled[:, None] * pi) / jnp.maximum(cells.size, 1.0)[:, None]

    mixed = mix(design, mate, share)._replace(shares=shares if oracle == "deterministic" else None)
    return _floored(mixed, oracle, audit_floor), n_strata


def _floored(design, oracle: str, floor: float):
    """``design`` with :func:`~bayes_eval.designs.unlabeled_floor` on every proposal (the
    deterministic oracle's: a stochastic oracle's every draw is a label)."""
    if oracle != "deterministic" or not floor:
        return design
    return design._replace(propose=lambda st, c, o: unlabeled_floor(design.propose(st, c, o), c, o.labeled, floor))


def model_design(name: str, g, om, n_strata: int, *, eps0: float = 1e-3, delta: float = 0.0,
                 oracle: str = "deterministic", plugin: str = "model", predictive: str = "point") -> Design:
    """AIS (001 Alg. 1, Prop. 2-3) fed by one oracle model ``om``: its state is the
    model's, ``update`` refits it to the labels per stratum, ``propose`` is
    :func:`ais_proposal` at its predictive -- ``om.predictive(state)`` (``"point"``) or
    ``om.posterior_predictive(state, counts)`` (``"posterior"``, what a companion uses)."""

    def counts_of(cells, labeled):
        # a stochastic oracle's labels are observations, not items: no unlabeled items
        return leaf_counts(cells, labeled, n_strata, observations=oracle != "deterministic")

    def init(cells):
        return om.init_state()

    def update(state, cells, obs: Observed):
        counts, unl = counts_of(cells, obs.labeled)
        return om.fit(state, counts, unl)

    def propose(state, cells, obs: Observed):
        if predictive == "point":
            pi = om.predictive(state)[cells.stratum]
        else:
            pi = om.posterior_predictive(state, counts_of(cells, obs.labeled)[0])[cells.stratum]
        if oracle == "deterministic":
            r_model = model_risk(cells, obs.labeled, pi)
        else:
            r_model = jnp.einsum("x,xc,xcd->d", cells.weight * cells.size, pi, cells.loss)
        if plugin == "model":
            risk = r_model
        else:
            ok = jnp.all(jnp.isfinite(jnp.atleast_1d(g(obs.risk))))
            risk = jnp.where(ok, obs.risk, r_model)
        return ais_proposal(g, cells, obs.labeled, pi, risk, eps0, delta, oracle)

    return Design(name, init, propose, update, estimator="is", oracle=oracle, model=om)
