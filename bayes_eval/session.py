"""Labeling sessions: the stateful shell around the pure core (``docs/architecture.md``).

A :class:`Session` is opened on a pool, one or several measures and a design.  It hands
out batches of items to label, takes the labels back, and keeps the estimate, its CLT
interval (001 §3.3.2) and — under a deterministic oracle, for every design — a Bayesian
interval up to date.  Everything it knows lives in one SQLite file
(:mod:`bayes_eval.store`): every stage is stored with its draws (``q`` and ``weight =
p/q``; a Poisson round's items with ``q = b``) before its batch is returned, every accepted
label before :meth:`Session.add_labels` returns.  :meth:`Session.open` replays the stored
stages through the same compiled functions to the exact state (bit for bit), and refuses a
file whose stored Poisson inclusion probabilities differ.

This module holds the persistence, the replay and the checks of incoming labels; the rest
is split by concern: :mod:`~bayes_eval.session_setup` (the configuration, every default
resolved; designs and measures by name), :mod:`~bayes_eval.session_core` (strata, cells and
the design's compiled functions, kept on the pool), :mod:`~bayes_eval.stages` (the two
kinds of stage, one interface: with-replacement draws, 001 Alg. 1, and Poisson rounds, 000
§3), :mod:`~bayes_eval.drawing` (item-level draws, a pure function of (seed, stage, labels
so far)) and :mod:`~bayes_eval.session_reports` (estimates, intervals, the posterior,
reports: the read side, inherited).

**Oracles.**  Deterministic: a stage draws until ``n`` *new* items are drawn; draws of
items already labeled are answered from the store.  Stochastic: every draw asks for a
label.  The Poisson designs label distinct items (deterministic oracle only).  **Several
measures** (001 §3.3.1): the labels serve every measure, the design targets the first; the
proposal must keep every item with a non-zero loss of every measure in its support:
:meth:`Session.create` refuses further measures that AIS, IS or OASIS for the first would never
draw for (:func:`~bayes_eval.session_core.unreached_measures`; AIS's ``delta`` of p(x) reaches
every item).  OASIS proposes for one label per stage, so a
session matches the simulation when ``n = 1``.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections import OrderedDict
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from . import _config  # noqa: F401  (float64)
from . import annotate, kernel
from .drawing import draw_stage, order_positions, poisson_pick  # noqa: F401  (re-exported)
from .partitioned import changed_partition
from .designs import resolve_oracle_model
from .session_core import (SessionCore, clear_cache, core_for, ids_at, item_rows, pool_fingerprint,  # noqa: F401  (re-exported)
                           PORTABLE_VERSION, portable_fingerprint, same_pool, unreached_measures, unreached_message)
from .session_replay import SessionReplay
from .session_reports import SessionReports
from .session_stopping import SessionStopping
from .session_corrections import SessionCorrections
from .session_files import IngestResult, SessionFiles
from .session_skip import SessionSkips
from .session_setup import (ORACLES, POISSON_DESIGNS, POISSON_OPTIONS, SESSION_DESIGNS,  # noqa: F401  (re-exported)
                            component_names, make_design, pool_partitions, session_config, session_measures)
from .stages import (DrawLog, LabeledItems, StageKind, StageSnapshot, effective_draws, match_deterministic,
                     match_stochastic, stage_tallies, stages_for)
from .store import (EmptyInputError, InvalidLabelError, LabelConflictError, MalformedInputError, NotDrawnError,
                    PoolMismatchError, SessionError, StaleSessionError, Store, UnknownItemError)

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

_MAX_EMPTY_ROUNDS = 1000  # Poisson: rounds that drew nothing, recorded in one next_batch call at most
_RESERVED = ("item", "label", "draw", "stage", "q", "weight")


def _py(v):
    return v.item() if isinstance(v, np.generic) else v


def _as_list(name, v) -> list:
    """``items`` / ``labels`` / ``draws`` of :meth:`Session.add_labels` as a list of plain
    Python values, one per label; a single value or a 2-D array is refused by name."""
    if np.isscalar(v) or v is None or not hasattr(v, "__iter__") or (isinstance(v, np.ndarray) and v.ndim == 0):
        v = v.item() if isinstance(v, (np.ndarray, np.generic)) else v
        raise MalformedInputError(f"{name} must be a sequence with one entry per label (a list, an array, a "
                                  f"column), got the single value {v!r}")
    if isinstance(v, np.ndarray) and v.ndim != 1:
        raise MalformedInputError(f"{name} must be one-dimensional (one entry per label), got shape {v.shape}")
    return [_py(x) for x in (v.tolist() if hasattr(v, "tolist") else v)]


# ------------------------------------------------------------------------------ results
def _noop_progress(msg, done, total):
    return None


# ------------------------------------------------------------------------------ the session

class Session(SessionReports, SessionStopping, SessionFiles, SessionSkips, SessionCorrections, SessionReplay):
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
    def __init__(self, store: Store, pool, measures, config: dict, core: SessionCore, progress=None):
        self._store = store
        self.pool = pool
        self.measures = list(measures)
        self.config = config
        self._core = core
        self._progress = progress or _noop_progress
        self._names = component_names(self.measures)
        # further measures the design never draws for (sessions made before stop 82 could hold
        # them; Session.create refuses them now): their CLT check fails, the Bayesian interval leads
        self.unreached = unreached_measures(core, self.measures, config)
        self._n_classes = pool.n_classes
        x = core.cells.n_cells
        c = self._n_classes
        self._stochastic = config["oracle"] == "stochastic"
        progress_fn = self._progress
        progress_fn("compiling the design", 0, 1)
        # the kind of stage (with-replacement draws or Poisson rounds), chosen once
        self._kind: StageKind = stages_for(core, seed=config["seed"], stochastic=self._stochastic, ids=pool.ids,
                                           path=store.path)
        self._labeled = np.zeros((x, c))
        self._draw_counts = np.zeros((x, c))
        self._wsum = np.zeros((x, c))
        self._w2sum = np.zeros((x, c))  # Σ w² per (cell, class): the martingale variance (kernel.Tallies)
        self._ew2_lab = np.zeros((x, c))  # expected Σ w² (the model-assisted variance, kernel.Tallies)
        self._ew2_unl = np.zeros(x)
        self._n_draws = 0
        self._n_labels = 0
        self._sum_w = 0.0
        self._sum_w2 = 0.0
        self._max_w = 0.0
        self._draws = DrawLog()
        self._label_of: dict[int, int] = {}  # deterministic: row -> label
        self._label_stage: dict[int, int] = {}
        self._draw_label: dict[int, int] = {}  # stochastic: draw -> label
        self._skipped: dict[int, int] = {}  # items nobody can label: row -> cell (session_skip)
        self._skip_w = 0.0
        self._lab = LabeledItems.empty()  # labeled items of closed stages (deterministic)
        self._stages: list[dict] = []
        self._open: dict | None = None
        self._snapshots: list[StageSnapshot] = []
        self._est_cache: dict = {}
        self._post_cache: dict = {}
        self._files: list = []   # (path, new labels) of each file ingest_file took, for its errors

    @classmethod
    def create(cls, path: str, pool, measure="f1", design: str = "ais", *, seed: int = 0,
               oracle: str = "deterministic", n_strata: int = 256, depth: int = 8, branching: int | None = None,
               model: str = "auto", eps: float = 1e-3, lam: float = 0.9, delta: float = 0.0,
               plugin: str = "model", strength: float = 1.0, n_fine: int | None = None,
               strata_method: str = "csf", keep_empty: bool | None = None, system: int | None = None,
               thresholds: int = 1024, beta: float = 1.0,
               label_map: dict | None = None, posterior_model: str = "calibrated", pool_path: str | None = None,
               progress=None, fixed_size: str | None = "auto", poisson_options: dict | None = None,
               companion: str | None = "auto", audit_floor: float | None = None) -> "Session":
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
            whose scores: ``system`` (default: the measures' own, where they all name one —
            ``[{"name": "f1", "system": 1}]`` stratifies on system 1's score — else 0).
        depth, branching, model, eps, delta, plugin, strength :
            AIS and its oracle model (001 Prop. 2-3, §4); ``eps`` is also the floor of
            static IS and OASIS.
        audit_floor : float, optional
            AIS: the least share of each proposal's mass kept on unlabeled items
            (:func:`bayes_eval.designs.unlabeled_floor`; default
            :data:`bayes_eval.designs.AUDIT_FLOOR`, 0 turns it off).  Recorded in the
            session file; files written before it existed reopen without it.
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
            :func:`~bayes_eval.poisson_designs.poisson_design`: ``estimator``
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
        Store.check_new(path)  # before any work: the file can be created
        measures, config = session_config(
            pool, measure, design, seed=seed, oracle=oracle, n_strata=n_strata, depth=depth, branching=branching,
            model=model, eps=eps, lam=lam, delta=delta, plugin=plugin, strength=strength, n_fine=n_fine,
            strata_method=strata_method, keep_empty=keep_empty, system=system, thresholds=thresholds, beta=beta,
            label_map=label_map, posterior_model=posterior_model, pool_path=pool_path, fixed_size=fixed_size,
            poisson_options=poisson_options, companion=companion, audit_floor=audit_floor)
        progress = progress or _noop_progress
        fingerprint = pool_fingerprint(pool)
        core = core_for(pool, measures, config, progress)  # validates the design settings
        unreached = unreached_measures(core, measures, config)
        if unreached:
            raise SessionError(unreached_message(unreached, core, measures, config))
        if config["design"].get("model") == "auto":   # recorded as resolved: a reopen never re-decides it
            config["design"]["model"] = resolve_oracle_model("auto", core.cells, core.n_strata)
        store = Store.create(path, {"config": config, "fingerprint": fingerprint, "portable_fingerprint": portable_fingerprint(pool),
                                    "portable_version": PORTABLE_VERSION}, unique_labels_by="draw" if oracle == "stochastic" else "row")
        try:
            return cls(store, pool, measures, config, core, progress)
        except BaseException:
            store.close()
            raise

    @classmethod
    def open(cls, path: str, pool=None, *, measures=None, progress=None, engine=None, scheduler=None) -> "Session":
        """Reopen a session file and replay it to the exact state it was left in.

        ``pool`` defaults to the pool file recorded at creation (a Pool, or a path);
        its fingerprint must match, else :class:`PoolMismatchError` (``engine``, ``scheduler``:
        :meth:`~bayes_eval.pool.Pool.from_parquet_dataset`).  Custom measures
        (not built-in) must be passed again as ``measures``.
        """
        from .errors import PoolError, cli_message
        from .pool import Pool
        from .registry import load_pool

        progress = progress or _noop_progress
        store = Store.open(path)
        try:
            meta = store.meta()
            config = meta["config"]
            if pool is None or isinstance(pool, (str, os.PathLike)):
                src = os.fspath(pool) if pool is not None else config["pool"].get("path")
                if src is None:
                    raise SessionError(f"{path}: the session does not record where its pool is; pass it: "
                                       f"Session.open(path, pool)",
                                       cli=f"{path}: the session does not record where its pool is; give the "
                                           f"pool's file with --pool FILE")
                progress("reading the pool", 0, 1)
                # read as at creation; files from before score kinds recorded nothing: legacy reading
                read = config["pool"].get("read")
                try:
                    # as recorded (a partitioned pool: the engine and a scheduler address), unless given
                    opts = dict(read) if read is not None else {"legacy": True}
                    if opts.get("n_classes", 2) > 2:   # several classes, recorded before their confidence prior
                        opts.setdefault("classes_prior", "halfway")
                    opts.setdefault("csv_ids", "guess")   # ids as pandas guessed them, before text ids
                    opts.update({k: v for k, v in (("engine", engine), ("scheduler", scheduler)) if v is not None})
                    if opts.get("engine") == "memory":
                        opts.pop("scheduler", None)
                    pool = load_pool(src, **opts)
                except PoolError as exc:
                    if pool is not None:  # the pool given: its error is the whole story
                        raise SessionError(f"cannot load the pool {src}: {exc}",
                                           cli=f"--pool {src}: {cli_message(exc)}") from None
                    raise SessionError(f"cannot load the session's pool {src}: {exc} (if it is elsewhere now, pass "
                                       f"it: Session.open(path, pool))", cli=f"cannot load the session's pool {src}: "
                                       f"{cli_message(exc)} (if it is elsewhere now, give it with --pool FILE)") from None
            if not isinstance(pool, Pool) and not getattr(pool, "partitioned", False):
                raise SessionError(f"expected a Pool, got {type(pool).__name__}")
            progress("checking the pool's fingerprint", 0, 1)
            info = config["pool"]
            if not same_pool(pool, meta, info, path):     # warns where the CPU's rounding alone differs
                fingerprint = pool_fingerprint(pool)      # (the full one: only for the message, since stop 66)
                msg = (f"{path}: the pool has changed — the session was created on pool {info.get('name')!r} "
                       f"({info.get('n_items')} items, fingerprint {meta['fingerprint'][:12]}…), the pool given "
                       f"({pool.name!r}, {pool.n_items} items) has fingerprint {fingerprint[:12]}…; "
                       f"refusing to open it on different data"
                       + "".join(f" ({w})" for w in [changed_partition(info.get("partitions"), pool_partitions(pool))] if w))
                raise PoolMismatchError(msg, cli=msg + " (if the pool's file moved, give it with --pool FILE)")
            ms = session_measures(config["measures"], pool, measures, path)
            core = core_for(pool, ms, config, progress)
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
    def class_names(self) -> list:
        """Each class's name (the first where several map to one), or None: the pool's label map
        (its predictions written as names), else the session's (``--label-map`` for the labels)."""
        pairs = list(getattr(self.pool, "label_names", ())) + sorted((self.config.get("label_map") or {}).items())
        return [next((str(k) for k, v in pairs if int(v) == c), None) for c in range(self.pool.n_classes)]

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
        return self._kind.proposal(self._open["round"] if self._open is not None else None)

    @property
    def is_exact(self) -> bool:
        """Poisson designs: a closed round has labeled every item that can matter, so
        the estimate equals the measure on the pool (no sampling error)."""
        return self._kind.is_exact(self._labeled)

    @property
    def rounds(self) -> list:
        """Poisson designs: one dict per closed round — ``b``, ``mean``, ``pi``,
        ``labeled_before``, ``sampled``, ``pred_var`` (the cell-level
        :class:`~bayes_eval.poisson_designs.RoundRecord`), ``pi_after``, ``complete``,
        ``budget``, ``cum``."""
        return list(self._kind.rounds)

    @property
    def cells(self):
        return self._core.cells

    @property
    def item_cell(self) -> np.ndarray:
        return self._core.item_cell

    # ------------------------------------------------------------------ stage bookkeeping
    def _begin_stage(self, st: dict, rows, cells, new, q, w, pround: dict | None = None):
        """Record a stage's draws in memory and open it.

        Poisson designs: ``pround`` is the round's proposal (``PoissonRounds.propose_round``);
        on replay it is recomputed from the labels so far and checked against the
        inclusion probabilities the stored items were drawn with."""
        pround = self._kind.open_stage(st, rows, cells, q, pround, self._labeled)
        first = len(self._draws)
        self._draws.extend(int(st["stage"]), rows, cells, new, q, w)
        pending = self._pending_of(first, rows, new)
        self._stages.append(dict(st))
        self._open = {"stage": int(st["stage"]), "first": first, "end": len(self._draws), "pending": pending,
                      "opened_at": st["opened_at"], "round": pround}

    def _pending_of(self, first, rows, new) -> "OrderedDict[int, int]":
        """The draws of a stage (draw ids from ``first``) still awaiting a label:
        deterministic row -> draw, stochastic draw -> row."""
        pending: "OrderedDict[int, int]" = OrderedDict()
        for k in np.flatnonzero(new).tolist():
            did, r = first + k, int(rows[k])
            if r in self._skipped:
                continue
            if self._stochastic:
                if did not in self._draw_label:
                    pending[did] = r
            elif r not in self._label_of:
                pending[r] = did
        return pending

    def _close_state(self, extra_labels: dict | None = None, time_closed=None, skipped: dict | None = None,
                     closing=None):
        """The state after closing the open stage (pure: nothing is mutated).

        ``extra_labels``: labels being ingested now (row -> label, or draw -> label).
        The tallies per (cell, class) are common to both kinds of stage; the stage kind
        computes the new design state and proposal (``stages``: ``close``), unless
        ``closing`` gives them (restored from the file).
        """
        op = self._open
        rows, cells, new, q, w = self._draws.arrays(op["first"], op["end"])
        c = self._n_classes
        x = self._core.cells.n_cells
        skipped = self._skipped if skipped is None else skipped  # draws of skipped items: outside the population
        keep = np.asarray([int(r) not in skipped for r in rows], bool) if skipped else np.ones(rows.size, bool)
        if self._stochastic:
            lab_of_draw = {**self._draw_label, **(extra_labels or {})}
            y = np.asarray([lab_of_draw.get(op["first"] + k, 0) for k in range(rows.size)], np.int64)
            obs_mask = keep
        else:
            lab_of = self._label_of if not extra_labels else {**self._label_of, **extra_labels}
            y = np.asarray([lab_of.get(int(r), 0) for r in rows], np.int64)
            obs_mask = new & keep
        hits, d_draws, d_wsum, d_w2sum = stage_tallies(cells * c + y, w, keep, obs_mask, x, c)
        labeled = self._labeled + hits
        draw_counts = self._draw_counts + d_draws
        wsum = self._wsum + d_wsum
        w2sum = self._w2sum + d_w2sum
        n_draws = self._n_draws + int(rows.size)
        skip_w = self._skip_w + float(w[~keep].sum())
        n_eff = effective_draws(n_draws, self._sum_w + float(w.sum()), skip_w)
        if closing is None:  # (a stored state on replay: session_replay)
            closing = self._kind.close(self._labeled, hits, labeled, draw_counts, wsum, n_eff, op["round"])
        n_new = int(obs_mask.sum())
        ew2_lab = ew2_unl = None
        if self._kind.sampling == "draws":
            ew2_lab, ew2_unl = (np.asarray(a) for a in kernel.expected_w2(
                self._core.cells, self._labeled, self._ew2_lab, self._ew2_unl, closing.prop_used, float(keep.sum())))
        snap = StageSnapshot(
            stage=op["stage"], n_new=n_new, labels=self._n_labels + n_new, draws=n_draws, labeled=labeled,
            draw_counts=draw_counts, wsum=wsum, w2sum=w2sum, prop_used=closing.prop_used, prop=closing.prop,
            sum_w=self._sum_w + float(w.sum()), sum_w2=self._sum_w2 + float((w * w).sum()),
            max_weight=max(self._max_w, float(w.max()) if w.size else 0.0), opened_at=op["opened_at"],
            closed_at=time_closed, skip_w=skip_w, ew2_lab=ew2_lab, ew2_unl=ew2_unl,
            design_state=closing.state if ew2_lab is not None else None)
        new_lab = None
        if not self._stochastic:
            nr, nc = rows[obs_mask], cells[obs_mask]
            new_lab = (nr, nc, y[obs_mask], order_positions(self._core.order, self._core.cell_start, nr, nc))
        return snap, closing, new_lab

    def _commit_close(self, closed):
        snap, closing, new_lab = closed
        self._kind.commit(closing)
        self._snapshots.append(snap)
        self._labeled = snap.labeled
        self._draw_counts = snap.draw_counts
        self._wsum = snap.wsum
        self._w2sum = snap.w2sum
        if snap.ew2_lab is not None:
            self._ew2_lab, self._ew2_unl = snap.ew2_lab, snap.ew2_unl
        self._n_draws = snap.draws
        self._n_labels = snap.labels
        self._sum_w, self._sum_w2, self._max_w = snap.sum_w, snap.sum_w2, snap.max_weight
        self._skip_w = snap.skip_w
        if new_lab is not None:
            self._lab = self._lab.extend(*new_lab)
        self._stages[-1]["closed_at"] = snap.closed_at
        self._open = None
        self._drop_old_posteriors()

    # ------------------------------------------------------------------ batches
    def _frame(self, rows, draw_ids, q, w, stage) -> pd.DataFrame:
        pool = self.pool
        ids = ids_at(pool, rows)
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
        return self._next(n)

    def _next(self, n, write=None):
        """:meth:`next_batch`; ``write(df) -> finish(ok)`` (:meth:`export_batch`) writes the
        batch file *before* its stage is committed, so that a failed write records nothing."""
        def done(df):
            if write is not None:
                write(df)(True)
            return df

        if self._open is not None:
            df = self.pending()
            df.attrs["reissued"] = True
            df.attrs["stalled"] = False
            return done(df)
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise SessionError(f"the batch size must be a positive integer, got {_py(n)!r}",
                               cli=f"--n must be a positive integer, got {_py(n)!r}")
        n = int(n)
        empty_rounds = 0
        while True:
            stage = len(self._stages)
            d = self._kind.draw(stage, n, self._labeled, self._lab, self._skipped)
            if d.status == "stalled":
                return done(self._empty_frame(stage, True, empty_rounds))
            now = time.time()
            st = {"stage": stage, "n_requested": n, "n_new": int(d.new.sum()), "n_draws": int(d.rows.size),
                  "stalled": int(d.stalled), "rng_state": d.rng_state, "opened_at": now}
            if d.status == "empty":
                # a round that drew nothing (Poisson: probability prod(1 - b)) is still a round of the
                # design: record it, closed, and go on to the next, as the simulation does
                self._store.add_stage(st, [], closed_at=now)
                self._begin_stage({**st, "closed_at": now}, d.rows, d.cells, d.new, d.q, d.w, pround=d.round)
                closed = self._close_state(time_closed=now)
                self._commit_close(closed)
                self._store.add_stage_state(stage, self._encoded_state(closed))
                empty_rounds += 1
                if d.exhausted or empty_rounds >= _MAX_EMPTY_ROUNDS:
                    return done(self._empty_frame(stage + 1, d.exhausted, empty_rounds))
                continue
            first = len(self._draws)
            ids = ids_at(self.pool, d.rows)
            rows_db = [(first + k, stage, int(r), _py(ids[k]), int(d.new[k]), float(d.q[k]), float(d.w[k]))
                       for k, r in enumerate(d.rows)]
            # the batch as pending() will give it once the stage is open, built before anything is stored
            dids = list(self._pending_of(first, d.rows, d.new).items())
            dids = [k if self._stochastic else v for k, v in dids]
            sel = np.asarray(dids, np.int64) - first
            df = self._frame(d.rows[sel], dids, d.q[sel], d.w[sel], stage)
            df.attrs.update(reissued=False, stalled=bool(d.stalled), **self._kind.frame_attrs(d, empty_rounds))
            finish = write(df) if write is not None else None
            try:
                self._store.add_stage(st, rows_db)
            except BaseException:
                if finish is not None:
                    finish(False)
                raise
            self._begin_stage({**st, "closed_at": None}, d.rows, d.cells, d.new, d.q, d.w, pround=d.round)
            if finish is not None:
                finish(True)
            return df

    def _empty_frame(self, stage, stalled, empty_rounds):
        df = self._frame(np.zeros(0, np.int64), [], [], [], stage)
        df.attrs.update(reissued=False, stalled=bool(stalled), **self._kind.frame_attrs(None, empty_rounds))
        return df

    # ------------------------------------------------------------------ labels
    def add_labels(self, items, labels, *, draws=None, label_map: dict | None = None, where=None,
                   source: str = "add_labels", n_skipped: int = 0, surplus: bool = False) -> IngestResult:
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
        items, labels = _as_list("items", items), _as_list("labels", labels)
        if draws is not None:
            draws = _as_list("draws", draws)
        if len(items) != len(labels) or (draws is not None and len(draws) != len(items)):
            raise MalformedInputError(f"{len(items)} items but {len(labels)} labels"
                                      + (f" and {len(draws)} draws" if draws is not None else ""))
        if not items:
            raise EmptyInputError("no labels given")
        where = list(where) if where is not None else [f"row {i}" for i in range(len(items))]
        lmap = dict(self.config.get("label_map") or {})
        lmap.update(annotate.parse_label_map(label_map) or {})
        y = annotate.parse_labels(labels, self._n_classes, lmap, where)
        rows = item_rows(self._core, self.pool.ids, items, where)
        op = self._open
        pending = op["pending"] if op is not None else {}
        sha = self._content_hash(rows, y, draws if self._stochastic else None)
        unused = None
        if self._stochastic and self._store.has_ingest(sha):
            new, n_dup, already = {}, len(items), True
        elif self._stochastic:
            unused = [] if surplus else None
            new, n_dup = match_stochastic(pending, self._draws, self._draw_label, items, rows, y, draws, where, unused,
                                          self._skipped)
            already = False
        else:
            new, n_dup = match_deterministic(pending, self._label_of, self._label_stage, items, rows, y, where,
                                             labels, self._skipped, self.path)
            already = not new   # every row an item labeled before with the same label
        if not new:
            return IngestResult(len(items), 0, n_dup, n_skipped, False, self._open and self._open["stage"],
                                self.n_pending, self.n_labels, already, n_unused=len(unused or ()))
        extra = {k: v[0] for k, v in new.items()}
        closes = len(op["pending"]) == len(new)
        now = time.time()
        closed = self._close_state(extra, time_closed=now) if closes else None
        pairs = [(k, op["pending"][k]) if self._stochastic else (op["pending"][k], k) for k in new]
        ids = ids_at(self.pool, np.asarray([row for _, row in pairs], np.int64))
        recs = []
        for i, (lab, _) in enumerate(new.values()):
            did, row = pairs[i]
            recs.append((row, _py(ids[i]), int(lab), did, op["stage"], now))
        self._store.add_labels({"sha256": sha, "source": str(source), "n_rows": len(items), "n_new": len(new),
                                "at": now}, recs, close_stage=op["stage"] if closes else None, closed_at=now,
                               state=self._encoded_state(closed) if closes else None)
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
                            False, n_unused=len(unused or ()))

    def _content_hash(self, rows, y, draws):
        h = hashlib.sha256()
        h.update(json.dumps([[int(r), int(v), None if draws is None else draws[i]]
                             for i, (r, v) in enumerate(zip(rows, y))]).encode())
        return h.hexdigest()

    def run(self, oracle: Callable[[pd.DataFrame], Sequence], budget: int, batch: int = 50,
            target_width: float | None = None, level: float = 0.95) -> "Session":
        """Label until ``budget`` labels with a Python oracle: ``oracle(batch_frame)`` returns the
        labels of the batch's rows, in order; with ``target_width``, until :meth:`stopping` (the rule
        of ``session status --target-width``) is reached at the end of a batch."""
        if target_width is not None and not target_width > 0:
            self.stopping(target_width, level)  # refused, before any label
        while self.n_labels < budget:
            df = self.next_batch(min(batch, budget - self.n_labels))
            if df.empty:
                break
            self.add_labels(df["item"], np.asarray(oracle(df)), draws=df["draw"] if self._stochastic else None)
            if target_width is not None and self.n_pending == 0 and self.stopping(target_width, level)["reached"]:
                break
        return self

    # ------------------------------------------------------------------ diagnostics
    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` of the session file ("ok")."""
        return self._store.integrity_check()

    def snapshots(self) -> list[StageSnapshot]:
        return list(self._snapshots)
