"""The jit-compiled simulation core: ``lax.scan`` over stages, ``vmap`` over repeats.

A simulated run labels a pool whose ground truth is known (the truth plays the oracle)
under a design and a batch schedule, and records the estimate and its interval after
every stage.  It works on cells (:mod:`bayes_eval.cells`), so a stage costs O(cells +
draws), not O(N).

Protocol (001 §5.2; ``docs/architecture.md``, "Oracle semantics"): under a deterministic oracle the
budget counts *distinct* labeled items; a with-replacement stage of size n draws from the
fixed proposal q_{t-1} until n new items are labeled; items drawn again are answered
from what is known at no cost, and *every* draw, repeats included, enters the estimator
with its weight p/q_{t-1}.  Under a stochastic oracle every draw costs a label.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401
from .cells import CellTable, leaf_probs, posterior_units, prior_key
from . import kernel
from .models.registry import make_oracle_model
from .poisson_designs import (
    MAX_SIM_LOSS_DIM,
    PoissonDesign,
    as_design,
    design_support,
    fixed_size_round_counts,
    poisson_round_counts,
)
from .poisson_estimators import beta_limits
from .designs import Design
from .kernel import StageState
from .estimators import normal_interval
from .feasible import cut, project, unknown
from .posterior import intervals_at_checkpoints, units_for_model
from .results import SIMULATION_BAYES_DRAWS, SimResult, StageRecord, make_result, schedule, summarize  # noqa: F401  (re-exported)

__all__ = ["SimState", "StageRecord", "SimResult", "schedule", "simulate_runs", "summarize", "run_simulation", "simulate_poisson"]

_CHUNK = 64
#: bytes of per-stage temporaries allowed for one vmapped batch of repeats
REPEAT_MEMORY = 2.0 * 2**30


class SimState(NamedTuple):
    stage: StageState  # tallies, design state, the proposal for the next stage
    n_labels: jnp.ndarray
    stalled: jnp.ndarray  # True once a stage could not find enough new items


def _draw_stage(key, truth, labeled, prop, n_new, stochastic, max_chunks):
    """Draw i.i.d. from the fixed per-item proposal until ``n_new`` new labels.

    Returns hits of labeled-at-start items (X, C), hits of unlabeled-at-start items
    (X, C), new labels (X, C) and whether the stage stalled.
    """
    x, c = truth.shape
    g = x * c
    if stochastic:
        cnt_a = jnp.zeros_like(truth)
        cnt_b = truth
    else:
        cnt_a = labeled
        cnt_b = truth - labeled
    q_a = prop.lab
    q_b = jnp.broadcast_to(prop.unl[:, None], truth.shape)
    mass = jnp.concatenate([(cnt_a * q_a).ravel(), (cnt_b * q_b).ravel()])
    cdf = jnp.cumsum(mass)
    total = cdf[-1]
    cnt_b_flat = cnt_b.ravel()
    q_b_flat = q_b.ravel()
    rem0 = total if stochastic else jnp.sum(q_b_flat * cnt_b_flat)
    idx = jnp.arange(_CHUNK)

    def cond(carry):
        _, _, _, _, got, it, rem = carry
        return (got < n_new) & (rem > 1e-12 * total) & (it < max_chunks)

    def body(carry):
        key, h_a, h_b, n_b, got, it, rem = carry
        key, k1, k2 = jax.random.split(key, 3)
        u = jax.random.uniform(k1, (_CHUNK,)) * total
        grp = jnp.clip(jnp.searchsorted(cdf, u, side="right"), 0, 2 * g - 1)
        v = jax.random.uniform(k2, (_CHUNK,))
        is_b = grp >= g
        gb = jnp.where(is_b, grp - g, 0)
        ga = jnp.where(is_b, 0, grp)
        u_cnt = cnt_b_flat[gb]
        seen0 = n_b[gb]

        # newness is sequential only among draws of the same group inside the chunk:
        # resolve it with an O(chunk^2) scan over small local arrays
        def one(carry, i):
            new_flags, act_flags, got = carry
            active = got < n_new
            if stochastic:
                new = is_b[i] & active
            else:
                before = jnp.sum(jnp.where((idx < i) & (gb == gb[i]) & is_b, new_flags, 0.0))
                new = is_b[i] & active & (v[i] * u_cnt[i] < u_cnt[i] - seen0[i] - before)
            new_flags = new_flags.at[i].set(new.astype(new_flags.dtype))
            act_flags = act_flags.at[i].set(active.astype(act_flags.dtype))
            return (new_flags, act_flags, got + new.astype(got.dtype)), None

        z = jnp.zeros(_CHUNK)
        (new_flags, act_flags, got), _ = jax.lax.scan(one, (z, z, got), idx)
        isb = is_b.astype(jnp.float64)
        h_a = h_a.at[ga].add(act_flags * (1.0 - isb))
        h_b = h_b.at[gb].add(act_flags * isb)
        n_b = n_b.at[gb].add(new_flags)
        rem = total if stochastic else rem - jnp.sum(new_flags * q_b_flat[gb])
        return key, h_a, h_b, n_b, got, it + 1, rem

    z = jnp.zeros(g)
    init = (key, z, z, z, jnp.asarray(0, jnp.int64), jnp.asarray(0, jnp.int64), rem0)
    _, h_a, h_b, n_b, got, _, _ = jax.lax.while_loop(cond, body, init)
    return h_a.reshape(x, c), h_b.reshape(x, c), n_b.reshape(x, c), got < n_new


def _kl_optimal(cells: CellTable, labeled, prop, a_true, stochastic):
    """KL(q* ‖ q) over items, q* ∝ p(x) ‖Dg(R) ℓ(x, y(x))‖ with the true labels (001 Prop. 1)."""
    truth = cells.truth
    qstar = cells.weight[:, None] * a_true
    zstar = jnp.sum(truth * qstar)
    qstar = qstar / jnp.where(zstar > 0, zstar, 1.0)
    q_b = jnp.broadcast_to(prop.unl[:, None], truth.shape)
    cnt_a = jnp.zeros_like(truth) if stochastic else labeled
    cnt_b = truth - cnt_a

    def part(cnt, q):
        t = jnp.where(qstar > 0, qstar * (jnp.log(jnp.where(qstar > 0, qstar, 1.0)) - jnp.log(jnp.where(q > 0, q, 1e-300))), 0.0)
        return jnp.sum(cnt * t)

    return part(cnt_a, prop.lab) + part(cnt_b, q_b)


def _interval(est, level, var=None):
    """The CLT interval of an estimate cut to what the labels allow (:func:`~bayes_eval.feasible.cut`),
    its sd and that range (4, m; ±inf where the estimate carries none).  ``var``: the marginal
    variances where the estimate does not carry them (Poisson rounds)."""
    var = est.var if var is None else var
    sd = jnp.sqrt(jnp.clip(var, 0.0))
    lo, hi = normal_interval(est.value, None, level, var=var)
    if est.feasible is None:
        return lo, hi, sd, unknown(est.value.shape[0])
    lo, hi = cut(lo, hi, est.feasible)
    return lo, hi, sd, est.feasible


def _run_one(key, cells: CellTable, batches, design: Design, g, n_strata, ck_stages, m_hist, a_true, max_chunks,
             track_kl, bayes_model=None, level=0.95, keep_labeled=False, fractional=False):
    """One simulated run: one ``lax.scan`` over the stages, the state at every checkpoint's
    stage kept in its carry; at every checkpoint the CLT estimate and, with a ``bayes_model``,
    the labeled table for the finite-pool posterior of G (:mod:`bayes_eval.posterior`);
    ``keep_labeled``: the record keeps every stage's labeled table (for per-stage Bayesian
    intervals).  ``fractional``
    (``Measure.fractional``): estimates projected onto what the labels allow and intervals
    cut to it (:mod:`bayes_eval.feasible`)."""
    stochastic = design.oracle == "stochastic"
    g_hist = lambda r: jnp.atleast_1d(g(r))[:m_hist]  # noqa: E731
    m_out = jax.eval_shape(lambda r: jnp.atleast_1d(g(r)), jnp.zeros(cells.loss.shape[2])).shape[0]
    state = SimState(kernel.init(design, cells), jnp.asarray(0.0), jnp.asarray(False))

    def stage(state, inp):
        key, n_new = inp
        st = state.stage
        h_a, h_b, n_b, stalled = _draw_stage(key, cells.truth, st.tallies.labeled, st.proposal, n_new, stochastic,
                                             max_chunks)
        tallies = kernel.add_draws(cells, st.tallies, st.proposal, h_a, h_b, n_b)
        st, _ = kernel.step(design, cells, n_strata, st, tallies)
        n_labels = state.n_labels + n_b.sum()
        # the record keeps the first m_hist components: estimate only those (a PR curve
        # has m = 2048; XLA drops the unused part of g)
        est = kernel.estimate(design, g_hist, cells, tallies, st.proposal, n_strata, full_cov=False,
                              design_state=st.design_state, fractional=fractional)
        lo, hi, sd, feas = _interval(est, level)
        kl = _kl_optimal(cells, tallies.labeled, st.proposal, a_true, stochastic) if track_kl else jnp.asarray(jnp.nan)
        new_state = SimState(st, n_labels, state.stalled | stalled)
        chk = jnp.full(est.value.shape, jnp.nan) if est.check is None else est.check
        rec = StageRecord(n_labels, tallies.n_draws, est.value, lo, hi, kl, tallies.labeled.sum(0), chk,
                          tallies.labeled if keep_labeled else None, sd, feas)
        return new_state, rec

    # One scan over every stage, the state at each checkpoint's stage kept in the carry and the
    # checkpoint estimates computed after it, vmapped over the checkpoints: one copy of the stage
    # body and of the full estimate in the compiled program.  (A scan per stretch between
    # checkpoints compiled the stage body once per stretch: three copies for the default
    # checkpoints; stop 68: the demo's AIS simulation compiled in 15 s instead of 24 s.)
    ck_at = sorted(set(int(s_) for s_ in ck_stages))
    ck_idx = jnp.asarray(ck_at, jnp.int32)
    # where the stage record holds every component (m ≤ 16: F1, precision, ...) it *is* the
    # checkpoint's estimate (the same function of the same state): only the labeled table is
    # kept, and only for the Bayesian intervals
    from_record = m_out == m_hist
    if not from_record:
        keep = lambda sim: sim  # noqa: E731
    elif bayes_model is not None:
        keep = lambda sim: sim.stage.tallies.labeled  # noqa: E731
    else:
        keep = lambda sim: ()  # noqa: E731
    saved = jax.tree_util.tree_map(lambda a: jnp.zeros((len(ck_at),) + jnp.shape(a), jnp.result_type(a)),
                                   keep(state))

    def stage_and_keep(carry, inp):
        state, saved = carry
        t = inp[0]
        state, rec = stage(state, inp[1:])
        hit = ck_idx == t
        saved = jax.tree_util.tree_map(
            lambda buf, new: jnp.where(hit.reshape((-1,) + (1,) * jnp.ndim(new)), new[None], buf), saved, keep(state))
        return (state, saved), rec

    stage_keys = jax.random.split(key, len(batches))
    (state, saved), hist = jax.lax.scan(stage_and_keep, (state, saved),
                                        (jnp.arange(len(batches)), stage_keys, jnp.asarray(batches)))
    # the checkpoint's range is its stage's, recorded by the scan (not searched again: compile time)
    reuse = fractional and hist.feasible.shape[-1] == m_out

    def at_checkpoint(sim, feasible):
        st = sim.stage
        est = kernel.estimate(design, g, cells, st.tallies, st.proposal, n_strata, full_cov=False,
                              design_state=st.design_state, fractional=fractional and not reuse)
        if reuse:
            est = project(est, feasible)
        lo, hi, sd, feas = _interval(est, level)
        out = {"value": est.value, "lower": lo, "upper": hi, "sd": sd, "feasible": feas, "labels": sim.n_labels,
               "draws": st.tallies.n_draws,
               "check": jnp.full(est.value.shape, jnp.nan) if est.check is None else est.check}
        if bayes_model is not None:
            out["labeled"] = st.tallies.labeled
        return out

    if from_record:
        at_ck = {"value": hist.value[ck_idx], "lower": hist.lower[ck_idx], "upper": hist.upper[ck_idx],
                 "sd": hist.sd[ck_idx], "feasible": hist.feasible[ck_idx], "labels": hist.n_labels[ck_idx],
                 "draws": hist.n_draws[ck_idx], "check": hist.check[ck_idx]}
        if bayes_model is not None:
            at_ck["labeled"] = saved
    else:
        at_ck = jax.vmap(at_checkpoint)(saved, hist.feasible[ck_idx])
    # checkpoints in the order given
    order = jnp.asarray([ck_at.index(int(s_)) for s_ in ck_stages], jnp.int32)
    stacked = jax.tree_util.tree_map(lambda a: a[order], at_ck)
    return hist, stacked, state.stalled


def simulate_runs(
    cells: CellTable,
    design: Design,
    measure,
    budget: int = 2000,
    batch: int = 50,
    repeats: int = 100,
    seed: int = 0,
    checkpoints=(500, 1000, 2000),
    n_strata: int | None = None,
    max_chunks: int = 4096,
    track_kl: bool = True,
    bayes_model=None,
    bayes_draws: int = SIMULATION_BAYES_DRAWS,
    interval: str = "normal",
    level: float = 0.95,
    return_rounds: bool = False,
    bayes_stages: bool = False,
    bayes_units=None,
) -> SimResult:
    """Run ``repeats`` simulated labeling runs, vmapped and jit-compiled: the one simulation
    driver, for both sampling kinds of the stage kernel (:mod:`bayes_eval.kernel`).

    With-replacement designs (``design.sampling == "draws"``): every stage draws from the
    fixed proposal until its new labels are in (:func:`_draw_stage`); the estimate and its
    CLT interval after every stage, the full estimate at the checkpoints.

    Poisson designs (``"rounds"``): rounds follow the batch schedule (``budget // batch``
    rounds of expected size ``batch``; the static design: stage ``t`` is the nested Poisson
    sample of expected size ``cum_budget_t``); a round labels a *random* number of items
    with mean = its budget (exactly its budget with ``fixed_size``).  Checkpoint ``c`` is
    read after the round whose cumulative *expected* labels reach ``c``; the realized label
    count is in ``checkpoint_labels`` / ``checkpoint_draws``.  ``interval``: ``"normal"``
    (``value ± z sd``) or ``"beta"`` (Beta-fitted limits, 000 §2.2, for measures in
    [0, 1]).  ``return_rounds``: also return the stacked :class:`~bayes_eval.kernel.RoundInfo`
    of every run (diagnostics).

    ``bayes_model`` adds the Bayesian finite-pool posterior interval at each checkpoint
    (:func:`bayes_eval.posterior.intervals_at_checkpoints`); with ``bayes_stages`` also after
    every stage (``stage_bayes_lower`` / ``stage_bayes_upper``, and ``stage_bayes_collapsed``:
    :func:`bayes_eval.posterior.collapsed`; for stopping on it: one
    posterior per stage and run, the stages' labeled tables kept meanwhile).  Compilation is
    timed separately (``compile_seconds``) from the run (``seconds``).  ``bayes_units``
    (:class:`~bayes_eval.cells.PosteriorUnits`): the groups of items ``bayes_model`` is
    built over (default: the strata; the calibrated model's are the cells,
    :func:`bayes_eval.posterior.units_for_model`).
    """
    if bayes_stages and bayes_model is None:
        raise ValueError("per-stage Bayesian intervals need a bayes_model")
    rounds = design.sampling == "rounds"
    if rounds:
        if interval not in ("normal", "beta"):
            raise ValueError(f"interval must be 'normal' or 'beta', got {interval!r}")
    elif return_rounds:
        raise ValueError("return_rounds is for Poisson designs")
    if design.stage_size is not None:
        batch = design.stage_size
    batches = schedule(budget, batch)
    cum = np.cumsum(batches)
    checkpoints = [int(c) for c in checkpoints if 0 < c <= budget]
    if not checkpoints:                # every checkpoint past the budget: report at the budget
        checkpoints = [int(budget)]
    ck_stages = [int(np.searchsorted(cum, c)) for c in checkpoints]
    if rounds and design.settings.n_strata:
        n_strata = design.settings.n_strata
    if n_strata is None:
        n_strata = int(np.asarray(cells.stratum).max()) + 1
    g = measure.g
    fractional = bool(getattr(measure, "fractional", False))   # estimates projected onto what the labels allow
    x, c, d = cells.loss.shape
    true_risk = jnp.einsum("x,xc,xcd->d", cells.weight, cells.truth, cells.loss)
    true_value = np.asarray(jnp.atleast_1d(g(true_risk)))
    m = true_value.shape[0]
    m_hist = min(m, 16)
    if rounds:
        pd = design.settings
        sup = np.asarray(design_support(pd, cells.loss))
        n_sup = float(np.sum(np.asarray(cells.size) * sup))
        complete_round = int(np.searchsorted(cum, n_sup)) if pd.adaptive and cum[-1] >= n_sup else -1
        a_true = jnp.zeros(())

        def run(key, cells, a_true):
            info = _run_rounds(key, cells, design, n_strata, batches, cum, complete_round, int(batch))
            value, var, lo, hi, lnow, check, feas = _round_estimates(cells, design, g, info, complete_round,
                                                                          level, fractional)
            n_labels = lnow.sum((1, 2))
            ck = jnp.asarray(ck_stages, jnp.int32)
            sd = jnp.sqrt(var)
            out = dict(value=value[ck], var=var[ck], lower=lo[ck], upper=hi[ck], labels=n_labels[ck],
                       draws=n_labels[ck], labeled=lnow[ck], check=check[ck], sd=sd[ck], feasible=feas[ck])
            hist = StageRecord(n_labels, n_labels, value[:, :m_hist], lo[:, :m_hist], hi[:, :m_hist],
                               jnp.full(value.shape[0], jnp.nan), lnow.sum(1), check[:, :m_hist],
                               lnow if bayes_stages else None, sd[:, :m_hist], feas[:, :, :m_hist])
            return hist, out, (info if return_rounds else jnp.asarray(False))
    else:
        from .designs import importance

        a_true = importance(g, true_risk, cells.loss)

        def run(key, cells, a_true):
            # cells are a traced argument, not a closure constant: XLA would otherwise
            # constant-fold operations on the (possibly large) loss table at compile time
            return _run_one(key, cells, batches, design, g, n_strata, ck_stages, m_hist, a_true, max_chunks,
                            track_kl, bayes_model, level, bayes_stages, fractional)

    fn = jax.jit(jax.vmap(run, in_axes=(0, None, None)))
    keys = jax.random.split(jax.random.PRNGKey(seed), repeats)
    # vmap in chunks of repeats when one run's per-stage temporaries are large (a PR curve
    # keeps (cells × classes) × m Jacobian rows: 500 repeats at once needed 33 GB)
    chunk = repeats if rounds else max(1, min(repeats, int(REPEAT_MEMORY // (32.0 * x * c * max(m, d)))))
    n_chunks = -(-repeats // chunk)
    pad = n_chunks * chunk - repeats
    keys_p = jnp.concatenate([keys, keys[:pad]]) if pad else keys
    t0 = time.perf_counter()
    compiled = fn.lower(keys_p[:chunk], cells, a_true).compile()
    t1 = time.perf_counter()
    outs = []
    for i in range(n_chunks):
        o = compiled(keys_p[i * chunk:(i + 1) * chunk], cells, a_true)
        jax.block_until_ready(o)
        outs.append(jax.tree_util.tree_map(np.asarray, o) if n_chunks > 1 else o)
    if n_chunks > 1:
        hist, ck, extra = jax.tree_util.tree_map(lambda *a: np.concatenate(a, axis=0)[:repeats], *outs)
    else:
        hist, ck, extra = outs[0]
    t2 = time.perf_counter()
    ck = {k_: np.asarray(v) for k_, v in ck.items()}
    bayes = {}
    obs = design.oracle == "stochastic"  # tables of label observations, not of items
    if bayes_model is not None:
        bu = bayes_units if bayes_units is not None else posterior_units(cells, n_strata, "stratum")
        bayes = intervals_at_checkpoints(bu.cells, bayes_model, g, bu.n_units, jnp.asarray(ck["labeled"]), seed,
                                         bayes_draws, observations=obs)
    if bayes_stages:
        stage = intervals_at_checkpoints(bu.cells, bayes_model, g, bu.n_units, jnp.asarray(hist.labeled), seed + 1,
                                         bayes_draws, observations=obs)
        bayes["stage_bayes_lower"], bayes["stage_bayes_upper"] = stage["bayes_lower"], stage["bayes_upper"]
        bayes["stage_bayes_collapsed"] = stage["bayes_collapsed"]
        hist = hist._replace(labeled=None)
    t3 = time.perf_counter()
    lower = upper = None
    if rounds and interval == "beta":
        lower, upper = cut(*beta_limits(ck["value"], ck["var"], level), ck["feasible"])
    stalled = np.zeros(repeats, dtype=bool) if rounds else extra
    res = make_result(hist, ck, stalled, checkpoints, true_value, measure, t2 - t1, t1 - t0, design.name, bayes,
                      (t3 - t2) if bayes_model is not None else 0.0, lower=lower, upper=upper,
                      bayes_draws=bayes_draws if bayes_model is not None else None)
    if return_rounds:
        return res, jax.tree_util.tree_map(np.asarray, extra)
    return res


def run_simulation(pool, measure, design_name="is", budget=2000, batch=50, repeats=100, seed=0,
                   checkpoints=(500, 1000, 2000), n_strata=256, depth=8, branching=None,
                   model="auto", lam=0.9, eps=1e-3, track_kl=True, n_fine=None, keep_empty=True, bayes=None,
                   bayes_draws=SIMULATION_BAYES_DRAWS, posterior_model="calibrated", companion="auto", bayes_stages=False, system=0,
                   **design_kw):
    """Build strata, cells and the design for a pool with ground truth, and simulate.

    Strata: CSF with a K-bin fine histogram, empty strata kept in place (``keep_empty``)
    so the Dirichlet tree over them mirrors the score axis, as in the reference
    implementation.  Measured on abt-buy (AIS depth 8, 400 repeats): MSE of F1 at 2000
    labels 0.000235 with empty leaves in place vs 0.00111 with strata compacted and the
    tree padded at the top.

    ``companion``: the companion model of ``ais`` and ``poisson-adaptive``
    (:func:`bayes_eval.designs.resolve_companion`; ``"auto"``: the calibrated model on
    binary pools, ``"none"``: the designs of 001 / 000 with the oracle model alone).
    ``system``: the system whose score the strata follow (and whose prior splits the cells), the
    measure's — a measure of system 1 on system 0's strata gave Bayesian intervals of F1 that
    held the truth in 0 of 40 runs (stop 80).  ``bayes_stages``: the Bayesian interval after every stage too (with ``bayes``;
    :func:`simulate_runs`).  ``posterior_model``: the Bayesian interval's model, ``"calibrated"``
    (``models/calibrated.py``; with several classes its top-class split,
    ``models/calibrated_classes.py``), ``"design"`` or an oracle model's name.
    """
    from .cells import build_cells
    from .designs import resolve_companion
    from .registry import build_design, design_spec
    from .strata import stratify

    spec = design_spec(design_name)
    if pool.labels is None:
        raise ValueError("simulation needs a pool with ground-truth labels (a 'label' column)")
    strata = stratify(pool, n_strata, n_fine=n_fine, keep_empty=keep_empty, system=system)
    k = strata.n_strata
    cells, _ = build_cells(pool, strata, measure, system=system,
                           extra_key=prior_key(pool, system=system) if spec.cell_key == "prior" else None)
    interval = design_kw.pop("interval", "normal")
    eps = design_kw.pop("eps0", eps)  # AIS's ε_0 (the CLI passes --eps as both)
    if spec.kind == "rounds":
        if design_kw.get("oracle", "deterministic") != "deterministic":
            raise ValueError("Poisson designs label distinct items: only the deterministic oracle is supported")
        if cells.loss.shape[-1] > MAX_SIM_LOSS_DIM:
            raise ValueError(f"the Poisson simulation forms (d, d) round covariances; measures with more than "
                             f"{MAX_SIM_LOSS_DIM} loss components (this one has {cells.loss.shape[-1]}, e.g. a "
                             f"PR curve) are not supported by it yet")
    from .designs import resolve_oracle_model

    model = resolve_oracle_model(model, cells, k)      # "auto": the tree, a Beta per stratum on two strata
    settings = dict(design_kw, model=model, depth=depth, branching=branching, lam=lam, eps=eps,
                    companion=resolve_companion(companion, cells.loss.shape[1], design_name))
    design = build_design(design_name, measure, cells, k, **settings)
    bayes_model = bayes_units = None
    if bayes:
        if posterior_model == "calibrated":
            bayes_units = posterior_units(cells, k, units_for_model("calibrated"))
            bayes_model = make_oracle_model("calibrated", bayes_units.probs)
        elif design.model is not None and posterior_model in ("design", model):
            bayes_model = design.model
        else:
            name = model if posterior_model in ("design", "calibrated") else posterior_model
            bayes_model = make_oracle_model(name, leaf_probs(cells, k), depth=depth, branching=branching,
                                            strength=design_kw.get("strength", 1.0),
                                            em_iters=design_kw.get("em_iters", 10))
    res = simulate_runs(cells, design, measure, budget=budget, batch=batch, repeats=repeats, seed=seed,
                        checkpoints=checkpoints, n_strata=k, track_kl=track_kl, bayes_model=bayes_model,
                        bayes_draws=bayes_draws, interval=interval, bayes_stages=bool(bayes_stages and bayes_model),
                        bayes_units=bayes_units)
    return res, cells


def _draw_round(key, cells: CellTable, labeled, draw_b, n_r, fixed_size, n_max: int):
    """The items a Poisson round includes, per (cell, true class): each unlabeled item
    independently with its cell's ``draw_b`` (:func:`~bayes_eval.poisson_designs.poisson_round_counts`),
    or exactly ``n_r`` of them by order sampling (``fixed_size``)."""
    unl_true = jnp.maximum(cells.truth - labeled, 0.0)
    if fixed_size is None:
        return poisson_round_counts(key, unl_true, draw_b)
    return fixed_size_round_counts(key, unl_true, draw_b, n_r, n_max, fixed_size)


def _run_rounds(key, cells: CellTable, design: Design, n_strata: int, budgets, cum_budgets, complete_round: int,
                n_max: int):
    """All rounds of one run of a Poisson design (``design.sampling == "rounds"``):
    ``lax.scan`` of the stage kernel (:func:`bayes_eval.kernel.open_round`, a drawn round,
    :func:`bayes_eval.kernel.step`); the stacked :class:`~bayes_eval.kernel.RoundInfo`."""
    pd = design.settings
    round_budget = budgets if pd.adaptive else cum_budgets  # the static design's b is for the cumulative budget

    def stage(st, inp):
        kr, n_r, m_r, r = inp
        prop, draw_b = kernel.open_round(design, cells, st, m_r, complete=r == complete_round)
        sampled = _draw_round(kr, cells, st.tallies.labeled, draw_b, n_r, pd.fixed_size if pd.adaptive else None,
                              n_max)
        return kernel.step(design, cells, n_strata, st, kernel.RoundDraw(prop, sampled))

    keys = jax.random.split(key, len(budgets))
    _, info = jax.lax.scan(stage, kernel.init(design, cells),
                           (keys, jnp.asarray(budgets, jnp.float64), jnp.asarray(round_budget, jnp.float64),
                            jnp.arange(len(budgets))))
    return info


def _round_estimates(cells, design: Design, g, info: "kernel.RoundInfo", complete_round: int, level: float,
                     fractional: bool = False):
    """Estimate and interval after every round t (vmapped over t), by the kernel's
    estimator of rounds (:func:`bayes_eval.kernel.round_estimate`); with ``fractional`` the
    estimate projected onto what the labels allow and the interval cut to it."""
    def at(t):
        rec = info.record
        lnow = rec.labeled_before[t] + rec.sampled[t]
        pi_check = None if info.pi_check is None else info.pi_check[t]
        est = kernel.round_estimate(design, g, cells, rec, t, lnow, info.pi_after[t], complete_round, pi_check,
                                    fractional=fractional)
        var = jnp.clip(jnp.diagonal(est.cov), 0.0)
        lo, hi, _, feas = _interval(est, level, var)
        check = jnp.full(est.value.shape, jnp.nan) if est.check is None else est.check
        return est.value, var, lo, hi, lnow, check, feas

    return jax.vmap(at)(jnp.arange(info.record.b.shape[0]))


def simulate_poisson(cells: CellTable, design, measure, budget: int = 2000, batch: int = 50,
                     repeats: int = 100, seed: int = 0, checkpoints=(500, 1000, 2000), bayes_model=None,
                     bayes_draws: int = SIMULATION_BAYES_DRAWS, level: float = 0.95, interval: str = "normal",
                     return_rounds: bool = False):
    """:func:`simulate_runs` for a Poisson design given as its
    :class:`~bayes_eval.poisson_designs.PoissonDesign` record or as a ``"rounds"``
    :class:`~bayes_eval.designs.Design` (kept for the benchmarks that pass the record)."""
    if isinstance(design, PoissonDesign):
        design = as_design(design, measure.g)
    return simulate_runs(cells, design, measure, budget=budget, batch=batch, repeats=repeats, seed=seed,
                         checkpoints=checkpoints, bayes_model=bayes_model, bayes_draws=bayes_draws, level=level,
                         interval=interval, return_rounds=return_rounds)
