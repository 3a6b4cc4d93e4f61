"""The SQLite store of a labeling session: one file per session, nothing ever lost.

``docs/architecture.md`` ("Persistence"): an embedded SQLite database per session, in WAL mode with
``synchronous=FULL``, holding the pool's fingerprint, the configuration, every stage with
the RNG state it drew with, every draw with its weight and proposal probability, and
every label with its arrival time.  Every write — drawing a batch, ingesting labels — is
*one* transaction, so after ``kill -9`` at any point a batch is either wholly present or
wholly absent, and an acknowledged (committed) label is never lost.

This module is the thin I/O layer only: it stores and returns rows.  What the rows mean
(replaying the design, validating labels) lives in :mod:`bayes_eval.session`.

Tables
------
``meta(key, value)``
    JSON values: ``schema_version``, ``config`` (measures, design, seed, oracle, pool
    path and fingerprint), ``revision`` (bumped by every write; a second writer whose
    view is stale is refused instead of silently interleaving).
``stages(stage, n_requested, n_new, n_draws, stalled, rng_state, opened_at, closed_at)``
    One row per batch drawn.  ``rng_state`` is the bit generator state after the draws.
``draws(draw, stage, row, item, new, q, weight)``
    Every draw of every stage, repeats included; ``q`` is the per-item proposal
    probability it was drawn with and ``weight = p(x) / q`` its importance weight.
    Poisson designs (a stage is a round, items are distinct): ``q`` is the item's
    inclusion probability ``b`` in its round (static design: the cumulative ``b_t`` of
    the nested sample) and ``weight = p(x) / b``; the round's ``b`` for every cell is
    recomputed from the labels on replay and checked against ``q``.  A round that drew
    no item is a stage without draws, written closed.
``ingests(ingest, sha256, source, n_rows, n_new, at)``
    One row per accepted ingest (a file or an ``add_labels`` call).
``labels(id, row, item, label, draw, stage, ingest, arrived_at)``
    Every accepted label.  Deterministic oracle: at most one per item (unique index on
    ``row``); stochastic oracle: one per draw (unique index on ``draw``).
``skips(id, row, item, stage, reason, at)``
    Items nobody can label (``Session.skip``), one row per item, with the stage they were
    skipped in.  Created by the first skip, so files from before (and sessions that never
    skip) have no such table and read as having none.
``corrections(id, row, item, old_label, new_label, stage, stage_open, reason, at, draw)``
    Labels corrected after they were accepted (``Session.correct``): the ``labels`` row stays
    as it arrived and the correction is added, with the last stage at the time and whether it
    was open (where the replay applies it); ``draw`` the draw corrected (stochastic oracle).  Created by the
    first correction, like ``skips``.  The first correction also sets ``schema_version`` to 2
    (:data:`CORRECTIONS_VERSION`): a bayes_eval from before corrections refuses the file
    rather than read the labels as they arrived; this one reads 1 and 2.
"""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import sqlite3
from typing import Iterable, Sequence

__all__ = [
    "SCHEMA_VERSION",
    "SessionError",
    "PoolMismatchError",
    "UnknownItemError",
    "NotDrawnError",
    "InvalidLabelError",
    "LabelConflictError",
    "EmptyInputError",
    "MalformedInputError",
    "StaleSessionError",
    "Store",
    "describe_sqlite_error",
]

SCHEMA_VERSION = 1
#: a file with corrected labels (``corrections``) is written as version 2, so that a
#: bayes_eval from before corrections refuses it instead of reading the labels as they arrived
CORRECTIONS_VERSION = 2
READABLE_VERSIONS = (SCHEMA_VERSION, CORRECTIONS_VERSION)


from . import sqlite_store
from .sqlite_store import describe_sqlite_error  # noqa: F401  (re-exported)
from .errors import (  # noqa: F401  (re-exported: the session's errors live in bayes_eval.errors)
    EmptyInputError,
    InvalidLabelError,
    LabelConflictError,
    MalformedInputError,
    NotDrawnError,
    PoolMismatchError,
    SessionError,
    StaleSessionError,
    UnknownItemError,
)

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE stages (
    stage INTEGER PRIMARY KEY,
    n_requested INTEGER NOT NULL,
    n_new INTEGER NOT NULL,
    n_draws INTEGER NOT NULL,
    stalled INTEGER NOT NULL,
    rng_state TEXT NOT NULL,
    opened_at REAL NOT NULL,
    closed_at REAL
);
CREATE TABLE draws (
    draw INTEGER PRIMARY KEY,
    stage INTEGER NOT NULL REFERENCES stages(stage),
    row INTEGER NOT NULL,
    item NOT NULL,
    new INTEGER NOT NULL,
    q REAL NOT NULL,
    weight REAL NOT NULL
);
CREATE INDEX draws_stage ON draws(stage);
CREATE TABLE ingests (
    ingest INTEGER PRIMARY KEY,
    sha256 TEXT NOT NULL,
    source TEXT,
    n_rows INTEGER NOT NULL,
    n_new INTEGER NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX ingests_sha ON ingests(sha256);
CREATE TABLE labels (
    id INTEGER PRIMARY KEY,
    row INTEGER NOT NULL,
    item NOT NULL,
    label INTEGER NOT NULL,
    draw INTEGER REFERENCES draws(draw),
    stage INTEGER NOT NULL REFERENCES stages(stage),
    ingest INTEGER NOT NULL REFERENCES ingests(ingest),
    arrived_at REAL NOT NULL
);
"""

_SKIPS = """CREATE TABLE IF NOT EXISTS skips (
    id INTEGER PRIMARY KEY,
    row INTEGER NOT NULL UNIQUE,
    item NOT NULL,
    stage INTEGER NOT NULL REFERENCES stages(stage),
    reason TEXT,
    at REAL NOT NULL
)"""


# labels corrected after they were accepted (bayes_eval.session_corrections): the labels table
# keeps what arrived; a replay applies each correction where it was made (after stage ``stage``
# was opened, ``stage_open`` = 1, or closed, 0)
_CORRECTIONS = """CREATE TABLE IF NOT EXISTS corrections (
    id INTEGER PRIMARY KEY,
    row INTEGER NOT NULL,
    item NOT NULL,
    old_label INTEGER NOT NULL,
    new_label INTEGER NOT NULL,
    stage INTEGER NOT NULL REFERENCES stages(stage),
    stage_open INTEGER NOT NULL,
    reason TEXT,
    at REAL NOT NULL,
    draw INTEGER REFERENCES draws(draw)
)"""


# the design's state after each closed stage (bayes_eval.session_replay): restored on reopen
# instead of recomputed; a file without the table (or a stage without a row) is replayed
_STAGE_STATES = """CREATE TABLE IF NOT EXISTS stage_states (
    stage INTEGER PRIMARY KEY REFERENCES stages(stage),
    key TEXT NOT NULL,
    state BLOB NOT NULL
)"""


def _put_state(conn, stage: int, state):
    if state is not None:
        conn.execute(_STAGE_STATES)
        conn.execute("INSERT OR REPLACE INTO stage_states(stage, key, state) VALUES (?, ?, ?)",
                     (int(stage), str(state[0]), sqlite3.Binary(state[1])))


def _py(v):
    """numpy scalars -> Python scalars (sqlite3 adapts only the latter)."""
    return v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v


def _open_error(exc: sqlite3.Error, path: str) -> SessionError:
    """The error for a session file that cannot be opened: a file that is not SQLite is
    not a session file; any other failure is an I/O problem, said as such."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    if name.startswith("SQLITE_NOTADB") or "file is not a database" in str(exc):
        return SessionError(f"{path} is not a bayes_eval session file (not an SQLite database)")
    return SessionError(f"cannot open session file {path}: {describe_sqlite_error(exc, path)}")


class Store:
    """One session file.  Create with :meth:`create`, open with :meth:`open`.

    Every write method runs in one ``BEGIN IMMEDIATE`` transaction and checks that the
    file's ``revision`` is the one this object last saw (else :class:`StaleSessionError`
    and nothing is written).
    """

    def __init__(self, path: str, conn: sqlite3.Connection):
        self.path = path
        self._conn = conn
        self.revision = int(self._meta_value("revision"))

    # ------------------------------------------------------------------ opening
    @staticmethod
    def _connect(path: str) -> sqlite3.Connection:
        return sqlite_store.connect(path)

    @staticmethod
    def _is_blank(path: str) -> bool:
        """A file left by a crash *before* the creating transaction committed (no tables)."""
        if os.path.getsize(path) == 0:
            return True
        try:
            conn = sqlite3.connect(path, isolation_level=None)
            try:
                n = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            finally:
                conn.close()
        except sqlite3.DatabaseError:
            return False
        return n == 0

    @classmethod
    def check_new(cls, path: str) -> None:
        """Raise :class:`SessionError` unless a new session file can be created at ``path``
        (nothing there, or a blank file left by a crash; its folder exists and is writable).
        Cheap: :meth:`bayes_eval.session.Session.create` and the CLI call it before any work."""
        path = os.fspath(path)
        if os.path.isdir(path):
            raise SessionError(f"cannot create session file {path}: it is a folder")
        if os.path.exists(path) and not cls._is_blank(path):
            raise SessionError(
                f"{path} already exists; choose another file name for a new session (to continue the session "
                f"in it: Session.open({path!r}))",
                cli=f"{path} already exists; choose another file name for a new session (to continue the session "
                    f"in it: bayes-eval session next {shlex.quote(str(path))} / status / ingest)")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise SessionError(f"cannot create session file {path}: folder {parent} does not exist")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise SessionError(f"cannot create session file {path}: permission denied (folder {parent} is not "
                               f"writable)")

    @classmethod
    def create(cls, path: str, meta: dict, unique_labels_by: str = "row") -> "Store":
        """Create a new session file holding ``meta`` (JSON-serialisable values).

        ``unique_labels_by``: ``"row"`` (deterministic oracle: one label per item) or
        ``"draw"`` (stochastic oracle: one label per draw), enforced by a unique index.
        """
        if unique_labels_by not in ("row", "draw"):
            raise ValueError(f"unique_labels_by must be 'row' or 'draw', got {unique_labels_by!r}")
        path = os.fspath(path)
        cls.check_new(path)
        existed = os.path.exists(path)
        conn = None
        try:
            conn = cls._connect(path)
            rows = dict(meta)
            rows["schema_version"] = SCHEMA_VERSION
            rows["revision"] = 0
            sqlite_store.create_file(conn, path, _SCHEMA, rows, keep_file=existed,
                                     extra=[f"CREATE UNIQUE INDEX labels_unique ON labels({unique_labels_by})"])
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if not existed:  # leave nothing behind
                sqlite_store.remove_file(path)
            if isinstance(exc, sqlite3.Error):
                raise SessionError(f"cannot create session file {path}: {describe_sqlite_error(exc, path)}") from None
            raise
        return cls(path, conn)

    @classmethod
    def open(cls, path: str) -> "Store":
        path = os.fspath(path)
        if not os.path.exists(path):
            raise SessionError(f"session file not found: {path}")
        if os.path.isdir(path):
            raise SessionError(f"{path} is a folder, not a session file")
        if not os.access(path, os.R_OK):
            raise SessionError(f"cannot open session file {path}: permission denied")
        try:
            conn = cls._connect(path)
        except sqlite3.Error as exc:
            raise _open_error(exc, path) from None
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not {"meta", "stages", "draws", "labels", "ingests"} <= tables:
                raise SessionError(f"{path} is not a bayes_eval session file (an SQLite database without the "
                                   f"session's tables)")
            try:
                store = cls(path, conn)
                version = store.meta().get("schema_version")
            except (TypeError, ValueError) as exc:  # no revision, or values that are not JSON
                if isinstance(exc, SessionError):
                    raise
                raise SessionError(f"{path} is not a bayes_eval session file (its meta table is not one)") from None
        except sqlite3.Error as exc:
            conn.close()
            raise _open_error(exc, path) from None
        except BaseException:
            conn.close()
            raise
        if version not in READABLE_VERSIONS:
            store.close()
            raise SessionError(f"{path}: session schema version {version}, this bayes_eval reads "
                               f"{' and '.join(map(str, READABLE_VERSIONS))}")
        return store

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ------------------------------------------------------------------ reading
    def _meta_value(self, key):
        row = self._conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def meta(self) -> dict:
        return {k: json.loads(v) for k, v in self._conn.execute("SELECT key, value FROM meta")}

    def stages(self) -> list[dict]:
        cur = self._conn.execute(
            "SELECT stage, n_requested, n_new, n_draws, stalled, rng_state, opened_at, closed_at "
            "FROM stages ORDER BY stage")
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur]

    def draws(self) -> list[tuple]:
        """(draw, stage, row, item, new, q, weight) in draw order."""
        return self._conn.execute(
            "SELECT draw, stage, row, item, new, q, weight FROM draws ORDER BY draw").fetchall()

    def labels(self) -> list[tuple]:
        """(id, row, item, label, draw, stage, ingest, arrived_at) in arrival order."""
        return self._conn.execute(
            "SELECT id, row, item, label, draw, stage, ingest, arrived_at FROM labels ORDER BY id").fetchall()

    def skips(self) -> list[tuple]:
        """(id, row, item, stage, reason, at) of the skipped items, in the order skipped
        (none in a file that never skipped)."""
        if self._conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='skips'").fetchone() is None:
            return []
        return self._conn.execute("SELECT id, row, item, stage, reason, at FROM skips ORDER BY id").fetchall()

    def corrections(self) -> list[tuple]:
        """(id, row, item, old_label, new_label, stage, stage_open, reason, at, draw) of the
        corrected labels, in the order corrected (none in a file that never corrected one)."""
        if self._conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='corrections'"
                              ).fetchone() is None:
            return []
        return self._conn.execute("SELECT id, row, item, old_label, new_label, stage, stage_open, reason, at, draw "
                                  "FROM corrections ORDER BY id").fetchall()

    def n_corrections(self) -> int:
        """How many labels were corrected (:meth:`corrections`' length, counted by SQLite: the status
        reads it every time)."""
        if self._conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='corrections'"
                              ).fetchone() is None:
            return 0
        return int(self._conn.execute("SELECT count(*) FROM corrections").fetchone()[0])

    def stage_states(self) -> list[tuple]:
        """(stage, key, state) of the stored stage states (none in a file from before them)."""
        if self._conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='stage_states'"
                              ).fetchone() is None:
            return []
        return self._conn.execute("SELECT stage, key, state FROM stage_states ORDER BY stage").fetchall()

    def has_ingest(self, sha256: str) -> bool:
        return self._conn.execute("SELECT 1 FROM ingests WHERE sha256=? LIMIT 1", (sha256,)).fetchone() is not None

    def integrity_check(self) -> str:
        return self._conn.execute("PRAGMA integrity_check").fetchone()[0]

    def pragma(self, name: str):
        return self._conn.execute(f"PRAGMA {name}").fetchone()[0]

    # ------------------------------------------------------------------ writing
    @contextlib.contextmanager
    def _transaction(self):
        with sqlite_store.revision_transaction(self._conn, self.path, self.revision, self._stale,
                                               "cannot write the session file") as w:
            yield w.conn
        self.revision = w.revision

    def _stale(self, rev: int, seen: int) -> StaleSessionError:
        return StaleSessionError(
            f"{self.path} was changed by another process (revision {rev}, this session has {seen}); reopen it",
            cli=f"{self.path} was changed by another process while this command ran (revision {rev}, "
                f"this command read {seen}); nothing was written — run the command again")

    def add_stage(self, stage: dict, draws: Iterable[Sequence], closed_at: float | None = None):
        """Write a stage and its draws ``(draw, stage, row, item, new, q, weight)`` at once.

        ``closed_at``: a stage that needs no label (a Poisson round that drew no item) is
        written closed."""
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO stages(stage, n_requested, n_new, n_draws, stalled, rng_state, opened_at, closed_at) "
                "VALUES (:stage, :n_requested, :n_new, :n_draws, :stalled, :rng_state, :opened_at, :closed_at)",
                {**{k: _py(v) for k, v in stage.items() if k != "closed_at"}, "closed_at": _py(closed_at)})
            conn.executemany(
                "INSERT INTO draws(draw, stage, row, item, new, q, weight) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [tuple(_py(v) for v in d) for d in draws])

    def set_meta(self, key: str, value) -> None:
        """Record one more fact about the session (JSON), replacing an earlier value."""
        with self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))

    def add_stage_state(self, stage: int, state) -> None:
        """Store the state ``(key, blob)`` a closed stage produced (None: nothing)."""
        if state is not None:
            with self._transaction() as conn:
                _put_state(conn, stage, state)

    def add_labels(self, ingest: dict, labels: Iterable[Sequence], close_stage: int | None = None,
                   closed_at: float | None = None, state=None) -> int:
        """Write one ingest: its record, its labels ``(row, item, label, draw, stage,
        arrived_at)`` and, when it completes the open stage, the stage's closing time and
        the state it produced (``state``: ``(key, blob)``, see ``session_replay``).
        Returns the ingest id."""
        with self._transaction() as conn:
            cur = conn.execute(
                "INSERT INTO ingests(sha256, source, n_rows, n_new, at) "
                "VALUES (:sha256, :source, :n_rows, :n_new, :at)",
                {k: _py(v) for k, v in ingest.items()})
            ingest_id = cur.lastrowid
            conn.executemany(
                "INSERT INTO labels(row, item, label, draw, stage, ingest, arrived_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [tuple(_py(v) for v in lab[:5]) + (ingest_id, _py(lab[5])) for lab in labels])
            if close_stage is not None:
                conn.execute("UPDATE stages SET closed_at=? WHERE stage=?", (closed_at, int(close_stage)))
                _put_state(conn, close_stage, state)
        return ingest_id

    def add_skips(self, skips: Iterable[Sequence], close_stage: int | None = None,
                  closed_at: float | None = None, state=None) -> None:
        """Write skipped items ``(row, item, stage, reason, at)`` in one transaction and,
        when they complete the open stage, the stage's closing time."""
        with self._transaction() as conn:
            conn.execute(_SKIPS)
            conn.executemany("INSERT INTO skips(row, item, stage, reason, at) VALUES (?, ?, ?, ?, ?)",
                             [tuple(_py(v) for v in sk) for sk in skips])
            if close_stage is not None:
                conn.execute("UPDATE stages SET closed_at=? WHERE stage=?", (closed_at, int(close_stage)))
                _put_state(conn, close_stage, state)

    def add_corrections(self, corrections: Iterable[Sequence]) -> None:
        """Write corrected labels ``(row, item, old_label, new_label, stage, stage_open, reason,
        at, draw)`` in one transaction."""
        with self._transaction() as conn:
            conn.execute(_CORRECTIONS)
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                         (json.dumps(CORRECTIONS_VERSION),))
            conn.executemany("INSERT INTO corrections(row, item, old_label, new_label, stage, stage_open, reason, at, "
                             "draw) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             [tuple(_py(v) for v in c) for c in corrections])

    def dump(self) -> dict:
        """Every table's rows (for tests that check that nothing changed)."""
        out = {}
        for t in ("meta", "stages", "draws", "ingests", "labels"):
            out[t] = self._conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
        out["skips"] = self.skips()
        out["corrections"] = self.corrections()
        return out
