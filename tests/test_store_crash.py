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

# Both children below kill themselves at planned points through a sqlite3 connection
# factory (no library internals): SQL_HOOK counts the write statements (INSERT / UPDATE /
# DELETE / REPLACE / COMMIT) of the session's connection once ``armed``, and SIGKILLs the
# process at the ``plan["write"]``-th -- before it runs, or after with ``plan["after"]`` --
# or, with ``plan["commit_of_ingest"] = k``, at the COMMIT of the k-th ingest (0-based,
# counted in the file), after its labels are written.
SQL_HOOK = r"""
import json, os, signal, sqlite3, sys

plan = json.loads(os.environ.get("KILL_PLAN", "{}"))
armed = [False]
count = [0]
ingests_seen = [None]


def _die():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _run(cur, sql, run):
    verb = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    if armed[0] and verb in ("INSERT", "UPDATE", "DELETE", "REPLACE", "COMMIT"):
        count[0] += 1
        if count[0] == plan.get("write", -1):
            if plan.get("after"):
                run()
            _die()
        k = plan.get("commit_of_ingest", -1)
        if k >= 0 and verb == "INSERT" and "INTO INGESTS" in sql.upper():
            ingests_seen[0] = sqlite3.Cursor.execute(cur.connection.cursor(), "SELECT count(*) FROM ingests"
                                                     ).fetchone()[0]
        if k >= 0 and verb == "COMMIT" and ingests_seen[0] == k:
            _die()
    return run()


class Cursor(sqlite3.Cursor):
    def execute(self, sql, *a):
        return _run(self, sql, lambda: sqlite3.Cursor.execute(self, sql, *a))

    def executemany(self, sql, *a):
        return _run(self, sql, lambda: sqlite3.Cursor.executemany(self, sql, *a))


class Connection(sqlite3.Connection):
    def cursor(self, factory=Cursor):
        return super().cursor(factory)

    def execute(self, sql, *a):
        return self.cursor().execute(sql, *a)

    def executemany(self, sql, *a):
        return self.cursor().executemany(sql, *a)


_connect = sqlite3.connect


def connect(*a, **kw):
    kw.setdefault("factory", Connection)
    return _connect(*a, **kw)


sqlite3.connect = connect
"""

# The child ingests small label files until the session holds N_INGESTS ingests (BATCH new
# labels each), printing an acknowledgement after each commit.  With a 4th argument k it
# kills itself inside the transaction of its k-th ingest, after the labels are written and
# before COMMIT.
CHILD = SQL_HOOK + r"""
import numpy as np
import pandas as pd
from bayes_eval.pool import demo_pool
from bayes_eval.session import Session

path, folder, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
if len(sys.argv) > 4:
    plan["commit_of_ingest"] = int(sys.argv[4])
batch = int(os.environ["BATCH"])
pool = demo_pool(**json.loads(os.environ["POOL_KW"]))
s = Session.open(path, pool)
armed[0] = True
print("READY", flush=True)
while True:
    done = s.n_labels // batch  # every ingest brings `batch` new labels
    if done >= total:
        break
    b = s.next_batch(batch)
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


@pytest.mark.slow
def test_sigkill_during_ingests_loses_no_committed_label(tmp_path):
    """Slow tier (six child processes; the default tier's kill test,
    test_sigkill_while_writing_batches_replays_consistently, covers the same properties --
    a kill before the COMMIT of a label file's ingest, kills at random moments, the resumed
    run equal to an uninterrupted one -- with label files on every other stage): 50 label
    files ingested by children killed inside an ingest's transaction and at random moments;
    no acknowledged label lost, every ingest and batch whole."""
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
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM ingests").fetchone()[0] == N_INGESTS
    assert s.n_labels == N_INGESTS * BATCH and s.n_pending == 0
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


# ---------------------------------------------------------------------------- kills inside the writes of batches
# The child draws batches and labels them (next_batch + add_labels) until the session has
# ``target`` closed stages, printing DRAWN after a batch is returned (committed) and ACK
# after its labels are.  With a plan {"write": k, "after": bool} (SQL_HOOK) it SIGKILLs
# itself at its k-th write statement after the session's open, before or after executing
# it, so kills land inside the transaction that writes a stage and its draws, or an ingest
# and its labels, at every statement boundary; without a plan the parent kills it at a
# random moment.
LOOP_CHILD = SQL_HOOK + r"""
path, target, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
from bayes_eval.pool import demo_pool
from bayes_eval.session import Session

pool = demo_pool(**json.loads(os.environ["POOL_KW"]))
s = Session.open(path, pool)
armed[0] = True
print("READY", flush=True)
while s.n_stages < target:
    b = s.next_batch(batch)
    stage = int(b["stage"].iloc[0])
    items = [int(i) for i in b["item"]]
    print("DRAWN " + json.dumps({"stage": stage, "items": items}), flush=True)
    labels = pool.labels[pool.index_of(b["item"].to_numpy())]
    if stage % 2:  # odd stages: a label file (the CLI's route), even stages: add_labels
        import pandas as pd
        f = os.path.join(os.environ["LABEL_DIR"], f"labels_{stage}.csv")
        pd.DataFrame({"item": b["item"], "label": labels}).to_csv(f, index=False)
        s.ingest_file(f)
    else:
        s.add_labels(b["item"], labels)
    print("ACK " + json.dumps({"items": items, "labels": [int(v) for v in labels]}), flush=True)
print("DONE", flush=True)
"""

LOOP_POOL_KW = dict(n_items=3000, positive_rate=0.05, seed=5)
LOOP_SESSION = dict(seed=31, n_strata=16, depth=4, companion="none")
LOOP_BATCH = 6
WRITES_PER_STAGE = 9  # add_stage: stage, draws, revision, COMMIT; add_labels: ingest, labels, closed_at, revision, COMMIT


def _loop_child(path, target, plan, env):
    return subprocess.Popen([sys.executable, "-c", LOOP_CHILD, path, str(target), str(LOOP_BATCH)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(env, KILL_PLAN=json.dumps(plan)))


def _read_child(proc, timeout, kill_after=None):
    """Run the child to its end (or SIGKILL it ``kill_after`` seconds after READY); returns
    (returncode, stdout lines, stderr)."""
    lines: list = []
    q: queue.Queue = queue.Queue()

    def read():
        for line in proc.stdout:
            q.put(line.rstrip("\n"))
        q.put(None)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    end = time.monotonic() + timeout
    deadline = None
    while True:
        wait = end - time.monotonic()
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
        try:
            line = q.get(timeout=max(wait, 0.0))
        except queue.Empty:
            if deadline is not None and time.monotonic() >= deadline:
                proc.send_signal(signal.SIGKILL)
                deadline = None
                continue
            proc.kill()
            raise AssertionError(f"child timed out; output {lines[-3:]}")
        if line is None:
            break
        lines.append(line)
        if line == "READY" and kill_after is not None:
            deadline = time.monotonic() + kill_after
    proc.wait(60)
    t.join(10)
    err = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    return proc.returncode, lines, err


def _check_replay(path, pool, acks, drawn):
    """The file after a kill: intact; every acknowledged label there with its value; every
    stage wholly present with all its draws (the open one included) or absent; every ingest
    whole; at most one open stage, the last; and it replays: the session reopens with the
    labels, closed stages and pending items the file holds."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stages = conn.execute("SELECT stage, n_new, n_draws, closed_at FROM stages ORDER BY stage").fetchall()
        draws = conn.execute("SELECT draw, stage, row, new FROM draws ORDER BY draw").fetchall()
        labels = conn.execute("SELECT row, label, stage, ingest, draw FROM labels").fetchall()
        ingests = conn.execute("SELECT ingest, n_new FROM ingests").fetchall()
    finally:
        conn.close()
    assert [st[0] for st in stages] == list(range(len(stages)))
    by_stage = {st[0]: [d for d in draws if d[1] == st[0]] for st in stages}
    assert sum(len(v) for v in by_stage.values()) == len(draws), "draws of a stage that is not there"
    for stage, n_new, n_draws, _ in stages:
        ds = by_stage[stage]
        assert len(ds) == n_draws and sum(d[3] for d in ds) == n_new, ("a stage without all its draws", stage)
    assert [d[0] for d in draws] == list(range(len(draws)))  # draw ids dense: no stage's draws lost midway
    # every stage the child saw drawn is there, with its items
    rows_of_stage = {stage: {pool.ids[r] for _, _, r, _ in by_stage[stage]} for stage in by_stage}
    for dr in drawn:
        assert dr["stage"] in rows_of_stage and set(dr["items"]) <= rows_of_stage[dr["stage"]], dr
    # labels: one per item, each for an item drawn new in its stage, each ingest whole
    assert len({r for r, *_ in labels}) == len(labels)
    new_rows = {(d[1], d[2]) for d in draws if d[3] == 1}
    assert all((stage, r) in new_rows for r, _, stage, _, _ in labels)
    assert all(pool.labels[r] == lab for r, lab, *_ in labels)
    for ing, n_new in ingests:
        assert sum(1 for lab in labels if lab[3] == ing) == n_new
    stored = {pool.ids[r]: lab for r, lab, *_ in labels}
    for a in acks:
        for item, lab in zip(a["items"], a["labels"]):
            assert stored.get(item) == lab, ("an acknowledged label was lost", item)
    # closed stages are fully labeled; only the last may be open
    labeled_rows = {r for r, *_ in labels}
    open_stages = [st[0] for st in stages if st[3] is None]
    assert open_stages in ([], [len(stages) - 1]), open_stages
    for stage, _, _, closed in stages:
        complete = all(r in labeled_rows for (s_, r) in new_rows if s_ == stage)
        assert complete == (closed is not None), ("closed_at disagrees with the labels", stage)
    s = Session.open(path, pool)
    try:
        assert s.integrity_check() == "ok"
        assert s.n_labels == len(labels) and s.n_stages == len(stages) - len(open_stages)
        if open_stages:
            want = {pool.ids[r] for (s_, r) in new_rows if s_ == open_stages[0]} - set(stored)
            assert set(int(i) for i in s.pending()["item"]) == want
        else:
            assert s.n_pending == 0
    finally:
        s.close()


def _kill_while_writing_batches(tmp_path, n_kills, seed):
    pool = demo_pool(**LOOP_POOL_KW)
    path = str(tmp_path / "loop.db")
    Session.create(path, pool, "f1", "ais", **LOOP_SESSION).close()
    env = dict(os.environ, POOL_KW=json.dumps(LOOP_POOL_KW), JAX_PLATFORMS="cpu",
               JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jaxcache"), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p), LABEL_DIR=str(tmp_path))
    rng = np.random.default_rng(seed)
    acks: list = []
    drawn: list = []
    in_write = 0
    for i in range(n_kills):
        if i == 0:  # inside the ingest of stage 1's label file: its labels written, before COMMIT
            plan, kill_after = {"commit_of_ingest": 1}, None
        elif i % 4 == 3:  # a random moment
            plan, kill_after = {}, float(rng.uniform(0.0, 0.1))
        else:  # a random write statement of the next two stages, before or after it runs
            plan, kill_after = {"write": int(rng.integers(1, 2 * WRITES_PER_STAGE + 1)),
                                "after": bool(rng.integers(2))}, None
        target = 10_000  # runs until killed
        rc, lines, err = _read_child(_loop_child(path, target, plan, env), timeout=180, kill_after=kill_after)
        assert rc == -signal.SIGKILL, (rc, err[-2000:])
        in_write += bool(plan)
        acks += [json.loads(x[4:]) for x in lines if x.startswith("ACK ")]
        drawn += [json.loads(x[6:]) for x in lines if x.startswith("DRAWN ")]
        _check_replay(path, pool, acks, drawn)
        if i == 0:  # stage 0 acknowledged; stage 1 drawn, its labels lost with the uncommitted ingest
            assert len(acks) == 1 and [d["stage"] for d in drawn] == [0, 1]
            s = Session.open(path, pool)
            assert s.n_labels == LOOP_BATCH and s.n_stages == 1 and s.n_pending == LOOP_BATCH
            s.close()
    # a last run completes the work: the resumed session equals an uninterrupted one
    s = Session.open(path, pool)
    target = s.n_stages + 3
    s.close()
    rc, lines, err = _read_child(_loop_child(path, target, {}, env), timeout=180)
    assert rc == 0 and lines[-1] == "DONE", err[-2000:]
    acks += [json.loads(x[4:]) for x in lines if x.startswith("ACK ")]
    _check_replay(path, pool, acks, drawn)
    s = Session.open(path, pool)
    ref = Session.create(str(tmp_path / "ref.db"), pool, "f1", "ais", **LOOP_SESSION)
    while ref.n_stages < target:
        b = ref.next_batch(LOOP_BATCH)
        ref.add_labels(b["item"], pool.labels[pool.index_of(b["item"].to_numpy())])
    assert s.n_stages == target and s.n_labels == ref.n_labels
    assert list(s.draws()["item"]) == list(ref.draws()["item"])
    np.testing.assert_array_equal(s.estimate().to_numpy(), ref.estimate().to_numpy())
    np.testing.assert_array_equal(s.next_batch(LOOP_BATCH)["item"].to_numpy(),
                                  ref.next_batch(LOOP_BATCH)["item"].to_numpy())
    return in_write


def test_sigkill_while_writing_batches_replays_consistently(tmp_path):
    """8 children killed while drawing and labeling batches (AIS; labels by add_labels and,
    every other stage, by a label file): the first inside the ingest of a label file, after
    its labels are written and before COMMIT; 5 at a random write statement of the next
    two stages -- inside the transaction that writes a stage and its draws, or an ingest
    and its labels, before or after the statement -- and 2 at a random moment.  After every
    kill the file is checked (see _check_replay) and reopened; then a last child finishes
    and the result equals an uninterrupted session's, batch for batch.  40 kills: the slow
    twin (and test_sigkill_during_ingests_loses_no_committed_label, 50 file ingests)."""
    assert _kill_while_writing_batches(tmp_path, n_kills=8, seed=13) == 6


@pytest.mark.slow
def test_sigkill_while_writing_batches_replays_consistently_40_kills(tmp_path):
    assert _kill_while_writing_batches(tmp_path, n_kills=40, seed=14) == 30
