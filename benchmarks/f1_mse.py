"""MSE, bias and 95%-interval coverage of F1 for every design, on every shared pool.

    python benchmarks/f1_mse.py [--repeats 200] [--data ../shared/data] [--out benchmarks/results]

For each pool in ``../shared/data`` and each design (passive, stratified, static IS, OASIS,
AIS with the depth-8 and depth-1 Dirichlet-tree models) it runs the jit-compiled
simulation (40 stages × 50 labels, deterministic oracle, labels counted as distinct items:
the protocol of ``../shared/benchmarks/README.md``) and writes

* ``f1_mse_<pool>.md`` / ``.csv``: MSE (with a 95% bootstrap interval over repeats), bias,
  coverage and mean width of the 95% CLT interval at 500 / 1000 / 2000 labels, seconds per
  run, beside the reference implementations' figures from ``peers.json``;
* ``f1_mse_<pool>.png``: MSE against labels spent (log scale), reference figures as markers.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from bayes_eval import measures as M  # noqa: E402
from bayes_eval.pool import Pool  # noqa: E402
from bayes_eval.simulate import run_simulation  # noqa: E402
from stats import bootstrap_ci  # noqa: E402  (benchmarks/stats.py)

DESIGNS = [
    ("passive", "passive", {}),
    ("stratified", "stratified", {}),
    ("is (λ=0.9)", "is", {"lam": 0.9}),
    ("is (λ=1)", "is", {"lam": 1.0}),
    ("oasis", "oasis", {}),
    ("ais depth-8", "ais", {"depth": 8}),
    ("ais depth-1", "ais", {"depth": 1}),
]
CHECKPOINTS = (500, 1000, 2000)


def per_stage_mse(res):
    v = res.history.value[:, :, 0]
    labels = res.history.n_labels[0]
    err2 = (v - res.true_value[0]) ** 2
    ok = np.isfinite(err2)
    mse = np.where(ok.any(0), np.nansum(np.where(ok, err2, 0), 0) / np.maximum(ok.sum(0), 1), np.nan)
    return labels, mse


def run_pool(path, repeats, seed, designs=DESIGNS, measure_name="f1"):
    pool = Pool.from_file(path)
    measure = M.get(measure_name)
    rows, curves = [], {}
    for label, design, kw in designs:
        t0 = time.perf_counter()
        res, _ = run_simulation(pool, measure, design, budget=2000, batch=50, repeats=repeats, seed=seed,
                                checkpoints=CHECKPOINTS, track_kl=False, **kw)
        wall = time.perf_counter() - t0
        truth = res.true_value[0]
        row = {"design": label, "repeats": repeats, "sec_per_run": res.seconds / repeats,
               "compile_s": res.compile_seconds, "wall_s": wall}
        for i, ck in enumerate(res.checkpoints):
            v = res.checkpoint_value[:, i, 0]
            lo = res.checkpoint_lower[:, i, 0]
            hi = res.checkpoint_upper[:, i, 0]
            ok = np.isfinite(v)
            err2 = (v[ok] - truth) ** 2
            b = bootstrap_ci(err2)
            row[f"mse@{ck}"] = float(err2.mean()) if ok.any() else np.nan
            row[f"mse_lo@{ck}"] = float(b[0])
            row[f"mse_hi@{ck}"] = float(b[1])
            row[f"bias@{ck}"] = float(v[ok].mean() - truth) if ok.any() else np.nan
            row[f"coverage@{ck}"] = float(np.mean((lo[ok] <= truth) & (truth <= hi[ok]))) if ok.any() else np.nan
            row[f"width@{ck}"] = float(np.mean(hi[ok] - lo[ok])) if ok.any() else np.nan
            row[f"undefined@{ck}"] = int((~ok).sum())
        rows.append(row)
        curves[label] = per_stage_mse(res)
        print(f"  {label:<14} mse@2000={row['mse@2000']:.3g} [{row['mse_lo@2000']:.3g}, {row['mse_hi@2000']:.3g}] "
              f"cov={row['coverage@2000']:.2f} {row['sec_per_run'] * 1000:.1f} ms/run", flush=True)
    return pool, rows, curves


def peers_for(name, peers_path):
    if not os.path.exists(peers_path):
        return {}
    with open(peers_path) as fh:
        peers = json.load(fh)
    return {k: v for k, v in peers.get(name, {}).items()
            if isinstance(v, dict) and isinstance(v.get("mse@2000"), (int, float))}


def write_tables(name, rows, peers, out):
    import pandas as pd

    df = pd.DataFrame(rows)
    df.to_csv(os.path.join(out, f"f1_mse_{name}.csv"), index=False)
    ref = peers.get("ours8", {})
    lines = [f"# F1 on `{name}`: MSE, bias, coverage (40 stages × 50 labels, {rows[0]['repeats']} repeats)", "",
             "MSE with its 95% bootstrap interval over repeats; `ratio` = MSE / reference AIS (`ours8`, peers.json) "
             "at the same budget; coverage and mean width of the 95% CLT interval.", "",
             "| design | mse@500 | mse@1000 | mse@2000 | ratio@2000 | bias@2000 | coverage@2000 | width@2000 | ms/run |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r["mse@2000"] / ref["mse@2000"] if ref else float("nan")
        cells = [f"{r[f'mse@{c}']:.3g} [{r[f'mse_lo@{c}']:.2g}, {r[f'mse_hi@{c}']:.2g}]" for c in CHECKPOINTS]
        lines.append(f"| {r['design']} | " + " | ".join(cells) +
                     f" | {ratio:.2f} | {r['bias@2000']:.2g} | {r['coverage@2000']:.2f} | {r['width@2000']:.3g} | "
                     f"{r['sec_per_run'] * 1000:.1f} |")
    lines += ["", "Reference implementations (`../shared/benchmarks/peers.json`, same protocol):", "",
              "| method | mse@500 | mse@1000 | mse@2000 | clt95 coverage@2000 | s/run |", "|---|---|---|---|---|---|"]
    for k, v in peers.items():
        lines.append(f"| {k} ({v.get('what', '')}) | {v['mse@500']:.3g} | {v['mse@1000']:.3g} | {v['mse@2000']:.3g} | "
                     f"{v.get('clt95_coverage@2000', '')} | {v.get('sec_per_run', '')} |")
    with open(os.path.join(out, f"f1_mse_{name}.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def plot(name, curves, peers, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, (labels, mse) in curves.items():
        ax.plot(labels, mse, label=label, lw=1.6)
    markers = {"ours8": "o", "IS": "s", "oasis": "^", "passive": "v"}
    for k, v in peers.items():
        ax.scatter(CHECKPOINTS, [v[f"mse@{c}"] for c in CHECKPOINTS], marker=markers.get(k, "x"), color="k",
                   zorder=5, label=f"reference {k}")
    ax.set_yscale("log")
    ax.set_xlabel("labels spent")
    ax.set_ylabel("MSE of F1")
    ax.set_title(f"F1 on {name}: MSE against labels (lower is better)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out, f"f1_mse_{name}.png"), dpi=120)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    ap.add_argument("--peers", default=os.path.join(ROOT, "..", "shared", "benchmarks", "peers.json"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--pools", default=None, help="comma-separated pool files (default: every *.parquet in --data)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.pools:
        paths = args.pools.split(",")
    else:
        if not os.path.isdir(args.data):
            sys.exit(f"no data folder at {args.data}; pass --data or --pools")
        paths = sorted(os.path.join(args.data, f) for f in os.listdir(args.data) if f.endswith(".parquet"))
    for path in paths:
        name = os.path.splitext(os.path.basename(path))[0]
        print(f"{name}:", flush=True)
        _, rows, curves = run_pool(path, args.repeats, args.seed)
        peers = peers_for(name, args.peers)
        write_tables(name, rows, peers, args.out)
        plot(name, curves, peers, args.out)
    print(f"wrote results to {args.out}")


if __name__ == "__main__":
    main()
