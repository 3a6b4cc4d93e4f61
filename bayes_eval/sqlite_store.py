"""The SQLite conventions shared by the package's files (``docs/architecture.md``,
"Persistence"): a session (:mod:`bayes_eval.store`) and an on-demand evaluation
(:mod:`bayes_eval.ondemand_store`).

* :func:`connect` — WAL mode, ``synchronous=FULL``, foreign keys on, autocommit off
  (``isolation_level=None``: the transactions are explicit);
* :func:`create_file` — the schema and the ``meta`` rows in one ``BEGIN IMMEDIATE``
  transaction; on failure the connection is closed and :func:`remove_file` leaves nothing
  behind;
* :func:`revision_transaction` — one write: ``BEGIN IMMEDIATE``, the check that the
  file's ``meta.revision`` is the one the writer last saw (else the caller's stale error,
  nothing written), the body, revision + 1, ``COMMIT``; any failure rolls back and an
  SQLite failure is said in words (:func:`describe_sqlite_error`) with "nothing was written";
* :func:`describe_sqlite_error` — a full disk, a read-only file, a lock, ... instead of
  SQLite's wording.

Thin I/O only, no JAX; the errors are :mod:`bayes_eval.errors`'.
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from typing import Callable, Iterable

from .errors import SessionError

__all__ = ["connect", "create_file", "remove_file", "revision_transaction", "describe_sqlite_error"]


def connect(path: str, timeout: float = 30.0) -> sqlite3.Connection:
    """An SQLite connection to ``path`` with the package's settings (module docstring);
    closed again if a setting fails."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=timeout)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
    except BaseException:
        conn.close()
        raise
    return conn


def remove_file(path: str) -> None:
    """Remove an SQLite file and the files SQLite keeps beside it (``-wal``, ``-shm``,
    ``-journal``), whichever exist."""
    for f in (path, path + "-wal", path + "-shm", path + "-journal"):
        with contextlib.suppress(OSError):
            os.remove(f)


def create_file(conn: sqlite3.Connection, path: str, schema: str, meta: dict, extra: Iterable[str] = (),
                keep_file: bool = False) -> None:
    """Create the tables of ``schema`` (statements separated by ``;``), then the ``extra``
    statements, and insert ``meta`` as ``meta(key, value)`` rows of JSON, in one
    ``BEGIN IMMEDIATE`` transaction on ``conn``.  On any failure: roll back, close
    ``conn``, remove the file unless ``keep_file`` (it existed before) and re-raise."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        for stmt in schema.strip().split(";"):
            if stmt.strip():
                conn.execute(stmt)
        for stmt in extra:
            conn.execute(stmt)
        conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        conn.close()
        if not keep_file:
            remove_file(path)
        raise


class Written:
    """What :func:`revision_transaction` yields: ``conn`` to write with; ``revision`` the
    file's revision once the transaction has committed (None before)."""

    __slots__ = ("conn", "revision")

    def __init__(self, conn):
        self.conn = conn
        self.revision = None


@contextlib.contextmanager
def revision_transaction(conn: sqlite3.Connection, path: str, seen: int,
                         stale: Callable[[int, int], Exception], what: str = "cannot write"):
    """One write to the file at ``path`` (module docstring).  ``seen``: the revision the
    writer last read; ``stale(revision, seen)`` the error when another process wrote since;
    ``what`` the words before an SQLite failure's description (``"{path}: {what}: ...;
    nothing was written"``).  Yields a :class:`Written`, whose ``revision`` holds the new
    revision after the commit::

        with revision_transaction(conn, path, self.revision, stale) as w:
            w.conn.execute(...)
        self.revision = w.revision
    """
    def failed(exc):
        return SessionError(f"{path}: {what}: {describe_sqlite_error(exc, path)}; nothing was written")

    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise failed(exc) from None
    w = Written(conn)
    try:
        rev = int(json.loads(conn.execute("SELECT value FROM meta WHERE key='revision'").fetchone()[0]))
        if rev != seen:
            raise stale(rev, seen)
        yield w
        conn.execute("UPDATE meta SET value=? WHERE key='revision'", (json.dumps(rev + 1),))
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise failed(exc) from None
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    w.revision = rev + 1


def describe_sqlite_error(exc: sqlite3.Error, path: str) -> str:
    """An SQLite failure on the file ``path`` in words a user can act on (a full disk, a
    read-only file or folder, a lock, ...), not "not a session file"."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    msg = str(exc)
    folder = os.path.dirname(os.path.abspath(path))
    if name.startswith("SQLITE_FULL") or "disk is full" in msg:
        return "disk full (no space left for the session file)"
    if name.startswith("SQLITE_READONLY") or "readonly" in msg:
        return (f"permission denied: the file or its folder {folder} is read-only (SQLite also writes "
                f"{os.path.basename(path)}-wal and -shm beside it)")
    if name.startswith("SQLITE_CANTOPEN") or "unable to open" in msg:
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"permission denied (folder {folder} is not writable)"
        if os.path.exists(path) and not os.access(path, os.R_OK | os.W_OK):
            return "permission denied"
        return f"the file cannot be opened ({msg})"
    if name.startswith(("SQLITE_PERM", "SQLITE_AUTH")):
        return "permission denied"
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in msg:
        return "the file is locked by another process (try again when it is done)"
    if name.startswith("SQLITE_IOERR") or "I/O error" in msg:
        return f"disk I/O error ({msg})"
    if name.startswith("SQLITE_CORRUPT") or "malformed" in msg:
        return f"the file is damaged ({msg})"
    return msg
