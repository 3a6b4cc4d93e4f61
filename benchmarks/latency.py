"""Wall-clock latency of the command line a labeling team runs all day (issue 16).

    python benchmarks/latency.py [--pool /work/shared/data/dblp-acm.parquet] [--runs 5] [--demo 2] [--cpu 1]

Each command runs in a fresh process under ``/usr/bin/time`` (pinned to one CPU with
``taskset`` when available), with JAX's persistent compilation cache in a fresh folder:
the first call of each command is *cold* (empty cache), the others *warm*.  ``next`` and
``ingest`` alternate (a batch of 50 drawn, then labeled with the pool's truth), ``status`` as
it runs by default (with the Bayesian interval, read first) and with ``--no-bayesian``.  Writes ``benchmarks/results/latency.md``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import pandas as pd

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
EXE = os.path.join(os.path.dirname(sys.executable), "bayes-eval")


def timed(argv, env, cpu):
    pre = ["taskset", "-c", str(cpu)] if cpu is not None and shutil.which("taskset") else []
    with tempfile.NamedTemporaryFile("r") as tf:
        t0 = time.monotonic()
        r = subprocess.run(pre + ["/usr/bin/time", "-f", "%e %U %S", "-o", tf.name] + argv, env=env,
                           capture_output=True, text=True)
        wall = time.monotonic() - t0
        if r.returncode != 0:
            raise RuntimeError(f"{argv}: {r.stderr}")
        e, u, s = map(float, open(tf.name).read().split()[-3:])
    return {"wall": e, "cpu": u + s, "outer": wall}


def label_file(batch, pool_path, out):
    truth = pd.read_parquet(pool_path)["label"] if pool_path.endswith(".parquet") else None
    b = pd.read_csv(batch)
    b["label"] = truth.iloc[b["item"].to_numpy()].to_numpy() if truth is not None else 0
    b.to_csv(out, index=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool", default="/work/shared/data/dblp-acm.parquet")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--demo", type=int, default=2, help="runs of bayes-eval demo (0: skip)")
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "latency.md"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="latency-")
    env = {**os.environ, "BAYES_EVAL_CACHE_DIR": os.path.join(work, "cache")}
    db = os.path.join(work, "s.db")
    rows = []

    def run(cmd, argv, phase):
        t = timed(argv, env, a.cpu)
        rows.append({"command": cmd, "phase": phase, **t})
        print(cmd, phase, t, flush=True)

    load = os.getloadavg()
    run("session new", [EXE, "session", "new", db, "--pool", a.pool, "--design", "ais", "--no-progress"], "cold")
    for k in range(a.runs + 1):
        phase = "cold" if k == 0 else "warm"
        batch = os.path.join(work, f"b{k}.csv")
        run("session next", [EXE, "session", "next", db, "--n", "50", "--out", batch, "--no-progress"], phase)
        lab = os.path.join(work, f"l{k}.csv")
        label_file(batch, a.pool, lab)
        run("session ingest", [EXE, "session", "ingest", db, lab, "--no-progress"], phase)
        # the default computes the Bayesian interval, read first (issue 15, item 4); --no-bayesian skips it
        run("session status", [EXE, "session", "status", db, "--no-progress"], phase)
        run("session status --no-bayesian", [EXE, "session", "status", db, "--no-bayesian", "--no-progress"], phase)
    for k in range(a.demo):
        run("demo", [EXE, "demo"], "cold" if k == 0 else "warm")
    t0 = timed([sys.executable, "-c", "import bayes_eval.session"], env, a.cpu)
    rows.append({"command": "python -c 'import bayes_eval.session'", "phase": "warm", **t0})
    df = pd.DataFrame(rows)
    load_after = os.getloadavg()
    lines = ["# Command-line latency (issue 16)\n",
             f"`python benchmarks/latency.py --pool {a.pool} --runs {a.runs} --demo {a.demo} --cpu {a.cpu}`: every "
             f"command a fresh process under `/usr/bin/time`, pinned to CPU {a.cpu} (`taskset`), JAX's persistent "
             f"compilation cache in a fresh folder (cold = first call, empty cache; warm = later calls). "
             f"Design ais, batches of 50 labeled with the pool's truth. Load average before "
             f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}, after {load_after[0]:.2f} / {load_after[1]:.2f} / "
             f"{load_after[2]:.2f} (`uptime`; 2-core machine).\n",
             "| command | phase | runs | wall median (s) | wall min–max (s) | CPU median (s) | target |",
             "|---|---|---|---|---|---|---|"]
    target = {"session next": "≤ 2 s warm, ≤ 10 s cold", "session ingest": "≤ 2 s warm, ≤ 10 s cold",
              "session status --no-bayesian": "≤ 2 s warm, ≤ 10 s cold", "demo": "≤ 15 s warm, ≤ 30 s fresh"}
    for (cmd, phase), g in df.groupby(["command", "phase"], sort=False):
        lines.append(f"| {cmd} | {phase} | {len(g)} | {statistics.median(g['wall']):.2f} | "
                     f"{g['wall'].min():.2f}–{g['wall'].max():.2f} | {statistics.median(g['cpu']):.2f} | "
                     f"{target.get(cmd, '')} |")
    with open(a.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    df.to_csv(os.path.splitext(a.out)[0] + ".csv", index=False)
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
