"""The SQLite file of an on-demand evaluation (seed ``003``; issue 17 item 3).

The conventions of :mod:`bayes_eval.store` (``docs/architecture.md``, "Persistence"): WAL
mode with ``synchronous=FULL``; every write — a submission with its draws, an ingest of
labels or of an exhaustive sample, a round of draws — is *one* ``BEGIN IMMEDIATE``
transaction guarded by a ``revision`` counter, so after ``kill -9`` a write is wholly
present or wholly absent, and a second writer with a stale view is refused.  Thin I/O
only: what the rows mean lives in :mod:`bayes_eval.ondemand_session`.

Tables: ``meta(key, value)`` (JSON: config, revision, schema); ``systems`` (one per
submission: name, file hash, size); ``predictions(system, item, p)``; ``draws(draw, system,
item, round, new)`` (verification draws from pᵢ, with replacement; ``new``: the item needed
a new verification when drawn); ``labels(item, label, ingest)`` (one verification per
item); ``exhaustive(item, unit, ingest)`` (instances found by exhaustive annotation);
``ingests(ingest, sha256, kind, source, n_rows, n_new, at)``.
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3

from .errors import SessionError, StaleSessionError
from .store import describe_sqlite_error

__all__ = ["OnDemandStore", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1
_KIND = "bayes_eval.ondemand"

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE systems (system INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, sha256 TEXT NOT NULL,
    source TEXT, n_items INTEGER NOT NULL, submitted_at REAL NOT NULL);
CREATE TABLE predictions (system INTEGER NOT NULL REFERENCES systems(system), item TEXT NOT NULL,
    p REAL NOT NULL, PRIMARY KEY (system, item));
CREATE TABLE draws (draw INTEGER PRIMARY KEY, system INTEGER NOT NULL REFERENCES systems(system),
    item TEXT NOT NULL, round INTEGER NOT NULL, new INTEGER NOT NULL);
CREATE TABLE ingests (ingest INTEGER PRIMARY KEY, sha256 TEXT NOT NULL, kind TEXT NOT NULL, source TEXT,
    n_rows INTEGER NOT NULL, n_new INTEGER NOT NULL, at REAL NOT NULL);
CREATE TABLE labels (item TEXT PRIMARY KEY, label INTEGER NOT NULL,
    ingest INTEGER NOT NULL REFERENCES ingests(ingest));
CREATE TABLE exhaustive (id INTEGER PRIMARY KEY, item TEXT NOT NULL, unit TEXT NOT NULL,
    ingest INTEGER NOT NULL REFERENCES ingests(ingest), UNIQUE (unit, item));
"""


class OnDemandStore:
    """One on-demand evaluation file (:meth:`create`, :meth:`open`)."""

    def __init__(self, path: str, conn: sqlite3.Connection):
        self.path = path
        self.conn = conn
        self.revision = int(self.meta()["revision"])

    @staticmethod
    def _connect(path):
        conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    @classmethod
    def create(cls, path: str, config: dict) -> "OnDemandStore":
        path = os.fspath(path)
        if os.path.isdir(path):
            raise SessionError(f"cannot create {path}: it is a folder")
        if os.path.exists(path) and os.path.getsize(path) > 0:
            raise SessionError(f"{path} already exists; choose another file name for a new evaluation")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise SessionError(f"cannot create {path}: folder {parent} does not exist")
        conn = None
        try:
            conn = cls._connect(path)
            conn.execute("BEGIN IMMEDIATE")
            for stmt in _SCHEMA.strip().split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            rows = {"kind": _KIND, "schema_version": SCHEMA_VERSION, "revision": 0, "config": config}
            conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                             [(k, json.dumps(v)) for k, v in rows.items()])
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            for f in (path, path + "-wal", path + "-shm"):
                with contextlib.suppress(OSError):
                    os.remove(f)
            raise SessionError(f"cannot create {path}: {describe_sqlite_error(exc, path)}") from None
        return cls(path, conn)

    @classmethod
    def open(cls, path: str) -> "OnDemandStore":
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise SessionError(f"on-demand evaluation file not found: {path}")
        try:
            conn = cls._connect(path)
            kind = conn.execute("SELECT value FROM meta WHERE key='kind'").fetchone()
        except sqlite3.Error as exc:
            raise SessionError(f"{path} is not an on-demand evaluation file "
                               f"({describe_sqlite_error(exc, path)})") from None
        if kind is None or json.loads(kind[0]) != _KIND:
            conn.close()
            raise SessionError(f"{path} is not an on-demand evaluation file (made by 'bayes-eval ondemand new')")
        return cls(path, conn)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # ------------------------------------------------------------------ reading
    def meta(self) -> dict:
        return {k: json.loads(v) for k, v in self.conn.execute("SELECT key, value FROM meta")}

    def rows(self, sql: str, args=()) -> list:
        return self.conn.execute(sql, args).fetchall()

    def has_ingest(self, sha256: str, kind: str) -> bool:
        return bool(self.rows("SELECT 1 FROM ingests WHERE sha256=? AND kind=?", (sha256, kind)))

    def dump(self) -> dict:
        """Every table's rows (tests check that a refused operation changed nothing)."""
        return {t: self.rows(f"SELECT * FROM {t} ORDER BY 1")
                for t in ("meta", "systems", "predictions", "draws", "ingests", "labels", "exhaustive")}

    # ------------------------------------------------------------------ writing
    @contextlib.contextmanager
    def transaction(self):
        """One write: ``BEGIN IMMEDIATE``, the revision check, the body, revision + 1,
        ``COMMIT``; any failure rolls back and says that nothing was written."""
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise SessionError(f"{self.path}: cannot write: {describe_sqlite_error(exc, self.path)}; "
                               f"nothing was written") from None
        try:
            rev = int(json.loads(conn.execute("SELECT value FROM meta WHERE key='revision'").fetchone()[0]))
            if rev != self.revision:
                raise StaleSessionError(f"{self.path} was changed by another process (revision {rev}, this "
                                        f"one read {self.revision}); nothing was written — reopen and retry")
            yield conn
            conn.execute("UPDATE meta SET value=? WHERE key='revision'", (json.dumps(rev + 1),))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise SessionError(f"{self.path}: cannot write: {describe_sqlite_error(exc, self.path)}; "
                               f"nothing was written") from None
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        self.revision = rev + 1
