"""The SQLite file of an on-demand evaluation (seed ``003``; issue 17 item 3).

The conventions of :mod:`bayes_eval.store` (``docs/architecture.md``, "Persistence"; the shared
code is :mod:`bayes_eval.sqlite_store`): WAL
mode with ``synchronous=FULL``; every write — a submission with its draws, an ingest of
labels or of an exhaustive sample, a round of draws — is *one* ``BEGIN IMMEDIATE``
transaction guarded by a ``revision`` counter, so after ``kill -9`` a write is wholly
present or wholly absent, and a second writer with a stale view is refused.  Thin I/O
only: what the rows mean lives in :mod:`bayes_eval.ondemand_session`.

Tables: ``meta(key, value)`` (JSON: config, revision, schema); ``systems`` (one per
submission: name, file hash, size); ``predictions(system, item, p)``; ``draws(draw, system,
item, round, new)`` (verification draws from system i's stratum proposal — pᵢ, or under the
``post-fill`` protocol the ``proposals(system, item, q)`` fixed at its submission — with
replacement; ``new``: the item needed a new verification when drawn); ``labels(item, label, ingest)`` (one verification per
item); ``exhaustive(item, unit, ingest)`` (instances found by exhaustive annotation);
``ingests(ingest, sha256, kind, source, n_rows, n_new, at)``; ``skips(item, ingest)`` (instances nobody can
verify, ``ondemand skip``: schema 3; a file of an earlier schema gains the table with its first skip).
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3

from . import sqlite_store
from .errors import SessionError, StaleSessionError
from .sqlite_store import describe_sqlite_error

__all__ = ["OnDemandStore", "SCHEMA_VERSION", "SKIPS_TABLE"]

SCHEMA_VERSION = 3  # 2: the proposals table (files of version 1 have none and use pᵢ); 3: the skips table
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
CREATE TABLE proposals (system INTEGER NOT NULL REFERENCES systems(system), item TEXT NOT NULL,
    q REAL NOT NULL, PRIMARY KEY (system, item));
"""
#: the skips table: part of a new file's schema, and made by the first skip in a file of an earlier one
SKIPS_TABLE = ("CREATE TABLE IF NOT EXISTS skips (item TEXT PRIMARY KEY, "
               "ingest INTEGER NOT NULL REFERENCES ingests(ingest))")
_SCHEMA += SKIPS_TABLE + ";\n"


class OnDemandStore:
    """One on-demand evaluation file (:meth:`create`, :meth:`open`)."""

    def __init__(self, path: str, conn: sqlite3.Connection):
        self.path = path
        self.conn = conn
        self.revision = int(self.meta()["revision"])

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
        try:
            conn = sqlite_store.connect(path)
            rows = {"kind": _KIND, "schema_version": SCHEMA_VERSION, "revision": 0, "config": config}
            sqlite_store.create_file(conn, path, _SCHEMA, rows)  # closes and removes the file on failure
        except sqlite3.Error as exc:
            sqlite_store.remove_file(path)  # also when the connection itself failed
            raise SessionError(f"cannot create {path}: {describe_sqlite_error(exc, path)}") from None
        return cls(path, conn)

    @classmethod
    def open(cls, path: str) -> "OnDemandStore":
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise SessionError(f"on-demand evaluation file not found: {path}")
        try:
            conn = sqlite_store.connect(path)
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

    def skipped_items(self) -> list:
        """The instances recorded as beyond any annotator (``ondemand skip``), none in a file without the table."""
        if not self.rows("SELECT 1 FROM sqlite_master WHERE type='table' AND name='skips'"):
            return []
        return [r[0] for r in self.rows("SELECT item FROM skips ORDER BY item")]

    def dump(self) -> dict:
        """Every table's rows (tests check that a refused operation changed nothing)."""
        tables = {r[0] for r in self.rows("SELECT name FROM sqlite_master WHERE type='table'")}
        return {t: self.rows(f"SELECT * FROM {t} ORDER BY 1")
                for t in ("meta", "systems", "predictions", "draws", "ingests", "labels", "exhaustive", "proposals", "skips")
                if t in tables}

    # ------------------------------------------------------------------ writing
    @contextlib.contextmanager
    def transaction(self):
        """One write: ``BEGIN IMMEDIATE``, the revision check, the body, revision + 1,
        ``COMMIT``; any failure rolls back and says that nothing was written
        (:func:`bayes_eval.sqlite_store.revision_transaction`)."""
        with sqlite_store.revision_transaction(self.conn, self.path, self.revision, self._stale) as w:
            yield w.conn
        self.revision = w.revision

    def _stale(self, rev: int, seen: int) -> StaleSessionError:
        return StaleSessionError(f"{self.path} was changed by another process (revision {rev}, this one read {seen}); "
                                 f"nothing was written — reopen and retry")
