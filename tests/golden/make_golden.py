"""Record the golden outputs that the architecture change (issue 13) must reproduce.

    python tests/golden/make_golden.py [--only simulate|session] [--pools demo,abt-buy,dblp-acm]

Writes ``simulate_<pool>_<design>.json`` (the ``bayes-eval simulate`` JSON, 20 repeats, seed 0,
``--bayes no``; timings dropped) and ``session_<design>.json`` (a scripted session transcript:
every batch's items, cells, proposal and weights, and every estimate) beside this file.  Run
it only to re-record on purpose; ``tests/test_golden.py`` compares the current code with them.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "shared", "data")
DESIGNS = ("passive", "stratified", "is", "oasis", "ais", "poisson", "poisson-adaptive")
TIMING_KEYS = ("seconds", "compile_seconds", "seconds_per_run", "bayes_seconds")


def pool_arg(name):
    return "demo" if name == "demo" else os.path.join(SHARED, f"{name}.parquet")


def simulate_json(pool_name, design, repeats=20):
    from bayes_eval.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["simulate", pool_arg(pool_name), "--design", design, "--repeats", str(repeats),
                   "--seed", "0", "--bayes", "no", "--format", "json"])
    assert rc == 0, (pool_name, design, rc)
    out = json.loads(buf.getvalue())
    for k in TIMING_KEYS:
        out.pop(k, None)
    out["pool"] = pool_name
    return out


def session_transcript(design, n_batches=8, batch=50):
    import numpy as np
    import bayes_eval as be
    from bayes_eval import Session

    pool = be.demo_pool()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        s = Session.create(os.path.join(d, "s.db"), pool, ["f1", "precision", "recall"], design, seed=3)
        for _ in range(n_batches):
            b = s.next_batch(batch)
            y = pool.labels[pool.index_of(b["item"].to_numpy())]
            s.add_labels(b["item"], y)
            est = s.estimate()
            iv = s.intervals(bayesian=False)
            rows.append({
                "batch": {c: [None if (isinstance(v, float) and not np.isfinite(v)) else v
                              for v in b[c].tolist()] for c in b.columns},
                "estimate": {k: float(v) for k, v in est.items()},
                "intervals": json.loads(iv.to_json(orient="records")),
            })
        s.close()
    return {"design": design, "pool": "demo", "seed": 3, "batch": batch, "stages": rows}


def legacy_session(design, n_batches=3, batch=30):
    """A small session file written by this release, and the state it replays to."""
    import bayes_eval as be
    from bayes_eval import Session

    pool = be.demo_pool()
    path = os.path.join(HERE, f"legacy_{design}.sqlite")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    s = Session.create(path, pool, ["f1", "precision"], design, seed=5, pool_path="demo")
    for _ in range(n_batches):
        b = s.next_batch(batch)
        s.add_labels(b["item"], pool.labels[pool.index_of(b["item"].to_numpy())])
    pending = s.next_batch(batch)  # an open stage, half labeled
    half = pending.iloc[: len(pending) // 2]
    s.add_labels(half["item"], pool.labels[pool.index_of(half["item"].to_numpy())])
    state = {
        "design": design, "n_labels": s.n_labels, "n_draws": s.n_draws, "n_stages": s.n_stages,
        "n_pending": s.n_pending,
        "estimate": {k: float(v) for k, v in s.estimate().items()},
        "intervals": json.loads(s.intervals(bayesian=False).to_json(orient="records")),
        "pending_items": [int(v) for v in s.pending()["item"].tolist()],
    }
    s.close()
    with open(os.path.join(HERE, f"legacy_{design}.json"), "w") as f:
        json.dump(state, f, indent=1)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["simulate", "session", "legacy"], default=None)
    ap.add_argument("--pools", default="demo,abt-buy,dblp-acm")
    ap.add_argument("--designs", default=",".join(DESIGNS))
    args = ap.parse_args(argv)
    if args.only in (None, "legacy"):
        for design in ("ais", "poisson-adaptive"):
            legacy_session(design)
            print("wrote legacy session", design, flush=True)
    if args.only in (None, "session"):
        for design in DESIGNS:
            out = session_transcript(design)
            with open(os.path.join(HERE, f"session_{design}.json"), "w") as f:
                json.dump(out, f, indent=1)
            print("wrote session", design, flush=True)
    if args.only in (None, "simulate"):
        for pool_name in args.pools.split(","):
            for design in args.designs.split(","):
                out = simulate_json(pool_name, design)
                with open(os.path.join(HERE, f"simulate_{pool_name}_{design}.json"), "w") as f:
                    json.dump(out, f, indent=1)
                print("wrote", pool_name, design, flush=True)


if __name__ == "__main__":
    sys.exit(main())
