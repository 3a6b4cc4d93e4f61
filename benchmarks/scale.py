"""Scale benchmark: a labeling session on synthetic pools of 10^5 ... 10^8 items.

    python benchmarks/scale.py                       # 1e5, 1e6, 1e7, 1e8 (peak ~7.5 GB at 1e8, scale.md)
    python benchmarks/scale.py --sizes 1e5,1e6       # a subset
    python benchmarks/scale.py --quick               # 1e4, 1e5: smoke run

Targets (issue 6): ``next_batch(50)`` + ingest + update ≤ 50 ms per stage at
N = 10^6 and ≤ 2 s at 10^8; peak memory ≤ 2 × the pool's own arrays; and the time to build
strata.  Each size runs in a fresh subprocess so that its peak resident memory
(``ru_maxrss``) is its own.  Per size it reports

* ``pool_mb``: the bytes of the arrays the :class:`~bayes_eval.pool.Pool` holds (scores,
  predictions, probabilities, weights, ids, labels);
* ``input_mb``: the user's own columns (float64 score + int32 prediction);
* ``baseline_mb``: resident memory after importing JAX and bayes_eval, before any pool
  (the JAX runtime, ~0.5 GB, the same at every N);
* ``peak_mb``: peak resident memory of the process; ``peak_over_pool`` =
  (peak − baseline) / pool_mb;
* ``strata_s`` (CSF strata, 256 bins), ``create_s`` (``Session.create``: fingerprint,
  strata, cells, store, first proposal, compilation included);
* ``stage_ms`` median / max over stages 2..k of one ``next_batch(50)`` + ``add_labels``
  (the labels come from the synthetic truth; the update and new proposal run inside
  ``add_labels`` when the batch completes), the first stage (compilation) reported apart.

Writes ``results/scale.{md,json}``.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def synthetic_arrays(n: int, positive_rate: float = 1e-3, seed: int = 0, chunk: int = 5_000_000):
    """Scores / predictions / labels of a synthetic imbalanced pool (as ``demo_pool``),
    generated chunk by chunk so the generator's temporaries stay small."""
    import numpy as np

    rng = np.random.default_rng(seed)
    s = np.empty(n, np.float64)
    y = np.empty(n, np.int32)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        yy = rng.random(b - a) < positive_rate
        s[a:b] = np.where(yy, rng.normal(0.3, 1.2, b - a), rng.normal(-3.0, 0.6, b - a))
        y[a:b] = yy
    y[0] = 1
    pred = (s >= 0).astype(np.int32)
    return s, pred, y


def one_size(n: int, stages: int, design: str) -> dict:
    import numpy as np

    sys.path.insert(0, ROOT)
    import jax  # noqa: F401

    import bayes_eval  # noqa: F401
    from bayes_eval.pool import Pool
    from bayes_eval.session import Session
    from bayes_eval.strata import stratify

    base = _rss_mb()
    s, pred, y = synthetic_arrays(n)
    input_mb = (s.nbytes + pred.nbytes) / 2**20
    pool = Pool.from_arrays(scores=s, preds=pred, labels=y, name=f"synthetic-{n}")
    del s, pred, y  # the pool holds its own copies; the oracle reads pool.labels
    pool_mb = sum(getattr(pool, a).nbytes for a in ("preds", "scores", "probs", "weights", "ids")
                  if getattr(pool, a) is not None) + (pool.labels.nbytes if pool.labels is not None else 0)
    pool_mb /= 2**20
    phases = {"pool": _peak_mb()}
    t = time.perf_counter()
    stratify(pool, 256)
    strata_s = time.perf_counter() - t
    labels = pool.labels
    times, first = [], None
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        sess = Session.create(os.path.join(tmp, "s.db"), pool, "f1", design=design, seed=0)
        create_s = time.perf_counter() - t
        phases["create"] = _peak_mb()
        for k in range(stages):
            t = time.perf_counter()
            batch = sess.next_batch(50)
            rows = pool.index_of(batch["item"].to_numpy())
            sess.add_labels(batch["item"].to_numpy(), labels[rows])
            dt = time.perf_counter() - t
            if k == 0:
                first = dt
            else:
                times.append(dt)
        phases["stages"] = _peak_mb()
        est = float(sess.estimate().iloc[0])
        sess.close()
    return {"n_items": n, "design": design, "pool_mb": pool_mb, "input_mb": input_mb, "baseline_mb": base,
            "peak_mb": _peak_mb(), "peak_over_pool": (_peak_mb() - base) / pool_mb,
            "peak_over_input": (_peak_mb() - base) / input_mb, "strata_s": strata_s, "create_s": create_s,
            "first_stage_s": first, "stage_ms_median": 1000 * float(np.median(times)),
            "stage_ms_max": 1000 * float(np.max(times)), "stages": stages, "estimate_f1": est,
            "peak_mb_after": phases}


def dask_size(n: int, stages: int, design: str, parts: int | None = None, workers: int = 2) -> dict:
    """One size on the dask engine (issue 19): a generated partitioned pool written to a
    temporary directory (never the repository), a local cluster of ``workers`` processes;
    the pool pass (read, validate, fingerprint), ``session new`` (strata, cells, the
    compiled core), per stage ``next`` 50 + ingest + update, and the driver's peak RSS.
    ``parts``: partitions (default 20, and at least one per 5·10^6 rows).  The oracle is
    the sorted ids of the positives (8 bytes per positive), not a label per item, so that
    the driver's peak stays the session's at 10^9."""
    import tempfile

    import numpy as np
    import pandas as pd

    from bayes_eval.partitioned import connect
    from bayes_eval.pool import Pool
    from bayes_eval.session import Session

    if parts is None:
        parts = max(20, -(-n // 5_000_000))
    tmp = tempfile.mkdtemp(prefix="scale_dask_", dir=os.environ.get("SCALE_TMP"))
    # generated partition by partition (as synthetic_arrays, one chunk per partition), so that the
    # driver never holds a whole column: only the oracle, the sorted ids of the positives, stays
    t_gen = time.perf_counter()
    rng = np.random.default_rng(0)
    bounds = np.linspace(0, n, parts + 1).astype(np.int64)
    positives = []  # the oracle (ids are the rows)
    for p in range(parts):
        a, b = bounds[p], bounds[p + 1]
        yy = rng.random(b - a) < 1e-3
        if p == 0:
            yy[0] = True
        sc = rng.normal(-3.0, 0.6, b - a)
        pos = np.flatnonzero(yy)
        sc[pos] = rng.normal(0.3, 1.2, pos.size)
        positives.append(pos + a)
        pd.DataFrame({"score": sc, "pred": (sc >= 0).astype(np.int8), "label": yy.astype(np.int8)}
                     ).to_parquet(os.path.join(tmp, f"part-{p:04d}.parquet"))
        del yy, sc
    positives = np.concatenate(positives)
    gen_s = time.perf_counter() - t_gen

    def labels_of(items):
        i = np.minimum(np.searchsorted(positives, items), positives.size - 1)
        return (positives[i] == items).astype(np.int8)

    import gc

    gc.collect()
    base = _rss_mb()
    mem = os.environ.get("SCALE_WORKER_MEMORY", "8GiB")
    client, cluster = connect(n_workers=workers, memory_limit=mem)
    t = time.perf_counter()
    pool = Pool.from_parquet_dataset(tmp, engine="dask", client=client)
    pass_s = time.perf_counter() - t
    t = time.perf_counter()
    ses = Session.create(os.path.join(tmp, "s.db"), pool, "f1", design, seed=0)
    create_s = time.perf_counter() - t
    times = []
    for _ in range(stages):
        t = time.perf_counter()
        batch = ses.next_batch(50)
        ses.add_labels(batch["item"], labels_of(batch["item"].to_numpy()))
        times.append(time.perf_counter() - t)
    ses.close()
    peak = _peak_mb()
    client.close()
    cluster.close()
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return {"n_items": n, "design": design, "engine": "dask", "partitions": parts, "workers": workers,
            "pool_pass_s": pass_s, "create_s": create_s, "first_stage_s": times[0],
            "stage_ms_median": 1e3 * float(np.median(times[1:] or times)), "stage_ms_max": 1e3 * max(times[1:] or times),
            "driver_peak_mb": peak, "driver_base_mb": base, "oracle_labels_mb": positives.nbytes / 2**20,
            "generate_s": gen_s}


def dask_main(args, sizes):
    rows = []
    for n in sizes:
        cmd = [sys.executable, os.path.abspath(__file__), "--engine", "dask", "--child", str(n), "--stages",
               str(args.stages), "--design", args.design, "--workers", str(args.workers)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            rows.append({"n_items": n, "error": proc.stderr.strip().splitlines()[-1:]})
            print(f"N={n:.0e}: failed\n{proc.stderr[-2000:]}", flush=True)
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(r)
        print(json.dumps(r), flush=True)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "scale_dask" + (f"_{args.tag}" if args.tag else ""))
    with open(stem + ".json", "w") as f:
        json.dump(rows, f, indent=2)
    lines = [f"# Scale on the dask engine: a labeling session ({args.design}, F1, batches of 50) on generated "
             f"partitioned pools", "",
             f"Produced by `python benchmarks/scale.py --engine dask --sizes {args.sizes} --stages {args.stages} "
             f"--workers {args.workers}` (20 partitions, one per 5·10^6 rows above 10^8; a local cluster of "
             f"{args.workers} worker process(es) on a 2-core machine). `driver peak` is the driver's peak RSS, "
             "which includes the generator of one partition at a time and the oracle (`oracle MB`: the sorted "
             "ids of the positives), both outside a real session.", "",
             "| items | partitions | workers | generate s | pool pass s | session new s | first stage s "
             "| stage ms (median) | stage ms (max) | driver peak MB | oracle MB |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['n_items']:.0e} | failed: {' '.join(r['error'])} ||||||||||")
            continue
        lines.append(f"| {r['n_items']:.0e} | {r['partitions']} | {r['workers']} | {r['generate_s']:.0f} "
                     f"| {r['pool_pass_s']:.1f} | {r['create_s']:.1f} | {r['first_stage_s']:.2f} "
                     f"| {r['stage_ms_median']:.0f} | {r['stage_ms_max']:.0f} | {r['driver_peak_mb']:.0f} "
                     f"| {r['oracle_labels_mb']:.1f} |")
    with open(stem + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"results in {stem}.md")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1e5,1e6,1e7,1e8")
    ap.add_argument("--stages", type=int, default=6)
    ap.add_argument("--design", default="ais")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--engine", default="memory", choices=["memory", "dask"],
                    help="dask: generated partitioned pools on a local Dask cluster (scale_dask.md)")
    ap.add_argument("--workers", type=int, default=2, help="dask: local worker processes")
    ap.add_argument("--tag", default="", help="dask: suffix of the result files (scale_dask_TAG.md)")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        if args.engine == "dask":
            print(json.dumps(dask_size(args.child, args.stages, args.design, workers=args.workers)))
        else:
            print(json.dumps(one_size(args.child, args.stages, args.design)))
        return
    sizes = [int(float(x)) for x in ("1e4,1e5" if args.quick else args.sizes).split(",")]
    if args.engine == "dask":
        return dask_main(args, sizes)
    rows = []
    for n in sizes:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", str(n), "--stages", str(args.stages),
               "--design", args.design]
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"N={n:.0e}: failed (exit {proc.returncode})\n{proc.stderr[-2000:]}", flush=True)
            rows.append({"n_items": n, "design": args.design, "error": proc.stderr.strip().splitlines()[-1:]})
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        r["wall_s"] = time.perf_counter() - t
        rows.append(r)
        print(f"N={n:.0e}: strata {r['strata_s']:.2f} s, create {r['create_s']:.1f} s, stage "
              f"{r['stage_ms_median']:.1f} ms (max {r['stage_ms_max']:.1f}), peak {r['peak_mb']:.0f} MB "
              f"(baseline {r['baseline_mb']:.0f}, pool {r['pool_mb']:.0f} MB, x{r['peak_over_pool']:.2f})", flush=True)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "scale_quick" if args.quick else "scale")
    with open(stem + ".json", "w") as f:
        json.dump(rows, f, indent=2)
    lines = [f"# Scale: a labeling session ({args.design}, F1, batches of 50) on synthetic pools", "",
             "Produced by `python benchmarks/scale.py`. Targets: stage ≤ 50 ms at 10^6, ≤ 2 s at 10^8; "
             "peak memory ≤ 2 × the pool's arrays. `peak/pool` = (peak − baseline) / pool arrays.", "",
             "| items | pool arrays MB | baseline MB | peak MB | peak/pool | strata s | create s | first stage s "
             "| stage ms (median) | stage ms (max) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['n_items']:.0e} | failed: {' '.join(r['error'])} |||||||||")
            continue
        lines.append(f"| {r['n_items']:.0e} | {r['pool_mb']:.0f} | {r['baseline_mb']:.0f} | {r['peak_mb']:.0f} | "
                     f"{r['peak_over_pool']:.2f} | {r['strata_s']:.2f} | {r['create_s']:.1f} | "
                     f"{r['first_stage_s']:.2f} | {r['stage_ms_median']:.1f} | {r['stage_ms_max']:.1f} |")
    with open(stem + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"results in {stem}.md")


if __name__ == "__main__":
    main()
