"""Compress a pool into *cells* of interchangeable items (DESIGN.md §5).

Every proposal in this package is constant on a cell: items that share a stratum, the
loss-relevant prediction pattern of the measure, and the item weight p(x) get the same
proposal value, the same posterior predictive and the same loss ℓ(x, y) for every class
y.  So the numerical core works on X cells ("xcells") instead of N items, and a
simulated pool with ground truth is the (X, C) table of true class counts per cell.

Drawing an item from a proposal q is then: draw a cell with probability (items in the
cell) × (per-item q), then an item uniformly inside it — the same distribution as drawing
the item directly, at a cost that grows with X, not N.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401
from .strata import Strata

__all__ = ["CellTable", "build_cells", "item_patterns"]


class CellTable(NamedTuple):
    """Static description of the X cells of a pool (a pytree of arrays).

    Attributes
    ----------
    stratum : (X,) int32 — the stratum (tree leaf) of the cell.
    size : (X,) float64 — number of items in the cell.
    weight : (X,) float64 — per-item p(x) (sums to one over the pool: Σ size·weight = 1).
    loss : (X, C, d) float64 — ℓ(x, y) for every class y.
    prior : (X, C) float64 — mean classifier probability s(y|x) of the cell's items.
    truth : (X, C) float64 — true class counts per cell (zeros when unknown).
    """

    stratum: jnp.ndarray
    size: jnp.ndarray
    weight: jnp.ndarray
    loss: jnp.ndarray
    prior: jnp.ndarray
    truth: jnp.ndarray

    @property
    def n_cells(self) -> int:
        return int(self.stratum.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.loss.shape[1])


def item_patterns(measure, features, chunk: int = 65536) -> np.ndarray:
    """(N,) int64 pattern ids: items with equal id have identical loss rows ℓ(x, ·).

    Uses ``measure.pattern`` when the measure provides it; otherwise groups identical
    rows of the loss table, computed in chunks.
    """
    n = int(features.preds.shape[0])
    if getattr(measure, "pattern", None) is not None:
        return np.asarray(measure.pattern(features), dtype=np.int64).reshape(n)
    rows = []
    for s in range(0, n, chunk):
        sub = type(features)(*(np.asarray(a[s : s + chunk]) for a in features))
        rows.append(np.asarray(measure.loss(sub)).reshape(min(chunk, n - s), -1))
    table = np.concatenate(rows, axis=0)
    _, inv = np.unique(table, axis=0, return_inverse=True)
    return inv.reshape(-1).astype(np.int64)


def _combine_keys(keys):
    """Map rows of several int64 key columns to consecutive group ids (first-seen order
    is irrelevant; ids follow lexicographic order of the keys)."""
    stacked = np.stack([np.asarray(k, dtype=np.int64) for k in keys], axis=1)
    _, inv = np.unique(stacked, axis=0, return_inverse=True)
    return inv.reshape(-1)


def build_cells(pool, strata: Strata, measure, labels=None, extra_key=None, system: int = 0):
    """Group the pool's items into cells.

    Parameters
    ----------
    pool : Pool
    strata : Strata
    measure : Measure
    labels : (N,) int, optional
        Ground truth (defaults to ``pool.labels``); fills ``CellTable.truth``.
    extra_key : (N,) int, optional
        A further key that splits cells (e.g. the item's own prior probability, for
        designs whose proposal varies item by item).
    system : int
        Whose probabilities make the ``prior``.

    Returns
    -------
    cells : CellTable
    item_cell : (N,) int64 — the cell of every item.
    """
    feats = pool.features()
    pattern = item_patterns(measure, feats)
    _, wgroup = np.unique(pool.weights, return_inverse=True)
    keys = [strata.index, pattern, wgroup.reshape(-1)]
    if extra_key is not None:
        keys.append(np.asarray(extra_key).reshape(-1))
    item_cell = _combine_keys(keys)
    x = int(item_cell.max()) + 1
    first = np.full(x, -1, dtype=np.int64)
    # representative item of each cell: the first one
    order = np.argsort(item_cell, kind="stable")
    starts = np.searchsorted(item_cell[order], np.arange(x))
    first = order[starts]
    size = np.bincount(item_cell, minlength=x).astype(np.float64)
    rep = type(feats)(*(np.asarray(a)[first] for a in feats))
    loss = np.asarray(measure.loss(rep), dtype=np.float64)
    c = pool.n_classes
    prior = np.zeros((x, c))
    np.add.at(prior, item_cell, np.asarray(pool.probs[:, system, :]))
    prior /= size[:, None]
    truth = np.zeros((x, c))
    labels = pool.labels if labels is None else labels
    if labels is not None:
        np.add.at(truth, (item_cell, np.asarray(labels)), 1.0)
    cells = CellTable(
        stratum=jnp.asarray(strata.index[first], dtype=jnp.int32),
        size=jnp.asarray(size),
        weight=jnp.asarray(np.asarray(pool.weights)[first]),
        loss=jnp.asarray(loss),
        prior=jnp.asarray(prior),
        truth=jnp.asarray(truth),
    )
    return cells, item_cell
