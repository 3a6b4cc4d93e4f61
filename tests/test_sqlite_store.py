"""The SQLite conventions shared by the session file and the on-demand file
(``bayes_eval/sqlite_store.py``): one revision-checked transaction per write, a stale
writer refused with nothing written, a failed body rolled back, a failed creation leaving
no file behind."""
import os
import sqlite3

import pytest

from bayes_eval import sqlite_store
from bayes_eval.errors import SessionError, StaleSessionError
from bayes_eval.ondemand_store import OnDemandStore
from bayes_eval.store import Store


def _stores(tmp_path):
    a = Store.create(str(tmp_path / "s.db"), {"config": {"x": 1}})
    b = OnDemandStore.create(str(tmp_path / "o.db"), {"x": 1})
    return [(a, Store.open(a.path), lambda s: s._transaction()),
            (b, OnDemandStore.open(b.path), lambda s: s.transaction())]


def test_a_stale_writer_is_refused_and_writes_nothing(tmp_path):
    for first, second, tx in _stores(tmp_path):
        with tx(first) as conn:
            conn.execute("INSERT INTO meta(key, value) VALUES ('k', '1')")
        assert first.revision == 1
        before = first.dump()
        with pytest.raises(StaleSessionError, match="changed by another process"):
            with tx(second) as conn:
                conn.execute("INSERT INTO meta(key, value) VALUES ('k2', '2')")
        assert first.dump() == before and second.revision == 0
        first.close()
        second.close()


def test_a_failed_body_rolls_back(tmp_path):
    for store, other, tx in _stores(tmp_path):
        other.close()
        before = store.dump()
        with pytest.raises(RuntimeError):
            with tx(store) as conn:
                conn.execute("INSERT INTO meta(key, value) VALUES ('k', '1')")
                raise RuntimeError("boom")
        with pytest.raises(SessionError, match="nothing was written"):  # an SQLite failure, said in words
            with tx(store) as conn:
                conn.execute("INSERT INTO meta(key, value) VALUES ('revision', '5')")  # duplicate key
        assert store.dump() == before and store.revision == 0
        store.close()


def test_a_failed_creation_leaves_no_file(tmp_path):
    path = str(tmp_path / "c.db")
    conn = sqlite_store.connect(path)
    with pytest.raises(sqlite3.OperationalError):
        sqlite_store.create_file(conn, path, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); "
                                             "CREATE TABLE meta (x)", {"revision": 0})
    assert not any(os.path.exists(path + s) for s in ("", "-wal", "-shm", "-journal"))
