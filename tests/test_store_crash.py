"""Never lose a label: the SQLite store under SIGKILL (issue 5, DESIGN.md §8)."""
import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from bayes_eval.pool import demo_pool
from bayes_eval.session import Session, SessionError
from bayes_eval.store import Store

POOL_KW = dict(n_items=3000, positive_rate=0.05, seed=5)
N_INGESTS = 50
BATCH = 4

# The child ingests small label files until the session holds N_INGESTS ingests, printing an
# acknowledgement after each commit.  With a 4th argument k it kills itself inside the
# transaction of its k-th ingest, after the labels are written and before COMMIT.
CHILD = r"""
import json, os, signal, sys
import numpy as np
import pandas as pd
from bayes_eval.pool import demo_pool
from bayes_eval.session import Session
from bayes_eval import store as S

path, folder, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
kill_at = int(sys.argv[4]) if len(sys.argv) > 4 else -1
pool = demo_pool(**json.loads(os.environ["POOL_KW"]))
if kill_at >= 0:
    orig = S.Store.add_labels
    def add_labels(self, ingest, labels, close_stage=None, closed_at=None):
        if len(self.ingests()) == kill_at:
            real = self._transaction
            def dying():
                gen = real()
                class T:
                    def __enter__(s_):
                        return gen.__enter__()
                    def __exit__(s_, *exc):
                        os.kill(os.getpid(), signal.SIGKILL)
                return T()
            self._transaction = dying
        return orig(self, ingest, labels, close_stage, closed_at)
    S.Store.add_labels = add_labels
s = Session.open(path, pool)
print("READY", flush=True)
while True:
    done = len(s._store.ingests())
    if done >= total:
        break
    b = s.next_batch(int(os.environ["BATCH"]))
    labels = pool.labels[pool.index_of(b["item"].to_numpy())]
    f = os.path.join(folder, f"labels_{done}.csv")
    pd.DataFrame({"item": b["item"], "label": labels}).to_csv(f, index=False)
    r = s.ingest_file(f)
    print("ACK " + json.dumps({"ingest": done, "items": [int(i) for i in b["item"]],
                               "labels": [int(v) for v in labels], "new": r.n_new}), flush=True)
print("DONE", flush=True)
"""


class _Child:
    """The child process, its stdout read by a thread into a queue."""

    def __init__(self, path, folder, env, *extra):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, path, folder, str(N_INGESTS), *map(str, extra)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.q: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def wait_ready(self):
        while True:
            line = self.q.get(timeout=180)
            if line is None:
                raise AssertionError(self.finish()[1])
            if line == "READY":
                return

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)

    def finish(self):
        """Wait for the end; returns (returncode, stderr) and closes the pipes."""
        self.proc.wait(120)
        self.thread.join(60)
        err = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode, err


def _drain(q, acks, timeout):
    """Collect lines until EOF or ``timeout``; returns True at EOF."""
    end = time.monotonic() + timeout
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return False
        try:
            line = q.get(timeout=left)
        except queue.Empty:
            return False
        if line is None:
            return True
        if line.startswith("ACK "):
            acks.append(json.loads(line[4:]))


def _check_file(path, pool, acks):
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT row, label, ingest FROM labels").fetchall()
        # no duplicates: one label per item (deterministic oracle)
        assert len(rows) == len({r for r, _, _ in rows})
        stored = {r: lab for r, lab, _ in rows}
        # every acknowledged label is there, with its value
        for a in acks:
            for item, lab in zip(a["items"], a["labels"]):
                assert stored.get(item) == lab, (item, lab)
        # every ingest whole: its recorded count of new labels equals the labels it holds
        for ing, n_new in conn.execute("SELECT ingest, n_new FROM ingests"):
            assert sum(1 for _, _, i in rows if i == ing) == n_new
        # every batch whole: the draws of each stage are all there
        for stage, n_draws in conn.execute("SELECT stage, n_draws FROM stages"):
            assert conn.execute("SELECT count(*) FROM draws WHERE stage=?", (stage,)).fetchone()[0] == n_draws
        # labels only for drawn items, all correct
        assert all(pool.labels[r] == lab for r, lab in stored.items())
    finally:
        conn.close()


def test_sigkill_during_ingests_loses_no_committed_label(tmp_path):
    pool = demo_pool(**POOL_KW)
    path = str(tmp_path / "crash.db")
    Session.create(path, pool, "f1", "is", seed=21).close()
    env = dict(os.environ, POOL_KW=json.dumps(POOL_KW), BATCH=str(BATCH), JAX_PLATFORMS="cpu",
               JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jaxcache"), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    rng = np.random.default_rng(20240611)
    acks: list = []
    kills = 0
    # 1) a kill inside the transaction, after the labels were written, before COMMIT
    child = _Child(path, str(tmp_path), env, 3)
    assert _drain(child.q, acks, 180), "the child did not die at the planned point"
    rc, err = child.finish()
    assert rc == -signal.SIGKILL, err
    kills += 1
    assert len(acks) == 3
    _check_file(path, pool, acks)
    # 2) kills at random moments (mid-batch, mid-ingest, between)
    done = False
    for attempt in range(12):
        child = _Child(path, str(tmp_path), env)
        child.wait_ready()  # start-up is not what we test
        if kills < 5:
            if not _drain(child.q, acks, rng.uniform(0.0, 0.25)):
                child.kill()
                kills += 1
            _drain(child.q, acks, 60)
            child.finish()
            _check_file(path, pool, acks)
        else:
            done = _drain(child.q, acks, 300)
            rc, err = child.finish()
            assert rc == 0, err
            break
    assert done and kills >= 5
    _check_file(path, pool, acks)
    # the file opens, holds the N_INGESTS ingests, and the resumed run equals an uninterrupted one
    s = Session.open(path, pool)
    assert s.integrity_check() == "ok"
    assert len(s._store.ingests()) == N_INGESTS and s.n_labels == N_INGESTS * BATCH and s.n_pending == 0
    ref = Session.create(str(tmp_path / "ref.db"), pool, "f1", "is", seed=21)
    for _ in range(N_INGESTS):
        b = ref.next_batch(BATCH)
        ref.add_labels(b["item"], pool.labels[pool.index_of(b["item"].to_numpy())])
    np.testing.assert_array_equal(s.estimate().to_numpy(), ref.estimate().to_numpy())
    assert list(s.draws()["item"]) == list(ref.draws()["item"])
    np.testing.assert_array_equal(s.next_batch(BATCH)["item"].to_numpy(), ref.next_batch(BATCH)["item"].to_numpy())


# ---------------------------------------------------------------------------- the store itself
def test_store_settings_and_refusals(tmp_path):
    pool = demo_pool(n_items=500, positive_rate=0.05, seed=1)
    path = str(tmp_path / "s.db")
    s = Session.create(path, pool, "f1", "passive")
    assert s._store.pragma("journal_mode") == "wal"
    assert s._store.pragma("synchronous") == 2  # FULL
    s.close()
    st = Store.open(path)
    assert st.pragma("synchronous") == 2 and st.meta()["schema_version"] == 1
    st.close()
    not_db = tmp_path / "x.db"
    not_db.write_text("hello")
    with pytest.raises(SessionError, match="not a bayes_eval session"):
        Store.open(str(not_db))
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (a)").connection.commit()
    with pytest.raises(SessionError, match="not a bayes_eval session"):
        Store.open(str(other))
    with pytest.raises(SessionError, match="not found"):
        Store.open(str(tmp_path / "missing.db"))
    with pytest.raises(SessionError, match="already exists"):
        Store.create(path, {})
    # a file left empty by a crash before the creating transaction committed can be reused
    blank = tmp_path / "blank.db"
    blank.write_bytes(b"")
    Store.create(str(blank), {"config": {}}).close()
