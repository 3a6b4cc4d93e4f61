"""The strata and cells of a :class:`~bayes_eval.partitioned.PartitionedPool`, computed on
Dask, and the per-batch lookup of drawn items (issue 19).

The passes reproduce :func:`bayes_eval.strata.stratify` and
:func:`bayes_eval.cells.build_cells` exactly, partition by partition: the CSF histogram
(001 §5.2) is a sum of per-partition histograms on the global score range, the strata's
relabelling and the tie split by predicted class are reductions (counts, min, max), and
the cells are the sorted distinct keys (stratum × loss pattern × further measures'
patterns) of the whole pool, so cell ``x`` is the same cell under either engine.  Only the
cells' mean prior probability is a sum of floating-point numbers; it is summed per
partition, so it agrees with the memory engine to round-off (not bit for bit).

Each partition keeps on its worker the cell of each of its items and its items sorted by
cell (:func:`task_assign`); the driver keeps the cells and the (partitions × cells) table of
counts.  A position ``cell_start[x] + k`` of the memory engine's ``order`` (rows sorted by
(cell, row)) is the ``k``-th item of cell ``x`` over the partitions in order: the partition
is chosen by the cumulated counts of cell ``x``, the row by rank inside it
(:class:`OrderView`), so :func:`bayes_eval.drawing.draw_stage` draws the same items.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .errors import PoolError
from .partitioned import WorkerView
from .strata import Strata

__all__ = ["StrataPlan", "partitioned_strata", "partitioned_cells", "CellsView", "OrderView", "strata_of",
           "z_of"]


class Scale(NamedTuple):
    kind: str
    interior: tuple | None  # global (min, max) interior probability
    halve: bool  # margins whose range overflows (scores.stratification_scale)


class StrataPlan(NamedTuple):
    """What maps a partition's scores to strata (small; shipped to the workers)."""

    method: str
    uniq: np.ndarray | None  # the distinct values (few-distinct CSF), else None
    lo: float
    hi: float
    nf: int  # fine bins (CSF) or bins (uniform)
    code_of_fine: np.ndarray | None  # CSF: fine bin -> code
    remap1: np.ndarray | None  # code -> stratum of the first cut (None: codes kept, keep_empty)
    mixed: np.ndarray | None  # strata split by predicted class (None: none)
    remap2: np.ndarray | None  # C*stratum + class -> final stratum
    n_classes: int = 2


def z_of(s, scale: Scale) -> np.ndarray:
    """:func:`bayes_eval.scores.stratification_scale` with the pool-wide numbers it needs."""
    s = np.asarray(s, dtype=np.float64).reshape(-1)
    if scale.kind in ("margin", "logit", "none"):
        return np.ldexp(s, -1) if scale.halve else s
    if scale.kind == "probability":  # the pool-wide interior range: every partition on the same scale
        from .scores import logit_of_probability

        return logit_of_probability(s, scale.interior)  # None: no interior probability in the pool
    raise PoolError(f"score kind {scale.kind!r} is not supported by the dask engine")


def codes_of(z, plan: StrataPlan) -> np.ndarray:
    """The first cut's codes of scale values ``z`` (CSF fine bins mapped, or uniform bins)."""
    if plan.method == "csf":
        if plan.uniq is not None:
            fine = np.searchsorted(plan.uniq, z)
        else:
            fine = np.minimum(((z - plan.lo) / (plan.hi - plan.lo) * plan.nf).astype(np.int64), plan.nf - 1)
        return plan.code_of_fine[fine]
    if plan.hi == plan.lo:
        return np.zeros(z.size, np.int64)
    return np.minimum(((z - plan.lo) / (plan.hi - plan.lo) * plan.nf).astype(np.int64), plan.nf - 1)


def strata_of(part, plan: StrataPlan, scale: Scale, system: int = 0) -> np.ndarray:
    """(n,) the stratum of every item of a partition under ``plan``."""
    z = z_of(part.scores[:, system], scale)
    idx = codes_of(z, plan)
    if plan.remap1 is not None:
        idx = plan.remap1[idx]
    if plan.mixed is not None:
        idx = plan.remap2[_split_codes(idx, np.asarray(part.preds[:, system]), plan)]
    return idx.astype(np.int32)


def _split_codes(idx, pred, plan: StrataPlan) -> np.ndarray:
    """``C*stratum + class`` for the items of split strata, ``C*stratum`` for the others (as
    :func:`bayes_eval.strata.stratify` codes them)."""
    return plan.n_classes * idx.astype(np.int64) + np.where(plan.mixed[idx], pred, 0)


# ------------------------------------------------------------------------------ worker tasks
def task_distinct(part, scale, limit):
    z = z_of(part.scores[:, 0], scale)
    u = np.unique(z[:65_536])
    if u.size <= limit:
        u = np.unique(z)
    return (u if u.size <= limit else None), float(z.min()), float(z.max())


def task_hist(part, scale, plan: StrataPlan, n_codes: int):
    z = z_of(part.scores[:, 0], scale)
    if plan.method == "csf":
        if plan.uniq is not None:
            fine = np.searchsorted(plan.uniq, z)
        else:
            fine = np.minimum(((z - plan.lo) / (plan.hi - plan.lo) * plan.nf).astype(np.int64), plan.nf - 1)
        return np.bincount(fine, minlength=n_codes)
    return np.bincount(codes_of(z, plan), minlength=n_codes)


def task_mixed(part, scale, plan: StrataPlan, k: int):
    z = z_of(part.scores[:, 0], scale)
    idx = plan.remap1[codes_of(z, plan)] if plan.remap1 is not None else codes_of(z, plan)
    pred = np.asarray(part.preds[:, 0])
    neg, pos = pred == 0, pred != 0
    hi_neg = np.full(k, -np.inf)
    lo_pos = np.full(k, np.inf)
    np.maximum.at(hi_neg, idx[neg], z[neg])
    np.minimum.at(lo_pos, idx[pos], z[pos])
    return hi_neg, lo_pos


def task_classes(part, scale, plan: StrataPlan, k: int):
    """(k, C): which predicted classes each stratum of the first cut holds in a partition."""
    z = z_of(part.scores[:, 0], scale)
    idx = plan.remap1[codes_of(z, plan)] if plan.remap1 is not None else codes_of(z, plan)
    present = np.zeros((k, plan.n_classes), bool)
    present[idx, np.asarray(part.preds[:, 0])] = True
    return present


def task_code_counts(part, scale, plan: StrataPlan, k: int):
    """Counts of ``C*stratum + class`` (the split's codes) of a partition."""
    z = z_of(part.scores[:, 0], scale)
    idx = plan.remap1[codes_of(z, plan)] if plan.remap1 is not None else codes_of(z, plan)
    return np.bincount(_split_codes(idx, np.asarray(part.preds[:, 0]), plan), minlength=plan.n_classes * k)


def task_strata_bounds(part, scale, plan: StrataPlan, k: int):
    idx = strata_of(part, plan, scale)
    raw = np.asarray(part.scores[:, 0], dtype=np.float64)
    lower = np.full(k, np.inf)
    upper = np.full(k, -np.inf)
    np.minimum.at(lower, idx, raw)
    np.maximum.at(upper, idx, raw)
    return np.bincount(idx, minlength=k), lower, upper


def _gather(client, fn, parts, *args):
    return client.gather([client.submit(fn, part, *args, pure=False) for part in parts])


def partitioned_strata(pool, n_strata: int = 256, method: str = "csf", n_fine: int | None = None,
                       keep_empty: bool = False, class_bins: str = "proportional"):
    """``(Strata, plan, scale)``: :func:`bayes_eval.strata.stratify` of system 0, on Dask
    (``Strata.index`` is None: each partition computes its items' strata from the plan);
    ``class_bins`` as there, and ``"none"``: a pool of several classes not split by predicted
    class, as sessions on this engine were built before."""
    client, parts = pool.client, pool.parts
    lo_s, hi_s = pool.score_range
    halve = pool.score_kind in ("margin", "logit", "none") and 0.5 * hi_s - 0.5 * lo_s > 0.5 * np.finfo(np.float64).max
    scale = Scale(pool.score_kind, pool.interior, bool(halve))
    if method not in ("csf", "uniform"):
        raise ValueError(f"unknown stratification method {method!r}; use 'csf' or 'uniform'")
    k = int(n_strata)
    while True:
        nf = (n_fine or k) if method == "csf" else k
        dist = _gather(client, task_distinct, parts, scale, nf)
        lo, hi = min(d[1] for d in dist), max(d[2] for d in dist)
        uniq = None
        if method == "csf" and all(d[0] is not None for d in dist):
            u = np.unique(np.concatenate([d[0] for d in dist]))
            uniq = u if u.size <= nf else None
        base = StrataPlan(method, uniq, lo, hi, nf, None, None, None, None, int(pool.n_classes))
        n_codes = uniq.size if uniq is not None else nf
        freq = np.sum(_gather(client, task_hist, parts, scale, base, n_codes), axis=0)
        if method == "csf":
            csf = np.cumsum(np.sqrt(freq))
            before = csf - np.sqrt(freq)
            code_of_fine = np.minimum((before / csf[-1] * k).astype(np.int64), k - 1)
            code_counts = np.bincount(code_of_fine, weights=freq, minlength=k)
            base = base._replace(code_of_fine=code_of_fine)
        else:
            code_counts = freq
        if keep_empty and method == "csf":
            remap1, k1 = None, k
        else:
            present = code_counts > 0
            remap1, k1 = (np.cumsum(present) - 1).astype(np.int32), int(present.sum())
        plan = base._replace(remap1=remap1)
        if pool.n_classes == 2:
            mm = _gather(client, task_mixed, parts, scale, plan, k1)
            mixed = np.max([m[0] for m in mm], axis=0) >= np.min([m[1] for m in mm], axis=0)
            n_mixed = int(mixed.sum())
        elif class_bins == "none":
            mixed, n_mixed = np.zeros(k1, bool), 0
        else:   # several classes: every stratum holding more than one predicted class is split by it
            held = np.any(_gather(client, task_classes, parts, scale, plan, k1), axis=0).sum(1)
            mixed, n_mixed = held > 1, int((held - 1).clip(0).sum())
        if n_mixed == 0:
            break
        if k1 + n_mixed <= n_strata or k <= 1:
            counts2 = np.sum(_gather(client, task_code_counts, parts, scale, plan._replace(mixed=mixed), k1), axis=0)
            present2 = counts2 > 0
            plan = plan._replace(mixed=mixed, remap2=(np.cumsum(present2) - 1).astype(np.int32))
            k1 = int(present2.sum())
            break
        if pool.n_classes == 2 or class_bins == "by-splits":
            k = max(1, k - max(n_mixed, (k1 + n_mixed - n_strata)))
        else:
            k = max(1, min(k - 1, k * n_strata // (k1 + n_mixed)))
    bounds = _gather(client, task_strata_bounds, parts, scale, plan, k1)
    sizes = np.sum([b[0] for b in bounds], axis=0).astype(np.int64)
    lower = np.min([b[1] for b in bounds], axis=0)
    upper = np.max([b[2] for b in bounds], axis=0)
    return Strata(index=None, sizes=sizes, lower=lower, upper=upper, method=method), plan, scale


# ------------------------------------------------------------------------------ cells
def loss_rows(measure, feats, chunk: int = 65536):
    n = int(feats.preds.shape[0])
    rows = []
    for s in range(0, n, chunk):
        sub = type(feats)(*(np.asarray(a[s:s + chunk]) for a in feats))
        rows.append(np.asarray(measure.loss(sub)).reshape(min(chunk, n - s), -1))
    return np.concatenate(rows, axis=0)


def task_loss_uniq(part, measure):
    from .measures import Features

    return np.unique(loss_rows(measure, Features(part.preds, part.scores, part.probs)), axis=0)


def patterns_of(part, measure, table):
    """(n,) the pattern of each item: ``measure.pattern``, or the item's loss row's place
    in the pool-wide sorted table of distinct loss rows (as :func:`~bayes_eval.cells.item_patterns`)."""
    from .cells import item_patterns
    from .measures import Features

    feats = Features(part.preds, part.scores, part.probs)
    if table is None:
        return item_patterns(measure, feats)
    rows = loss_rows(measure, feats)
    local, inv = np.unique(rows, axis=0, return_inverse=True)
    where = {r.tobytes(): i for i, r in enumerate(table)}
    return np.asarray([where[r.tobytes()] for r in local], np.int64)[inv.reshape(-1)]


class CellPlan(NamedTuple):
    strata: StrataPlan
    scale: Scale
    measures: tuple  # (first measure, further measures...)
    tables: tuple  # per measure: None (measure.pattern) or the distinct loss rows
    radices: tuple | None  # of [stratum, pattern, extra]
    extra_radices: tuple | None
    extra_present: np.ndarray | None
    present: np.ndarray | None  # the sorted cell keys


def _extra_key(part, plan: CellPlan):
    cols = [patterns_of(part, m, t) for m, t in zip(plan.measures[1:], plan.tables[1:])]
    if not cols:
        return None, cols
    if plan.extra_radices is None:
        return None, cols
    key = np.zeros(cols[0].size, np.int64)
    for c, r in zip(cols, plan.extra_radices):
        key = key * r + c
    return (np.searchsorted(plan.extra_present, key) if plan.extra_present is not None else key), cols


def cell_key(part, plan: CellPlan):
    cols = [strata_of(part, plan.strata, plan.scale).astype(np.int64), patterns_of(part, plan.measures[0],
                                                                                   plan.tables[0])]
    ek, _ = _extra_key(part, plan)
    if ek is not None:
        cols.append(ek)
    if plan.radices is None:
        return None, cols
    key = np.zeros(cols[0].size, np.int64)
    for c, r in zip(cols, plan.radices):
        key = key * r + c
    return key, cols


def task_extra_max(part, plan):
    _, cols = _extra_key(part, plan)
    return [int(c.max()) for c in cols]


def task_extra_uniq(part, plan):
    key, _ = _extra_key(part, plan)
    return np.unique(key)


def task_key_max(part, plan):
    _, cols = cell_key(part, plan)
    return [int(c.max()) for c in cols]


def task_cell_stats(part, plan: CellPlan, system: int = 0):
    """Per distinct cell key of a partition: count, first row, the first row's features,
    the summed prior and the true class counts."""
    key, _ = cell_key(part, plan)
    uk, first, inv, cnt = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    c = part.n_classes
    prior = np.zeros((uk.size, c))
    step = 1 << 22
    probs = part.probs  # once: a worker's partition recomputes it on every access (partitioned.Part)
    for a in range(0, inv.size, step):
        for j in range(c):
            prior[:, j] += np.bincount(inv[a:a + step], weights=probs[a:a + step, system, j], minlength=uk.size)
    truth = None
    labels = part.labels
    if labels is not None:
        truth = np.bincount(inv * c + labels, minlength=uk.size * c).reshape(uk.size, c).astype(np.float64)
    rep = (part.preds[first], part.scores[first], probs[first])
    return uk, cnt, first, rep, prior, truth


def task_assign(part, plan: CellPlan):
    """What a partition keeps for the lookups: the cell of each item, its items sorted by
    cell (stable: row order inside a cell) and the cells' offsets in that order."""
    key, _ = cell_key(part, plan)
    x = plan.present.size
    item_cell = np.searchsorted(plan.present, key).astype(np.int32)
    order = np.argsort(item_cell, kind="stable")
    start = np.searchsorted(item_cell[order], np.arange(x + 1)).astype(np.int64)
    # kept for the session's life on the worker: the smallest dtypes (6 instead of 12 bytes
    # per item with fewer than 32768 cells; a partition's rows fit int32)
    if part.n_items >= 2**31:
        raise PoolError(f"a partition of {part.n_items} rows: split it into files of fewer than 2^31 rows")
    return item_cell.astype(np.int16 if x < 2**15 else np.int32), order.astype(np.int32), start


def task_cells_at(assign, rows):
    return assign[0][np.asarray(rows, np.int64)].astype(np.int32)


def task_slice(assign, a, b):
    return assign[0][a:b].astype(np.int32)


def task_round_candidates(assign, state, offset: int, labeled_local, b_cell, n: int, method):
    """A partition's candidates of a Poisson round (:func:`bayes_eval.poisson.round_candidates`)
    from its own stretch of the round's uniforms: the generator in ``state`` advanced by the
    partition's first row (PCG64 draws one 64-bit output per uniform), so that every row gets
    the uniform the memory engine gives it."""
    from .poisson import round_candidates

    bg = np.random.PCG64()
    bg.state = state
    bg.advance(int(offset))
    item_cell = assign[0]
    mask = np.zeros(item_cell.size, bool)
    mask[np.asarray(labeled_local, np.int64)] = True
    return round_candidates(np.random.Generator(bg), item_cell, mask, b_cell, n, method, int(offset))


def task_kth(assign, cells, ranks):
    """Local rows of the ``ranks``-th items of ``cells`` (row order inside a cell)."""
    _, order, start = assign
    return order[start[np.asarray(cells, np.int64)] + np.asarray(ranks, np.int64)]


def task_rank(assign, rows, cells):
    """Rank of local ``rows`` inside their ``cells`` (row order)."""
    _, order, start = assign
    out = np.empty(len(rows), np.int64)
    rows, cells = np.asarray(rows, np.int64), np.asarray(cells, np.int64)
    for c in np.unique(cells):
        m = cells == c
        out[m] = np.searchsorted(order[start[c]:start[c + 1]], rows[m])
    return out


def partitioned_cells(pool, measures, n_strata, method, n_fine, keep_empty, system: int = 0,
                      class_bins: str = "proportional"):
    """``(strata, cells, item_cell, order, cell_start, rep)`` of a partitioned pool, as
    :func:`bayes_eval.session_core.build_core` computes them on a whole pool: ``item_cell``
    and ``order`` are views (:class:`CellsView`, :class:`OrderView`) over the partitions,
    ``rep`` the features of each cell's first item."""
    import jax.numpy as jnp

    from .cells import CellTable
    from .measures import Features

    if system != 0:
        raise PoolError("the dask engine stratifies system 0 only (for now)")
    client, parts = pool.client, pool.parts
    strata, splan, scale = partitioned_strata(pool, n_strata, method, n_fine, keep_empty, class_bins)
    measures = tuple(measures)
    tables = []
    for m in measures:
        if getattr(m, "pattern", None) is not None:
            tables.append(None)
        else:
            u = _gather(client, task_loss_uniq, parts, m)
            tables.append(np.unique(np.concatenate(u, axis=0), axis=0))
    plan = CellPlan(splan, scale, measures, tuple(tables), None, None, None, None)
    if len(measures) > 1:  # the further measures' patterns, combined (cells.combine_keys)
        mx = np.max(_gather(client, task_extra_max, parts, plan), axis=0)
        plan = plan._replace(extra_radices=tuple(int(v) + 1 for v in mx))
        plan = plan._replace(extra_present=np.unique(np.concatenate(_gather(client, task_extra_uniq, parts, plan))))
    mx = np.max(_gather(client, task_key_max, parts, plan), axis=0)
    radices = tuple(int(v) + 1 for v in mx)
    if float(np.prod([float(r) for r in radices])) >= 2.0 ** 62:  # pragma: no cover
        raise PoolError("too many distinct cell keys for the dask engine")
    plan = plan._replace(radices=radices)
    stats = _gather(client, task_cell_stats, parts, plan, system)
    present = np.unique(np.concatenate([s[0] for s in stats]))
    x = present.size
    n_p = len(parts)
    counts = np.zeros((n_p, x), np.int64)
    first = np.full(x, -1, np.int64)
    c = pool.n_classes
    prior = np.zeros((x, c))
    truth = np.zeros((x, c))
    reps = [None] * 3
    for p, (uk, cnt, fst, rep, pri, tru) in enumerate(stats):
        pos = np.searchsorted(present, uk)
        counts[p, pos] = cnt
        new = first[pos] < 0
        first[pos[new]] = pool.offsets[p] + fst[new]
        for i, a in enumerate(rep):
            if reps[i] is None:
                reps[i] = np.zeros((x,) + a.shape[1:], a.dtype)
            reps[i][pos[new]] = a[new]
        prior[pos] += pri
        if tru is not None:
            truth[pos] += tru
    plan = plan._replace(present=present)
    assigns = [client.submit(task_assign, part, plan, pure=False) for part in parts]
    size = counts.sum(0).astype(np.float64)
    prior /= size[:, None]
    rep = Features(*reps)
    m0 = measures[0]
    stratum_of_cell = (present // int(np.prod(radices[1:]))).astype(np.int64)
    cells = CellTable(stratum=jnp.asarray(stratum_of_cell, dtype=jnp.int32), size=jnp.asarray(size),
                      weight=jnp.asarray(np.full(x, 1.0 / pool.n_items)),
                      loss=jnp.asarray(np.asarray(m0.loss(rep), dtype=np.float64)), prior=jnp.asarray(prior),
                      truth=jnp.asarray(truth))
    cell_start = np.concatenate([[0], np.cumsum(counts.sum(0))]).astype(np.int64)
    # built, without bringing them to the driver (a gather here moved every item's cell and
    # order, 12 bytes per item, through the driver: 1.2 GB at 10^8); errors surface here
    from distributed import wait

    wait(assigns)
    for f in assigns:
        if f.status != "finished":
            f.result()
    return (strata, cells, CellsView(pool, assigns, x), OrderView(pool, assigns, counts, cell_start), cell_start, rep)


class CellsView(WorkerView):
    """The cell of pool rows, kept on the workers: ``view[rows]``, ``view[int]`` and
    ``view[a:b]`` (the memory engine's ``item_cell`` array, fetched by pieces)."""

    _refusal = "the dask engine keeps the items' cells on the workers; index them with rows"

    def __init__(self, pool, assigns, n_cells):
        self._pool = pool
        self._assigns = assigns
        self.size = pool.n_items
        self.shape = (pool.n_items,)
        self.dtype = np.dtype(np.int32)
        self.n_cells = n_cells

    def _slice(self, rows):
        pool = self._pool
        a, b, _ = rows.indices(self.size)
        ps = range(int(np.searchsorted(pool.offsets, a, side="right") - 1),
                   int(np.searchsorted(pool.offsets, max(b - 1, a), side="right")))
        futs = [pool.client.submit(task_slice, self._assigns[p], max(a - pool.offsets[p], 0),
                                   min(b, pool.offsets[p + 1]) - pool.offsets[p], pure=False)
                for p in ps if p < len(self._assigns)]
        out = [f.result() for f in futs]
        return np.concatenate(out) if out else np.zeros(0, np.int32)

    def _take(self, rows):
        pool = self._pool
        out = np.empty(rows.size, np.int32)
        p_of = np.searchsorted(pool.offsets, rows, side="right") - 1
        futs = [(p_of == p, pool.client.submit(task_cells_at, self._assigns[p], rows[p_of == p] - pool.offsets[p],
                                               pure=False)) for p in np.unique(p_of)]
        for m, f in futs:
            out[m] = f.result()
        return out

    def poisson_pick(self, rng, labeled_rows, b_cell, n: int, method):
        """The candidates of a Poisson round (``drawing.poisson_pick`` on a partitioned pool):
        each partition's on its worker, from its stretch of ``rng``'s uniforms; ``rng`` is
        then advanced past every row, as the memory engine leaves it.  ``labeled_rows``: the
        labeled rows (global).  Returns ``(sure rows, candidate rows, keys)`` in row order."""
        pool = self._pool
        state = rng.bit_generator.state
        if state.get("bit_generator") != "PCG64":
            raise PoolError("a partitioned pool's Poisson rounds need a PCG64 generator")
        labeled_rows = np.sort(np.asarray(labeled_rows, np.int64))
        futs = []
        for p in range(len(self._assigns)):
            a, b = int(pool.offsets[p]), int(pool.offsets[p + 1])
            lab = labeled_rows[np.searchsorted(labeled_rows, a):np.searchsorted(labeled_rows, b)] - a
            futs.append(pool.client.submit(task_round_candidates, self._assigns[p], state, a, lab, b_cell, int(n),
                                           method, pure=False))
        out = pool.client.gather(futs)
        rng.bit_generator.advance(int(pool.n_items))
        if not out:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        return tuple(np.concatenate([o[i] for o in out]) for i in range(3))


class OrderView(WorkerView):
    """The memory engine's ``order`` (pool rows sorted by (cell, row)) over the partitions:
    ``view[positions]`` -> rows; :meth:`positions_of` (for
    :func:`bayes_eval.drawing.order_positions`) the other way."""

    _refusal = "the dask engine keeps the items' order on the workers; index it with positions"

    def __init__(self, pool, assigns, counts, cell_start):
        self._pool = pool
        self._assigns = assigns
        self._cum = np.concatenate([np.zeros((1, counts.shape[1]), np.int64), np.cumsum(counts, axis=0)])
        self.cell_start = cell_start
        self.size = pool.n_items
        self.shape = (pool.n_items,)

    def _take(self, pos):
        pool = self._pool
        cell = np.searchsorted(self.cell_start, pos, side="right") - 1
        k = pos - self.cell_start[cell]
        p_of = np.asarray([int(np.searchsorted(self._cum[:, c], kk, side="right") - 1) for c, kk in zip(cell, k)],
                          np.int64)
        out = np.empty(pos.size, np.int64)
        futs = []
        for p in np.unique(p_of):
            m = p_of == p
            futs.append((m, p, pool.client.submit(task_kth, self._assigns[p], cell[m], k[m] - self._cum[p, cell[m]],
                                                  pure=False)))
        for m, p, f in futs:
            out[m] = pool.offsets[p] + f.result()
        return out

    def positions_of(self, rows, cells) -> np.ndarray:
        """Positions of ``rows`` (in ``cells``) in the order: the cell's start, the items of
        the cell in earlier partitions, the row's rank inside its partition's part."""
        pool = self._pool
        rows, cells = np.asarray(rows, np.int64), np.asarray(cells, np.int64)
        out = np.empty(rows.size, np.int64)
        p_of = np.searchsorted(pool.offsets, rows, side="right") - 1
        futs = [(p_of == p, p, pool.client.submit(task_rank, self._assigns[p], rows[p_of == p] - pool.offsets[p],
                                                  cells[p_of == p], pure=False)) for p in np.unique(p_of)]
        for m, p, f in futs:
            out[m] = self.cell_start[cells[m]] + self._cum[p, cells[m]] + f.result()
        return out
