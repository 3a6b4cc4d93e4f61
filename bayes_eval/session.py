"""Labeling sessions: the stateful shell around the pure core (DESIGN.md §3).

A :class:`Session` is opened on a pool, one or several measures and a design.  It hands
out batches of items to label, takes the labels back, and keeps the estimate, its CLT
interval (001 §3.3.2) and — where the design carries an oracle model — a Bayesian
interval up to date.  Everything it knows lives in one SQLite file
(:mod:`bayes_eval.store`); :meth:`Session.open` rebuilds the exact state from it.

The math is the simulation's (:mod:`bayes_eval.simulate`), run at item level:

* **Stages** (001 Alg. 1; DESIGN.md §3, "Oracle semantics").  ``next_batch(n)`` draws
  with replacement from the fixed per-item proposal q_{t-1} (``Proposal.unl`` for an
  item without a label, ``Proposal.lab[x, y]`` for a labeled item of class y) until
  ``n`` *new* items are drawn — the items that still need a label.  Under a
  deterministic oracle, draws of items already labeled are answered from the store and
  recorded as draws without asking anyone.  Under a stochastic oracle every draw asks
  for a label, and an item may be labeled several times.
* **Draw mechanics** (DESIGN.md §5).  Draw a group (cell × labeled-or-not × class) with
  probability ∝ its mass, then an item uniformly inside it.  The generator of stage t is
  ``numpy.random.Generator(PCG64(SeedSequence([seed, t])))`` and the items of a group
  are found in an order that depends only on *which* items are labeled, so a batch is a
  pure function of (seed, stage, labels so far): after a crash the next batch is the
  one that would have come.
* **Update** (``simulate._run_one``).  When the last label of a stage arrives: R̂ from
  the importance-weighted estimator with q_N = the proposal just used,
  ``obs = Observed(labeled, R̂, n_draws)``, ``state = design.update(state, cells, obs)``,
  ``proposal = design.propose(state, cells, obs)`` — in one jit-compiled step.
* **Estimator** (001 eq. 1 and §3.3.2).  R̂ = (1/n) Σ_j w_j ℓ(x_j, y_j) over every draw,
  repeats included, w_j = p(x_j)/q_{j-1}(x_j), and the delta-method covariance with
  q_N the most recent proposal; the stratified design uses the post-stratified
  estimator (001 §5).  Because the loss and both proposals are constant on a cell, the
  draw-level sums are accumulated per (cell, class) and passed to the simulation's own
  ``_estimate`` (identical math; :meth:`Session.estimate_draws` computes the same from
  the raw draws with :func:`~bayes_eval.estimators.is_estimate_draws`, for checking).
* **Several measures** (001 §3.3.1, sample reuse).  The labels serve every measure; the
  design targets the first.  Cells are split by every measure's loss pattern, so each
  measure's loss is constant on a cell.  The proposal must keep every item with a
  non-zero loss of *every* measure in its support — true of passive, stratified and
  OASIS, and of AIS/IS for items not yet labeled; mix in ``delta`` of p(x) (001 §3.3.1)
  when the secondary measures weigh labeled items the target measure ignores.

OASIS proposes for one label per stage (``Design.stage_size = 1``); in a session a batch
of n uses one OASIS proposal, so it matches the simulation when ``n = 1``.

Poisson designs (``poisson``, ``poisson-adaptive``; :mod:`bayes_eval.poisson_designs`)
---------------------------------------------------------------------------------------
* **Rounds = stages.**  ``next_batch(n)`` opens round r with budget n.  Its inclusion
  probabilities per cell come from the simulation's own pure functions, compiled once per
  core (:class:`_PoissonCore`): ``poisson-adaptive`` —
  :func:`~bayes_eval.poisson_designs.round_proposal` fed by
  :func:`~bayes_eval.poisson_designs.model_predictive` of the oracle model
  (:func:`~bayes_eval.poisson_designs.build_model`), refitted with ``om.fit`` to all labels
  after every round, as ``_run_rounds``; ``poisson`` (static, 000 Alg. 2) —
  :func:`~bayes_eval.poisson_designs.static_proposal` at the cumulative budget, nested:
  round r draws the increment ``(b_r - b_{r-1}) / (1 - b_{r-1})`` among the unlabeled
  items.  The adaptive round is *complete* (``b = 1`` on every unlabeled item that can
  matter, so the estimate becomes exact) when the budgets so far reach the number of such
  items, the rule of ``simulate_poisson`` — and also when none is left (a random-size run
  may label them all early; the session then closes with an exact estimate).
* **Items** are distinct and never re-drawn; only the deterministic oracle is allowed.
  :func:`poisson_pick` selects at item level with one uniform per pool row from
  ``Generator(PCG64(SeedSequence([seed, r])))``: Poisson (``u < b``, random size, mean n)
  or, by default for ``poisson-adaptive``, Pareto order sampling with target
  probabilities ``b`` (exactly n items; ``fixed_size="sequential"``: Ohlsson's
  sequential Poisson sampling).  Fixed-size rounds are approximately unbiased (the
  estimator uses ``b`` as if the round were Poisson, as the simulation's
  ``fixed_size``); ``fixed_size=None`` gives exactly unbiased random-size rounds.  A
  round is a pure function of (seed, r, labels so far); a round that draws nothing is
  recorded closed and the next one drawn.
* **Estimator.**  Each closed round keeps the cell-level
  :class:`~bayes_eval.poisson_designs.RoundRecord` (``b``, ``mean``, ``labeled_before``,
  ``sampled`` by class, ``pred_var``); the estimate and CLT interval after round t are
  :func:`~bayes_eval.poisson_designs.combine` over the records with the design's
  weights, variance and complete round, as ``_estimates`` (static: the single Poisson
  sample with ``b_t``).  Secondary measures reuse the records (their support must lie in
  the first measure's).  The Bayesian interval is the same finite-pool posterior as for
  the other designs (it needs only the labeled counts per cell).
* **Persistence.**  A round is a stage; its items are draws with ``q = b`` and
  ``weight = p/b``.  Replay recomputes every round's ``b`` from the stored labels with
  the same compiled functions (bit for bit) and refuses a file whose stored ``q`` differ.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
import weakref
from collections import OrderedDict
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from . import _config  # noqa: F401  (float64)
from . import annotate
from .store import (
    EmptyInputError,
    InvalidLabelError,
    LabelConflictError,
    MalformedInputError,
    NotDrawnError,
    PoolMismatchError,
    SessionError,
    StaleSessionError,
    Store,
    UnknownItemError,
)

__all__ = [
    "Session",
    "SessionError",
    "PoolMismatchError",
    "UnknownItemError",
    "NotDrawnError",
    "InvalidLabelError",
    "LabelConflictError",
    "EmptyInputError",
    "MalformedInputError",
    "StaleSessionError",
    "IngestResult",
    "StageSnapshot",
    "make_design",
    "draw_stage",
    "clear_cache",
    "SESSION_DESIGNS",
    "POISSON_DESIGNS",
    "POISSON_OPTIONS",
    "ORACLES",
    "poisson_pick",
]

SESSION_DESIGNS = ("passive", "stratified", "is", "oasis", "ais", "poisson", "poisson-adaptive")
POISSON_DESIGNS = ("poisson", "poisson-adaptive")
POISSON_SIZES = ("pareto", "sequential", None)
#: settings of the Poisson designs a session takes in ``poisson_options`` (as
#: :func:`bayes_eval.poisson_designs.run_poisson_simulation` names them)
POISSON_OPTIONS = ("estimator", "form", "weights", "variance", "poisson_eps", "defensive", "defensive_form",
                   "em_iters")
ORACLES = ("deterministic", "stochastic")
_CHUNK = 64
_MAX_EMPTY_ROUNDS = 1000  # Poisson: rounds that drew nothing, recorded in one next_batch call at most
_MAX_DRAWS = 4096 * _CHUNK  # as simulate_runs' max_chunks
_RESERVED = ("item", "label", "draw", "stage", "q", "weight")
_INT_RE = re.compile(r"^[+-]?\d+(\.0*)?$")


def _py(v):
    return v.item() if isinstance(v, np.generic) else v


# ------------------------------------------------------------------------------ designs
#: stands in for the oracle model when a Poisson design's settings are only validated
_PLACEHOLDER_MODEL = object()


def make_design(name: str, measure, cells, n_strata: int, *, oracle: str = "deterministic",
                model: str = "dirichlet-tree", depth: int = 8, branching: int | None = None,
                eps: float = 1e-3, lam: float = 0.9, delta: float = 0.0, plugin: str = "model",
                strength: float = 1.0, fixed_size: str | None = None, estimator: str | None = None,
                form: str | None = None, weights: str = "quadratic", variance: str | None = None,
                poisson_eps: float = 1e-3, defensive: float | None = None, defensive_form: str = "linear",
                em_iters: int = 10, companion: str | None = None):
    """Build a design by name, as :func:`bayes_eval.simulate.run_simulation` does.

    Returns ``(design, n_strata)``; the design's ``oracle`` is set to ``oracle`` (it
    selects q_N in the estimator, as in ``simulate._estimate``).  ``is`` and ``poisson``
    expect cells split by the classifier's prior (``simulate.prior_key``).

    ``poisson`` / ``poisson-adaptive`` return a
    :class:`~bayes_eval.poisson_designs.PoissonDesign` built as
    :func:`~bayes_eval.poisson_designs.run_poisson_simulation` builds it (the oracle
    model by :func:`~bayes_eval.poisson_designs.build_model`; ``fixed_size``,
    ``estimator``, ``form``, ``weights``, ``variance``, ``poisson_eps``, ``defensive``,
    ``defensive_form``, ``em_iters`` as there); deterministic oracle only.

    ``companion``: the companion model of ``ais`` / ``poisson-adaptive`` (``"calibrated"``
    or None; :func:`bayes_eval.designs.sweep_share`).  None here, so that session files
    written before companions existed replay unchanged; :meth:`Session.create` resolves
    ``"auto"`` and records it.
    """
    from . import designs as D

    if oracle not in ORACLES:
        raise SessionError(f"oracle must be one of {ORACLES}, got {oracle!r}")
    if name in POISSON_DESIGNS:
        if oracle != "deterministic":
            raise SessionError(f"design {name!r} labels distinct items with inclusion probabilities: it needs the "
                               f"deterministic oracle (one true label per item), not {oracle!r}")
        from .poisson_designs import build_model, poisson_design

        om = cm = None
        try:
            if cells is not None and (name == "poisson-adaptive" or variance == "model"):
                om = build_model(model, cells, n_strata, depth=depth, branching=branching, strength=strength,
                                 em_iters=em_iters)
            if companion is not None:
                if cells is not None:
                    from .ais import companion_model

                    cm = companion_model(companion, cells, n_strata)
                else:
                    cm = _PLACEHOLDER_MODEL
            design = poisson_design(name, estimator=estimator, form=form, weights=weights, variance=variance,
                                    eps=poisson_eps, lam=lam, fixed_size=fixed_size,
                                    model=om if cells is not None else _PLACEHOLDER_MODEL, n_strata=n_strata,
                                    defensive=defensive, defensive_form=defensive_form, companion=cm)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, SessionError):
                raise
            raise SessionError(f"design {name!r}: {exc}") from None
        return design, n_strata
    if name == "passive":
        design = D.passive()
    elif name == "stratified":
        design = D.stratified()
    elif name == "is":
        design = D.static_is(measure.g, lam=lam, eps=eps, oracle=oracle)
    elif name == "oasis":
        design = D.oasis(measure.g, n_strata, eps=eps)
    elif name == "ais":
        from .ais import ais_design

        design, n_strata = ais_design(measure.g, cells, n_strata, model=model, depth=depth, branching=branching,
                                      strength=strength, eps0=eps, delta=delta, oracle=oracle, plugin=plugin,
                                      companion=companion)
    else:
        raise SessionError(f"unknown design {name!r}; choose one of {', '.join(SESSION_DESIGNS)}")
    return design._replace(oracle=oracle), n_strata


# ------------------------------------------------------------------------------ drawing
class DrawResult(NamedTuple):
    rows: np.ndarray  # (k,) pool rows drawn, in draw order
    cells: np.ndarray  # (k,) their cells
    new: np.ndarray  # (k,) bool: asks for a label
    q: np.ndarray  # (k,) per-item proposal probability at draw time
    gpos: np.ndarray  # (k,) position of the row in ``order`` (valid for new draws)
    stalled: bool


def draw_stage(rng: np.random.Generator, unl_q, lab_q, size, order, cell_start, n: int, stochastic: bool,
               lab_cells=None, lab_classes=None, lab_rows=None, lab_gpos=None,
               max_draws: int = _MAX_DRAWS) -> DrawResult:
    """Draw one stage at item level, as ``simulate._draw_stage`` does on cells.

    I.i.d. draws from the fixed per-item proposal until ``n`` new items (deterministic
    oracle: items not labeled and not yet drawn in this stage) or ``n`` draws
    (stochastic oracle).  A group — (cell, class) of the labeled items or the cell's
    unlabeled items — is drawn with probability ∝ count × per-item q, then an item
    uniformly inside it.  The k-th unlabeled item of a cell is located from the sorted
    positions of the labeled items alone, so the result does not depend on the order in
    which labels arrived.  Stops early (``stalled``) when the unlabeled mass left is
    ≤ 1e-12 of the total or after ``max_draws`` draws.

    Parameters
    ----------
    rng : numpy Generator
    unl_q : (X,) per-item proposal of an unlabeled item; lab_q : (X, C) of a labeled one.
    size : (X,) items per cell; order : (N,) rows sorted by (cell, row);
    cell_start : (X+1,) offsets of each cell in ``order``.
    lab_cells, lab_classes, lab_rows, lab_gpos : (L,) the labeled items (deterministic
        oracle): cell, class, row, and position in ``order``.
    """
    unl_q = np.asarray(unl_q, dtype=np.float64)
    lab_q = np.asarray(lab_q, dtype=np.float64)
    x, c = lab_q.shape
    size = np.asarray(size, dtype=np.int64)
    if stochastic:
        cnt_a = np.zeros(x * c, dtype=np.int64)
        cnt_b = size
    else:
        cnt_a = np.bincount(lab_cells * c + lab_classes, minlength=x * c).astype(np.int64)
        cnt_b = size - cnt_a.reshape(x, c).sum(1)
    mass = np.concatenate([cnt_a * lab_q.ravel(), cnt_b * unl_q])
    cdf = np.cumsum(mass)
    total = cdf[-1]
    empty = np.zeros(0, np.int64)
    if not total > 0 or not np.isfinite(total):
        return DrawResult(empty, empty, np.zeros(0, bool), np.zeros(0), empty, True)
    last = int(np.flatnonzero(mass > 0)[-1])
    g = x * c
    if not stochastic:
        key = lab_cells * c + lab_classes
        o = np.lexsort((lab_rows, key))
        a_rows = np.asarray(lab_rows)[o]
        a_off = np.concatenate([[0], np.cumsum(cnt_a)])
        s = np.sort(np.asarray(lab_gpos, dtype=np.int64))
        s_adj = s - np.arange(s.size)
        before = cell_start[:-1] - np.searchsorted(s, cell_start[:-1])  # unlabeled items before each cell
    rows, cells, new, qs, gpos = [], [], [], [], []
    seen = set()
    got = 0
    drawn = 0
    rem = float(np.sum(cnt_b * unl_q))
    while got < n and drawn < max_draws and (stochastic or rem > 1e-12 * total):
        u = rng.random(_CHUNK) * total
        v = rng.random(_CHUNK)
        grp = np.minimum(np.searchsorted(cdf, u, side="right"), last)
        is_b = grp >= g
        cell = np.where(is_b, grp - g, grp // c)
        cnt = np.where(is_b, cnt_b[np.where(is_b, grp - g, 0)], cnt_a[np.where(is_b, 0, grp)])
        k = np.minimum((v * cnt).astype(np.int64), np.maximum(cnt - 1, 0))
        if stochastic:
            pos = cell_start[cell] + k
            row = order[pos]
        else:
            m = before[cell] + k
            pos = m + np.searchsorted(s_adj, m, side="right")
            row = np.where(is_b, order[np.minimum(pos, order.size - 1)],
                           a_rows[np.minimum(a_off[np.where(is_b, 0, grp)] + k, max(a_rows.size - 1, 0))]
                           if a_rows.size else 0)
        q = np.where(is_b, unl_q[cell], lab_q.ravel()[np.where(is_b, 0, grp)])
        for i in range(_CHUNK):
            if got >= n or drawn >= max_draws:
                break
            r = int(row[i])
            is_new = bool(is_b[i]) and (stochastic or r not in seen)
            if is_new:
                got += 1
                if not stochastic:
                    seen.add(r)
                    rem -= float(unl_q[cell[i]])
            rows.append(r)
            cells.append(int(cell[i]))
            new.append(is_new)
            qs.append(float(q[i]))
            gpos.append(int(pos[i]) if is_b[i] else -1)
            drawn += 1
    return DrawResult(np.asarray(rows, np.int64), np.asarray(cells, np.int64), np.asarray(new, bool),
                      np.asarray(qs, np.float64), np.asarray(gpos, np.int64), got < n)


_PICK_CHUNK = 1 << 20


def poisson_pick(rng: np.random.Generator, item_cell, labeled_mask, b_cell, n: int,
                 method: str | None = None) -> np.ndarray:
    """Select one Poisson round at item level (000 §3; fixed size: Pareto / sequential
    Poisson sampling, as :func:`bayes_eval.poisson_designs.fixed_size_round_counts` on cells).

    Every pool row ``i`` gets one uniform ``u_i`` — the ``i``-th of ``rng.random``, drawn in
    row order in chunks whatever is labeled — so the round is a pure function of the
    generator, the labeled rows and ``b``.  Candidates are the unlabeled rows whose cell
    has ``b > 0``; rows with ``b = 1`` are always taken.

    * ``method=None``: Poisson (Bernoulli) sampling, row ``i`` taken iff ``u_i < b_i``; the
      size is random with mean ``sum b``.
    * ``"pareto"`` (Rosén): the ``n - n_sure`` candidates of smallest
      ``[u/(1-u)] / [b/(1-b)]``; ``"sequential"`` (Ohlsson): smallest ``u / b``.  Exactly
      ``n`` rows unless fewer candidates exist (all are taken) or more rows have ``b = 1``.

    Returns the rows, the ``b = 1`` rows first (in row order), then by rank (Poisson:
    by ``u / b``).
    """
    item_cell = np.asarray(item_cell)
    b_cell = np.clip(np.asarray(b_cell, np.float64), 0.0, 1.0)
    n = int(n)
    total = item_cell.size
    sure_rows, rows, keys = [], [], []
    for lo in range(0, total, _PICK_CHUNK):
        hi = min(total, lo + _PICK_CHUNK)
        u = rng.random(hi - lo)
        bi = b_cell[item_cell[lo:hi]]
        cand = (bi > 0) & ~labeled_mask[lo:hi]
        sure = cand & (bi >= 1.0)
        part = cand & ~sure
        if method is None:
            idx = np.flatnonzero(part & (u < bi))
            key = u[idx] / bi[idx]
        else:
            idx = np.flatnonzero(part)
            uu, bb = u[idx], bi[idx]
            if method == "pareto":
                key = (uu / (1.0 - uu)) / (bb / (1.0 - bb))
            elif method == "sequential":
                key = uu / bb
            else:
                raise SessionError(f"fixed-size method must be one of {POISSON_SIZES}, got {method!r}")
            if idx.size > n:
                keep = np.argpartition(key, n - 1)[:n] if n > 0 else np.zeros(0, np.int64)
                idx, key = idx[keep], key[keep]
        sure_rows.append(np.flatnonzero(sure) + lo)
        rows.append(idx + lo)
        keys.append(key)
    sure_r = np.concatenate(sure_rows) if sure_rows else np.zeros(0, np.int64)
    cand_r = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    cand_k = np.concatenate(keys) if keys else np.zeros(0)
    order = np.lexsort((cand_r, cand_k))
    if method is not None:
        order = order[:max(n - sure_r.size, 0)]
    return np.concatenate([sure_r, cand_r[order]]).astype(np.int64)


class _PoissonCore(NamedTuple):
    """The pure functions of a Poisson design in a session, jit-compiled once per core.

    ``propose``: adaptive ``(model_state, labeled, budget, complete) -> (RoundProposal,
    pi_cell)`` — :func:`~bayes_eval.poisson_designs.round_proposal` fed by
    :func:`~bayes_eval.poisson_designs.model_predictive`, as ``_run_rounds`` does; static
    ``(cumulative_budget) -> RoundProposal`` (:func:`~bayes_eval.poisson_designs.static_proposal`).
    ``fit``: ``(model_state, labeled) -> (model_state, pi_after)`` (None without a model).
    ``estimate_fns``: per measure, :func:`~bayes_eval.poisson_designs.combine` on the
    stacked round records.
    """

    design: Any  # PoissonDesign
    model: Any  # the oracle model refitted after every round (None: static without variance="model")
    support: np.ndarray  # (X,) bool: cells whose items need b > 0 (the first measure's estimator)
    n_support: float  # items in those cells
    pi_static: Any  # (X, C) λ-mixed prior predictive (static design), else None
    propose: Callable
    fit: Callable | None
    estimate_fns: tuple


# ------------------------------------------------------------------------------ the core
class _Core(NamedTuple):
    """Everything derived from (pool, configuration) alone: strata, cells, the design and
    its jit-compiled stage step.  Cached per process (pure, so safe to share)."""

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
    poisson: Any = None  # _PoissonCore for the Poisson designs (then ``init`` gives the model state)


_CORE_CACHE: "OrderedDict[tuple, _Core]" = OrderedDict()
_CORE_CACHE_SIZE = 4


def clear_cache():
    """Forget the per-process cache of strata, cells and compiled designs."""
    _CORE_CACHE.clear()


def _combine(keys):
    from .cells import _combine_keys

    return _combine_keys(keys)[0]


def _build_core(pool, measures, cfg, progress) -> _Core:
    from .cells import build_cells, item_patterns
    from .designs import Observed
    from .simulate import _estimate, prior_key
    from .strata import stratify

    d = cfg["design"]
    system = cfg["system"]
    progress("stratifying", 0, 1)
    skw = {"keep_empty": cfg["keep_empty"]} if cfg.get("keep_empty") is not None else {}
    strata = stratify(pool, cfg["n_strata"], method=cfg["strata_method"], system=system, n_fine=cfg["n_fine"], **skw)
    progress("building cells", 0, 1)
    from .measures import Features

    # NumPy features: item_patterns moves them to JAX in chunks (a whole 10^8-item copy
    # in XLA buffers was most of the session's memory overhead)
    feats = Features(preds=pool.preds, scores=pool.scores, probs=pool.probs)
    extra = [item_patterns(m, feats) for m in measures[1:]]
    if d["name"] in ("is", "poisson"):
        extra.append(prior_key(pool, system=system))
    extra_key = _combine(extra) if extra else None
    cells, item_cell = build_cells(pool, strata, measures[0], extra_key=extra_key, system=system)
    x = cells.n_cells
    small = np.int32 if item_cell.size < 2**31 else np.int64
    item_cell = np.asarray(item_cell, dtype=np.int32 if x < 2**31 else np.int64)
    # stable sort of the cell ids: radix (O(N)) for < 65536 cells; int32 offsets
    order = np.argsort(item_cell.astype(np.uint16) if x < 65536 else item_cell, kind="stable").astype(small)
    cell_start = np.searchsorted(item_cell[order], np.arange(x + 1)).astype(np.int64)
    rep = order[cell_start[:-1]]
    sub = type(feats)(*(np.asarray(a)[rep] for a in feats))
    loss_tables = [cells.loss] + [jnp.asarray(np.asarray(m.loss(sub), dtype=np.float64)) for m in measures[1:]]
    progress("building the design", 0, 1)
    kw = {k: v for k, v in d.items() if k != "name"}
    design, n_strata = make_design(d["name"], measures[0], cells, strata.n_strata, oracle=cfg["oracle"], **kw)
    xc, c, dd = cells.loss.shape
    g0 = measures[0].g
    ids = np.asarray(pool.ids)
    if ids.dtype.kind in "iu":
        id_index = None if np.array_equal(ids, np.arange(ids.size)) else pd.Index(ids.astype(np.int64))
    else:
        id_index = pd.Index(ids.astype(str))
    common = dict(
        strata=strata, cells=cells, item_cell=item_cell, order=order, cell_start=cell_start,
        size=np.asarray(cells.size).astype(np.int64), p_cell=np.asarray(cells.weight, dtype=np.float64),
        stratum=np.asarray(cells.stratum, dtype=np.int64), loss_tables=tuple(loss_tables), design=design,
        n_strata=int(n_strata), id_index=id_index, jitted={})
    if d["name"] in POISSON_DESIGNS:
        pc = _build_poisson(design, measures, cells, loss_tables, int(n_strata))

        def init_poisson():
            from .poisson_designs import init_model_states

            return (init_model_states(design) if pc.model is not None else ()), None

        return _Core(init=init_poisson, step=None, estimate_fns=pc.estimate_fns, poisson=pc, **common)

    def init():
        state = design.init(cells)
        obs = Observed(jnp.zeros((xc, c)), jnp.full(dd, jnp.nan), jnp.asarray(0.0))
        return state, design.propose(state, cells, obs)

    def step(state, labeled, draws, wsum, n_draws, prop):
        # 001 Alg. 1 / simulate._run_one: R̂ with q_N = the proposal just used, then update, propose
        est_prev = _estimate(design, g0, cells, labeled, draws, wsum, n_draws, prop, n_strata)
        obs = Observed(labeled=labeled, risk=est_prev.risk, n_draws=n_draws)
        state = design.update(state, cells, obs)
        return state, design.propose(state, cells, obs)

    def make_est(j):
        cells_j = cells._replace(loss=loss_tables[j])
        g = measures[j].g

        def est(labeled, draws, wsum, n_draws, prop):
            return _estimate(design, g, cells_j, labeled, draws, wsum, n_draws, prop, n_strata)

        return jax.jit(est)

    return _Core(init=jax.jit(init), step=jax.jit(step), estimate_fns=tuple(make_est(j) for j in range(len(measures))),
                 **common)


def _build_poisson(design, measures, cells, loss_tables, n_strata: int) -> _PoissonCore:
    """The jit-compiled functions of a Poisson design: the round proposal and the model
    refit exactly as ``poisson_designs._run_rounds`` computes them, and the estimator of
    ``poisson_designs._estimates`` (:func:`~bayes_eval.poisson_designs.combine`)."""
    from . import poisson_designs as PD

    om = design.model
    k = n_strata
    g0 = measures[0].g
    x, c, _ = cells.loss.shape
    sup = np.asarray(PD.design_support(design, cells.loss))
    for j in range(1, len(measures)):
        sj = np.asarray(PD.design_support(design, loss_tables[j]))
        if np.any(sj & ~sup):
            raise SessionError(
                f"measure {measures[j].name!r} needs labels of items that {measures[0].name!r} (the measure the "
                f"Poisson design targets) never asks for: its {design.estimator!r} estimator would be biased; "
                f"put {measures[j].name!r} first or use separate sessions")
    n_sup = float(np.sum(np.asarray(cells.size) * sup))
    need_pi_after = design.variance == "model"

    if design.adaptive:
        def propose(mstate, labeled, budget, complete):
            return PD.adaptive_round(design, g0, cells, labeled, mstate, budget, complete)

        pi_static = None
    else:
        def propose(budget):
            return PD.static_proposal(g0, cells, budget, lam=design.lam, estimator=design.estimator,
                                      form=design.form, eps=design.eps)

        pi_static = np.asarray(PD.prior_predictive(cells, design.lam))

    fit = None
    if om is not None:
        def fit(mstate, labeled):
            mstate = PD.fit_model_states(design, mstate, cells, labeled)
            if need_pi_after:
                counts = PD._leaf_counts(cells, labeled, k)[0]
                pi_after = PD.model_predictive(om, mstate[0], counts)[cells.stratum]
            else:
                pi_after = jnp.zeros((x, c))
            return mstate, pi_after

        fit = jax.jit(fit)

    def make_est(j):
        cells_j = cells._replace(loss=loss_tables[j])
        g = measures[j].g
        dj = int(loss_tables[j].shape[2])

        def mean_of(mean0, pis):
            # the round's model prediction m_r for measure j (the proposal's own for the first)
            if j == 0:
                return mean0
            if design.estimator == "ht":
                return jnp.zeros(pis.shape[:-1] + (dj,))
            return jnp.einsum("...xc,xcd->...xd", pis, cells_j.loss)

        if design.adaptive:
            def est(b, mean0, pis, lb, sampled, pv, t, lnow, pi_now, cr):
                recs = PD.RoundRecord(b, mean_of(mean0, pis), lb, sampled, pv)
                return PD.combine(g, cells_j, recs, t, weights=design.weights, variance=design.variance,
                                  labeled_now=lnow, pi_now=pi_now, complete_round=cr)
        else:
            def est(b, mean0, pi, lnow, pv, pi_now):
                # the estimate after stage t is the single Poisson sample with b_t (as _estimates)
                rec = PD.RoundRecord(b[None], mean_of(mean0, pi)[None], jnp.zeros_like(lnow)[None], lnow[None],
                                     pv[None])
                return PD.combine(g, cells_j, rec, 0, weights="equal", variance=design.variance, labeled_now=lnow,
                                  pi_now=pi_now, complete_round=None)

        return jax.jit(est)

    return _PoissonCore(design=design, model=om, support=sup, n_support=n_sup, pi_static=pi_static,
                        propose=jax.jit(propose), fit=fit,
                        estimate_fns=tuple(make_est(j) for j in range(len(measures))))


def _get_core(pool, measures, cfg, fingerprint, progress) -> _Core:
    core_cfg = {k: cfg.get(k) for k in ("measures", "design", "oracle", "n_strata", "n_fine", "strata_method", "system",
                                        "keep_empty")}
    key = (fingerprint, json.dumps(core_cfg, sort_keys=True),
           tuple(id(m) for m, s in zip(measures, cfg["measures"]) if s.get("custom")))
    core = _CORE_CACHE.get(key)
    if core is None:
        core = _build_core(pool, measures, cfg, progress)
        _CORE_CACHE[key] = core
        while len(_CORE_CACHE) > _CORE_CACHE_SIZE:
            _CORE_CACHE.popitem(last=False)
    else:
        _CORE_CACHE.move_to_end(key)
    return core


def _poisson_config(design, model, depth, branching, strength, lam, fixed_size, options, oracle,
                    companion=None) -> dict:
    """The JSON configuration of a Poisson design, every default resolved (so that a
    session file replays under later defaults too)."""
    if oracle != "deterministic":
        make_design(design, None, None, 0, oracle=oracle)  # raises the explanatory error
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(POISSON_OPTIONS))
    if unknown:
        raise SessionError(f"unknown Poisson option(s) {unknown}; valid: {', '.join(POISSON_OPTIONS)}")
    aliases = {"exact": "pareto", "random": None, "none": None}
    if isinstance(fixed_size, str) and fixed_size in aliases:
        fixed_size = aliases[fixed_size]
    if fixed_size == "auto":
        fixed_size = "pareto" if design == "poisson-adaptive" else None
    if fixed_size not in POISSON_SIZES:
        raise SessionError(f"fixed_size must be 'auto', 'exact', 'pareto', 'sequential' or None ('random'), "
                           f"got {fixed_size!r}")
    if fixed_size is not None and design == "poisson":
        raise SessionError("the static 'poisson' design is nested Poisson sampling: its rounds have a random size "
                           "(mean n); fixed-size rounds are offered for 'poisson-adaptive' only")
    try:
        for key in ("poisson_eps", "defensive"):
            if opts.get(key) is not None:
                opts[key] = float(opts[key])
        if opts.get("em_iters") is not None:
            opts["em_iters"] = int(opts["em_iters"])
    except (TypeError, ValueError) as exc:
        raise SessionError(f"bad Poisson option: {exc}") from None
    em_iters = opts.pop("em_iters", None)
    em_iters = 10 if em_iters is None else em_iters
    if em_iters < 1:
        raise SessionError(f"em_iters must be >= 1, got {em_iters}")
    kw = {k: v for k, v in opts.items() if v is not None}
    pd_design, _ = make_design(design, None, None, 0, lam=float(lam), fixed_size=fixed_size, companion=companion,
                               **kw)  # validates
    return {"model": model, "depth": int(depth), "branching": branching, "strength": float(strength),
            "em_iters": int(em_iters), "fixed_size": fixed_size, "estimator": pd_design.estimator,
            "form": pd_design.form, "weights": pd_design.weights, "variance": pd_design.variance,
            "poisson_eps": pd_design.eps, "defensive": pd_design.defensive,
            "defensive_form": pd_design.defensive_form, "lam": pd_design.lam, "companion": companion}


# ------------------------------------------------------------------------------ measures
def _measure_specs(measure, pool, thresholds=1024, beta=1.0, system=0):
    """Measures and their JSON specs from names, dicts or Measure objects."""
    from . import measures as M

    items = measure if isinstance(measure, (list, tuple)) else [measure]
    flat = []
    for it in items:
        if isinstance(it, str):
            flat.extend(p.strip() for p in it.split(",") if p.strip())
        else:
            flat.append(it)
    if not flat:
        raise SessionError("a session needs at least one measure")
    out, specs = [], []
    for it in flat:
        if isinstance(it, M.Measure):
            try:
                builtin = M.get(it.name)
            except (ValueError, TypeError):
                builtin = None
            if builtin is it:
                spec = {"name": it.name, "system": 0}
            else:
                spec = {"name": it.name, "custom": True, "components": list(it.names)}
            out.append(it)
            specs.append(spec)
            continue
        spec = dict(it) if isinstance(it, dict) else {"name": it}
        name = spec.get("name")
        if name not in M.MEASURE_NAMES:
            raise SessionError(f"unknown measure {name!r}; valid names: {', '.join(M.MEASURE_NAMES)}")
        spec.setdefault("system", system)
        if name == "fbeta":
            spec.setdefault("beta", beta)
        if name in ("pr_curve", "roc_curve", "auc"):
            spec.setdefault("thresholds", thresholds)
        out.append(_measure_of_spec(spec, pool))
        specs.append(spec)
    if len({m.n_classes for m in out}) > 1 or out[0].n_classes != pool.n_classes:
        raise SessionError(f"the measures' classes {[m.n_classes for m in out]} do not match the pool's "
                           f"{pool.n_classes} classes")
    return out, specs


def _measure_of_spec(spec, pool):
    """A built-in measure from its JSON spec, as the CLI builds it (thresholds of curve
    measures from the pool's scores), with the pool's number of classes where the
    measure takes one (accuracy, Brier, macro/micro F1)."""
    import inspect

    from . import measures as M
    from .cli import measure_from_args

    name = spec["name"]
    try:
        m = measure_from_args(name, pool, thresholds=int(spec.get("thresholds", 1024)),
                              beta=float(spec.get("beta", 1.0)), system=int(spec.get("system", 0)))
        if m.n_classes != pool.n_classes:
            factory = getattr(M, "_REGISTRY", {}).get(name)
            if factory is not None and "n_classes" in inspect.signature(factory).parameters:
                m = M.get(name, system=int(spec.get("system", 0)), n_classes=pool.n_classes)
    except (TypeError, ValueError) as exc:
        raise SessionError(f"measure {spec}: {exc}") from None
    return m


def _component_names(measures):
    names = [n for m in measures for n in m.names]
    if len(set(names)) == len(names):
        return names
    return [f"{m.name}:{n}" for m in measures for n in m.names]


# ------------------------------------------------------------------------------ results
class IngestResult(NamedTuple):
    """What one ``add_labels`` / ``ingest_file`` did.

    ``n_rows`` labels given; ``n_new`` accepted and stored; ``n_duplicate`` already
    known (harmless repeats); ``n_skipped`` rows without a label (files only);
    ``stage_closed`` whether this completed the open batch (and so updated the design);
    ``pending`` labels the open batch still needs; ``labels`` labels in the session;
    ``already_ingested`` the same content was ingested before (nothing done).
    """

    n_rows: int
    n_new: int
    n_duplicate: int
    n_skipped: int
    stage_closed: bool
    stage: int | None
    pending: int
    labels: int
    already_ingested: bool = False


class StageSnapshot(NamedTuple):
    """The state after a closed stage: per-(cell, class) sums of the estimator, the
    proposal the stage used and the one it produced, and weight diagnostics."""

    stage: int
    n_new: int
    labels: int
    draws: int
    labeled: np.ndarray  # (X, C)
    draw_counts: np.ndarray  # (X, C)
    wsum: np.ndarray  # (X, C)
    prop_used: Any
    prop: Any
    sum_w: float
    sum_w2: float
    max_weight: float
    opened_at: float
    closed_at: float | None

    @property
    def ess(self) -> float:
        """Effective sample size (Σw)²/Σw² of all draws so far."""
        return self.sum_w**2 / self.sum_w2 if self.sum_w2 > 0 else 0.0


class _Draws:
    """Growing per-draw arrays (every draw of every stage, in draw order)."""

    def __init__(self):
        self.stage, self.row, self.cell, self.new, self.q, self.w = [], [], [], [], [], []

    def __len__(self):
        return len(self.row)

    def extend(self, stage, rows, cells, new, q, w):
        self.stage.extend([stage] * len(rows))
        self.row.extend(int(r) for r in rows)
        self.cell.extend(int(c) for c in cells)
        self.new.extend(bool(b) for b in new)
        self.q.extend(float(v) for v in q)
        self.w.extend(float(v) for v in w)

    def arrays(self, lo=0, hi=None):
        sl = slice(lo, hi)
        return (np.asarray(self.row[sl], np.int64), np.asarray(self.cell[sl], np.int64),
                np.asarray(self.new[sl], bool), np.asarray(self.q[sl], np.float64),
                np.asarray(self.w[sl], np.float64))


def _keep_empty_default(keep_empty):
    """``keep_empty`` as :func:`~bayes_eval.simulate.run_simulation` uses it (None where
    the installed :func:`~bayes_eval.strata.stratify` has no such option)."""
    import inspect

    from .simulate import run_simulation
    from .strata import stratify

    if "keep_empty" not in inspect.signature(stratify).parameters:
        return None
    if keep_empty is not None:
        return bool(keep_empty)
    p = inspect.signature(run_simulation).parameters.get("keep_empty")
    return bool(p.default) if p is not None else False


_FINGERPRINTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _fingerprint(pool) -> str:
    """``pool.fingerprint()``, computed once per Pool object (its arrays are read-only)."""
    fp = _FINGERPRINTS.get(pool)
    if fp is None:
        fp = pool.fingerprint()
        _FINGERPRINTS[pool] = fp
    return fp


def _noop_progress(msg, done, total):
    return None


# ------------------------------------------------------------------------------ the session
class Session:
    """A labeling session on one SQLite file.

    Create with :meth:`create`, reopen with :meth:`open`.  The loop is
    ``batch = s.next_batch(50)`` → labels from people or a script →
    ``s.add_labels(batch["item"], labels)`` (or :meth:`export_batch` /
    :meth:`ingest_file` for annotation tools) → :meth:`estimate`, :meth:`intervals`,
    :meth:`summary`.  Every accepted label is committed before ``add_labels`` returns.

    Examples
    --------
    >>> s = Session.create("f1.db", pool, "f1", "ais", seed=0)   # doctest: +SKIP
    >>> s.run(lambda batch: oracle(batch["item"]), budget=1000)  # doctest: +SKIP
    >>> s.summary()                                              # doctest: +SKIP
    """

    # ------------------------------------------------------------------ construction
    def __init__(self, store: Store, pool, measures, config: dict, core: _Core, progress=None):
        self._store = store
        self.pool = pool
        self.measures = list(measures)
        self.config = config
        self._core = core
        self._progress = progress or _noop_progress
        self._names = _component_names(self.measures)
        self._n_classes = pool.n_classes
        x = core.cells.n_cells
        c = self._n_classes
        self._stochastic = config["oracle"] == "stochastic"
        progress_fn = self._progress
        progress_fn("compiling the design", 0, 1)
        dstate, prop = core.init()
        self._dstate = dstate
        self._prop = prop
        self._labeled = np.zeros((x, c))
        self._draw_counts = np.zeros((x, c))
        self._wsum = np.zeros((x, c))
        self._n_draws = 0
        self._n_labels = 0
        self._sum_w = 0.0
        self._sum_w2 = 0.0
        self._max_w = 0.0
        self._draws = _Draws()
        self._label_of: dict[int, int] = {}  # deterministic: row -> label
        self._label_stage: dict[int, int] = {}
        self._draw_label: dict[int, int] = {}  # stochastic: draw -> label
        self._lab_rows = np.zeros(0, np.int64)  # labeled items of closed stages (deterministic)
        self._lab_cells = np.zeros(0, np.int64)
        self._lab_classes = np.zeros(0, np.int64)
        self._lab_gpos = np.zeros(0, np.int64)
        self._stages: list[dict] = []
        self._open: dict | None = None
        self._snapshots: list[StageSnapshot] = []
        self._est_cache: dict = {}
        self._post_cache: dict = {}
        # Poisson designs: one record per closed round (RoundRecord fields and more, numpy)
        self._poisson = core.poisson
        self._rounds: list[dict] = []
        self._cum_budget = 0.0  # sum of the rounds' budgets n (closed and open)
        self._complete_round = -1  # the round that labeled every item that can matter

    @classmethod
    def create(cls, path: str, pool, measure="f1", design: str = "ais", *, seed: int = 0,
               oracle: str = "deterministic", n_strata: int = 256, depth: int = 8, branching: int | None = None,
               model: str = "dirichlet-tree", eps: float = 1e-3, lam: float = 0.9, delta: float = 0.0,
               plugin: str = "model", strength: float = 1.0, n_fine: int | None = None,
               strata_method: str = "csf", keep_empty: bool | None = None, system: int = 0,
               thresholds: int = 1024, beta: float = 1.0,
               label_map: dict | None = None, posterior_model: str = "calibrated", pool_path: str | None = None,
               progress=None, fixed_size: str | None = "auto", poisson_options: dict | None = None,
               companion: str | None = "auto") -> "Session":
        """Start a new session in a new file ``path``.

        Parameters
        ----------
        path : str
            The session file (SQLite) to create; refused if it exists.
        pool : Pool
        measure : str, dict, Measure or a list of them
            Built-in names (``"f1"``, ``"precision,recall"``, ``{"name": "fbeta",
            "beta": 2}``) or Measure objects; the labels serve every measure (001
            §3.3.1), the design targets the first.  Custom Measure objects must be
            passed again to :meth:`open`.
        design : {"passive", "stratified", "is", "oasis", "ais", "poisson", "poisson-adaptive"}
            The Poisson designs (deterministic oracle only) label distinct items in
            rounds, see the module docstring.
        seed : int
            Seeds every stage's generator (with the stage index).
        oracle : {"deterministic", "stochastic"}
            Deterministic: one true label per item, re-draws answered from the store
            (the budget counts distinct items, 001 §5.2).  Stochastic: every draw asks
            for a label.
        n_strata, n_fine, strata_method, keep_empty, system :
            Score strata (001 §5.2): K, fine bins, "csf" or "uniform", whether empty
            strata keep their place on the score axis (default: as ``run_simulation``),
            whose scores.
        depth, branching, model, eps, delta, plugin, strength :
            AIS and its oracle model (001 Prop. 2-3, §4); ``eps`` is also the floor of
            static IS and OASIS.
        lam : float
            λ-mixing of static IS (000 eq. 13).
        label_map : dict, optional
            Choice string -> label, e.g. ``{"negative": 0, "positive": 1}``, used by
            :meth:`add_labels` and :meth:`ingest_file`.
        posterior_model : str
            The oracle model of the Bayesian interval (:meth:`posterior_model`).
        pool_path : str, optional
            Where the pool lives, so that :meth:`open` (and the CLI) can reload it.
        progress : callable(message, done, total), optional
        fixed_size : {"auto", "pareto", "sequential", None}
            Poisson designs: how a round of ``next_batch(n)`` is drawn.  ``"auto"``
            (default): ``"pareto"`` for ``poisson-adaptive`` — exactly ``n`` items by
            Pareto sampling with the round's inclusion probabilities as targets
            (``"exact"`` is an alias); ``"sequential"``: Ohlsson's sequential Poisson
            sampling; ``None`` (alias ``"random"``): true Poisson rounds of random size
            with mean ``n`` (exactly unbiased).  The static ``poisson`` design is nested
            Poisson sampling, always of random size.
        poisson_options : dict, optional
            Further settings of the Poisson designs, named as in
            :func:`~bayes_eval.poisson_designs.run_poisson_simulation`: ``estimator``
            (``"ht"``), ``form``, ``weights`` (``"quadratic"``), ``variance``,
            ``poisson_eps`` (the relative floor of the deviations, 1e-3), ``defensive``,
            ``defensive_form``, ``em_iters``; defaults as
            :func:`~bayes_eval.poisson_designs.poisson_design` (recorded resolved in the
            session file).  ``model``, ``depth``, ``branching``, ``strength`` choose the
            oracle model of ``poisson-adaptive`` as for AIS; ``lam`` the λ-mixing of the
            static design.
        companion : {"auto", "calibrated", "none"}
            Companion model of ``ais`` and ``poisson-adaptive``
            (:func:`bayes_eval.designs.sweep_share`): ``"auto"`` (default) is the
            calibrated model on binary pools; ``"none"`` runs the designs of 001 / 000 with
            the Dirichlet tree alone.  Recorded resolved in the session file.
        """
        from .pool import Pool

        if not isinstance(pool, Pool):
            raise SessionError(f"expected a Pool, got {type(pool).__name__}")
        if oracle not in ORACLES:
            raise SessionError(f"oracle must be one of {ORACLES}, got {oracle!r}")
        if design not in SESSION_DESIGNS:
            make_design(design, None, None, 0)  # raises the explanatory error
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise SessionError(f"seed must be a non-negative integer, got {seed!r}")
        measures, specs = _measure_specs(measure, pool, thresholds, beta, system)
        label_map = annotate.parse_label_map(label_map)
        annotate.label_mapping(pool.n_classes, label_map)  # validates
        dkw = {"name": design}
        from .designs import resolve_companion

        try:
            comp = resolve_companion(companion, pool.n_classes, design)
        except ValueError as exc:
            raise SessionError(str(exc)) from None
        if design == "ais":
            dkw.update(model=model, depth=int(depth), branching=branching, eps=float(eps), delta=float(delta),
                       plugin=plugin, strength=float(strength), companion=comp)
        elif design == "is":
            dkw.update(lam=float(lam), eps=float(eps))
        elif design == "oasis":
            dkw.update(eps=float(eps))
        elif design in POISSON_DESIGNS:
            dkw.update(_poisson_config(design, model, depth, branching, strength, lam, fixed_size, poisson_options,
                                       oracle, comp))
        if design not in POISSON_DESIGNS and (fixed_size != "auto" or poisson_options):
            raise SessionError(f"fixed_size and poisson_options apply to the Poisson designs "
                               f"({', '.join(POISSON_DESIGNS)}), not to {design!r}")
        from . import __version__

        config = {
            "measures": specs,
            "design": dkw,
            "oracle": oracle,
            "seed": int(seed),
            "n_strata": int(n_strata),
            "n_fine": n_fine,
            "strata_method": strata_method,
            "keep_empty": _keep_empty_default(keep_empty),
            "system": int(system),
            "label_map": label_map,
            "posterior_model": posterior_model,
            "pool": {"path": os.path.abspath(pool_path) if pool_path not in (None, "demo") else pool_path,
                     "name": pool.name, "n_items": pool.n_items, "n_classes": pool.n_classes},
            "created_at": time.time(),
            "bayes_eval_version": __version__,
        }
        progress = progress or _noop_progress
        fingerprint = _fingerprint(pool)
        core = _get_core(pool, measures, config, fingerprint, progress)  # validates the design settings
        store = Store.create(path, {"config": config, "fingerprint": fingerprint},
                             unique_labels_by="draw" if oracle == "stochastic" else "row")
        try:
            return cls(store, pool, measures, config, core, progress)
        except BaseException:
            store.close()
            raise

    @classmethod
    def open(cls, path: str, pool=None, *, measures=None, progress=None) -> "Session":
        """Reopen a session file and replay it to the exact state it was left in.

        ``pool`` defaults to the pool file recorded at creation (a Pool, or a path);
        its fingerprint must match, else :class:`PoolMismatchError`.  Custom measures
        (not built-in) must be passed again as ``measures``.
        """
        from .pool import Pool, PoolError

        progress = progress or _noop_progress
        store = Store.open(path)
        try:
            meta = store.meta()
            config = meta["config"]
            if pool is None or isinstance(pool, (str, os.PathLike)):
                src = os.fspath(pool) if pool is not None else config["pool"].get("path")
                if src is None:
                    raise SessionError(f"{path}: the session does not record where its pool is; pass the pool")
                progress("reading the pool", 0, 1)
                try:
                    from .cli import load_pool

                    pool = load_pool(src)
                except PoolError as exc:
                    raise SessionError(f"cannot load the session's pool: {exc}; pass the pool explicitly") from None
            if not isinstance(pool, Pool):
                raise SessionError(f"expected a Pool, got {type(pool).__name__}")
            progress("checking the pool's fingerprint", 0, 1)
            fingerprint = _fingerprint(pool)
            if fingerprint != meta["fingerprint"]:
                info = config["pool"]
                raise PoolMismatchError(
                    f"{path}: the pool has changed — the session was created on pool {info.get('name')!r} "
                    f"({info.get('n_items')} items, fingerprint {meta['fingerprint'][:12]}…), the pool given "
                    f"({pool.name!r}, {pool.n_items} items) has fingerprint {fingerprint[:12]}…; "
                    f"refusing to open it on different data")
            specs = config["measures"]
            if measures is None:
                if any(s.get("custom") for s in specs):
                    names = [s["name"] for s in specs if s.get("custom")]
                    raise SessionError(f"{path}: the session uses custom measures {names}; pass them as measures=")
                ms = [_measure_of_spec(s, pool) for s in specs]
            else:
                ms = list(measures) if isinstance(measures, (list, tuple)) else [measures]
                if len(ms) != len(specs):
                    raise SessionError(f"{path}: the session has {len(specs)} measures, {len(ms)} given")
                for m, s in zip(ms, specs):
                    if m.name != s["name"] or (s.get("custom") and list(m.names) != s["components"]):
                        raise SessionError(f"{path}: measure {m.name!r} given where the session has {s['name']!r}")
            core = _get_core(pool, ms, config, fingerprint, progress)
            self = cls(store, pool, ms, config, core, progress)
            self._replay()
        except BaseException:
            store.close()
            raise
        return self

    def close(self):
        self._store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"Session({self.path!r}, {self.pool.name!r}, measures={[m.name for m in self.measures]}, "
                f"design={self.design_name!r}, labels={self.n_labels}, stages={self.n_stages})")

    # ------------------------------------------------------------------ properties
    @property
    def path(self) -> str:
        return self._store.path

    @property
    def design_name(self) -> str:
        return self.config["design"]["name"]

    @property
    def oracle(self) -> str:
        return self.config["oracle"]

    @property
    def seed(self) -> int:
        return self.config["seed"]

    @property
    def components(self) -> list[str]:
        """Names of the measure components, all measures concatenated."""
        return list(self._names)

    @property
    def n_labels(self) -> int:
        """Labels accepted (deterministic: distinct items), open batch included."""
        return len(self._label_of) if not self._stochastic else len(self._draw_label)

    @property
    def n_draws(self) -> int:
        return len(self._draws)

    @property
    def n_stages(self) -> int:
        """Closed stages (batches whose labels are all in)."""
        return len(self._snapshots)

    @property
    def n_pending(self) -> int:
        return 0 if self._open is None else len(self._open["pending"])

    @property
    def proposal(self):
        """The current proposal (per-item probabilities on cells, ``Proposal(unl, lab)``).

        Poisson designs: the :class:`~bayes_eval.poisson_designs.RoundProposal` (``b`` per
        cell, ...) of the open round, else of the last closed one (None before any)."""
        if self._poisson is not None and self._open is not None:
            return self._open["round"]["prop"]
        return self._prop

    @property
    def is_exact(self) -> bool:
        """Poisson designs: a closed round has labeled every item that can matter, so
        the estimate equals the measure on the pool (no sampling error)."""
        if self._poisson is None or self._complete_round < 0:
            return False
        if self._poisson.design.adaptive:
            return True
        unl = self._core.size - self._labeled.sum(1)
        return bool(np.sum(unl * self._poisson.support) == 0)

    @property
    def rounds(self) -> list:
        """Poisson designs: one dict per closed round — ``b``, ``mean``, ``pi``,
        ``labeled_before``, ``sampled``, ``pred_var`` (the cell-level
        :class:`~bayes_eval.poisson_designs.RoundRecord`), ``pi_after``, ``complete``,
        ``budget``, ``cum``."""
        return list(self._rounds)

    @property
    def cells(self):
        return self._core.cells

    @property
    def item_cell(self) -> np.ndarray:
        return self._core.item_cell

    # ------------------------------------------------------------------ replay
    def _replay(self):
        store = self._store
        stages = store.stages()
        draws = store.draws()
        labels = store.labels()
        for r in labels:
            _, row, _, label, draw, stage, _, _ = r
            if self._stochastic:
                self._draw_label[int(draw)] = int(label)
            else:
                self._label_of[int(row)] = int(label)
                self._label_stage[int(row)] = int(stage)
        by_stage: dict[int, list] = {}
        for d in draws:
            by_stage.setdefault(int(d[1]), []).append(d)
        n = len(stages)
        for i, st in enumerate(stages):
            self._progress("replaying stages", i, n)
            s = int(st["stage"])
            ds = by_stage.get(s, [])
            if len(self._draws) != (ds[0][0] if ds else len(self._draws)):
                raise SessionError(f"{self.path}: draws of stage {s} are not contiguous; the file is damaged")
            rows = np.asarray([d[2] for d in ds], np.int64)
            cells = self._core.item_cell[rows] if rows.size else np.zeros(0, np.int64)
            new = np.asarray([bool(d[4]) for d in ds], bool)
            q = np.asarray([d[5] for d in ds], np.float64)
            w = np.asarray([d[6] for d in ds], np.float64)
            self._begin_stage(st, rows, cells, new, q, w)
            if not self._open["pending"]:
                self._commit_close(self._close_state(time_closed=st["closed_at"]))
            elif i != n - 1:
                raise SessionError(f"{self.path}: stage {s} is incomplete but later stages exist; the file is damaged")
        self._progress("replaying stages", n, n)

    # ------------------------------------------------------------------ stage bookkeeping
    def _begin_stage(self, st: dict, rows, cells, new, q, w, pround: dict | None = None):
        """Record a stage's draws in memory and open it.

        Poisson designs: ``pround`` is the round's proposal (:meth:`_poisson_round`);
        on replay it is recomputed from the labels so far and checked against the
        inclusion probabilities the stored items were drawn with."""
        if self._poisson is not None:
            if pround is None:
                pround = self._poisson_round(int(st["n_requested"]))
                self._check_round(st, np.asarray(rows, np.int64), np.asarray(cells, np.int64),
                                  np.asarray(q, np.float64), pround)
            self._cum_budget = pround["cum"]
        first = len(self._draws)
        self._draws.extend(int(st["stage"]), rows, cells, new, q, w)
        pending: "OrderedDict[int, int]" = OrderedDict()  # deterministic: row -> draw; stochastic: draw -> row
        for k in range(len(rows)):
            if not new[k]:
                continue
            did = first + k
            if self._stochastic:
                if did not in self._draw_label:
                    pending[did] = int(rows[k])
            elif int(rows[k]) not in self._label_of:
                pending[int(rows[k])] = did
        self._stages.append(dict(st))
        self._open = {"stage": int(st["stage"]), "first": first, "end": len(self._draws), "pending": pending,
                      "opened_at": st["opened_at"], "round": pround}

    # ------------------------------------------------------------------ Poisson rounds
    def _poisson_round(self, n: int) -> dict:
        """The next round's inclusion probabilities given the closed rounds (pure).

        Adaptive: :func:`~bayes_eval.poisson_designs.round_proposal` with the model's
        predictive after the last refit, budget ``n``; the round is *complete* (``b = 1``
        on every unlabeled item that can matter) when the budgets so far reach the
        number of such items — the rule of ``simulate_poisson`` — or when none is left.
        Static: :func:`~bayes_eval.poisson_designs.static_proposal` at the cumulative
        budget; the round draws the increment ``(b_t - b_{t-1}) / (1 - b_{t-1})`` among
        the unlabeled items (nested Poisson samples, as ``_run_rounds``).
        """
        pc = self._poisson
        cum = self._cum_budget + float(n)
        unl = self._core.size - self._labeled.sum(1)
        u_sup = float(np.sum(unl * pc.support))
        if pc.design.adaptive:
            complete = bool(cum >= pc.n_support or u_sup <= 0)
            prop, pi = pc.propose(self._dstate, jnp.asarray(self._labeled), jnp.asarray(float(n)),
                                  jnp.asarray(complete))
            prop = jax.tree_util.tree_map(np.asarray, prop)
            b = prop.b
            draw_b = b
            pi = np.asarray(pi)
        else:
            complete = bool(cum >= pc.n_support)
            prop = jax.tree_util.tree_map(np.asarray, pc.propose(jnp.asarray(cum)))
            b = prop.b
            b_prev = self._rounds[-1]["b"] if self._rounds else np.zeros_like(b)
            still = b_prev < 1.0
            draw_b = np.clip(np.where(still, (b - b_prev) / np.where(still, 1.0 - b_prev, 1.0), 0.0), 0.0, 1.0)
            pi = pc.pi_static
        return {"budget": float(n), "cum": cum, "complete": complete, "prop": prop, "b": b, "draw_b": draw_b,
                "pi": pi, "u_sup": u_sup}

    def _check_round(self, st, rows, cells, q, pround):
        """Replay check: the stored items' inclusion probabilities are those recomputed
        from the labels (else the file was written under other settings or code)."""
        if cells.size == 0:
            return
        want = pround["b"][cells]
        if not np.allclose(q, want, rtol=1e-9, atol=0.0):
            k = int(np.flatnonzero(~np.isclose(q, want, rtol=1e-9, atol=0.0))[0])
            raise SessionError(
                f"{self.path}: round {st['stage']} cannot be replayed: its items were drawn with inclusion "
                f"probability {q[k]!r} (item {_py(np.asarray(self.pool.ids)[rows[k]])!r}) but the labels so far give "
                f"{want[k]!r}; "
                f"the file was written by another version of bayes_eval or is damaged")

    def _next_poisson(self, n: int) -> pd.DataFrame:
        """Start the next Poisson round of budget ``n`` (see :meth:`next_batch`)."""
        pc = self._poisson
        core = self._core
        adaptive = pc.design.adaptive
        method = pc.design.fixed_size if adaptive else None
        ids = np.asarray(self.pool.ids)
        empty_rounds = 0
        while True:
            rd = self._poisson_round(n)
            stage = len(self._stages)
            if rd["u_sup"] <= 0 and not (adaptive and self._complete_round < 0):
                return self._poisson_frame(stage, stalled=True, empty_rounds=empty_rounds)
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(self.seed), stage])))
            lab_mask = np.zeros(core.item_cell.size, bool)
            lab_mask[self._lab_rows] = True
            rows = poisson_pick(rng, core.item_cell, lab_mask, rd["draw_b"], int(n), method)
            cells = core.item_cell[rows]
            q = rd["b"][cells]
            w = core.p_cell[cells] / q
            now = time.time()
            st = {"stage": stage, "n_requested": int(n), "n_new": int(rows.size), "n_draws": int(rows.size),
                  "stalled": 0, "rng_state": json.dumps(rng.bit_generator.state), "opened_at": now}
            new = np.ones(rows.size, bool)
            if rows.size == 0:
                # a round that drew nothing (Poisson: probability prod(1 - b)) is still a round of the
                # design: record it, closed, and go on to the next, as the simulation does
                self._store.add_stage(st, [], closed_at=now)
                self._begin_stage({**st, "closed_at": now}, rows, cells, new, q, w, pround=rd)
                self._commit_close(self._close_state(time_closed=now))
                empty_rounds += 1
                if rd["u_sup"] <= 0 or empty_rounds >= _MAX_EMPTY_ROUNDS:
                    return self._poisson_frame(stage + 1, stalled=rd["u_sup"] <= 0, empty_rounds=empty_rounds)
                continue
            first = len(self._draws)
            rows_db = [(first + k, stage, int(r), _py(ids[r]), 1, float(q[k]), float(w[k]))
                       for k, r in enumerate(rows)]
            self._store.add_stage(st, rows_db)
            self._begin_stage({**st, "closed_at": None}, rows, cells, new, q, w, pround=rd)
            df = self.pending()
            df.attrs.update(reissued=False, stalled=False, complete=bool(rd["complete"]), expected_size=float(n),
                            empty_rounds=empty_rounds)
            return df

    def _poisson_frame(self, stage, stalled, empty_rounds=0):
        df = self._frame(np.zeros(0, np.int64), [], [], [], stage)
        df.attrs.update(reissued=False, stalled=bool(stalled), complete=False, expected_size=0.0,
                        empty_rounds=empty_rounds)
        return df

    def _close_state(self, extra_labels: dict | None = None, time_closed=None):
        """The state after closing the open stage (pure: nothing is mutated).

        ``extra_labels``: labels being ingested now (row -> label, or draw -> label).
        """
        op = self._open
        rows, cells, new, q, w = self._draws.arrays(op["first"], op["end"])
        c = self._n_classes
        x = self._core.cells.n_cells
        if self._stochastic:
            lab_of_draw = {**self._draw_label, **(extra_labels or {})}
            y = np.asarray([lab_of_draw[op["first"] + k] for k in range(rows.size)], np.int64)
            obs_mask = np.ones(rows.size, bool)
        else:
            lab_of = self._label_of if not extra_labels else {**self._label_of, **extra_labels}
            y = np.asarray([lab_of[int(r)] for r in rows], np.int64)
            obs_mask = new
        if self._poisson is not None:
            return self._close_poisson(op, rows, cells, y, w, time_closed)
        idx = cells * c + y
        labeled = self._labeled + np.bincount(idx[obs_mask], minlength=x * c).reshape(x, c)
        draw_counts = self._draw_counts + np.bincount(idx, minlength=x * c).reshape(x, c)
        wsum = self._wsum + np.bincount(idx, weights=w, minlength=x * c).reshape(x, c)
        n_draws = self._n_draws + int(rows.size)
        prop_used = self._prop
        dstate, prop = self._core.step(self._dstate, jnp.asarray(labeled), jnp.asarray(draw_counts),
                                       jnp.asarray(wsum), jnp.asarray(float(n_draws)), prop_used)
        jax.block_until_ready(prop)
        n_new = int(obs_mask.sum())
        snap = StageSnapshot(
            stage=op["stage"], n_new=n_new, labels=self._n_labels + n_new, draws=n_draws, labeled=labeled,
            draw_counts=draw_counts, wsum=wsum, prop_used=prop_used, prop=prop,
            sum_w=self._sum_w + float(w.sum()), sum_w2=self._sum_w2 + float((w * w).sum()),
            max_weight=max(self._max_w, float(w.max()) if w.size else 0.0), opened_at=op["opened_at"],
            closed_at=time_closed)
        new_lab = None
        if not self._stochastic:
            nr = rows[new]
            new_lab = (nr, cells[new], y[new], self._gpos(nr, cells[new]))
        return snap, dstate, new_lab, None

    def _close_poisson(self, op, rows, cells, y, w, time_closed):
        """The state after a Poisson round's labels (pure): the round's cell-level
        :class:`~bayes_eval.poisson_designs.RoundRecord` and the model refitted to all
        labels (``_run_rounds``)."""
        pc = self._poisson
        c = self._n_classes
        x = self._core.cells.n_cells
        rd = op["round"]
        idx = cells * c + y
        sampled = np.bincount(idx, minlength=x * c).reshape(x, c).astype(np.float64)
        labeled = self._labeled + sampled
        if pc.fit is not None:
            mstate, pi_after = pc.fit(self._dstate, jnp.asarray(labeled))
            jax.block_until_ready(mstate)
            pi_after = np.asarray(pi_after)
        else:
            mstate, pi_after = self._dstate, np.zeros((x, c))
        prop = rd["prop"]
        if pc.design.adaptive:
            lb, smp = self._labeled, sampled
        else:  # the static estimate after stage t is one Poisson sample with b_t over the pool
            lb, smp = np.zeros((x, c)), labeled
        rnd = {"b": rd["b"], "mean": np.asarray(prop.mean), "pi": rd["pi"], "labeled_before": lb, "sampled": smp,
               "pred_var": np.asarray(prop.pred_var), "pi_after": pi_after, "complete": rd["complete"],
               "budget": rd["budget"], "cum": rd["cum"]}
        n_new = int(rows.size)
        snap = StageSnapshot(
            stage=op["stage"], n_new=n_new, labels=self._n_labels + n_new, draws=self._n_draws + n_new,
            labeled=labeled, draw_counts=self._draw_counts + sampled,
            wsum=self._wsum + np.bincount(idx, weights=w, minlength=x * c).reshape(x, c), prop_used=prop, prop=prop,
            sum_w=self._sum_w + float(w.sum()), sum_w2=self._sum_w2 + float((w * w).sum()),
            max_weight=max(self._max_w, float(w.max()) if w.size else 0.0), opened_at=op["opened_at"],
            closed_at=time_closed)
        new_lab = (rows, cells, y, self._gpos(rows, cells))
        return snap, mstate, new_lab, rnd

    def _gpos(self, rows, cells):
        """Positions of ``rows`` in ``order`` (rows of a cell are sorted within it)."""
        core = self._core
        out = np.empty(rows.size, np.int64)
        for cell in np.unique(cells):
            m = cells == cell
            lo, hi = core.cell_start[cell], core.cell_start[cell + 1]
            out[m] = lo + np.searchsorted(core.order[lo:hi], rows[m])
        return out

    def _commit_close(self, closed):
        snap, dstate, new_lab, rnd = closed
        if rnd is not None:
            self._rounds.append(rnd)
            if rnd["complete"] and self._complete_round < 0:
                self._complete_round = len(self._rounds) - 1
        self._snapshots.append(snap)
        self._dstate = dstate
        self._prop = snap.prop
        self._labeled = snap.labeled
        self._draw_counts = snap.draw_counts
        self._wsum = snap.wsum
        self._n_draws = snap.draws
        self._n_labels = snap.labels
        self._sum_w, self._sum_w2, self._max_w = snap.sum_w, snap.sum_w2, snap.max_weight
        if new_lab is not None:
            nr, nc, ny, ng = new_lab
            self._lab_rows = np.concatenate([self._lab_rows, nr])
            self._lab_cells = np.concatenate([self._lab_cells, nc])
            self._lab_classes = np.concatenate([self._lab_classes, ny])
            self._lab_gpos = np.concatenate([self._lab_gpos, ng])
        self._stages[-1]["closed_at"] = snap.closed_at
        self._open = None
        self._post_cache.clear()

    # ------------------------------------------------------------------ batches
    def _frame(self, rows, draw_ids, q, w, stage) -> pd.DataFrame:
        pool = self.pool
        ids = np.asarray(pool.ids)[rows] if rows.size else np.asarray(pool.ids)[:0]
        df = pd.DataFrame({"item": ids})
        if self._stochastic:
            df["draw"] = np.asarray(draw_ids, np.int64)
        if pool.columns is not None and len(pool.columns.columns):
            own = pool.columns.iloc[rows].reset_index(drop=True)
            own.columns = [f"{c}_pool" if c in _RESERVED else c for c in own.columns]
            df = pd.concat([df, own], axis=1)
        df["q"] = np.asarray(q, np.float64)
        df["weight"] = np.asarray(w, np.float64)
        df["stage"] = np.full(len(df), stage, np.int64)
        return df

    def pending(self) -> pd.DataFrame:
        """The open batch's items still awaiting a label (empty if none)."""
        if self._open is None:
            return self._frame(np.zeros(0, np.int64), [], [], [], -1)
        op = self._open
        if self._stochastic:
            dids = list(op["pending"].keys())
        else:
            dids = list(op["pending"].values())
        rows = np.asarray([self._draws.row[d] for d in dids], np.int64)
        q = [self._draws.q[d] for d in dids]
        w = [self._draws.w[d] for d in dids]
        return self._frame(rows, dids, q, w, op["stage"])

    def next_batch(self, n: int = 50) -> pd.DataFrame:
        """The next ``n`` items that need a label, as a DataFrame.

        Columns: ``item`` (the pool's id), ``draw`` (stochastic oracle: the draw each
        row answers), the pool's own columns, ``q`` (the per-item proposal probability
        it was drawn with), ``weight`` (p(x)/q, its importance weight) and ``stage``.
        The batch is committed to the session file before it is returned.

        While a batch is open (labels still missing), its remaining items are returned
        again, whatever ``n`` — a batch is closed only by its labels, so that the
        design's update sees whole stages (``df.attrs["reissued"]`` is then True).
        Fewer than ``n`` rows come back only when the pool has no unlabeled item left
        that the proposal can reach (``df.attrs["stalled"]``).

        Poisson designs: the batch is one round of budget ``n`` — distinct unlabeled
        items, ``q`` their inclusion probability ``b`` and ``weight`` = p(x)/b.  With
        fixed-size rounds (the default of ``poisson-adaptive``) it has exactly ``n`` rows,
        fewer only in the round that labels every item that can still matter
        (``df.attrs["complete"]``: once labeled, the estimate is exact); with random-size
        rounds (``fixed_size=None``, and the static ``poisson`` design) its size is random
        with mean ``n``.  A round that happens to draw no item is recorded (closed) and the
        next round is drawn (``df.attrs["empty_rounds"]`` counts them).  Empty and
        ``stalled`` when no item that can matter is left unlabeled.
        """
        if self._open is not None:
            df = self.pending()
            df.attrs["reissued"] = True
            df.attrs["stalled"] = False
            return df
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise SessionError(f"the batch size must be a positive integer, got {n!r}")
        if self._poisson is not None:
            return self._next_poisson(int(n))
        core = self._core
        stage = len(self._stages)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(self.seed), stage])))
        prop = self._prop
        res = draw_stage(rng, np.asarray(prop.unl), np.asarray(prop.lab), core.size, core.order, core.cell_start,
                         int(n), self._stochastic, self._lab_cells, self._lab_classes, self._lab_rows,
                         self._lab_gpos)
        if not res.new.any():
            df = self._frame(np.zeros(0, np.int64), [], [], [], stage)
            df.attrs["reissued"] = False
            df.attrs["stalled"] = True
            return df
        w = core.p_cell[res.cells] / res.q
        first = len(self._draws)
        now = time.time()
        st = {"stage": stage, "n_requested": int(n), "n_new": int(res.new.sum()), "n_draws": int(res.rows.size),
              "stalled": int(res.stalled), "rng_state": json.dumps(rng.bit_generator.state), "opened_at": now}
        ids = np.asarray(self.pool.ids)
        rows_db = [(first + k, stage, int(r), _py(ids[r]), int(res.new[k]), float(res.q[k]), float(w[k]))
                   for k, r in enumerate(res.rows)]
        self._store.add_stage(st, rows_db)
        self._begin_stage({**st, "closed_at": None}, res.rows, res.cells, res.new, res.q, w)
        df = self.pending()
        df.attrs["reissued"] = False
        df.attrs["stalled"] = bool(res.stalled)
        return df

    # ------------------------------------------------------------------ labels
    def _rows_of(self, items, where) -> np.ndarray:
        """Pool rows of item ids given by a user or a file (ints, strings, floats)."""
        core = self._core
        ids = np.asarray(self.pool.ids)
        n = ids.size
        rows = np.empty(len(items), np.int64)
        if ids.dtype.kind in "iu":
            vals = np.empty(len(items), np.int64)
            for i, v in enumerate(items):
                v = _py(v)
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
            keys = [str(_py(v)).strip() if not isinstance(v, str) else v.strip() for v in items]
            rows[:] = core.id_index.get_indexer(keys)
            bad = np.flatnonzero(rows < 0)
        if bad.size:
            i = int(bad[0])
            raise UnknownItemError(f"{where[i]}: unknown item id {items[i]!r} (not in the pool)")
        return rows

    def add_labels(self, items, labels, *, draws=None, label_map: dict | None = None, where=None,
                   source: str = "add_labels", n_skipped: int = 0) -> IngestResult:
        """Accept labels for drawn items, in one transaction.

        Parameters
        ----------
        items : sequence of item ids (the ``item`` column of a batch)
        labels : sequence of labels: ints 0..C-1, or strings mapped by ``label_map``
            (default ``"0"``, ``"1"``, ...; the session's own map applies too)
        draws : sequence of draw ids, optional
            Stochastic oracle: which draw each label answers (the batch's ``draw``
            column); without it, a label goes to the item's first draw still waiting.

        Returns
        -------
        IngestResult

        Raises
        ------
        SessionError subclasses, naming the offending item and row, with nothing
        changed: :class:`UnknownItemError`, :class:`NotDrawnError` (never asked for),
        :class:`InvalidLabelError` (outside the label set), :class:`LabelConflictError`
        (deterministic oracle: a different label for an item already labeled, or two
        labels in one call), :class:`EmptyInputError`, :class:`StaleSessionError`.

        Labels already known (same item, same label) are harmless and counted as
        duplicates, so re-ingesting a file changes nothing.
        """
        items = list(items.tolist() if hasattr(items, "tolist") else items)
        labels = list(labels.tolist() if hasattr(labels, "tolist") else labels)
        if draws is not None:
            draws = list(draws.tolist() if hasattr(draws, "tolist") else draws)
        if len(items) != len(labels) or (draws is not None and len(draws) != len(items)):
            raise MalformedInputError(f"{len(items)} items but {len(labels)} labels"
                                      + (f" and {len(draws)} draws" if draws is not None else ""))
        if not items:
            raise EmptyInputError("no labels given")
        where = list(where) if where is not None else [f"row {i}" for i in range(len(items))]
        lmap = dict(self.config.get("label_map") or {})
        lmap.update(annotate.parse_label_map(label_map) or {})
        y = annotate.parse_labels(labels, self._n_classes, lmap, where)
        rows = self._rows_of(items, where)
        if self._stochastic:
            new, n_dup, already, sha = self._match_stochastic(items, rows, y, draws, where)
        else:
            new, n_dup = self._match_deterministic(items, rows, y, where)
            already, sha = False, self._content_hash(rows, y, None)
        if not new:
            return IngestResult(len(items), 0, n_dup, n_skipped, False, self._open and self._open["stage"],
                                self.n_pending, self.n_labels, already)
        op = self._open
        extra = {k: v[0] for k, v in new.items()}
        closes = len(op["pending"]) == len(new)
        now = time.time()
        closed = self._close_state(extra, time_closed=now) if closes else None
        ids = np.asarray(self.pool.ids)
        recs = []
        for k, (lab, _) in new.items():
            if self._stochastic:
                did, row = k, op["pending"][k]
            else:
                did, row = op["pending"][k], k
            recs.append((row, _py(ids[row]), int(lab), did, op["stage"], now))
        self._store.add_labels({"sha256": sha, "source": str(source), "n_rows": len(items), "n_new": len(new),
                                "at": now}, recs, close_stage=op["stage"] if closes else None, closed_at=now)
        # committed: now update the in-memory state
        for k, (lab, _) in new.items():
            if self._stochastic:
                self._draw_label[k] = int(lab)
            else:
                self._label_of[k] = int(lab)
                self._label_stage[k] = op["stage"]
            del op["pending"][k]
        stage = op["stage"]
        if closes:
            self._commit_close(closed)
        return IngestResult(len(items), len(new), n_dup, n_skipped, closes, stage, self.n_pending, self.n_labels,
                            False)

    def _content_hash(self, rows, y, draws):
        h = hashlib.sha256()
        h.update(json.dumps([[int(r), int(v), None if draws is None else draws[i]]
                             for i, (r, v) in enumerate(zip(rows, y))]).encode())
        return h.hexdigest()

    def _match_deterministic(self, items, rows, y, where):
        new: dict[int, tuple] = {}
        n_dup = 0
        pending = self._open["pending"] if self._open is not None else {}
        for i, (r, lab) in enumerate(zip(rows.tolist(), y.tolist())):
            if r in new:
                if new[r][0] != lab:
                    raise LabelConflictError(
                        f"{where[i]}: item {items[i]!r} is labeled {lab} here but {new[r][0]} at {new[r][1]}; "
                        f"a deterministic oracle gives one label per item — nothing was ingested")
                n_dup += 1
                continue
            if r in self._label_of:
                if self._label_of[r] != lab:
                    raise LabelConflictError(
                        f"{where[i]}: item {items[i]!r} already has label {self._label_of[r]} (stage "
                        f"{self._label_stage.get(r)}), refusing the conflicting label {lab} — nothing was ingested")
                n_dup += 1
                continue
            if r in pending:
                new[r] = (lab, where[i])
                continue
            raise NotDrawnError(f"{where[i]}: item {items[i]!r} was never drawn (it is in no batch of this session); "
                                f"only items of a batch can be labeled — nothing was ingested")
        return new, n_dup

    def _match_stochastic(self, items, rows, y, draws, where):
        op = self._open
        pending = op["pending"] if op is not None else {}
        sha = self._content_hash(rows, y, draws)
        if self._store.has_ingest(sha):
            return {}, len(items), True, sha
        new: dict[int, tuple] = {}
        n_dup = 0
        free: dict[int, list] = {}
        for did, r in pending.items():
            free.setdefault(r, []).append(did)
        explicit = [i for i in range(len(items)) if draws is not None and draws[i] is not None]
        implicit = [i for i in range(len(items)) if i not in set(explicit)]
        n_total = len(self._draws)
        for i in explicit:
            try:
                did = int(draws[i])
            except (TypeError, ValueError):
                raise MalformedInputError(f"{where[i]}: draw id {draws[i]!r} is not an integer") from None
            r, lab = int(rows[i]), int(y[i])
            if not 0 <= did < n_total or self._draws.row[did] != r or not self._draws.new[did]:
                raise NotDrawnError(f"{where[i]}: item {items[i]!r} has no draw {did} in this session — nothing "
                                    f"was ingested")
            known = self._draw_label.get(did, new.get(did, (None,))[0])
            if known is not None:
                if known != lab:
                    raise LabelConflictError(f"{where[i]}: draw {did} of item {items[i]!r} already has label "
                                             f"{known}, refusing {lab} — nothing was ingested")
                n_dup += 1
                continue
            new[did] = (lab, where[i])
            if did in free.get(r, []):
                free[r].remove(did)
        for i in implicit:
            r, lab = int(rows[i]), int(y[i])
            if not free.get(r):
                drawn = sum(1 for k in range(n_total) if self._draws.row[k] == r)
                raise NotDrawnError(
                    f"{where[i]}: item {items[i]!r} has no draw awaiting a label (drawn {drawn} time(s) in this "
                    f"session) — nothing was ingested")
            did = free[r].pop(0)
            new[did] = (lab, where[i])
        return new, n_dup, False, sha

    def ingest_file(self, path: str, *, fmt: str | None = None, label_map: dict | None = None,
                    from_name: str | None = None) -> IngestResult:
        """Read a labeled file (CSV, JSONL, Label Studio JSON export) and ingest it as one
        transaction (see :mod:`bayes_eval.annotate` for the formats)."""
        recs = annotate.read_labels(path, fmt=fmt, from_name=from_name)
        draws = recs.draws if any(d is not None for d in recs.draws) else None
        return self.add_labels(recs.items, recs.labels, draws=draws, label_map=label_map, where=recs.where,
                               source=os.path.abspath(path), n_skipped=recs.skipped)

    def export_batch(self, path: str, n: int = 50, fmt: str | None = None) -> pd.DataFrame:
        """Draw the next batch (or re-issue the open one) and write it for annotators:
        ``item``, the pool's own columns (and ``draw`` for a stochastic oracle)."""
        annotate.format_of(path, fmt)
        df = self.next_batch(n)
        cols = [c for c in df.columns if c not in ("q", "weight", "stage")]
        annotate.write_batch(df[cols], path, fmt)
        return df

    def run(self, oracle: Callable[[pd.DataFrame], Sequence], budget: int, batch: int = 50) -> "Session":
        """Label until ``budget`` labels with a Python oracle: ``oracle(batch_frame)``
        returns the labels of the batch's rows, in order."""
        while self.n_labels < budget:
            df = self.next_batch(min(batch, budget - self.n_labels))
            if df.empty:
                break
            self.add_labels(df["item"], np.asarray(oracle(df)), draws=df["draw"] if self._stochastic else None)
        return self

    # ------------------------------------------------------------------ estimates
    def _est(self, snap_index: int, j: int):
        key = (snap_index, j)
        if key not in self._est_cache and self._poisson is not None:
            est = self._est_poisson(snap_index, j)
            self._est_cache[key] = (np.asarray(est.value), np.asarray(est.cov), np.asarray(est.risk))
        if key not in self._est_cache:
            s = self._snapshots[snap_index]
            est = self._core.estimate_fns[j](jnp.asarray(s.labeled), jnp.asarray(s.draw_counts), jnp.asarray(s.wsum),
                                             jnp.asarray(float(s.draws)), s.prop)
            self._est_cache[key] = (np.asarray(est.value), np.asarray(est.cov), np.asarray(est.risk))
        return self._est_cache[key]

    def _est_poisson(self, i: int, j: int):
        """:func:`~bayes_eval.poisson_designs.combine` after round ``i`` for measure ``j``,
        as ``poisson_designs._estimates`` computes it in the simulation.  The adaptive
        design's round records are stacked and zero-padded to a power of two (rounds after
        ``i`` get weight 0), so that a few compilations serve every round count."""
        pc = self._poisson
        fn = pc.estimate_fns[j]
        snap = self._snapshots[i]
        rr = self._rounds
        if not pc.design.adaptive:
            r = rr[i]
            return fn(jnp.asarray(r["b"]), jnp.asarray(r["mean"]), jnp.asarray(r["pi"]), jnp.asarray(snap.labeled),
                      jnp.asarray(r["pred_var"]), jnp.asarray(r["pi_after"]))
        cap = 8
        while cap < i + 1:
            cap *= 2

        def stack(key):
            first = np.asarray(rr[0][key], np.float64)
            out = np.zeros((cap,) + first.shape)
            for k in range(i + 1):
                out[k] = rr[k][key]
            return jnp.asarray(out)

        cr = self._complete_round if 0 <= self._complete_round <= i else -1
        return fn(stack("b"), stack("mean"), stack("pi"), stack("labeled_before"), stack("sampled"),
                  stack("pred_var"), jnp.asarray(i), jnp.asarray(snap.labeled), jnp.asarray(rr[i]["pi_after"]),
                  jnp.asarray(cr))

    def _values(self, snap_index=-1):
        """(value, sd) over all components after a closed stage (NaN before any)."""
        if not self._snapshots:
            m = len(self._names)
            return np.full(m, np.nan), np.full(m, np.nan)
        i = snap_index % len(self._snapshots)
        vals, sds = [], []
        for j in range(len(self.measures)):
            v, cov, _ = self._est(i, j)
            vals.append(v)
            sds.append(np.sqrt(np.clip(np.diagonal(cov), 0.0, None)))
        return np.concatenate(vals), np.concatenate(sds)

    def estimate(self) -> pd.Series:
        """Ĝ after the last closed stage, one entry per component (NaN where undefined)."""
        v, _ = self._values()
        return pd.Series(v, index=self._names, name="estimate")

    def estimate_draws(self, measure=None):
        """The importance-weighted estimate computed from the raw draws with
        :func:`~bayes_eval.estimators.is_estimate_draws` (001 eq. 1, §3.3.2) — for any
        measure, also one not in the session (sample reuse, 001 §3.3.1: valid where the
        proposals cover the measure's support).  ``measure`` defaults to the first.
        IS designs only."""
        from .estimators import is_estimate_draws

        if self._poisson is not None:
            raise SessionError(f"estimate_draws is for importance-sampling designs; the Poisson design "
                               f"{self.design_name!r} estimates its measures from the round records (estimate())")
        if self._core.design.estimator != "is":
            raise SessionError("estimate_draws is for importance-sampling designs (not 'stratified')")
        measure = self.measures[0] if measure is None else measure
        k = self._snapshots[-1].draws if self._snapshots else 0
        rows, cells, _, _, w = self._draws.arrays(0, k)
        y = self._draw_labels(k)
        feats = self.pool.features()
        sub = type(feats)(*(np.asarray(a)[rows] for a in feats))
        loss = np.asarray(measure.loss(sub))[np.arange(rows.size), y]
        prop = self._prop
        if self._stochastic:
            qn = np.asarray(prop.unl)[cells]
        else:
            qn = np.asarray(prop.lab)[cells, y]
        p_over_qn = np.where(qn > 0, self._core.p_cell[cells] / np.where(qn > 0, qn, 1.0), 0.0)
        return is_estimate_draws(measure.g, loss, w, p_over_qn)

    def _draw_labels(self, k):
        if self._stochastic:
            return np.asarray([self._draw_label[d] for d in range(k)], np.int64)
        return np.asarray([self._label_of[r] for r in self._draws.row[:k]], np.int64)

    def intervals(self, level: float = 0.95, bayesian: bool = True) -> pd.DataFrame:
        """Intervals per component: the CLT interval Ĝ ± z sd (delta method, 001 §3.3.2)
        and, where the design carries an oracle model, the Bayesian interval
        (:meth:`bayesian_interval`; its first computation in a process compiles the
        posterior sampler, which takes a while — ``bayesian=False`` skips it).
        Columns: component, kind, level, estimate, lower, upper."""
        v, sd = self._values()
        z = _z(level)
        df = pd.DataFrame({"component": self._names, "kind": "clt", "level": level, "estimate": v,
                           "lower": v - z * sd, "upper": v + z * sd})
        if bayesian:
            b = self.bayesian_interval(level)
            if b is not None:
                df = pd.concat([df, b], ignore_index=True)
        return df

    # ------------------------------------------------------------------ Bayesian hook
    def posterior_model(self):
        """The oracle model behind the Bayesian interval, chosen as
        :func:`~bayes_eval.simulate.run_simulation` chooses it (``posterior_model``,
        default ``"calibrated"``: the calibrated Beta-binomial model for binary pools,
        whose finite-pool intervals hold where the Dirichlet tree's do not; ``"design"``:
        the design's own model).  None when the design carries no model; the Poisson
        designs always have one (the posterior needs only the labeled counts per cell,
        whatever chose the items: the selection is ignorable, 001 §4.2)."""
        design = self._core.design
        if design.model is None and self._poisson is None:
            return None
        core = self._core
        choice = self.config.get("posterior_model") or "calibrated"
        if ("posterior_model", choice) in core.jitted:
            return core.jitted[("posterior_model", choice)]
        from .ais import leaf_probs, make_model

        dkw = self.config["design"]
        model = None
        if choice == "calibrated" and self._n_classes == 2:
            try:
                from .models.calibrated import calibrated_model
            except ImportError:  # pragma: no cover - older model collections
                calibrated_model = None
            if calibrated_model is not None:
                model = calibrated_model(leaf_probs(core.cells, core.n_strata))
        if model is None:
            if choice in ("design", "calibrated", dkw.get("model")):
                model = design.model
                if model is None:  # static Poisson design: the model the adaptive one would use
                    from .poisson_designs import build_model

                    model = build_model(dkw.get("model", "dirichlet-tree"), core.cells, core.n_strata,
                                        depth=dkw.get("depth", 8), branching=dkw.get("branching"),
                                        strength=dkw.get("strength", 1.0), em_iters=dkw.get("em_iters", 10))
            else:
                model = make_model(choice, leaf_probs(core.cells, core.n_strata), depth=dkw.get("depth", 8),
                                   branching=dkw.get("branching"))
        core.jitted[("posterior_model", choice)] = model
        return model

    def _has_model(self) -> bool:
        return self._core.design.model is not None or self._poisson is not None

    def posterior(self, n_draws: int = 1000, seed: int | None = None) -> np.ndarray | None:
        """Draws (n, m) of every component of G on this pool, or None.

        The hook for the Bayesian finite-pool posterior (DESIGN.md §4): None unless the
        design carries an oracle model (AIS, the Poisson designs) and the oracle is
        deterministic.  Otherwise
        :func:`bayes_eval.posterior.finite_pool_posterior` given the labels of the closed
        stages, with :meth:`posterior_model` fitted to them — the recipe of the
        simulation's Bayesian intervals.  The same key serves every measure, so the draws
        of different measures come from the same completed pools.  For NUTS, ArviZ
        diagnostics and posterior predictive checks see
        :func:`bayes_eval.report.report_from_session`.
        """
        model = self.posterior_model()
        if model is None or self._stochastic:
            return None
        from .posterior import finite_pool_posterior, leaf_counts

        seed = self.seed if seed is None else int(seed)
        key = (int(n_draws), seed)
        if key in self._post_cache:
            return self._post_cache[key]
        core = self._core
        fkey = ("posterior", self.config.get("posterior_model") or "calibrated", int(n_draws))
        fn = core.jitted.get(fkey)
        if fn is None:
            measures = tuple(self.measures)

            def all_measures(rkey, labeled):
                cnt, unl = leaf_counts(core.cells, labeled, core.n_strata)
                state = model.fit(model.init_state(), cnt, unl)
                out = []
                for j, m in enumerate(measures):
                    cells_j = core.cells._replace(loss=core.loss_tables[j])
                    post = finite_pool_posterior(rkey, model, cells_j, labeled, core.n_strata, m.g,
                                                 n_draws=int(n_draws), state=state)
                    out.append(post.value)
                return jnp.concatenate(out, axis=1)

            fn = jax.jit(all_measures)
            core.jitted[fkey] = fn
        rkey = jax.random.fold_in(jax.random.PRNGKey(seed), len(self._snapshots))
        draws = np.asarray(fn(rkey, jnp.asarray(self._labeled)))
        self._post_cache[key] = draws
        return draws

    def bayesian_interval(self, level: float = 0.95, n_draws: int = 1000, seed: int | None = None):
        """Equal-tailed Bayesian intervals of every component from :meth:`posterior`, or
        None when the design has no oracle model.  Columns as :meth:`intervals`
        (``kind="bayes"``, ``estimate`` = posterior median)."""
        draws = self.posterior(n_draws, seed)
        if draws is None:
            return None
        a = (1 - level) / 2
        with np.errstate(all="ignore"):
            lo = np.nanquantile(draws, a, axis=0) if np.isfinite(draws).any() else np.full(draws.shape[1], np.nan)
            hi = np.nanquantile(draws, 1 - a, axis=0) if np.isfinite(draws).any() else lo
            med = np.nanmedian(draws, axis=0) if np.isfinite(draws).any() else lo
        return pd.DataFrame({"component": self._names, "kind": "bayes", "level": level, "estimate": med,
                             "lower": lo, "upper": hi})

    # ------------------------------------------------------------------ reports
    def weight_stats(self) -> dict:
        """Effective sample size (Σw)²/Σw² and the largest weight of the draws so far."""
        ess = self._sum_w**2 / self._sum_w2 if self._sum_w2 > 0 else 0.0
        return {"ess": ess, "max_weight": self._max_w, "draws": self._n_draws}

    def summary(self, level: float = 0.95, bayesian: bool = False) -> pd.DataFrame:
        """One row per component: estimate, standard error, CLT interval (and Bayesian
        interval with ``bayesian=True``), labels, draws, ESS, largest weight."""
        v, sd = self._values()
        z = _z(level)
        measure_of = [m.name for m in self.measures for _ in m.names]
        ws = self.weight_stats()
        df = pd.DataFrame({"measure": measure_of, "component": self._names, "estimate": v, "std_error": sd,
                           "clt_lower": v - z * sd, "clt_upper": v + z * sd})
        if bayesian:
            b = self.bayesian_interval(level)
            if b is not None:
                df["bayes_lower"] = b["lower"].to_numpy()
                df["bayes_upper"] = b["upper"].to_numpy()
        df["level"] = level
        df["labels"] = self._n_labels
        df["draws"] = ws["draws"]
        df["ess"] = ws["ess"]
        df["max_weight"] = ws["max_weight"]
        return df

    def history(self, level: float = 0.95) -> pd.DataFrame:
        """Every closed stage: labels and draws after it, ESS, largest weight, times, and
        the estimate and CLT interval of each component (long format)."""
        z = _z(level)
        parts = []
        for i, s in enumerate(self._snapshots):
            v, sd = self._values(i)
            parts.append(pd.DataFrame({
                "stage": s.stage, "labels": s.labels, "draws": s.draws, "new_labels": s.n_new, "ess": s.ess,
                "max_weight": s.max_weight, "opened_at": s.opened_at, "closed_at": s.closed_at,
                "component": self._names, "estimate": v, "std_error": sd, "lower": v - z * sd, "upper": v + z * sd}))
        if not parts:
            return pd.DataFrame(columns=["stage", "labels", "draws", "new_labels", "ess", "max_weight", "opened_at",
                                         "closed_at", "component", "estimate", "std_error", "lower", "upper"])
        return pd.concat(parts, ignore_index=True)

    def labels(self) -> pd.DataFrame:
        """Every accepted label with its arrival time (from the session file)."""
        rows = self._store.labels()
        return pd.DataFrame(rows, columns=["id", "row", "item", "label", "draw", "stage", "ingest", "arrived_at"])

    def draws(self) -> pd.DataFrame:
        """Every draw: stage, item, whether it asked for a label, q and weight."""
        rows = self._store.draws()
        return pd.DataFrame(rows, columns=["draw", "stage", "row", "item", "new", "q", "weight"])

    def stopping(self, target_width: float, level: float = 0.95, bayesian: bool = False) -> dict:
        """Whether the ``level`` interval is narrower than ``target_width``, and how many
        more labels that is expected to take.

        The interval is the CLT interval of the first measure's widest component — with
        ``bayesian=True`` and a design that carries a model, the wider of the CLT and the
        Bayesian interval (the CLT interval is optimistic after few labels).  Its width
        is extrapolated as width ∝ 1/sqrt(labels) from the current value: an
        *extrapolation*, not a promise (AIS typically does better, the first stages
        worse).
        """
        if not target_width > 0:
            raise SessionError(f"the target width must be positive, got {target_width}")
        iv = self.intervals(level, bayesian=bayesian)
        m0 = len(self.measures[0].names)
        first = set(self._names[:m0])
        iv = iv[iv["component"].isin(first)]
        width = (iv["upper"] - iv["lower"]).to_numpy()
        out = {"target_width": float(target_width), "level": level, "labels_in_estimate": self._n_labels}
        if not self._snapshots or not np.isfinite(width).any():
            out.update(width=None, component=None, kind=None, reached=False, more_labels=None,
                       note="the interval is not defined yet; label more items")
            return out
        i = int(np.nanargmax(width))
        wmax = float(width[i])
        out.update(width=wmax, component=str(iv["component"].iloc[i]), kind=str(iv["kind"].iloc[i]))
        if wmax <= 0:
            out.update(reached=False, more_labels=None,
                       note="the interval has zero width (too few informative labels for the CLT); label more items")
            return out
        reached = wmax < target_width
        need = self._n_labels * (wmax / target_width) ** 2
        more = 0 if reached else int(math.ceil(need - self._n_labels))
        out.update(reached=bool(reached), more_labels=more,
                   note="extrapolation: width assumed to shrink as 1/sqrt(labels) from the current width")
        return out

    def status(self, target_width: float | None = None, level: float = 0.95, bayesian: bool = False) -> dict:
        """A JSON-ready summary of the session (what ``bayes-eval session status`` shows).

        ``labels`` counts every accepted label (the budget spent, an open batch's
        partial labels included); ``labels_in_estimate`` those of the closed stages,
        which the estimate and intervals rest on.
        """
        iv = self.intervals(level, bayesian=bayesian)
        v, sd = self._values()
        comps = []
        for k, name in enumerate(self._names):
            row = {"component": name, "estimate": _f(v[k]), "std_error": _f(sd[k])}
            for kind in ("clt", "bayes"):
                sel = iv[(iv["component"] == name) & (iv["kind"] == kind)]
                if len(sel):
                    row[f"{kind}_lower"] = _f(sel["lower"].iloc[0])
                    row[f"{kind}_upper"] = _f(sel["upper"].iloc[0])
            comps.append(row)
        ws = self.weight_stats()
        out = {
            "session": self.path,
            "pool": self.config["pool"],
            "measures": [m.name for m in self.measures],
            "design": self.design_name,
            "oracle": self.oracle,
            "seed": self.seed,
            "stages": self.n_stages,
            "labels": self.n_labels,
            "labels_in_estimate": self._n_labels,
            "pending": self.n_pending,
            "draws": ws["draws"],
            "ess": _f(ws["ess"]),
            "max_weight": _f(ws["max_weight"]),
            "level": level,
            "estimates": comps,
        }
        if self._poisson is not None:
            dkw = self.config["design"]
            out["poisson"] = {
                "rounds": len(self._rounds),
                "round_size": "random" if dkw.get("fixed_size") is None else dkw.get("fixed_size"),
                "estimator": dkw.get("estimator"), "weights": dkw.get("weights"), "variance": dkw.get("variance"),
                "exact": self.is_exact,
            }
        if target_width is not None:
            out["stopping"] = self.stopping(target_width, level, bayesian=bayesian)
        return out

    def plot_progress(self, path: str | None = None, components: Sequence[str] | None = None, level: float = 0.95,
                      bayesian: bool = False):
        """Estimate and CLT interval against labels spent (PNG via matplotlib's Agg).

        ``components`` defaults to the first measure's first component (up to four may
        be given); ``bayesian=True`` adds the current Bayesian interval (designs with an
        oracle model).  Returns the path written, or the Figure when ``path`` is None.
        """
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        comps = list(components) if components is not None else [self._names[0]]
        unknown = [c for c in comps if c not in self._names]
        if unknown:
            raise SessionError(f"unknown components {unknown}; the session has {self._names[:8]}...")
        h = self.history(level)
        fig = Figure(figsize=(7, 4.2), dpi=110)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        for c in comps[:4]:
            d = h[h["component"] == c]
            if d.empty:
                continue
            line = ax.plot(d["labels"], d["estimate"], marker="o", ms=3, label=f"{c} (estimate)")[0]
            ax.fill_between(d["labels"].to_numpy(float), d["lower"].to_numpy(float), d["upper"].to_numpy(float),
                            color=line.get_color(), alpha=0.2, label=f"{int(level * 100)}% CLT interval")
        if bayesian and self._snapshots and self._has_model() and not self._stochastic:
            b = self.bayesian_interval(level)
            if b is not None:
                for c in comps[:4]:
                    r = b[b["component"] == c]
                    if len(r) and np.isfinite(r["lower"].iloc[0]):
                        x = self._n_labels
                        ax.errorbar([x * 1.01], [r["estimate"].iloc[0]],
                                    yerr=[[r["estimate"].iloc[0] - r["lower"].iloc[0]],
                                          [r["upper"].iloc[0] - r["estimate"].iloc[0]]],
                                    fmt="s", color="black", capsize=4, label=f"{int(level * 100)}% Bayesian (now)")
        ax.set_xlabel("labels spent")
        ax.set_ylabel("estimate")
        ax.set_title(f"{', '.join(m.name for m in self.measures)} — design {self.design_name}, "
                     f"{self._n_labels} labels")
        ax.grid(alpha=0.3)
        if h.shape[0]:
            ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
        if path is None:
            return fig
        fig.savefig(path, format="png")
        return path

    # ------------------------------------------------------------------ diagnostics
    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` of the session file ("ok")."""
        return self._store.integrity_check()

    def snapshots(self) -> list[StageSnapshot]:
        return list(self._snapshots)


def _z(level: float) -> float:
    """z_{(1+level)/2}, the normal quantile of a two-sided ``level`` interval."""
    if not 0 < level < 1:
        raise SessionError(f"level must be in (0, 1), got {level}")
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2)


def _f(v):
    v = float(v)
    return v if math.isfinite(v) else None
