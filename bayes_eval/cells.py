"""Compress a pool into *cells* of interchangeable items (``docs/architecture.md``, "Cells").

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

import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401
from .strata import Strata

__all__ = ["CellTable", "build_cells", "item_patterns", "combine_keys", "prior_key", "leaf_counts", "leaf_probs",
           "PosteriorUnits", "posterior_units"]


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
        # in chunks: a 10^8-item pool must not be copied into JAX whole
        big = 1 << 21
        out = np.empty(n, np.int64)
        for s in range(0, n, big):
            sub = type(features)(*(jnp.asarray(a[s : s + big]) for a in features))
            out[s : s + big] = np.asarray(measure.pattern(sub), dtype=np.int64).reshape(-1)
        return out
    rows = []
    for s in range(0, n, chunk):
        sub = type(features)(*(np.asarray(a[s : s + chunk]) for a in features))
        rows.append(np.asarray(measure.loss(sub)).reshape(min(chunk, n - s), -1))
    table = np.concatenate(rows, axis=0)
    _, inv = np.unique(table, axis=0, return_inverse=True)
    return inv.reshape(-1).astype(np.int64)


def combine_keys(keys):
    """Map rows of several non-negative integer key columns to consecutive group ids.

    Returns ``(inverse, first, counts)``: the group of every row, the first row of every
    group, and group sizes.  The columns are combined by mixed radix into one int64 (one
    1-D sort of N values, no N × k temporary) when the product of their ranges fits;
    otherwise a row-wise unique is used.
    """
    cols = [np.asarray(k).reshape(-1) for k in keys]
    n = cols[0].shape[0]
    radices = [int(c.max()) + 1 if c.size else 1 for c in cols]

    def key_of(a, b):
        key = np.zeros(b - a, dtype=np.int64)
        for c, r in zip(cols, radices):
            key *= r
            key += c[a:b]
        return key

    if float(np.prod([float(r) for r in radices])) < 2.0**62:
        n_keys = int(np.prod(radices))
        if n_keys <= max(1 << 22, 4 * n):
            # dense keys: O(N) counting instead of an O(N log N) sort (2.3 s at 10^7
            # items), in chunks, so no N-sized int64 key is ever held (10^8 items)
            step = 1 << 22
            counts_all = np.zeros(n_keys, dtype=np.int64)
            first_all = np.full(n_keys, n, dtype=np.int64)
            for a in range(0, n, step):
                b = min(a + step, n)
                key = key_of(a, b)
                counts_all += np.bincount(key, minlength=n_keys)
                np.minimum.at(first_all, key, np.arange(a, b, dtype=np.int64))
            present = counts_all > 0
            group_of_key = np.cumsum(present) - 1
            small = group_of_key.size == 0 or group_of_key[-1] < 2**31 - 1
            inv = np.empty(n, dtype=np.int32 if small else np.int64)  # 4 bytes per item, not 8
            for a in range(0, n, step):
                inv[a:a + step] = group_of_key[key_of(a, min(a + step, n))]
            return inv, first_all[present], counts_all[present]
        key = key_of(0, n)
        _, first, inv, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    else:  # pragma: no cover - astronomically many distinct keys
        stacked = np.stack([c.astype(np.int64) for c in cols], axis=1)
        _, first, inv, counts = np.unique(stacked, axis=0, return_index=True, return_inverse=True, return_counts=True)
    return inv.reshape(-1), first, counts


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
    from .measures import Features

    feats = Features(preds=pool.preds, scores=pool.scores, probs=pool.probs)  # NumPy; chunks go to JAX
    pattern = item_patterns(measure, feats)
    keys = [strata.index, pattern]
    if not pool.uniform_weights:
        keys.append(np.unique(pool.weights, return_inverse=True)[1].reshape(-1))
    if extra_key is not None:
        keys.append(np.asarray(extra_key).reshape(-1))
    item_cell, first, counts = combine_keys(keys)
    del pattern
    x = int(first.shape[0])
    size = counts.astype(np.float64)
    rep = type(feats)(*(np.asarray(a)[first] for a in feats))
    loss = np.asarray(measure.loss(rep), dtype=np.float64)
    c = pool.n_classes
    probs = pool.probs[:, system, :]  # a view: bincount reads one strided column at a time
    labels = pool.labels if labels is None else labels
    labels = None if labels is None else np.asarray(labels)
    prior = np.zeros((x, c))
    truth = np.zeros((x, c))
    step = 1 << 22
    for a in range(0, item_cell.shape[0], step):  # chunked: bincount copies its inputs
        ic = item_cell[a:a + step]
        for j in range(c):
            prior[:, j] += np.bincount(ic, weights=probs[a:a + step, j], minlength=x)
        if labels is not None:
            truth += np.bincount(ic * c + labels[a:a + step], minlength=x * c).reshape(x, c)
    prior /= size[:, None]
    cells = CellTable(
        stratum=jnp.asarray(strata.index[first], dtype=jnp.int32),
        size=jnp.asarray(size),
        weight=jnp.asarray(np.asarray(pool.weights)[first]),
        loss=jnp.asarray(loss),
        prior=jnp.asarray(prior),
        truth=jnp.asarray(truth),
    )
    return cells, item_cell


def prior_key(pool, resolution: float = 0.02, system: int = 0):
    """Cell key for designs whose proposal varies item by item with the classifier's
    probability (static IS): the logit of each class probability on a grid of width
    ``resolution``.  The proposal is then constant on a cell — so the estimator stays
    exactly unbiased — and differs from the per-item proposal by well under 1%.
    """
    pr = np.clip(np.asarray(pool.probs[:, system, :]), 1e-300, 1.0)
    logit = np.log(pr) - np.log1p(-np.clip(pr, 0, 1 - 1e-16))
    q = np.round(logit / resolution).astype(np.int64)
    _, inv = np.unique(q, axis=0, return_inverse=True)
    return inv.reshape(-1)



def leaf_counts(cells: CellTable, labeled, n_strata: int, observations: bool = False):
    """Labeled items per stratum and class (K, C), and unlabeled items per stratum (K,):
    what the oracle models of 001 §4 condition on (they work on counts per leaf).
    ``observations`` (a stochastic oracle): ``labeled`` counts label observations, and there
    are no unlabeled items to complete (zeros)."""
    counts = jax.ops.segment_sum(labeled, cells.stratum, num_segments=n_strata)
    if observations:
        return counts, jnp.zeros(n_strata, counts.dtype)
    unl = jax.ops.segment_sum(cells.size - labeled.sum(1), cells.stratum, num_segments=n_strata)
    return counts, unl


def leaf_probs(cells: CellTable, n_strata: int):
    """(K, C) mean classifier probability s(y|k) of the items in each stratum (001 §5.2).

    NumPy: built once per design, outside any compiled function (eager JAX here was a few
    dozen small programs per CLI command, ``benchmarks/results/latency.md``)."""
    size, stratum = np.asarray(cells.size, np.float64), np.asarray(cells.stratum)
    prior = np.asarray(cells.prior, np.float64)
    size_k = np.bincount(stratum, weights=size, minlength=n_strata)[:n_strata]
    tot = np.stack([np.bincount(stratum, weights=size * prior[:, c], minlength=n_strata)[:n_strata]
                    for c in range(prior.shape[1])], axis=1)
    return tot / np.maximum(size_k, 1.0)[:, None]


class PosteriorUnits(NamedTuple):
    """The groups of items a posterior model treats as exchangeable (its "leaves").

    Attributes
    ----------
    cells : CellTable
        The pool's cells with ``stratum`` replaced by the unit of each cell, so that
        :func:`leaf_counts` and :mod:`bayes_eval.posterior` work on units unchanged.
    n_units : int
    probs : numpy.ndarray, shape (U, C)
        Mean classifier probability s(y|u) of the unit's items (what
        :func:`leaf_probs` is for strata).
    stratum : numpy.ndarray, shape (U,)
        The stratum of every unit (for reports per stratum).
    """

    cells: CellTable
    n_units: int
    probs: np.ndarray
    stratum: np.ndarray


def posterior_units(cells: CellTable, n_strata: int, by: str = "cell") -> PosteriorUnits:
    """The units of the finite-pool posterior.

    ``by="stratum"``: the strata (what the Dirichlet tree of 001 §4 needs: its leaves are
    the score strata in order).

    ``by="cell"``: the items of one stratum that share the measure's loss pattern and
    the item weight p(x) -- the cells of every design without a per-item proposal, and
    the cells of ``is`` / ``poisson`` merged across their fine prior key.  Why: 001 §4.2's
    ignorability makes the design irrelevant to the posterior *if the model is right*;
    a model that pools a stratum's items assumes them exchangeable, but the designs draw
    the items of one stratum at different rates when their predictions differ (for F1
    an item predicted positive has a nonzero loss for both classes, one predicted
    negative only for the positive class, 002 §3).  Where a stratum straddles the
    decision threshold, its labeled items are then mostly the predicted positives --
    mostly positive -- and a per-stratum rate puts their positive rate on the unlabeled
    predicted negatives.  On dblp-acm (the top stratum: 18 predicted positives, all
    positive; 4 predicted negatives, one positive) that made the Bayesian interval miss
    in 11.5% of AIS runs at 500 labels, every miss a run that had found all 20
    positives; per cell, 2% (``benchmarks/results/interval_units.md``).

    Parameters
    ----------
    cells : CellTable
    n_strata : int
    by : {"cell", "stratum"}

    Returns
    -------
    PosteriorUnits
    """
    if by == "stratum":
        return PosteriorUnits(cells, int(n_strata), leaf_probs(cells, n_strata), np.arange(int(n_strata)))
    if by != "cell":
        raise ValueError(f"posterior units are by 'cell' or by 'stratum', got {by!r}")
    stratum = np.asarray(cells.stratum, np.int64)
    x = stratum.shape[0]
    loss = np.asarray(cells.loss, np.float64).reshape(x, -1)
    weight = np.asarray(cells.weight, np.float64)
    keys = [stratum, np.unique(loss, axis=0, return_inverse=True)[1].reshape(-1),
            np.unique(weight, return_inverse=True)[1].reshape(-1)]
    unit, first, _ = combine_keys(keys)
    unit = np.asarray(unit, np.int64)
    n_units = int(first.shape[0])
    size = np.asarray(cells.size, np.float64)
    prior = np.asarray(cells.prior, np.float64)
    size_u = np.bincount(unit, weights=size, minlength=n_units)
    probs = np.stack([np.bincount(unit, weights=size * prior[:, c], minlength=n_units)
                      for c in range(prior.shape[1])], axis=1) / np.maximum(size_u, 1.0)[:, None]
    ucells = cells._replace(stratum=jnp.asarray(unit, dtype=jnp.int32))
    return PosteriorUnits(ucells, n_units, probs, stratum[first])

