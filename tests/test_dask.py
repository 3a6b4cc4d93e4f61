"""The dask engine (issue 19): a partitioned Parquet pool whose passes run on a local Dask
cluster gives the same strata, cells, batches and estimates as the memory engine on the
same files (``bayes_eval.partitioned``, ``bayes_eval.partitioned_cells``).

The default tier uses 2·10^4 rows in 20 partitions (a couple of seconds per session on two
cores); the 10^6-row pool of the issue runs in the slow tier."""
from __future__ import annotations

import json
import os
import sqlite3
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask", reason="the dask engine needs dask: pip install \"bayes_eval[dask]\"")
pytest.importorskip("distributed", reason="the dask engine needs distributed: pip install \"bayes_eval[dask]\"")

from bayes_eval.errors import PoolError, PoolMismatchError  # noqa: E402
from bayes_eval.partitioned import PartitionedPool, connect, require_dask  # noqa: E402
from bayes_eval.pool import Pool  # noqa: E402
from bayes_eval.session import Session  # noqa: E402
from bayes_eval.session_core import pool_fingerprint, portable_fingerprint  # noqa: E402


def write_pool(path, n, n_parts, seed=0, ids=True):
    """An imbalanced pool (1% positives, margins as ``demo_pool``) in ``n_parts`` files;
    ids ``7 r + 3`` (not the rows, so ingest goes through the id index)."""
    os.makedirs(path, exist_ok=True)
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.01).astype(np.int8)
    s = np.where(y == 1, rng.normal(0.3, 1.2, n), rng.normal(-3.0, 0.6, n))
    df = pd.DataFrame({"score": s, "pred": (s >= 0).astype(np.int8), "label": y})
    if ids:
        df.insert(0, "item", 7 * np.arange(n, dtype=np.int64) + 3)
    for p, rows in enumerate(np.array_split(np.arange(n), n_parts)):
        df.iloc[rows].reset_index(drop=True).to_parquet(os.path.join(path, f"part-{p:03d}.parquet"))
    return dict(zip(df["item"], df["label"])) if ids else dict(enumerate(df["label"]))


@pytest.fixture(scope="module")
def client():
    c, cluster = connect(n_workers=2, processes=False)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("parts") / "pool")
    truth = write_pool(d, 20_000, 20)
    return d, truth


def run(path, pool, design, truth, stages=4, seed=3):
    s = Session.create(path, pool, "f1", design, seed=seed)
    batches = []
    for _ in range(stages):
        b = s.next_batch(50)
        batches.append(b[["item", "q", "weight"]].copy())
        s.add_labels(b["item"], [truth[i] for i in b["item"]])
    core = s._core
    out = dict(cells=core.cells, strata=core.strata, cell_start=np.asarray(core.cell_start), batches=batches,
               estimate=s.estimate().to_numpy(),
               # the frequentist intervals: the Bayesian one is a function of the cells (their
               # prior, the model's only input, compared below) and the labels, and compiling
               # its sampler twice cost this test 20 of its 40 s
               intervals=s.intervals(bayesian=False).select_dtypes("number").to_numpy(float))
    s.close()
    return out


# poisson-adaptive in the slow tier (27 s: the default tier's budget); its 10^6-row twin is slow too
@pytest.mark.parametrize("design", ["ais", pytest.param("poisson-adaptive", marks=pytest.mark.slow)])
def test_memory_and_dask_engines_give_the_same_session(small, client, tmp_path, design):
    d, truth = small
    pm = Pool.from_parquet_dataset(d, engine="memory")
    pk = Pool.from_parquet_dataset(d, engine="dask", client=client)
    assert isinstance(pk, PartitionedPool) and pk.n_items == pm.n_items == 20_000
    assert pool_fingerprint(pm) == pool_fingerprint(pk)
    # the portable one too (the derived probabilities left out, stop 66), different from the full one
    assert portable_fingerprint(pm) == portable_fingerprint(pk) != pool_fingerprint(pk) and pk.probs_derived
    a = run(str(tmp_path / "m.db"), pm, design, truth)
    b = run(str(tmp_path / "d.db"), pk, design, truth)
    for f in ("sizes", "lower", "upper"):
        np.testing.assert_array_equal(getattr(a["strata"], f), getattr(b["strata"], f))
    for f in ("stratum", "size", "weight", "loss", "truth"):
        np.testing.assert_array_equal(np.asarray(getattr(a["cells"], f)), np.asarray(getattr(b["cells"], f)))
    # the cells' mean prior is summed per partition: equal to round-off
    np.testing.assert_allclose(np.asarray(a["cells"].prior), np.asarray(b["cells"].prior), rtol=1e-13, atol=0)
    np.testing.assert_array_equal(a["cell_start"], b["cell_start"])
    for x, y in zip(a["batches"], b["batches"]):
        np.testing.assert_array_equal(x["item"].to_numpy(), y["item"].to_numpy())
        np.testing.assert_allclose(x["q"].to_numpy(), y["q"].to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(a["estimate"], b["estimate"], rtol=1e-12)
    np.testing.assert_allclose(a["intervals"], b["intervals"], rtol=1e-9)


def test_several_classes_are_stratified_and_read_alike_on_both_engines(tmp_path, client):
    """A 4-class pool of pred and confidence in 5 files: both engines give the same fingerprint
    (the confidence prior on each partition), record ``classes_prior``, and cut the same strata --
    score bins within each predicted class, about n_strata of them (this engine did not split
    several classes before: sessions without ``class_bins`` keep that, ``class_bins="none"``)."""
    from bayes_eval.partitioned_cells import partitioned_strata
    from bayes_eval.strata import stratify

    rng = np.random.default_rng(4)
    n, c = 6000, 4
    y = rng.integers(0, c, n)
    conf = rng.uniform(0.3, 1.0, n)
    pred = np.where(rng.random(n) < conf, y, rng.integers(0, c, n))
    d = str(tmp_path / "four")
    os.makedirs(d)
    df = pd.DataFrame({"score": conf, "pred": pred, "label": y})
    for p, rows in enumerate(np.array_split(np.arange(n), 5)):
        df.iloc[rows].reset_index(drop=True).to_parquet(os.path.join(d, f"part-{p:03d}.parquet"))
    pm = Pool.from_parquet_dataset(d, engine="memory", n_classes=c)
    pk = Pool.from_parquet_dataset(d, engine="dask", client=client, n_classes=c)
    assert pool_fingerprint(pm) == pool_fingerprint(pk)
    assert portable_fingerprint(pm) == portable_fingerprint(pk) and pm.probs_derived and pk.probs_derived
    assert pm.read_options["classes_prior"] == pk.read_options["classes_prior"] == "confidence"
    a = stratify(pm, 64)
    b, _, _ = partitioned_strata(pk, 64)
    assert 48 <= a.n_strata <= 64
    for f in ("sizes", "lower", "upper"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert partitioned_strata(pk, 64, class_bins="none")[0].n_strata < a.n_strata


def test_reopening_replays_and_a_crash_reissues_the_batch(small, client, tmp_path):
    d, truth = small
    pk = Pool.from_parquet_dataset(d, engine="dask", client=client)
    whole = run(str(tmp_path / "a.db"), pk, "ais", truth, stages=3)
    s = Session.create(str(tmp_path / "b.db"), pk, "f1", "ais", seed=3)
    for _ in range(2):
        b = s.next_batch(50)
        s.add_labels(b["item"], [truth[i] for i in b["item"]])
    third = s.next_batch(50)
    s.close()  # the process dies with a batch out
    s = Session.open(str(tmp_path / "b.db"), pk)
    again = s.next_batch(50)  # the open batch is re-issued, not a new one
    np.testing.assert_array_equal(again["item"].to_numpy(), third["item"].to_numpy())
    np.testing.assert_array_equal(again["item"].to_numpy(), whole["batches"][2]["item"].to_numpy())
    s.add_labels(again["item"], [truth[i] for i in again["item"]])
    np.testing.assert_allclose(s.estimate().to_numpy(), whole["estimate"], rtol=0, atol=0)
    s.close()


def test_in_process_workers_do_not_pause_on_the_drivers_memory(client):
    """Threads in this process (``connect(processes=False)``) count the whole process's
    memory -- JAX's compiled programs included -- against a worker's limit and pause at 80%
    of it; with the 4 GiB default a driver past 3.2 GiB waited forever on ``Future.result``
    (a default-tier run hung in test_reopening... once the test process had grown). They get
    no limit; worker processes keep theirs."""
    workers = client.scheduler_info()["workers"].values()
    assert workers and all(not w.get("memory_limit") for w in workers)


def test_a_changed_partition_is_refused(tmp_path, client):
    d = str(tmp_path / "pool")
    write_pool(d, 20_000, 5)
    pk = Pool.from_parquet_dataset(d, engine="dask", client=client)
    Session.create(str(tmp_path / "s.db"), pk, "f1", "ais", seed=0).close()
    # a file of stop 65 (portable scheme 1: a partitioned pool's portable fingerprint was its full one,
    # no portable_version) reopens on the same pool without a warning; then back to this stop's keys
    con = sqlite3.connect(str(tmp_path / "s.db"))
    saved = dict(con.execute("SELECT key, value FROM meta WHERE key LIKE 'portable%'").fetchall())
    with con:
        con.execute("UPDATE meta SET value = ? WHERE key = 'portable_fingerprint'", (json.dumps(pool_fingerprint(pk)),))
        con.execute("DELETE FROM meta WHERE key = 'portable_version'")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Session.open(str(tmp_path / "s.db"), pk).close()
    with con:
        con.execute("DELETE FROM meta WHERE key LIKE 'portable%'")
        con.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", saved.items())
    con.close()
    f = os.path.join(d, "part-003.parquet")
    df = pd.read_parquet(f)
    df.loc[10, "score"] += 1e-9
    df.to_parquet(f)
    changed = Pool.from_parquet_dataset(d, engine="dask", client=client)
    assert pool_fingerprint(changed) != pool_fingerprint(pk)
    assert pool_fingerprint(changed) == pool_fingerprint(Pool.from_parquet_dataset(d, engine="memory"))
    assert portable_fingerprint(changed) != portable_fingerprint(pk)
    # refused under either engine, naming the partition that changed (recorded at creation)
    for pool in (changed, Pool.from_parquet_dataset(d, engine="memory")):
        with pytest.raises(PoolMismatchError, match=r"pool has changed.*\(partition 3 \(part-003.parquet\) changed\)"):
            Session.open(str(tmp_path / "s.db"), pool)
    os.remove(os.path.join(d, "part-004.parquet"))   # a partition gone: said as such
    with pytest.raises(PoolMismatchError, match=r"the pool had 5 partition files and has 4"):
        Session.open(str(tmp_path / "s.db"), Pool.from_parquet_dataset(d, engine="memory"))


@pytest.mark.parametrize("what,match", [
    ("nan", r"partition 3 \(part-003.parquet\), column 'score': .*row 12"),
    ("inf", r"partition 3 \(part-003.parquet\), column 'score': .*row 12"),
    ("label", r"partition 3 \(part-003.parquet\), column 'label': .*row 12"),
    ("dup", r"partition 3 \(part-003.parquet\), column 'item': duplicate id 10 at row 12"),
])
@pytest.mark.parametrize("engine", ["dask", "memory"])
def test_bad_input_is_named_by_partition_and_row(tmp_path, client, what, match, engine):
    """Both engines name the partition, its file and the row inside it (the memory engine
    validates the partitions concatenated, and maps its row back)."""
    d = str(tmp_path / "pool")
    write_pool(d, 10_000, 5)
    f = os.path.join(d, "part-003.parquet")
    df = pd.read_parquet(f)
    if what == "nan":
        df.loc[12, "score"] = np.nan
    elif what == "inf":
        df.loc[12, "score"] = np.inf
    elif what == "label":
        df.loc[12, "label"] = 2
    else:
        df.loc[12, "item"] = 10  # the id of row 1 of partition 0 (7 * 1 + 3)
    df.to_parquet(f)
    with pytest.raises(PoolError, match=match):
        Pool.from_parquet_dataset(d, engine=engine, client=client)


def test_own_column_names_and_an_empty_partition_read_alike_on_both_engines(tmp_path, client):
    """A partitioned pool as users have it: their own column names (ids in ``pair_id``, the score in
    ``prob``, names in ``predicted``) and an empty partition file (Spark writes them).  Before stop 81
    the names were refused ("rename them in its files") and the dask engine refused the empty file that
    the memory engine read.  Both engines now read the same pool (fingerprints, partition record), record
    the names so that a session reopens with them, and name a bad row by its partition's own number."""
    d = str(tmp_path / "own")
    os.makedirs(d)
    rng = np.random.default_rng(8)
    n = 3000
    p = rng.uniform(0, 1, n)
    df = pd.DataFrame({"pair_id": [f"a/{i} b" for i in range(n)], "prob": p,
                       "predicted": np.where(p >= 0.5, "match", "no match"), "gold": (rng.random(n) < p).astype(int)})
    parts = np.array_split(np.arange(n), 3)
    files = [df.iloc[parts[0]], df.iloc[:0], df.iloc[parts[1]], df.iloc[parts[2]]]
    for k, f in enumerate(files):
        f.reset_index(drop=True).to_parquet(os.path.join(d, f"part-{k:03d}.parquet"))
    from bayes_eval.registry import load_pool
    from bayes_eval.session_setup import pool_partitions

    kw = dict(id_column="pair_id", columns={"score": "prob", "pred": "predicted", "label": "gold"},
              label_map={"no match": 0, "match": 1})
    pm = load_pool(d, engine="memory", **kw)
    pk = load_pool(d, engine="dask", client=client, **kw)
    assert pm.n_items == pk.n_items == n
    assert pool_fingerprint(pm) == pool_fingerprint(pk) and portable_fingerprint(pm) == portable_fingerprint(pk)
    assert pool_partitions(pm) == pool_partitions(pk) and len(pool_partitions(pk)) == 4
    for pool in (pm, pk):
        ro = pool.read_options
        assert (ro["id_column"], ro["columns"], ro["label_map"]) == (
            "pair_id", {"score": "prob", "pred": "predicted", "label": "gold"}, {"no match": 0, "match": 1}), ro
        assert "label from column 'gold', pred from column 'predicted', score from column 'prob'" in pool.notes
    assert "1 empty partition file(s) left out (part-001.parquet)" in pk.notes
    np.testing.assert_array_equal(np.asarray(pm.preds)[:, 0], (p >= 0.5).astype(int))   # the names, read
    # a session made on the dask engine reopens from what it recorded (here on the memory engine)
    db = str(tmp_path / "s.db")
    s = Session.create(db, pk, "f1", "ais", seed=0)
    items = list(s.next_batch(20)["item"])
    s.close()
    s = Session.open(db, d, engine="memory")   # the path: read with the names the session recorded
    assert sorted(s.pending()["item"]) == sorted(items) and str(items[0]).startswith("a/")
    s.close()
    # a duplicate id in the fourth file: named as partition 3 on both engines, the empty file counted
    bad = files[3].reset_index(drop=True)
    bad.loc[5, "pair_id"] = "a/0 b"
    bad.to_parquet(os.path.join(d, "part-003.parquet"))
    for engine in ("memory", "dask"):
        with pytest.raises(PoolError, match=r"partition 3 \(part-003.parquet\).*'a/0 b'"):
            load_pool(d, engine=engine, client=client, **kw)
    # one system, binary: several systems' columns are refused by name
    with pytest.raises(PoolError, match="several systems"):
        load_pool(d, engine="memory", columns={"score": ["prob", "prob2"]})
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    df.iloc[:0].to_parquet(os.path.join(d, "part-000.parquet"))
    with pytest.raises(PoolError, match="empty"):
        load_pool(d, engine="dask", client=client)


def test_missing_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(PoolError, match=r'pip install "bayes_eval\[dask\]"'):
        require_dask()


def test_the_driver_holds_no_column(small, client):
    d, _ = small
    pk = Pool.from_parquet_dataset(d, engine="dask", client=client)
    for what in ("scores", "preds", "labels"):
        with pytest.raises(PoolError, match="on the workers"):
            getattr(pk, what)
    with pytest.raises(PoolError, match="on the workers"):
        np.asarray(pk.ids)
    assert list(pk.ids[np.array([0, 5000, 19_999])]) == [3, 7 * 5000 + 3, 7 * 19_999 + 3]


@pytest.mark.slow
def test_a_million_rows_in_20_partitions(tmp_path, client):
    d = str(tmp_path / "pool")
    truth = write_pool(d, 1_000_000, 20, seed=1)
    pm = Pool.from_parquet_dataset(d, engine="memory")
    pk = Pool.from_parquet_dataset(d, engine="dask", client=client)
    a = run(str(tmp_path / "m.db"), pm, "ais", truth, stages=3)
    b = run(str(tmp_path / "d.db"), pk, "ais", truth, stages=3)
    np.testing.assert_array_equal(np.asarray(a["cells"].size), np.asarray(b["cells"].size))
    for x, y in zip(a["batches"], b["batches"]):
        np.testing.assert_array_equal(x["item"].to_numpy(), y["item"].to_numpy())
    np.testing.assert_allclose(a["estimate"], b["estimate"], rtol=1e-12)


@pytest.mark.slow  # a second cluster and two more sessions: ~10 s alone, the default tier is at its budget
def test_a_session_reopens_on_the_engine_and_scheduler_it_was_created_with(small, client, tmp_path):
    """A session on a partitioned pool records the dask engine and the scheduler address it
    was given (``read_options``); reopening with the path alone (``bayes-eval session ...
    DB`` without ``--engine/--scheduler``) reads the pool on the same cluster and replays
    to the same estimate; an explicit ``engine="memory"`` still wins."""
    import distributed

    d, truth = small
    # a scheduler reached by its address (tcp: an in-process cluster's inproc address is
    # not reachable from a second client)
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                       dashboard_address=":0")
    addr = cluster.scheduler_address
    try:
        _reopen_on(d, truth, addr, client, tmp_path)
    finally:
        cluster.close()


def _reopen_on(d, truth, addr, client, tmp_path):
    pk = Pool.from_parquet_dataset(d, engine="dask", scheduler=addr)
    assert pk.read_options["engine"] == "dask" and pk.read_options["scheduler"] == addr
    assert "scheduler" not in Pool.from_parquet_dataset(d, engine="dask", client=client).read_options
    p = str(tmp_path / "s.db")
    s = Session.create(p, pk, "f1", "ais", seed=3, pool_path=d)
    for _ in range(2):
        b = s.next_batch(50)
        s.add_labels(b["item"], [truth[i] for i in b["item"]])
    want = s.estimate().to_numpy()
    s.close()
    s = Session.open(p)
    assert isinstance(s.pool, PartitionedPool) and s.pool.scheduler == addr
    np.testing.assert_allclose(s.estimate().to_numpy(), want, rtol=0, atol=0)
    s.close()
    s = Session.open(p, engine="memory")
    assert isinstance(s.pool, Pool)
    np.testing.assert_allclose(s.estimate().to_numpy(), want, rtol=1e-12)
    s.close()


def test_a_worker_keeps_a_slim_partition_with_the_same_columns(tmp_path):
    """``partitioned.Part`` (what a worker keeps of a partition) gives back exactly the
    validated pool's columns — the probabilities recomputed from the scores bit for bit,
    the row ids, the predictions and labels in their dtypes — in a quarter of the memory;
    ids that are not the rows are kept as they are."""
    from bayes_eval.partitioned import Part

    n = 50_000
    rng = np.random.default_rng(1)
    s = rng.normal(-2.0, 1.0, n)
    df = pd.DataFrame({"score": s, "pred": (s >= 0).astype(np.int8), "label": (rng.random(n) < 0.05).astype(np.int8)})
    df.index = np.arange(1000, 1000 + n)
    pool = Pool.from_frame(df, name="p")
    part = Part(pool, 1000)
    for f in ("scores", "preds", "labels", "probs", "ids", "weights"):
        a, b = np.asarray(getattr(pool, f)), np.asarray(getattr(part, f))
        assert a.dtype == b.dtype and a.shape == b.shape, f
        np.testing.assert_array_equal(a, b)
    kept = sum(v.nbytes for v in vars(part).values() if isinstance(v, np.ndarray))
    full = sum(v.nbytes for v in vars(pool).values() if isinstance(v, np.ndarray))
    assert kept <= 0.3 * full, (kept, full)
    df2 = df.assign(item=7 * np.arange(n) + 3)
    pool2 = Pool.from_frame(df2, name="p")
    np.testing.assert_array_equal(Part(pool2, 1000).ids, pool2.ids)


@pytest.mark.parametrize("method", [None, "pareto", "sequential"])
def test_poisson_rounds_are_picked_on_the_workers_as_in_memory(small, client, method):
    """A Poisson round on a partitioned pool is picked partition by partition on the
    workers (``CellsView.poisson_pick``: each partition's uniforms from the round's
    generator advanced to its first row) — the same rows, in the same order, as the memory
    engine's ``drawing.poisson_pick`` over the whole pool, and the generator left in the
    same state; the driver never builds an N-sized mask (the labeled rows go to each
    partition)."""
    from bayes_eval.drawing import poisson_pick, stage_rng
    from bayes_eval.partitioned_cells import partitioned_cells
    from bayes_eval import measures as M

    d, _ = small
    pm = Pool.from_parquet_dataset(d, engine="memory")
    pk = Pool.from_parquet_dataset(d, engine="dask", client=client)
    _, cells, view, _, _, _ = partitioned_cells(pk, [M.f1()], 32, "csf", None, True)
    item_cell = np.asarray(view[0:pk.n_items])
    rng_b = np.random.default_rng(5)
    x = cells.size.shape[0]
    b_cell = rng_b.random(x) * 0.05
    small_cells = np.flatnonzero((np.asarray(cells.size) > 0) & (np.asarray(cells.size) < 20))
    b_cell[small_cells[:2]] = 1.0  # a few items taken surely, the rest by their keys
    labeled = np.sort(rng_b.choice(pm.n_items, 300, replace=False))
    mask = np.zeros(pm.n_items, bool)
    mask[labeled] = True
    r1, r2 = stage_rng(3, 4), stage_rng(3, 4)
    want = poisson_pick(r1, item_cell, labeled, b_cell, 60, method)
    got = poisson_pick(r2, view, labeled, b_cell, 60, method)
    sure = np.flatnonzero((b_cell[item_cell] >= 1.0) & ~mask)
    assert 0 < sure.size < 60 and want.size > sure.size  # both kinds of row in the round
    np.testing.assert_array_equal(got, want)
    assert r1.bit_generator.state == r2.bit_generator.state


def test_a_scheduler_that_is_down_is_named_with_the_ways_out(monkeypatch):
    """A session reopens on the scheduler it recorded; when that one is down the error says
    where the address came from and how to override it (--scheduler, --engine memory),
    instead of the client's bare timeout."""
    import distributed

    def down(address, *a, **kw):
        raise OSError(f"Timed out trying to connect to {address} after 30 s")

    monkeypatch.setattr(distributed, "Client", down)
    with pytest.raises(PoolError, match=r"cannot reach the Dask scheduler at tcp://10\.0\.0\.5:8786 \(Timed out.*\); "
                                        r"a session reopens on the scheduler it was created with: --scheduler ADDR "
                                        r"names another, --engine memory"):
        connect("tcp://10.0.0.5:8786")


def test_label_studio_and_task_fields_are_refused_on_the_dask_engine_before_anything_is_drawn(tmp_path, client,
                                                                                                small):
    """Label Studio push/pull and --fields are not on the dask engine yet: each is refused
    with what to do instead, and no batch is drawn (push once crashed on ``index_of`` with
    the batch already drawn)."""
    from bayes_eval import labelstudio
    from bayes_eval.errors import SessionError

    d, _ = small
    pk = Pool.from_parquet_dataset(d, engine="dask", client=client)
    s = Session.create(str(tmp_path / "d.db"), pk, "f1", "passive", seed=0)
    for call in (lambda: labelstudio.push(s, "http://127.0.0.1:9", 1, token="t"),
                 lambda: labelstudio.pull(s, "http://127.0.0.1:9", 1, token="t")):
        with pytest.raises(SessionError, match="Label Studio push and pull are not yet on the dask engine: use the "
                                               "file route"):
            call()
    with pytest.raises(SessionError, match="does not carry the pool's own columns into batches yet") as info:
        s.export_batch(str(tmp_path / "b.csv"), n=5, fields="title")
    assert "--engine memory" in info.value.cli
    assert s._store.stages() == [] and not (tmp_path / "b.csv").exists()
    s.close()
