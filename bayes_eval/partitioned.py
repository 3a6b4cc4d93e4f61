"""Pools past one machine: a pool stored as partitioned Parquet whose passes run on Dask
(issue 19).

A :class:`PartitionedPool` is a directory (or glob) of Parquet files, one partition per
file, in sorted file order; row ``r`` of partition ``p`` is the pool row
``offset[p] + r`` (the rows of the concatenation of the partitions in order), so a
session on it and a session on the same files read whole (``--engine memory``) see the
same rows.  Each partition is read and validated on a Dask worker by
:meth:`bayes_eval.pool.Pool.from_frame` (the same checks as a single file; an error names
the partition, its file and the row inside it) and kept there (a future); the driver
holds only what is small: the partitions' sizes, the fingerprint, the score range, and,
once a session's core is built (:mod:`bayes_eval.partitioned_cells`), the cells.

What stays on the workers: every column of the pool, each partition's cells and its items
sorted by cell, and the id → (partition, row) index (ids hashed into buckets).  What
comes back per batch: the drawn items' rows, cells and ids.

Dask is an optional extra: ``pip install "bayes_eval[dask]"``.
"""
from __future__ import annotations

import glob
import hashlib
import logging
import os
import re
from typing import NamedTuple, Sequence

import numpy as np
import pandas as pd

from .errors import PoolError
from .fingerprints import array_digest, combine_portable

__all__ = ["DASK_EXTRA", "require_dask", "is_partitioned_path", "partition_files", "PartitionedPool",
           "partition_digest", "combine_digests", "partition_record", "changed_partition", "in_partition", "fix_index", "connect", "choose_engine", "read_frames", "named_columns"]

#: how to install what the dask engine needs
DASK_EXTRA = 'pip install "bayes_eval[dask]"'


def require_dask():
    """The ``distributed`` module, or a :class:`PoolError` naming the extra to install."""
    try:
        import dask  # noqa: F401
        import dask.dataframe  # noqa: F401
        import distributed
    except ImportError as exc:
        raise PoolError(f"the dask engine needs dask[dataframe] and distributed ({exc}); install them with: "
                        f"{DASK_EXTRA}") from None
    return distributed


def is_partitioned_path(path) -> bool:
    """Whether ``--pool`` names a partitioned pool: a directory or a glob pattern."""
    path = os.fspath(path)
    return os.path.isdir(path) or any(ch in path for ch in "*?[")


def partition_files(path) -> list[str]:
    """The Parquet files of a partitioned pool, in sorted order (the partitions' order)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        files = sorted(f for f in glob.glob(os.path.join(path, "*")) if f.lower().endswith((".parquet", ".pq")))
    else:
        files = sorted(glob.glob(path))
    if not files:
        raise PoolError(f"no Parquet files found at {path} (a partitioned pool is a directory or glob of .parquet "
                        f"files)")
    return files


def fix_index(df: pd.DataFrame, offset: int) -> pd.DataFrame:
    """A partition written without its index reads with the rows 0..n-1 of the partition as
    ids: make them the pool's rows (``offset + r``) so ids stay unique across partitions."""
    if "item" not in df.columns and isinstance(df.index, pd.RangeIndex) and df.index.start == 0 \
            and df.index.step == 1 and df.index.name is None:
        df = df.set_axis(pd.RangeIndex(offset, offset + len(df)), axis=0)
    return df


def partition_digest(preds, scores, probs, ids) -> bytes:
    """SHA-256 of one partition's content (predictions, scores, probabilities, ids), as
    :meth:`bayes_eval.pool.Pool.fingerprint` hashes a whole pool
    (:func:`bayes_eval.fingerprints.array_digest` of the probabilities as they are)."""
    return array_digest(preds, scores, np.asarray(probs), ids)


def combine_digests(digests: Sequence[bytes], n_classes: int) -> str:
    """The fingerprint of a partitioned pool: SHA-256 over its partitions' digests in order
    (the same whichever engine reads it; a changed partition changes it)."""
    h = hashlib.sha256(b"partitioned-pool-v1")
    for d in digests:
        h.update(d)
    h.update(str(n_classes).encode())
    return h.hexdigest()


def named_columns(frame_kw) -> tuple[tuple, str | None]:
    """``(column_names, note)`` of a partitioned pool read with the files' own column names
    (``frame_kw`` as :meth:`PartitionedPool.open`): the ``(role, column)`` pairs a pool records
    (``Pool.column_names``, for a reopen) and its summary line's words, as a single file's."""
    named = tuple(sorted((k, tuple(v) if k == "prob" else v) for k, v in (frame_kw or {}).items()
                         if k in ("score", "pred", "label", "prob") and v is not None))
    said = ", ".join(f"class probabilities from columns {', '.join(map(repr, v))}" if k == "prob"
                     else f"{k} from column {v!r}" for k, v in named)
    return named, said or None


def read_frames(files) -> pd.DataFrame:
    """Every partition read whole and concatenated (the memory engine on a partitioned pool)."""
    frames, off = [], 0
    for f in files:
        try:
            df = pd.read_parquet(f)
        except (OSError, ValueError) as exc:
            raise PoolError(f"could not read partition file {f}: {exc}") from None
        frames.append(fix_index(df, off))
        off += len(df)
    return pd.concat(frames, axis=0)


def choose_engine(files, fraction: float = 0.25) -> tuple[str, str]:
    """``("memory" | "dask", why)``: memory when the pool's arrays (about 48 bytes per item
    and system: prediction, score, two probabilities, id, cells) fit in ``fraction`` of
    the machine's RAM, dask above."""
    import pyarrow.parquet as pq

    n = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    need = 48 * n
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        ram = 16 << 30
    if need <= fraction * ram:
        return "memory", f"{n:,} items fit in a quarter of RAM ({need / 2**30:.1f} of {ram / 2**30:.0f} GiB)"
    return "dask", f"{n:,} items need {need / 2**30:.1f} GiB, more than a quarter of RAM ({ram / 2**30:.0f} GiB)"


def connect(scheduler: str | None = None, n_workers: int | None = None, memory_limit: str = "4GiB",
            processes: bool = True):
    """``(client, cluster)``: a client of the ``dask.distributed`` scheduler at ``scheduler``
    (cluster None), or of a new local cluster whose workers each have ``memory_limit``
    (worker processes; threads in this process, ``processes=False``, have no limit)."""
    distributed = require_dask()
    if scheduler:
        try:
            return distributed.Client(scheduler), None
        except OSError as exc:   # a scheduler that is down: say where the address came from and the ways out
            raise PoolError(f"cannot reach the Dask scheduler at {scheduler} ({exc}); a session reopens on the "
                            f"scheduler it was created with: --scheduler ADDR names another, --engine memory reads "
                            f"the pool in this process") from None
    n = n_workers or max(1, min(4, os.cpu_count() or 1))
    # a private local cluster lives as long as the command: its workers leaving at exit is not news
    # (distributed logs a warning per worker that "lost computed tasks" then)
    # dashboard on a free port (None meant the default :8787 here: two clusters at once collided)
    # in-process workers (processes=False) measure the memory of the whole process -- the driver's
    # JAX programs and arrays included -- against their limit, and pause at 80% of it: a driver
    # past 3.2 GiB then waited forever on a paused worker (seen as a hung test). No limit there.
    cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1,
                                       memory_limit=memory_limit if processes else 0,
                                       processes=processes, dashboard_address=":0", silence_logs=logging.ERROR)
    logging.getLogger("distributed").setLevel(logging.ERROR)
    return distributed.Client(cluster), cluster


# ------------------------------------------------------------------------------ worker tasks
# module-level functions: what the workers run (no reference to the driver's objects)
def task_scan(file: str, score: str = "score"):
    """(rows, score range) of one partition file: the first pass, for the score kind (``score``:
    the file's name of the score column)."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(file)
    n = pf.metadata.num_rows
    if score not in pf.schema_arrow.names:
        return n, None, None
    s = pd.read_parquet(file, columns=[score])[score]
    s = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64)
    fin = s[np.isfinite(s)]
    if fin.size == 0:
        return n, None, None
    return n, float(fin.min()), float(fin.max())


class Part:
    """A validated partition as a worker keeps it (:func:`task_read`): the columns the
    passes read, in the smallest dtypes that hold them, and what is a function of them
    recomputed when asked instead of stored — the prior probabilities derived from the
    scores (``bayes_eval.scores.prior_probability``, the function the pool itself used,
    so bit for bit the same), ids that are the global row numbers, the uniform item
    weights.  A 5·10^6-row partition of scores, predictions and labels takes ~50 MB
    instead of the full :class:`~bayes_eval.pool.Pool`'s ~230 MB: at 10^9 rows the
    workers hold ~10 GB instead of ~46 GB (which spilled to disk on a 24 GB machine and
    made ``session new`` take 10 minutes).  Read-only, like the pool's arrays."""

    def __init__(self, pool, offset: int):
        n = pool.n_items
        self.n_items, self.n_classes, self.n_systems = n, pool.n_classes, pool.n_systems
        self.name, self.notes, self.score_kind, self.threshold = pool.name, pool.notes, pool.score_kind, pool.threshold
        self.scores = pool.scores
        self._preds_dtype = pool.preds.dtype
        self._preds = pool.preds.astype(np.int8) if pool.n_classes <= 127 else pool.preds
        self._labels_dtype = None if pool.labels is None else pool.labels.dtype
        self._labels = None if pool.labels is None else (
            pool.labels.astype(np.int8) if pool.n_classes <= 127 else pool.labels)
        self._offset = int(offset)
        ids = np.asarray(pool.ids)
        self._ids = None if (ids.dtype.kind in "iu" and np.array_equal(ids, np.arange(offset, offset + n))) else ids
        self._probs = pool.probs
        self.probs_derived = pool.probs_derived
        if pool.probs_derived and pool.n_classes == 2:  # not from a 'prob' column: recomputed when asked
            self._probs = None
        for a in (self._preds, self._labels, self._ids):
            if a is not None:
                a.setflags(write=False)

    @property
    def preds(self):
        return self._preds.astype(self._preds_dtype)

    @property
    def labels(self):
        return None if self._labels is None else self._labels.astype(self._labels_dtype)

    @property
    def ids(self):
        return np.arange(self._offset, self._offset + self.n_items) if self._ids is None else self._ids

    @property
    def probs(self):
        if self._probs is not None:
            return self._probs
        from .scores import prior_probability

        out = np.empty((self.n_items, self.n_systems, 2))
        prior_probability(self.scores, self.preds, self.score_kind, out=out[..., 1])
        out[..., 0] = 1.0 - out[..., 1]
        return out

    @property
    def weights(self):
        return np.full(self.n_items, 1.0 / self.n_items)


def partition_record(files, digests) -> list[list[str]]:
    """``[file name, digest prefix]`` per partition, in order: what a session records of a
    partitioned pool, so a changed pool on reopening names the partition that changed
    (:func:`changed_partition`)."""
    return [[os.path.basename(f), d.hex()[:16]] for f, d in zip(files, digests)]


def changed_partition(recorded, now) -> str | None:
    """Which partition differs between two :func:`partition_record` lists, in words (None
    where either is missing or they agree)."""
    if not recorded or not now:
        return None
    if len(recorded) != len(now):
        return f"the pool had {len(recorded)} partition files and has {len(now)}"
    for p, (a, b) in enumerate(zip(recorded, now)):
        if a[0] != b[0]:
            return f"partition {p} was {a[0]} and is now {b[0]}"
        if a[1] != b[1]:
            return f"partition {p} ({a[0]}) changed"
    return None


def in_partition(exc: PoolError, files, sizes) -> PoolError:
    """A validation error of the partitions read whole (the memory engine), worded as the
    dask engine's (:func:`task_read`): its first ``at row R`` of the concatenated rows becomes
    the partition, its file and the row inside it, so the user can find the row to mend."""
    from .errors import cli_message

    offsets = np.cumsum([0, *sizes])

    def local(msg):
        m = re.search(r"at row (\d+)", msg)
        if m is None:
            return msg
        row = int(m.group(1))
        p = int(np.searchsorted(offsets, row, side="right") - 1)
        return (f"partition {p} ({os.path.basename(files[p])}), {msg[:m.start()]}at row {row - int(offsets[p])}"
                f"{msg[m.end():]}")

    return PoolError(local(str(exc)), cli=local(cli_message(exc)) if exc.cli else None)


def task_pred_counts(file: str, n_classes: int, pred: str = "pred"):
    """(C,) predicted-class counts of one partition file's ``pred`` column (the file's name:
    ``pred``; values outside 0..C−1 and missing ones left out: the partition's validation names them)."""
    import pyarrow.parquet as pq

    if pred not in pq.ParquetFile(file).schema_arrow.names:
        return np.zeros(n_classes)
    v = pd.to_numeric(pd.read_parquet(file, columns=[pred])[pred], errors="coerce").to_numpy(dtype=np.float64)
    v = v[np.isfinite(v) & (v >= 0) & (v < n_classes) & (v == np.round(v))].astype(np.int64)
    return np.bincount(v, minlength=n_classes).astype(np.float64)


def task_read(pool_cls, file: str, p: int, offset: int, score_kind, threshold, n_classes: int, name: str,
              classes_prior: str = "confidence", class_shares=None, frame_kw=None):
    """One partition, validated as a :class:`~bayes_eval.pool.Pool` and kept on the worker
    as a :class:`Part`, or ``("error", message, cli)`` naming the partition and the row
    inside it.  ``frame_kw``: the file's own column names and label names, as
    :meth:`~bayes_eval.pool.Pool.from_frame` takes them (``score``, ``pred``, ``label``, ``item``,
    ``label_map``)."""
    from .errors import cli_message

    try:
        df = fix_index(pd.read_parquet(file), offset)
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pool = pool_cls.from_frame(df, n_classes=n_classes, name=f"{name}[{p}]", score_kind=score_kind,
                                       threshold=threshold, classes_prior=classes_prior, class_shares=class_shares,
                                       **(frame_kw or {}))
        del df
        return Part(pool, offset)
    except PoolError as exc:
        where = f"partition {p} ({os.path.basename(file)}), "
        return ("error", where + str(exc), where + cli_message(exc))
    except (OSError, ValueError) as exc:
        return ("error", f"partition {p} ({os.path.basename(file)}): could not read it: {exc}", None)


class PartSummary(NamedTuple):
    n: int
    digest: bytes
    score_kind: str
    notes: tuple
    n_systems: int
    has_labels: bool
    id_kind: str  # "rows" (ids are the pool rows), "int", "str"
    z_interior: tuple  # (min, max) of the interior probabilities (probability kind), else (nan, nan)
    z_range: tuple  # (min, max) of the system-0 scores
    portable: bytes = b""  # fingerprints.array_digest with derived probabilities left out


def task_summary(part, offset: int, system: int = 0):
    """What the driver keeps of a partition: its size, digest, and the few numbers the
    strata need (the interior range of probability scores)."""
    if isinstance(part, tuple):
        return part
    ids = np.asarray(part.ids)
    if ids.dtype.kind in "iu":
        kind = "rows" if np.array_equal(ids, np.arange(offset, offset + ids.size)) else "int"
    else:
        kind = "str"
    s = np.asarray(part.scores[:, system], dtype=np.float64)
    inter = s[(s > 0) & (s < 1)]
    zi = (float(inter.min()), float(inter.max())) if inter.size else (np.nan, np.nan)
    preds, scores, probs = part.preds, part.scores, part.probs
    return PartSummary(part.n_items, partition_digest(preds, scores, probs, ids), part.score_kind,
                       tuple(part.notes), part.n_systems, part.labels is not None, kind, zi,
                       (float(s.min()), float(s.max())),
                       array_digest(preds, scores, None if part.probs_derived else probs, ids))


def task_ids(part, rows):
    """The ids of local ``rows`` of a partition."""
    return np.asarray(part.ids)[np.asarray(rows, np.int64)]


def id_keys(ids, kind: str, n_buckets: int):
    """(keys, bucket) of ids: int64 ids hash to their bucket; other ids are matched as
    text, stripped (as :func:`bayes_eval.session_core.item_rows`)."""
    if kind == "int":
        keys = np.asarray(ids).astype(np.int64)
        h = pd.util.hash_array(keys)
    else:
        keys = np.asarray([str(v).strip() for v in np.asarray(ids, dtype=object)], dtype=object)
        h = pd.util.hash_array(keys)
    return keys, (h % np.uint64(n_buckets)).astype(np.int64)


def task_split_ids(part, kind: str, n_buckets: int):
    """A partition's ids split by bucket: per bucket (keys, local rows)."""
    keys, b = id_keys(part.ids, kind, n_buckets)
    order = np.argsort(b, kind="stable")
    starts = np.searchsorted(b[order], np.arange(n_buckets + 1))
    return [(keys[order[starts[j]:starts[j + 1]]], order[starts[j]:starts[j + 1]]) for j in range(n_buckets)]


def task_bucket(splits, j: int):
    """Bucket ``j`` of the id index: keys sorted, with their (partition, row); the first
    duplicate (by partition, row of its second occurrence) or None."""
    keys = [s[j][0] for s in splits]
    rows = [s[j][1] for s in splits]
    parts = [np.full(len(r), p, np.int64) for p, r in enumerate(rows)]
    k = np.concatenate(keys) if keys else np.zeros(0, np.int64)
    r = np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, np.int64)
    p = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    o = np.lexsort((r, p, k)) if k.dtype != object else np.lexsort((r, p, pd.util.hash_array(k)))
    if k.dtype == object:  # sort text keys by their own order (searchsorted needs it)
        o = sorted(range(k.size), key=lambda i: (k[i], p[i], r[i]))
        o = np.asarray(o, np.int64)
    k, r, p = k[o], r[o], p[o]
    dup = None
    if k.size > 1:
        same = np.flatnonzero(k[1:] == k[:-1]) + 1
        if same.size:
            cand = min(((int(p[i]), int(r[i]), k[i]) for i in same))
            dup = cand
    return (k, p, r), dup


def task_bucket_dup(bucket):
    return bucket[1]


def task_lookup(bucket, keys):
    """(partition, row) of each key in a bucket, (-1, -1) if absent."""
    (k, p, r), _ = bucket
    keys = np.asarray(keys, dtype=k.dtype)
    pos = np.searchsorted(k, keys)
    ok = pos < k.size
    ok[ok] = k[pos[ok]] == keys[ok]
    out_p = np.where(ok, p[np.minimum(pos, max(k.size - 1, 0))] if k.size else -1, -1)
    out_r = np.where(ok, r[np.minimum(pos, max(k.size - 1, 0))] if k.size else -1, -1)
    return out_p, out_r


# ------------------------------------------------------------------------------ the driver's side
class WorkerView:
    """A pool-sized array held on the workers (ids, the items' cells, the items' order):
    indexed, it fetches those entries (an int gives one); ``np.asarray`` of it is refused
    (it would be a column on the driver).  Subclasses give ``_take(int64 indices)``, a
    ``_refusal`` message and, if they take slices, ``_slice``."""

    lazy = True
    _refusal = "the dask engine keeps this column on the workers"

    def __len__(self):
        return self.size

    def __array__(self, *a, **k):
        raise PoolError(self._refusal)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return self._slice(key)
        if np.isscalar(key) or np.ndim(key) == 0:
            return self._take(np.asarray([int(key)], np.int64))[0]
        return self._take(np.asarray(key, np.int64))

    def _slice(self, key):
        raise TypeError(f"{type(self).__name__} takes indices, not slices")


class PartitionedIds(WorkerView):
    """The pool's ids, held on the workers: ``ids[rows]`` fetches the ids of those rows."""

    _refusal = "the dask engine keeps the pool's ids on the workers; index them with rows"

    def __init__(self, pool: "PartitionedPool"):
        self._pool = pool
        self.size = pool.n_items
        self.dtype = np.dtype(np.int64) if pool.id_kind in ("rows", "int") else np.dtype(object)

    def _take(self, rows):
        pool = self._pool
        if pool.id_kind == "rows":
            return rows.copy()
        out = np.empty(rows.size, dtype=self.dtype)
        p_of = np.searchsorted(pool.offsets, rows, side="right") - 1
        futs = {}
        for p in np.unique(p_of):
            m = p_of == p
            futs[int(p)] = (m, pool.client.submit(task_ids, pool.parts[p], rows[m] - pool.offsets[p], pure=False))
        for p, (m, f) in futs.items():
            out[m] = f.result()
        return out


class PartitionedIdIndex:
    """id → pool row, for ingest: the ids are hashed into buckets kept on the workers;
    ``get_indexer(keys)`` asks only the buckets of those keys (-1: not in the pool)."""

    def __init__(self, pool: "PartitionedPool", buckets):
        self._pool = pool
        self._buckets = buckets

    def get_indexer(self, keys):
        pool = self._pool
        keys_arr, b = id_keys(np.asarray(keys, dtype=np.int64 if pool.id_kind == "int" else object),
                              pool.id_kind, len(self._buckets))
        out = np.full(len(keys_arr), -1, np.int64)
        futs = [(b == j, pool.client.submit(task_lookup, self._buckets[j], keys_arr[b == j], pure=False))
                for j in np.unique(b)]
        for m, f in futs:
            p, r = f.result()
            out[m] = np.where(p >= 0, pool.offsets[np.maximum(p, 0)] + r, -1)
        return out


class PartitionedPool:
    """A pool of partitioned Parquet read on Dask (see the module docstring).

    Built by :meth:`open` (or :meth:`bayes_eval.pool.Pool.from_parquet_dataset` with
    ``engine="dask"``).  Offers what a session needs of a pool without holding its
    columns: ``n_items``, ``n_classes``, ``n_systems``, ``name``, ``ids`` (a
    :class:`PartitionedIds`), ``labels_known``, ``read_options``, ``notes``,
    :meth:`fingerprint`, :meth:`derived`; the partitions themselves are futures
    (``parts``) on the workers of ``client``.
    """

    partitioned = True
    engine = "dask"
    columns = None
    threshold = None

    def __init__(self, files, client, cluster, parts, summaries, n_classes, name, score_kind, threshold, notes,
                 kept=None):
        # ``kept``: the numbers of the non-empty partition files, those ``parts`` and ``summaries`` are of
        self.numbers = list(range(len(files))) if kept is None else list(kept)
        self.files = [files[p] for p in self.numbers]
        self.client = client
        self._cluster = cluster
        self.parts = list(parts)
        self.sizes = np.asarray([s.n for s in summaries], np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.n_items = int(self.offsets[-1])
        self.n_classes = int(n_classes)
        self.n_systems = int(summaries[0].n_systems)
        self.name = name
        self.score_kind = score_kind
        self.threshold = threshold
        self.notes = tuple(notes)
        self.labels_known = all(s.has_labels for s in summaries)
        kinds = {s.id_kind for s in summaries}
        self.id_kind = "rows" if kinds == {"rows"} else ("str" if "str" in kinds else "int")
        zi = np.asarray([s.z_interior for s in summaries], np.float64)
        self.interior = (float(np.nanmin(zi[:, 0])), float(np.nanmax(zi[:, 1]))) if np.isfinite(zi).any() else None
        zr = np.asarray([s.z_range for s in summaries], np.float64)
        self.score_range = (float(zr[:, 0].min()), float(zr[:, 1].max()))
        self.probs_derived = any(s.portable != s.digest for s in summaries)  # no 'prob' column
        # every partition file's digest in order, an empty one's as the memory engine computes it
        empty = np.empty(0, np.int64 if self.id_kind != "str" else object)
        by_number = dict(zip(self.numbers, summaries))
        digests = [by_number[p].digest if p in by_number else array_digest(empty, empty, empty, empty)
                   for p in range(len(files))]
        portables = [by_number[p].portable if p in by_number else
                     array_digest(empty, empty, None if self.probs_derived else empty, empty) for p in range(len(files))]
        self._fingerprint = combine_digests(digests, n_classes)
        portable = combine_portable(portables, n_classes, score_kind)
        self._derived_store: dict = {}
        self.derived("partitions", None, lambda: partition_record(files, digests), size=1)
        self.derived("portable_fingerprint", None, lambda: portable, size=1)
        self._id_index = None

    # ---------------------------------------------------------------- construction
    @classmethod
    def open(cls, path, pool_cls, score_kind: str | None = None, threshold: float | None = None, n_classes: int = 2,
             name: str | None = None, client=None, scheduler: str | None = None, memory_limit: str = "4GiB",
             n_workers: int | None = None, classes_prior: str = "confidence",
             frame_kw: dict | None = None) -> "PartitionedPool":
        """Read and validate the partitions of ``path`` (a directory or glob) on Dask, each
        by ``pool_cls.from_frame`` (:class:`bayes_eval.pool.Pool`; ``classes_prior`` and
        ``frame_kw``'s column and label names as there): ``client`` if given, else the
        scheduler at ``scheduler``, else a local cluster."""
        frame_kw = dict(frame_kw or {})
        require_dask()
        from .scores import SCORE_KINDS

        files = partition_files(path)
        if score_kind == "auto":
            score_kind = None
        if score_kind is not None and score_kind not in SCORE_KINDS:
            raise PoolError(f"unknown score kind {score_kind!r}; use one of auto, {', '.join(SCORE_KINDS)}",
                            cli=f"unknown --score-kind {score_kind!r}; use one of auto, {', '.join(SCORE_KINDS)}")
        if score_kind == "rank":
            raise PoolError("rank scores (normalized by the whole pool's ranks) are not supported by the dask engine "
                            "yet; use --engine memory", cli="--score-kind rank is not supported with --engine dask yet; "
                                                           "use --engine memory")
        cluster = None
        address = scheduler if client is None else None
        if client is None:
            client, cluster = connect(scheduler, n_workers=n_workers, memory_limit=memory_limit)
        try:
            scans = client.gather([client.submit(task_scan, f, frame_kw.get("score", "score"), pure=False)
                                   for f in files])
            sizes = np.asarray([s[0] for s in scans], np.int64)
            offsets = np.concatenate([[0], np.cumsum(sizes)])
            # an empty partition file (Spark writes them) holds no item: left out of the work, kept in the
            # fingerprint and the partition record, so that both engines read the same pool
            kept = [p for p in range(len(files)) if sizes[p] > 0]
            if not kept:
                raise PoolError(f"the pool is empty (0 rows): every one of its {len(files)} partition files is empty")
            detected = False
            lo = [s[1] for s in scans if s[1] is not None]
            hi = [s[2] for s in scans if s[2] is not None]
            if score_kind is None and lo:
                score_kind = "probability" if min(lo) >= 0.0 and max(hi) <= 1.0 else "margin"
                detected = True
            name = name or os.path.basename(os.path.normpath(path if os.path.isdir(path) else os.path.dirname(path)))
            shares = None   # several classes: each partition's prior spreads as the whole pool's predictions
            if n_classes > 2 and classes_prior == "confidence":
                shares = np.sum(client.gather([client.submit(task_pred_counts, files[p], n_classes,
                                                             frame_kw.get("pred", "pred"), pure=False)
                                               for p in kept]), axis=0)
            parts = [client.submit(task_read, pool_cls, files[p], p, int(offsets[p]), score_kind, threshold, n_classes,
                                   name, classes_prior, shares, frame_kw, pure=False) for p in kept]
            summaries = client.gather([client.submit(task_summary, part, int(offsets[p]), pure=False)
                                       for p, part in zip(kept, parts)])
            for s in summaries:  # the first bad partition, in partition order
                if isinstance(s, tuple) and len(s) == 3 and s[0] == "error":
                    raise PoolError(s[1], cli=s[2])
            kinds = {s.score_kind for s in summaries}
            if len(kinds) > 1:
                raise PoolError(f"the partitions' scores read as different kinds ({sorted(kinds)}); give --score-kind")
            notes = [n for n in summaries[0].notes if not n.startswith("scores read as")
                     and not n.startswith("predictions derived")]
            from .scores import describe

            kind = summaries[0].score_kind
            if kind != "none":
                notes.insert(0, describe(kind, detected, n_classes if classes_prior == "confidence" else 2))
            if threshold is not None:
                notes.append(f"predictions derived as score >= {float(threshold):g}")
            notes += [n for n in named_columns(frame_kw)[1:] if n]
            if len(kept) < len(files):
                notes.append(f"{len(files) - len(kept)} empty partition file(s) left out "
                             f"({', '.join(os.path.basename(files[p]) for p in range(len(files)) if p not in kept)})")
            pool = cls(files, client, cluster, parts, summaries, n_classes, name, kind,
                       float(threshold) if threshold is not None else None, notes, kept)
            pool.scheduler = address
            pool.classes_prior = classes_prior
            pool.frame_kw = frame_kw
            pool.check_ids()
            return pool
        except BaseException:
            if cluster is not None:
                client.close()
                cluster.close()
            raise

    def check_ids(self):
        """Build the id index (unless the ids are the rows) and refuse duplicate ids,
        naming the partition and row of the second occurrence."""
        if self.id_kind == "rows":
            return
        nb = max(1, len(self.parts))
        splits = [self.client.submit(task_split_ids, part, self.id_kind, nb, pure=False) for part in self.parts]
        buckets = [self.client.submit(task_bucket, splits, j, pure=False) for j in range(nb)]
        dups = [d for d in self.client.gather([self.client.submit(task_bucket_dup, b, pure=False) for b in buckets])
                if d is not None]
        del splits
        if dups:
            p, r, key = min(dups, key=lambda t: (t[0], t[1]))
            key = key.item() if isinstance(key, np.generic) else key
            raise PoolError(f"partition {self.numbers[p]} ({os.path.basename(self.files[p])}), column 'item': duplicate id "
                            f"{key!r} at row {r}")
        self._id_index = PartitionedIdIndex(self, buckets)

    def close(self):
        """Release the partitions on the workers (and the local cluster this pool started)."""
        self.parts = []
        self._derived_store.clear()
        if self._cluster is not None:
            self.client.close()
            self._cluster.close()
            self._cluster = None

    # ---------------------------------------------------------------- what a session reads
    @property
    def ids(self) -> PartitionedIds:
        return PartitionedIds(self)

    @property
    def id_index(self):
        """None when the ids are the rows, else the :class:`PartitionedIdIndex`."""
        return self._id_index

    @property
    def uniform_weights(self) -> bool:
        return True

    #: the scheduler address the pool was opened on (None: a local cluster or a client given)
    scheduler = None
    #: how a pool of several classes got its prior (:meth:`bayes_eval.pool.Pool.from_arrays`)
    classes_prior = "confidence"
    frame_kw = None    # the files' own column and label names (``open``)

    @property
    def read_options(self) -> dict:
        """How the pool was read, for a session to reopen it the same way: the score kind,
        the threshold, the dask engine and the scheduler address it was given (a local
        cluster records none: the reopening process starts its own)."""
        out = {"score_kind": self.score_kind if self.score_kind != "none" else None, "threshold": self.threshold,
               "engine": "dask"}
        if self.scheduler:
            out["scheduler"] = self.scheduler
        kw = self.frame_kw or {}
        if kw.get("item") is not None:
            out["id_column"] = kw["item"]
        named = named_columns(kw)[0]
        if named:
            out["columns"] = {k: list(v) if isinstance(v, tuple) else v for k, v in named}
        if kw.get("label_map"):
            out["label_map"] = dict(kw["label_map"])
        if self.n_classes != 2:
            out["n_classes"] = int(self.n_classes)
            out["classes_prior"] = self.classes_prior
        return out

    def fingerprint(self) -> str:
        return self._fingerprint

    def derived(self, kind: str, key, build, size: int = 4):
        """As :meth:`bayes_eval.pool.Pool.derived`: what is derived from the pool, kept on it."""
        from .derived import derived_value

        return derived_value(self._derived_store, kind, key, build, size)

    def forget_derived(self, kind: str | None = None) -> None:
        from .derived import forget

        forget(self._derived_store, kind)

    def _column(self, what):
        raise PoolError(f"the dask engine keeps the pool's {what} on the workers (no column of the pool on the "
                        f"driver); this needs --engine memory")

    @property
    def scores(self):
        return self._column("scores")

    @property
    def preds(self):
        return self._column("predictions")

    @property
    def probs(self):
        return self._column("probabilities")

    @property
    def labels(self):
        return self._column("labels")

    def features(self):
        return self._column("features")

    def __repr__(self):
        return (f"PartitionedPool({self.name!r}, {self.n_items} items in {len(self.files)} partitions, "
                f"{self.n_systems} system(s), {self.n_classes} classes)")
