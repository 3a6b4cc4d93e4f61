"""The compiled core of a session: everything derived from (pool, configuration) alone.

:func:`build_core` stratifies the pool, builds the cells (split by every measure's loss
pattern, and by the classifier's prior for ``is`` / ``poisson``), builds the design by name
(:func:`bayes_eval.session_setup.make_design`) and jit-compiles its pure functions: for the
with-replacement designs the stage step of 001 Alg. 1 (R̂ with q_N = the proposal just
used, ``design.update``, ``design.propose``) and the estimator of every measure
(:func:`bayes_eval.kernel.estimate`); for the Poisson designs the same kernel's round functions
(open a round, close it, the round estimator: :func:`build_poisson`).  The core is pure, so sessions on
the same pool share it: :func:`core_for` keeps the cores built from a pool on that pool
(:meth:`bayes_eval.pool.Pool.derived`), not in a module-level cache.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from . import _config  # noqa: F401  (float64)
from ._config import jit_run_often
from .checks import zero_padded_hint
from .errors import SessionError, UnknownItemError
from .fingerprints import PORTABLE_VERSION
from .fingerprints import portable_fingerprint as pool_portable
from .session_setup import make_design

__all__ = ["SessionCore", "PoissonCore", "build_core", "build_poisson", "core_for", "clear_cache",
           "pool_fingerprint", "portable_fingerprint", "unreached_measures", "unreached_message", "same_pool", "derived_probs", "item_rows", "ids_at", "finish_core", "posterior_model", "posterior_sampler", "CORE_CACHE_SIZE"]

#: compiled cores kept per pool (the most recently used ones)
CORE_CACHE_SIZE = 4
_CORE_KIND = "session-core"
_INT_RE = re.compile(r"^[+-]?\d+(\.0*)?$")


class PoissonCore(NamedTuple):
    """The pure functions of a Poisson design in a session, jit-compiled once per core:
    the stage kernel's round functions (:func:`bayes_eval.kernel.open_round`,
    :func:`bayes_eval.kernel.step`, :func:`bayes_eval.kernel.round_estimate`) — the ones
    the simulation's scan runs.

    ``open``: ``(design_state, labeled, b_prev, budget, complete) -> (RoundProposal without
    pi_mean, pi_mean, draw_b)``; ``close``: ``(design_state, labeled_before, b_prev,
    proposal, pi_mean, sampled) -> (design_state, RoundInfo)``; ``estimate_fns``: per
    measure, the estimate after round ``t`` from the stacked round records.
    """

    design: Any  # PoissonDesign (the settings the estimator reads)
    model: Any  # the oracle model refitted after every round (None: static without variance="model")
    support: np.ndarray  # (X,) bool: cells whose items need b > 0 (the first measure's estimator)
    n_support: float  # items in those cells
    open: Callable
    close: Callable
    estimate_fns: tuple


class SessionCore(NamedTuple):
    """Everything derived from (pool, configuration) alone: strata, cells, the design and
    its jit-compiled stage step.  Kept on the pool by :func:`core_for` (pure, so safe to
    share between sessions)."""

    strata: Any
    cells: Any  # CellTable of the design (loss of the first measure)
    item_cell: np.ndarray
    order: np.ndarray
    cell_start: np.ndarray
    size: np.ndarray  # (X,) int64
    p_cell: np.ndarray  # (X,) per-item p(x)
    stratum: np.ndarray  # (X,)
    loss_tables: tuple  # per measure (X, C, d)
    design: Any
    n_strata: int
    init: Callable
    step: Callable
    estimate_fns: tuple
    id_index: Any
    jitted: dict  # further compiled functions built on demand (the posterior)
    poisson: Any = None  # PoissonCore for the Poisson designs (then ``init`` gives the model state)


def build_core(pool, measures, cfg, progress) -> SessionCore:
    """Build the core of a session configuration ``cfg`` (the session file's ``config``)."""
    from .cells import build_cells, combine_keys, item_patterns, prior_key
    from .registry import design_spec
    from .strata import stratify

    d = cfg["design"]
    system = cfg["system"]
    if getattr(pool, "partitioned", False):
        # a partitioned pool (issue 19): the same strata and cells, computed on Dask; the items'
        # cells and order stay on the workers (views), the driver gets the cells
        from .partitioned_cells import partitioned_cells

        if design_spec(d["name"]).cell_key == "prior":
            raise SessionError(f"design {d['name']!r} splits cells by each item's prior, which the dask engine does "
                               f"not do yet; use --engine memory")
        progress("stratifying and building cells on dask", 0, 1)
        strata, cells, item_cell, order, cell_start, sub = partitioned_cells(
            pool, measures, cfg["n_strata"], cfg["strata_method"], cfg["n_fine"], bool(cfg.get("keep_empty")), system,
            cfg.get("class_bins", "none"))   # several classes were not split on this engine before
        return finish_core(pool, measures, cfg, progress, strata, cells, item_cell, order, cell_start, sub,
                           pool.id_index)
    progress("stratifying", 0, 1)
    skw = {"keep_empty": cfg["keep_empty"]} if cfg.get("keep_empty") is not None else {}
    if pool.n_classes > 2:   # sessions of several classes created before record no class_bins
        skw["class_bins"] = cfg.get("class_bins", "by-splits")
    strata = stratify(pool, cfg["n_strata"], method=cfg["strata_method"], system=system, n_fine=cfg["n_fine"], **skw)
    progress("building cells", 0, 1)
    from .measures import Features

    # NumPy features: item_patterns moves them to JAX in chunks (a whole 10^8-item copy
    # in XLA buffers was most of the session's memory overhead)
    feats = Features(preds=pool.preds, scores=pool.scores, probs=pool.probs)
    extra = [item_patterns(m, feats) for m in measures[1:]]
    if design_spec(d["name"]).cell_key == "prior":
        extra.append(prior_key(pool, system=system))
    extra_key = combine_keys(extra)[0] if extra else None
    cells, item_cell = build_cells(pool, strata, measures[0], extra_key=extra_key, system=system)
    x = cells.n_cells
    small = np.int32 if item_cell.size < 2**31 else np.int64
    item_cell = np.asarray(item_cell, dtype=np.int32 if x < 2**31 else np.int64)
    # stable sort of the cell ids: radix (O(N)) for < 65536 cells; int32 offsets
    order = np.argsort(item_cell.astype(np.uint16) if x < 65536 else item_cell, kind="stable").astype(small)
    cell_start = np.searchsorted(item_cell[order], np.arange(x + 1)).astype(np.int64)
    rep = order[cell_start[:-1]]
    sub = type(feats)(*(np.asarray(a)[rep] for a in feats))
    ids = np.asarray(pool.ids)
    if ids.dtype.kind in "iu":
        id_index = None if np.array_equal(ids, np.arange(ids.size)) else pd.Index(ids.astype(np.int64))
    else:
        id_index = pd.Index(ids.astype(str))
    return finish_core(pool, measures, cfg, progress, strata, cells, item_cell, order, cell_start, sub, id_index)


def finish_core(pool, measures, cfg, progress, strata, cells, item_cell, order, cell_start, sub, id_index):
    """The rest of :func:`build_core` once the strata and cells are known: the further
    measures' loss tables (from ``sub``, the features of each cell's first item), the
    design and its compiled functions."""
    from . import kernel
    from .kernel import StageState, Tallies, estimate

    d = cfg["design"]
    loss_tables = [cells.loss] + [jnp.asarray(np.asarray(m.loss(sub), dtype=np.float64)) for m in measures[1:]]
    progress("building the design", 0, 1)
    kw = {k: v for k, v in d.items() if k != "name"}
    if d["name"] == "ais":
        # session files written before the floor existed replay unchanged (designs.unlabeled_floor)
        kw.setdefault("audit_floor", 0.0)
    design, n_strata = make_design(d["name"], measures[0], cells, strata.n_strata, oracle=cfg["oracle"], **kw)
    common = dict(
        strata=strata, cells=cells, item_cell=item_cell, order=order, cell_start=cell_start,
        size=np.asarray(cells.size).astype(np.int64), p_cell=np.asarray(cells.weight, dtype=np.float64),
        stratum=np.asarray(cells.stratum, dtype=np.int64), loss_tables=tuple(loss_tables), design=design,
        n_strata=int(n_strata), id_index=id_index, jitted={})
    if design.sampling == "rounds":
        pc = build_poisson(design, measures, cells, loss_tables, int(n_strata))

        def init_poisson():
            return kernel.init(design, cells).design_state, None

        return SessionCore(init=init_poisson, step=None, estimate_fns=pc.estimate_fns, poisson=pc, **common)

    def init():
        st = kernel.init(design, cells)
        return st.design_state, st.proposal

    def step(state, labeled, draws, wsum, n_draws, prop):
        # the stage kernel (bayes_eval.kernel, as the simulation's scan): R̂ with q_N = the
        # proposal just used, then the design's update and its next proposal
        tallies = Tallies(labeled, draws, wsum, n_draws)
        st, _ = kernel.step(design, cells, n_strata, StageState(tallies, state, prop), tallies)
        return st.design_state, st.proposal

    def make_est(j):
        cells_j = cells._replace(loss=loss_tables[j])
        g = measures[j].g

        def est(labeled, draws, wsum, w2sum, n_draws, prop, ew2=None, design_state=None, project=True):
            # ew2 = (ew2_lab, ew2_unl) and the design state: the model-assisted variance; project: onto
            # what the labels allow (bayes_eval.feasible; not where items were skipped: the estimate is
            # then of the items that can be labeled, an unknown part of the unlabeled ones)
            ew2_lab, ew2_unl = (None, None) if ew2 is None else ew2
            tallies = Tallies(labeled, draws, wsum, n_draws, w2sum, ew2_lab, ew2_unl)
            return estimate(design, g, cells_j, tallies, prop, n_strata,
                            design_state=design_state if ew2 is not None else None,
                            fractional=project and measures[j].fractional)

        return jax.jit(est, static_argnames="project")

    return SessionCore(init=jax.jit(init), step=jax.jit(step),
                       estimate_fns=tuple(make_est(j) for j in range(len(measures))), **common)


def build_poisson(design, measures, cells, loss_tables, n_strata: int) -> PoissonCore:
    """The jit-compiled round functions of a Poisson design: the stage kernel's
    (:mod:`bayes_eval.kernel`), exactly as the simulation's scan calls them, for a session
    that holds the labels and the closed rounds' records itself."""
    from . import kernel
    from . import poisson_designs as PD
    from .kernel import RoundDraw, RoundTallies, StageState

    pd_design = design.settings
    x, c, d = cells.loss.shape
    if pd_design.variance_model is not None and pd_design.variance_model is not pd_design.model:
        raise SessionError("a separate variance model is offered by the simulation only; a session's "
                           "variance='model' uses the design's oracle model")
    sup = np.asarray(PD.design_support(pd_design, cells.loss))
    for j in range(1, len(measures)):
        sj = np.asarray(PD.design_support(pd_design, loss_tables[j]))
        if np.any(sj & ~sup):
            raise SessionError(
                f"measure {measures[j].name!r} needs labels of items that {measures[0].name!r} (the measure the "
                f"Poisson design targets) never asks for: its {pd_design.estimator!r} estimator would be biased; "
                f"put {measures[j].name!r} first or use separate sessions")
    n_sup = float(np.sum(np.asarray(cells.size) * sup))

    def state_of(dstate, labeled, b_prev):
        return StageState(RoundTallies(labeled, b_prev), dstate, ())

    def open_round(dstate, labeled, b_prev, budget, complete):
        prop, draw_b = kernel.open_round(design, cells, state_of(dstate, labeled, b_prev), budget, complete)
        pi_mean = prop.pi_mean if prop.pi_mean is not None else jnp.zeros((x, c))
        return prop._replace(pi_mean=None), pi_mean, draw_b

    def close_round(dstate, labeled_before, b_prev, prop, pi_mean, sampled):
        st, info = kernel.step(design, cells, n_strata, state_of(dstate, labeled_before, b_prev),
                               RoundDraw(prop._replace(pi_mean=pi_mean), sampled))
        return st.design_state, info

    def make_est(j):
        cells_j = cells._replace(loss=loss_tables[j])
        g = measures[j].g
        dj = int(loss_tables[j].shape[2])

        def est(b, mean0, pis, lb, sampled, pv, t, lnow, pi_now, cr, pi_check=None):
            # the round's model prediction m_r for measure j (the proposal's own for the first)
            if j == 0:
                mean = mean0
            elif pd_design.estimator == "ht":
                mean = jnp.zeros(pis.shape[:-1] + (dj,))
            else:
                mean = jnp.einsum("...xc,xcd->...xd", pis, cells_j.loss)
            recs = PD.RoundRecord(b, mean, lb, sampled, pv)
            return kernel.round_estimate(design, g, cells_j, recs, t, lnow, pi_now, cr, pi_check,
                                         fractional=measures[j].fractional)

        return jax.jit(est)

    return PoissonCore(design=pd_design, model=pd_design.model, support=sup, n_support=n_sup,
                       open=jax.jit(open_round), close=jax.jit(close_round),
                       estimate_fns=tuple(make_est(j) for j in range(len(measures))))


#: the with-replacement designs whose proposal is zero where the first measure's loss is zero at
#: every label (001 Prop. 2 and its floors; static IS's ε floor; OASIS's); passive and stratified
#: sampling reach every item, and AIS with a share δ of p(x) too
_FIRST_MEASURE_SUPPORT = ("ais", "is", "oasis")


def _supports(core: SessionCore) -> list[np.ndarray]:
    """Per measure, (X,) the cells where its loss is non-zero at some label: the support an
    importance-sampling estimate needs covered (the Poisson designs' HT support mask)."""
    from .poisson_designs import support_mask

    return [np.asarray(support_mask(t, "ht")) for t in core.loss_tables]


def unreached_measures(core: SessionCore, measures, cfg) -> list[tuple[str, int]]:
    """The session's further measures (name, items) that count items its design never draws.

    001 §3.3.1: the labels of an importance-sampling design serve another measure only where
    the proposal covers that measure's support.  AIS (and static IS, OASIS) draw nothing where
    the first measure -- the one the design targets -- has a zero loss at every label: for
    precision, the predicted negatives.  Recall counts exactly those items (a positive among
    them is a false negative), so in a session of ``precision, recall`` the draws never met a
    predicted negative and recall read 1.0000 with a passing CLT check where it was 0.83 (stop
    82's new-user walk).  The Poisson designs refuse such measures in :func:`build_poisson`."""
    d = cfg["design"]
    if d["name"] not in _FIRST_MEASURE_SUPPORT or (d["name"] == "ais" and float(d.get("delta", 0.0)) > 0.0):
        return []
    sup = _supports(core)
    out = []
    for m, need in zip(measures[1:], sup[1:]):
        need = need & ~sup[0]
        if need.any():
            out.append((m.name, int(np.asarray(core.size)[need].sum())))
    return out


def unreached_message(unreached, core: SessionCore, measures, cfg) -> str:
    """Why such measures are refused at creation, and the ways out (:func:`unreached_measures`):
    a listed measure whose support holds every other's put first, else a share of p(x) (AIS)."""
    sup = _supports(core)
    every = np.any(sup, axis=0)
    cover = [m.name for m, s in zip(measures, sup) if np.all(s | ~every)]
    names = ", ".join(f"{n!r} ({k:,} items)" for n, k in unreached)
    ways = ([f"list {cover[0]!r} first (the design targets the first measure; its draws reach every item the others count)"]
            if cover else ["list first a measure that counts every item the others do (for precision and recall: f1)"])
    if cfg["design"]["name"] == "ais":
        ways.append("mix a share of p(x) into every proposal (--delta 0.05; Python delta=0.05)")
    ways.append("or evaluate them in separate sessions")
    return (f"measure(s) {names} count items that the {cfg['design']['name']} design for {measures[0].name!r} "
            f"never draws (its loss is zero there whatever their label): their estimates would be biased, "
            f"not estimates (001 §3.3.1; e.g. recall counts the predicted negatives, which a design for precision "
            f"never draws): "
            + "; ".join(ways))


def pool_fingerprint(pool) -> str:
    """``pool.fingerprint()``, computed once per Pool object (kept on the pool)."""
    return pool.derived("fingerprint", None, pool.fingerprint, size=1)


def derived_probs(pool) -> bool:
    """Whether a binary in-memory pool's probabilities equal the ones derived from its scores
    (recomputed: the portable fingerprint's scheme 1 of stop 65, kept to open its files)."""
    from .scores import prior_probability

    if getattr(pool, "partitioned", False) or pool.n_classes != 2 or pool.probs is None:
        return False
    derived = prior_probability(np.asarray(pool.scores), np.asarray(pool.preds), pool.score_kind)
    return bool(np.allclose(np.asarray(pool.probs)[..., 1], derived, rtol=1e-12, atol=0.0))


def portable_fingerprint(pool, version: int = PORTABLE_VERSION) -> str:
    """SHA-256 of what the pool was given, its derived probabilities left out
    (:mod:`bayes_eval.fingerprints`; their last bits differ between CPUs, and a session file of
    the demo pool written on one machine refused to open on another: stop 65), kept on the pool.
    ``version=1``: stop 65's scheme (binary in-memory pools only; partitioned pools gave their
    full fingerprint, pools of several classes hashed their derived probabilities)."""
    if version == PORTABLE_VERSION:
        return pool.derived("portable_fingerprint", None, lambda: pool_portable(pool), size=1)
    import hashlib

    if getattr(pool, "partitioned", False):
        return pool_fingerprint(pool)
    h = hashlib.sha256(b"portable-1")
    for a in (pool.preds, pool.scores, pool.weights):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(b"derived-probs" if derived_probs(pool) else np.ascontiguousarray(pool.probs).tobytes())
    ids = np.asarray(pool.ids)      # as stop 65 hashed them (no "int-ids" tag: not fingerprints.hash_ids)
    h.update(np.ascontiguousarray(ids.astype(np.int64)).tobytes() if ids.dtype.kind in "iu"
             else pd.util.hash_array(np.asarray(ids, dtype=object)).tobytes())
    h.update(f"{pool.n_classes}:{pool.score_kind}".encode())
    return h.hexdigest()


def same_pool(pool, meta, info, path) -> bool:
    """Whether a session file's pool is ``pool``: by the portable fingerprint where the file has
    one (scheme ``portable_version``, 1 when absent: stop 65's files); else, or where a scheme-1
    fingerprint of a pool it did not cover (several classes, partitions) differs, by the full one, and where that differs only because the pool's derived
    probabilities hash differently on this CPU (the recorded name and size, probabilities derived
    from the scores) the pool is taken as the same one with a :class:`~bayes_eval.pool.PoolWarning`."""
    import warnings

    from .pool import PoolWarning

    version = int(meta.get("portable_version", 1))
    if meta.get("portable_fingerprint") is not None:
        if portable_fingerprint(pool, version) == meta["portable_fingerprint"]:
            return True
        if version == PORTABLE_VERSION or (pool.n_classes == 2 and not getattr(pool, "partitioned", False)):
            return False            # (scheme 1 left a binary in-memory pool's derived probabilities out too)
    if pool_fingerprint(pool) == meta["fingerprint"]:
        return True
    if info.get("name") == pool.name and int(info.get("n_items", -1)) == int(pool.n_items) and pool.probs_derived:
        warnings.warn(f"{path}: the pool's fingerprint differs from the session's, but the pool has the recorded name and "
                      "size and its probabilities are derived from its scores, whose last bits differ between CPUs (a "
                      "session file written before stop 66 hashed them): opened as the same pool -- check it is",
                      PoolWarning, stacklevel=3)
        return True
    return False


def core_for(pool, measures, cfg, progress) -> SessionCore:
    """The core of configuration ``cfg`` on ``pool``: built once, then kept on the pool
    (its :data:`CORE_CACHE_SIZE` most recently used cores; custom measures by identity)."""
    core_cfg = {k: cfg.get(k) for k in ("measures", "design", "oracle", "n_strata", "n_fine", "strata_method", "system",
                                        "keep_empty", "class_bins")}
    key = (json.dumps(core_cfg, sort_keys=True),
           tuple(id(m) for m, s in zip(measures, cfg["measures"]) if s.get("custom")))
    return pool.derived(_CORE_KIND, key, lambda: build_core(pool, measures, cfg, progress), size=CORE_CACHE_SIZE)


def clear_cache(pool) -> None:
    """Forget the strata, cells and compiled designs kept on ``pool`` (the next session
    opened on it builds its core from scratch)."""
    pool.forget_derived(_CORE_KIND)


def item_rows(core: SessionCore, ids, items, where) -> np.ndarray:
    """Pool rows of the item ids ``items`` given by a user or a file (ints, strings, floats);
    ``ids`` the pool's ids, ``where`` names each item's place (e.g. a file's row) for
    :class:`~bayes_eval.errors.UnknownItemError`."""
    ids = ids if getattr(ids, "lazy", False) else np.asarray(ids)  # a partitioned pool's ids stay on the workers
    n = ids.size
    rows = np.empty(len(items), np.int64)
    if ids.dtype.kind in "iu":
        vals = np.empty(len(items), np.int64)
        for i, v in enumerate(items):
            v = v.item() if isinstance(v, np.generic) else v
            if isinstance(v, bool):
                ok = False
            elif isinstance(v, int):
                ok = True
            elif isinstance(v, float):
                ok = math.isfinite(v) and v == int(v)
                v = int(v) if ok else v
            elif isinstance(v, str) and _INT_RE.match(v.strip()):
                ok, v = True, int(float(v.strip()))
            else:
                ok = False
            if not ok:
                raise UnknownItemError(f"{where[i]}: unknown item id {items[i]!r} (the pool's ids are integers)")
            vals[i] = v
        if core.id_index is None:
            bad = np.flatnonzero((vals < 0) | (vals >= n))
            rows[:] = vals
        else:
            rows[:] = core.id_index.get_indexer(vals)
            bad = np.flatnonzero(rows < 0)
    else:
        keys = [str(v.item() if isinstance(v, np.generic) else v).strip() if not isinstance(v, str) else v.strip()
                for v in items]
        rows[:] = core.id_index.get_indexer(keys)
        bad = np.flatnonzero(rows < 0)
    if bad.size:
        i = int(bad[0])
        raise UnknownItemError(f"{where[i]}: unknown item id {items[i]!r} (not in the pool)"
                               + zero_padded_hint(items[i], ids))
    return rows


def ids_at(pool, rows) -> np.ndarray:
    """The ids of pool ``rows`` (a partitioned pool fetches them from its workers)."""
    rows = np.asarray(rows, np.int64)
    if getattr(pool.ids, "lazy", False):
        return pool.ids[rows]
    ids = np.asarray(pool.ids)
    return ids[rows] if rows.size else ids[:0]


# ------------------------------------------------------------------------------ the posterior
def _posterior_choice(config: dict) -> tuple[str, bool]:
    """The session's posterior-model choice and whether it is the calibrated model on cell
    units (the default; with several classes its top-class split, ``models/calibrated_classes.py``)."""
    choice = config.get("posterior_model") or "calibrated"
    return choice, choice == "calibrated"


def _calibrated_on(cells, n_strata: int):
    """(units, model): the calibrated model on ``cells``' posterior units."""
    from .cells import posterior_units
    from .models.registry import make_oracle_model
    from .posterior import units_for_model

    units = posterior_units(cells, n_strata, units_for_model("calibrated"))
    return units, make_oracle_model("calibrated", units.probs)


def posterior_model(core: SessionCore, config: dict):
    """The oracle model behind a session's Bayesian interval (see
    :meth:`bayes_eval.session.Session.posterior_model`), built once per core and choice.

    Every design has one, whether or not it carries a model of its own: the finite-pool
    posterior conditions on the labeled counts per cell, and a design that chooses items
    from the scores and the earlier labels leaves the selection ignorable (001 §4.2) --
    passive, stratified, static IS and OASIS as much as AIS.  (Until stop 73 only the designs
    with a model offered it, and a stratified session on dblp-acm led with a CLT interval
    that held the truth in 0-4% of 200 simulated runs at 500-2000 labels, against 0.95-1.00
    for this posterior: ``benchmarks/results/baseline_designs_bayes.md``.)  ``"design"`` on a
    design without a model: the model AIS would use (``model``, default the Dirichlet tree)."""
    design = core.design
    choice, calibrated = _posterior_choice(config)
    if ("posterior_model", choice) in core.jitted:
        return core.jitted[("posterior_model", choice)]
    from .cells import leaf_probs, posterior_units
    from .models.registry import make_oracle_model

    from .designs import resolve_oracle_model

    dkw = config["design"]
    design_model = resolve_oracle_model(dkw.get("model", "auto"), core.cells, core.n_strata)
    model = None
    lp = leaf_probs(core.cells, core.n_strata)
    units = posterior_units(core.cells, core.n_strata, "stratum")
    if calibrated:
        units, model = _calibrated_on(core.cells, core.n_strata)
    if model is None:
        if choice in ("design", "calibrated", dkw.get("model"), design_model):
            model = design.model
            if model is None:  # a design without a model: the one the adaptive designs would use
                model = make_oracle_model(design_model, lp, depth=dkw.get("depth", 8),
                                          branching=dkw.get("branching"), strength=dkw.get("strength", 1.0),
                                          em_iters=dkw.get("em_iters", 10))
        else:
            model = make_oracle_model(choice, lp, depth=dkw.get("depth", 8), branching=dkw.get("branching"))
    core.jitted[("posterior_model", choice)] = model
    core.jitted[("posterior_units", choice)] = units
    return model


def posterior_sampler(core: SessionCore, model, measures, choice: str, n_draws: int,
                      observations: bool = False) -> Callable:
    """``(key, labeled) -> ((n_draws, m), (2, m), ())``: draws of every measure's components on the
    pool (:func:`~bayes_eval.posterior.finite_pool_posterior` with ``model`` fitted to the
    labeled counts; one key for every measure) and each component's range one unlabeled
    item's class away from the median completion (:attr:`~bayes_eval.posterior.PosteriorDraws.one_item`,
    for :func:`~bayes_eval.posterior.resolved_interval`) and the importance ESS behind the draws
    (:attr:`~bayes_eval.posterior.PosteriorDraws.sampler_ess`); jit-compiled once per core, choice
    and ``n_draws``.  ``observations``: a stochastic oracle's tallies of label observations
    (:func:`~bayes_eval.posterior.complete_pool_draws`; the one-item range NaN)."""
    from .cells import posterior_units

    fkey = ("posterior", choice, int(n_draws), bool(observations))
    fn = core.jitted.get(fkey)
    if fn is None:
        units = core.jitted.get(("posterior_units", choice)) or posterior_units(core.cells, core.n_strata, "stratum")
        fn = _pool_posterior_program(model, units, core.loss_tables, [m.g for m in measures], n_draws, observations)
        core.jitted[fkey] = fn
    return fn


def resolved_program(core: SessionCore, level: float, widen: bool) -> Callable:
    """``(draws (n, m), labeled (X, C), one_item (2, m)) -> (lower, upper, widened)``, each (m,):
    the ``level`` interval of every component (:func:`~bayes_eval.posterior.bayesian_interval`:
    highest-density on binary pools, equal-tailed with several classes), widened where an unlabeled item can
    still change the measure and the interval is narrower than one item's class
    (:func:`~bayes_eval.posterior.widen_to_resolution`, each measure with its own loss) -- the
    simulation's :func:`~bayes_eval.posterior.resolved_interval` on a session's draws.  One
    jit-compiled program per core, level and ``widen`` (False before any stage closed: the
    interval as it is): run eagerly its twenty-odd array operations were as many programs to
    trace and load, ~1.7 s of every ``session status`` with the Bayesian interval."""
    from .posterior import bayesian_interval, unlabeled_items_matter, widen_to_resolution

    fkey = ("resolved", float(level), bool(widen))
    fn = core.jitted.get(fkey)
    if fn is None:
        sizes = [int(np.shape(t)[-1]) for t in core.loss_tables]  # components per measure
        n_classes = int(np.shape(core.cells.loss)[1])

        def resolved(draws, labeled, one_item):
            lo, hi = bayesian_interval(draws, level, n_classes)
            if not widen:
                return lo, hi, jnp.zeros(lo.shape, bool)
            out, c = [], 0
            for loss, d in zip(core.loss_tables, sizes):
                matter = unlabeled_items_matter(core.cells._replace(loss=loss), labeled)
                out.append(widen_to_resolution(lo[c:c + d], hi[c:c + d], one_item[:, c:c + d], matter))
                c += d
            return tuple(jnp.concatenate([o[k] for o in out]) for k in range(3))

        fn = core.jitted[fkey] = jax.jit(resolved)
    return fn


def _pool_posterior_program(model, units, loss_tables, gs, n_draws: int, observations: bool = False) -> Callable:
    """The compiled program of :func:`posterior_sampler` and :func:`measure_posterior`:
    ``(key, labeled) -> ((n_draws, m), (2, m), ())``, the last the sampler's importance ESS
    (:attr:`~bayes_eval.posterior.PosteriorDraws.sampler_ess`), ``model`` fitted to the labels per unit, then
    :func:`~bayes_eval.posterior.finite_pool_posterior` of each ``g`` on the unit cells with
    its loss table (one key for all).  One builder for both, so that the same measure on the
    same cells is the same program (the persistent compilation cache serves the second)."""
    from .cells import leaf_counts
    from .posterior import finite_pool_posterior

    ucells, n_units = units.cells, units.n_units
    loss_tables, gs = tuple(loss_tables), tuple(gs)

    # the cells and loss tables are arguments of the compiled program, not closure constants: XLA
    # constant-folds operations on captured tables (posterior.intervals_at_checkpoints, stop 79)
    def all_measures(rkey, labeled, ucells, loss_tables):
        state = model.fit(model.init_state(), *leaf_counts(ucells, labeled, n_units, observations))
        out, one = [], []
        for loss, g in zip(loss_tables, gs):
            post = finite_pool_posterior(rkey, model, ucells._replace(loss=loss), labeled, n_units, g,
                                         n_draws=int(n_draws), state=state, observations=observations)
            out.append(post.value)
            one.append(jnp.full((2, post.value.shape[1]), jnp.nan) if post.one_item is None else post.one_item)
        # one key and one fit: every measure's parameter draws are the same, and so is their ESS
        return jnp.concatenate(out, axis=1), jnp.concatenate(one, axis=1), post.sampler_ess

    # run at every status and, for the Bayesian stopping rule, at every stage: compiled to run
    # (at least XLA's level 1 where the process compiles at 0, :func:`bayes_eval._config.jit_run_often`)
    program = jit_run_often(all_measures)
    return lambda rkey, labeled: program(rkey, labeled, ucells, loss_tables)


class MeasurePosterior(NamedTuple):
    """The finite-pool posterior of a measure a session was not created with (the report's PR
    curve): ``sample(key, labeled) -> (n_draws, m)`` draws of its components, ``labeled`` the
    labels per (cell, class) of the measure's own cells, whose items' cells are ``item_cell``."""

    sample: Callable
    item_cell: np.ndarray
    n_cells: int


def measure_cells(core: SessionCore, pool, measures, config: dict, measure):
    """(cells, item_cell) of a measure the session was not created with: the session's strata
    split by the measure's loss patterns and by the session's measures' ones, so each of its
    cells lies inside one of the session's cells (cached per core and measure)."""
    from .cells import build_cells, combine_keys, item_patterns
    from .measures import Features

    key = ("measure_cells", measure.name, tuple(measure.names))
    if key not in core.jitted:
        feats = Features(preds=pool.preds, scores=pool.scores, probs=pool.probs)
        extra = combine_keys([item_patterns(m, feats) for m in measures])[0]
        core.jitted[key] = build_cells(pool, core.strata, measure, extra_key=extra, system=config.get("system", 0))
    return core.jitted[key]


def measure_posterior(core: SessionCore, pool, measures, config: dict, measure,
                      n_draws: int, observations: bool = False) -> MeasurePosterior | None:
    """The posterior of ``measure`` on the pool given a session's labels, by the recipe of the
    session's own Bayesian interval (:func:`posterior_sampler`; the simulation's too): the
    session's posterior model (:func:`posterior_model`) fitted to the labels and every
    unlabeled item's class drawn from it (:func:`~bayes_eval.posterior.finite_pool_posterior`,
    001 §4).  The completions are counted on the measure's own cells -- the session's strata
    split by the measure's loss patterns and by the session's measures' ones (so a PR curve's
    thresholds and the session's predicted classes both separate units: the calibrated model's
    units are those cells, ``cells.posterior_units``) -- so G of the measure is exact on each
    completed pool.  None for a partitioned pool, whose items stay on the workers.  Compiled
    once per core, measure and ``n_draws``.  ``observations``: a stochastic oracle's label
    observations (:func:`posterior_sampler`)."""
    from .cells import posterior_units

    if getattr(pool, "partitioned", False):
        return None
    choice, calibrated = _posterior_choice(config)
    key = ("measure_posterior", choice, measure.name, tuple(measure.names), int(n_draws), bool(observations))
    if key in core.jitted:
        return core.jitted[key]
    cells, item_cell = measure_cells(core, pool, measures, config, measure)
    if calibrated:
        units, model = _calibrated_on(cells, core.n_strata)
    else:
        # the design's (or the named) model over the strata: the session's strata, so the
        # session's model serves as it is
        units = posterior_units(cells, core.n_strata, "stratum")
        model = posterior_model(core, config)
    program = _pool_posterior_program(model, units, (cells.loss,), (measure.g,), n_draws, observations)

    def sample(rkey, labeled):
        return program(rkey, labeled)[0]

    out = MeasurePosterior(sample, np.asarray(item_cell), int(cells.n_cells))
    core.jitted[key] = out
    return out
