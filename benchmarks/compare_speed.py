"""Side-by-side speed of two checkouts of bayes_eval (e.g. before and after a refactor).

    python benchmarks/compare_speed.py --trees OLD_CHECKOUT,NEW_CHECKOUT [--pool PATH] [--repeats 100]

For every design: simulated runs per second (``run_simulation`` on the pool, F1, 2000
labels in batches of 50, ``--repeats`` vmapped repeats, compilation excluded), and the
session's stage latency (``next_batch(50)`` + ``add_labels``, median over stages 2..k, on
the demo pool).  Each (design, checkout) runs in a fresh subprocess, alternating checkouts
design by design so that drift of the machine hits both alike.  Measure alone: other work
on the cores inflates every figure.  Prints a markdown table of ratios new / old.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

DESIGNS = ("passive", "stratified", "is", "oasis", "ais", "poisson", "poisson-adaptive")
HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import json, sys, time, tempfile, os
sys.path.insert(0, TREE)
import numpy as np
import bayes_eval as be
assert os.path.dirname(os.path.dirname(be.__file__)) == os.path.abspath(TREE), be.__file__
from bayes_eval import measures as M
from bayes_eval.simulate import run_simulation
pool = be.Pool.from_file(POOL) if POOL != "demo" else be.demo_pool()
res, _ = run_simulation(pool, M.get("f1"), DESIGN, budget=2000, batch=50, repeats=REPEATS, seed=0,
                        checkpoints=(500, 1000, 2000), bayes=False)
out = {"ms_per_run": 1000 * res.seconds / REPEATS, "compile_s": res.compile_seconds}
from bayes_eval import Session
demo = be.demo_pool()
with tempfile.TemporaryDirectory() as d:
    s = Session.create(os.path.join(d, "s.db"), demo, "f1", DESIGN, seed=0)
    times = []
    for i in range(STAGES):
        t0 = time.perf_counter()
        b = s.next_batch(50)
        s.add_labels(b["item"], demo.labels[demo.index_of(b["item"].to_numpy())])
        times.append(time.perf_counter() - t0)
    s.close()
out["stage_ms"] = 1000 * float(np.median(times[1:]))
print("RESULT " + json.dumps(out))
"""


def run_child(tree, design, pool, repeats, stages):
    code = (f"TREE={tree!r}\nPOOL={pool!r}\nDESIGN={design!r}\nREPEATS={repeats}\nSTAGES={stages}\n" + CHILD)
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONWARNINGS="ignore")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd="/tmp")
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{tree} {design} failed:\n{p.stderr[-3000:]}")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", required=True, help="OLD,NEW checkouts")
    ap.add_argument("--pool", default=os.path.join(HERE, "..", "..", "shared", "data", "abt-buy.parquet"))
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--stages", type=int, default=12)
    ap.add_argument("--designs", default=",".join(DESIGNS))
    args = ap.parse_args(argv)
    old, new = (os.path.abspath(t) for t in args.trees.split(","))
    rows = []
    for design in args.designs.split(","):
        r_old = run_child(old, design, args.pool, args.repeats, args.stages)
        r_new = run_child(new, design, args.pool, args.repeats, args.stages)
        rows.append((design, r_old, r_new))
        print(f"{design}: {r_old} -> {r_new}", file=sys.stderr, flush=True)
    print(f"pool {os.path.basename(args.pool)}, F1, 2000 labels, {args.repeats} vmapped repeats; session stages on the "
          f"demo pool (median of stages 2..{args.stages})\n")
    print("| design | ms/run old | ms/run new | new/old | stage ms old | stage ms new | new/old |")
    print("|---|---|---|---|---|---|---|")
    for design, a, b in rows:
        print(f"| {design} | {a['ms_per_run']:.2f} | {b['ms_per_run']:.2f} | {b['ms_per_run'] / a['ms_per_run']:.2f} | "
              f"{a['stage_ms']:.1f} | {b['stage_ms']:.1f} | {b['stage_ms'] / a['stage_ms']:.2f} |")


if __name__ == "__main__":
    main()
