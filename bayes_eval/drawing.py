"""Item-level drawing of a session's stages: a pure function of (seed, stage, labels so far).

* **With-replacement stages** (001 Alg. 1; ``docs/architecture.md``, "Oracle semantics"):
  :func:`draw_stage` draws i.i.d. from the fixed per-item proposal q_{t-1}
  (``Proposal.unl`` for an item without a label, ``Proposal.lab[x, y]`` for a labeled item
  of class y) until ``n`` *new* items are drawn.  A group (cell × labeled-or-not × class) is
  drawn with probability ∝ its mass, then an item uniformly inside it; the items of a group
  are found in an order that depends only on *which* items are labeled, so after a crash
  the next batch is the one that would have come.
* **Poisson rounds** (000 §3): :func:`poisson_pick` selects distinct unlabeled items with
  one uniform per pool row — Poisson (random size), Pareto or sequential Poisson sampling
  (fixed size).

The generator of stage t is :func:`stage_rng` ``(seed, t)``.  NumPy only (no JAX).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .errors import SessionError
from .poisson import round_candidates

__all__ = ["DrawResult", "draw_stage", "poisson_pick", "stage_rng", "order_positions", "POISSON_SIZES", "MAX_DRAWS"]

#: how a fixed-size Poisson round is drawn (None: true Poisson rounds of random size)
POISSON_SIZES = ("pareto", "sequential", None)
_CHUNK = 64
#: draws of one stage at most (as ``simulate_runs``' ``max_chunks``)
MAX_DRAWS = 4096 * _CHUNK


#: a constant word in every stage's seed: ``SeedSequence([seed, 0])`` is the stream of
#: ``np.random.default_rng(seed)`` (the entropy is zero-padded), so without it a synthetic pool
#: generated with the session's own seed drew items correlated with its labels (seen: a Poisson
#: session of seed 0 on ``demo_pool(seed=0)`` drew 385 of its 386 items from the positives)
_STREAM = 0x62617965  # "baye"


def stage_rng(seed: int, stage: int) -> np.random.Generator:
    """The generator of stage (or round) ``stage``: ``Generator(PCG64(SeedSequence([seed,
    stage, _STREAM])))`` — independent of any generator seeded with ``seed`` alone."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(stage), _STREAM])))


def order_positions(order, cell_start, rows, cells) -> np.ndarray:
    """Positions of ``rows`` (in cells ``cells``) in ``order``, the rows sorted by (cell, row)
    with cell ``x`` at ``order[cell_start[x]:cell_start[x + 1]]``."""
    if hasattr(order, "positions_of"):  # a partitioned pool's order, kept on the workers
        return order.positions_of(rows, cells)
    out = np.empty(rows.size, np.int64)
    for cell in np.unique(cells):
        m = cells == cell
        lo, hi = cell_start[cell], cell_start[cell + 1]
        out[m] = lo + np.searchsorted(order[lo:hi], rows[m])
    return out


class DrawResult(NamedTuple):
    rows: np.ndarray  # (k,) pool rows drawn, in draw order
    cells: np.ndarray  # (k,) their cells
    new: np.ndarray  # (k,) bool: asks for a label
    q: np.ndarray  # (k,) per-item proposal probability at draw time
    gpos: np.ndarray  # (k,) position of the row in ``order`` (valid for new draws)
    stalled: bool


def draw_stage(rng: np.random.Generator, unl_q, lab_q, size, order, cell_start, n: int, stochastic: bool,
               lab_cells=None, lab_classes=None, lab_rows=None, lab_gpos=None,
               max_draws: int = MAX_DRAWS, skipped=None) -> DrawResult:
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
    skipped : dict row -> cell, optional
        Items nobody can label (``Session.skip``): drawn like any unlabeled item (their
        draws enter the estimator as draws outside the measure's population) but never
        new, and their mass is not counted as unlabeled mass left.
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
    skipped = skipped or {}
    seen = set(skipped)
    got = 0
    drawn = 0
    rem = float(np.sum(cnt_b * unl_q))
    if not stochastic:
        rem -= float(sum(unl_q[cl] for cl in skipped.values()))
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
            is_new = bool(is_b[i]) and r not in seen
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




def poisson_pick(rng: np.random.Generator, item_cell, labeled_rows, b_cell, n: int,
                 method: str | None = None) -> np.ndarray:
    """Select one Poisson round at item level (000 §3; fixed size: Pareto / sequential
    Poisson sampling, as :func:`bayes_eval.poisson_designs.fixed_size_round_counts` on cells).

    ``labeled_rows``: the rows labeled so far (not candidates).  Every pool row ``i`` gets
    one uniform ``u_i`` — the ``i``-th of ``rng.random``, drawn in
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
    if method not in (None, "pareto", "sequential"):
        raise SessionError(f"fixed-size method must be one of {POISSON_SIZES}, got {method!r}")
    b_cell = np.clip(np.asarray(b_cell, np.float64), 0.0, 1.0)
    n = int(n)
    labeled_rows = np.asarray(labeled_rows, np.int64)
    if getattr(item_cell, "lazy", False):
        # a partitioned pool: each partition picks its candidates on its worker from its own
        # stretch of the same stream of uniforms (partitioned_cells.CellsView.poisson_pick)
        sure_r, cand_r, cand_k = item_cell.poisson_pick(rng, labeled_rows, b_cell, n, method)
    else:
        item_cell = np.asarray(item_cell)
        mask = np.zeros(item_cell.size, bool)
        mask[labeled_rows] = True
        sure_r, cand_r, cand_k = round_candidates(rng, item_cell, mask, b_cell, n, method, 0)
    order = np.lexsort((cand_r, cand_k))
    if method is not None:
        order = order[:max(n - sure_r.size, 0)]
    return np.concatenate([sure_r, cand_r[order]]).astype(np.int64)
