"""The benchmark suite: label efficiency, interval coverage and speed, in one command.

    python benchmarks/run.py                     # everything (long: see benchmarks/README.md)
    python benchmarks/run.py --quick             # smoke version: tiny synthetic pool, few repeats
    python benchmarks/run.py --measures f1 --repeats 500 --designs ais8,is

For every pool in ``../shared/data`` (or ``--pools``), every measure (F1, accuracy, PR curve
on L = 1024 thresholds, 001 §5.3) and every design, it simulates 40 stages × 50 labels
(deterministic oracle, labels counted as distinct items — the protocol of
``../shared/benchmarks/README.md``) and writes to ``benchmarks/results/``:

* ``suite_<measure>_<pool>.md`` / ``.csv``: MSE with its 95% bootstrap interval, bias,
  coverage and mean width of the 95% CLT and Bayesian intervals at 500 / 1000 / 2000
  labels, the ratio of each MSE to the reference AIS figure (``ours8`` in ``peers.json``)
  and to the best reference figure, seconds per run;
* ``suite_<measure>_<pool>.png``: MSE against labels (log scale);
* ``speed.md`` / ``speed.json``: seconds per vmapped run (compilation reported
  separately) against the reference implementation's seconds per run.

Vector measures (PR curve) are summarised by the MSE averaged over components, coverage
averaged over components.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from bayes_eval import measures as M  # noqa: E402
from bayes_eval.pool import Pool, demo_pool  # noqa: E402
from bayes_eval.simulate import run_simulation, summarize  # noqa: E402
from stats import bootstrap_ci, md_table, write_lines  # noqa: E402  (benchmarks/stats.py)

CHECKPOINTS = (500, 1000, 2000)
DESIGNS = {
    "passive": ("passive", {}),
    "stratified": ("stratified", {}),
    "is": ("is", {"lam": 0.9}),
    "is-lam1": ("is", {"lam": 1.0}),
    "oasis": ("oasis", {}),
    "ais8": ("ais", {"depth": 8}),
    "ais8-tree-only": ("ais", {"depth": 8, "companion": "none"}),
    "ais1": ("ais", {"depth": 1}),
    "poisson": ("poisson", {}),
    "poisson-adaptive": ("poisson-adaptive", {}),
    "poisson-adaptive-tree-only": ("poisson-adaptive", {"companion": "none"}),
}
#: the baselines a synthetic pool's designs are compared with (no reference figures there;
#: our static IS with λ = 1 reproduces the reference's static IS on the shared pools)
BASELINES = ("passive", "is", "is-lam1")
SYNTHETIC_PREVALENCES = (0.5, 0.1, 0.01)


def synthetic_pool(prevalence, n_items=50_000, seed=0):
    """A synthetic pool of a given prevalence whose SVM-like scores are informative but
    miscalibrated: scores ~ N(±sep/2, 1) shifted by ``shift`` (sep 2, shift -1 for
    prevalence > 5%; sep 4, shift -3 below, like an entity-resolution scorer); the
    classifier predicts ``score >= 0``."""
    from bayes_eval.pool import Pool

    rng = np.random.default_rng(seed)
    y = (rng.random(n_items) < prevalence).astype(np.int32)
    sep, shift = (2.0, -1.0) if prevalence > 0.05 else (4.0, -3.0)
    s = np.where(y == 1, rng.normal(sep / 2, 1.0, n_items), rng.normal(-sep / 2, 1.0, n_items)) + shift
    return Pool.from_arrays(scores=s, preds=(s >= 0).astype(np.int32), labels=y, name=f"synthetic-p{prevalence:g}")


def measure_of(name, pool):
    if name == "pr_curve":
        return M.pr_curve(M.default_thresholds(np.asarray(pool.scores[:, 0]), 1024))
    return M.get(name)


def run_one(pool, measure, design_key, repeats, seed, bayes, checkpoints=CHECKPOINTS, budget=2000):
    design, kw = DESIGNS[design_key]
    res, _ = run_simulation(pool, measure, design, budget=budget, batch=50, repeats=repeats, seed=seed,
                            checkpoints=checkpoints, track_kl=False, bayes=bayes, **kw)
    truth = res.true_value
    row = {"design": design_key, "repeats": repeats, "sec_per_run": res.seconds / repeats,
           "compile_s": res.compile_seconds, "bayes_s": res.bayes_seconds}
    for c in summarize(res):
        ck = c["labels"]
        i = res.checkpoints.index(ck)
        v = res.checkpoint_value[:, i, :]
        fin = np.isfinite(v)
        ok = fin.any(axis=1)
        err2 = np.where(fin[ok], (v[ok] - truth) ** 2, 0.0).sum(1) / fin[ok].sum(1)  # per run, defined components
        lo, hi = bootstrap_ci(err2)
        row.update({f"mse@{ck}": c["mse"], f"mse_lo@{ck}": lo, f"mse_hi@{ck}": hi,
                    f"bias@{ck}": float(np.mean(np.abs(np.atleast_1d(c["bias"])))) if c["bias"] is not None else None,
                    f"coverage@{ck}": c["coverage"], f"width@{ck}": c["mean_width"],
                    f"coverage_bayes@{ck}": c.get("coverage_bayes"), f"width_bayes@{ck}": c.get("mean_width_bayes"),
                    # the confidence sequence (the CLT interval widened for stopping), the CLT check's pass
                    # share and the CLT coverage where it passed, the posterior mean's own MSE
                    f"coverage_cs@{ck}": c.get("coverage_cs"), f"width_cs@{ck}": c.get("mean_width_cs"),
                    f"clt_check_passed@{ck}": c.get("clt_check_passed"),
                    f"coverage_checked@{ck}": c.get("coverage_checked"), f"mse_bayes@{ck}": c.get("mse_bayes"),
                    f"undefined@{ck}": c["undefined_runs"], f"undefined_share@{ck}": c.get("undefined_share")})
    hist = res.history
    vals = hist.value
    sq = (vals - truth[: vals.shape[-1]]) ** 2
    fin = np.isfinite(sq)
    err2 = np.where(fin.any(-1), np.where(fin, sq, 0.0).sum(-1) / np.maximum(fin.sum(-1), 1), np.nan)
    ok = np.isfinite(err2)
    mse = np.where(ok.any(0), np.where(ok, err2, 0.0).sum(0) / np.maximum(ok.sum(0), 1), np.nan)
    curve = (hist.n_labels[0], mse)
    return row, curve


def peers_of(peers, pool_name, measure):
    block = peers.get(pool_name, {})
    if measure == "accuracy":
        block = block.get("accuracy", {})
    elif measure != "f1":
        return {}
    return {k: v for k, v in block.items() if isinstance(v, dict) and isinstance(v.get("mse@2000"), (int, float))}


def fmt(x, spec=".3g"):
    return "–" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, spec)


def merge_previous(out, measure, pool_name, rows, curves):
    """Rows and curves of designs not rerun now, from an earlier run's CSV / curves JSON
    (``--merge``: rerun a few designs without redoing the rest), in the suite's order."""
    import pandas as pd

    stem = os.path.join(out, f"suite_{measure}_{pool_name}")
    if not (os.path.exists(stem + ".csv") and os.path.exists(stem + "_curves.json")):
        return rows, curves
    old = pd.read_csv(stem + ".csv").to_dict("records")
    with open(stem + "_curves.json") as fh:
        old_curves = {k: (np.asarray(v[0]), np.array([np.nan if x is None else x for x in v[1]], float))
                      for k, v in json.load(fh).items()}
    new = {r["design"] for r in rows}
    keep = [r for r in old if r["design"] not in new]
    merged = {r["design"]: r for r in keep + rows}
    order = [d for d in DESIGNS if d in merged]
    all_curves = {**{k: v for k, v in old_curves.items() if k not in new}, **curves}
    return [merged[d] for d in order], {d: all_curves[d] for d in order if d in all_curves}


def write_outputs(out, measure, pool_name, rows, curves, peers, checkpoints=CHECKPOINTS):
    import pandas as pd

    stem = os.path.join(out, f"suite_{measure}_{pool_name}")
    with open(stem + "_curves.json", "w") as fh:
        json.dump({k: [np.asarray(a).tolist(), [None if not np.isfinite(x) else float(x) for x in b]]
                   for k, (a, b) in curves.items()}, fh)
    ref = peers.get("ours8")
    best = min((v["mse@2000"] for v in peers.values()), default=None)
    base = [r for r in rows if r["design"] in BASELINES]
    if not peers and base:  # a pool without reference figures: ratio to our best baseline
        for r in rows:
            for ck in checkpoints:
                bk = min((b[f"mse@{ck}"] for b in base if b.get(f"mse@{ck}") is not None), default=None)
                if bk and r.get(f"mse@{ck}") is not None:
                    r[f"ratio_baseline@{ck}"] = r[f"mse@{ck}"] / bk
    for r in rows:
        for ck in checkpoints:
            if ref and r.get(f"mse@{ck}") is not None:
                r[f"ratio_ref_ais@{ck}"] = r[f"mse@{ck}"] / ref[f"mse@{ck}"]
                bk = min(v[f"mse@{ck}"] for v in peers.values())
                r[f"ratio_best@{ck}"] = r[f"mse@{ck}"] / bk
    pd.DataFrame(rows).to_csv(stem + ".csv", index=False)
    c1, c2, c3 = (list(checkpoints) * 3)[:3] if len(checkpoints) < 3 else checkpoints[:3]
    lines = [f"# {measure} on `{pool_name}` (stages of 50 labels; {rows[0]['repeats']} repeats)", "",
             ("MSE [95% bootstrap interval]; ratio = MSE / reference AIS (`ours8`); " if peers else
              "MSE [95% bootstrap interval]; ratio = MSE / the best of passive, static IS (λ = 0.9) and static IS "
              "(λ = 1) at that budget (no reference figures for this pool); ") +
             f"coverage and mean width of 95% CLT / Bayesian (finite-pool, calibrated model) intervals at {c3} labels.",
             "",
             f"| design | mse@{c1} | mse@{c2} | mse@{c3} | ratio@{c1} | ratio@{c2} | ratio@{c3} | cov CLT | width CLT "
             f"| cov Bayes@{c2} | cov Bayes@{c3} | width Bayes | ms/run |",
             "|" + "---|" * 13]
    for r in rows:
        cells = [f"{fmt(r.get(f'mse@{c}'))} [{fmt(r.get(f'mse_lo@{c}'), '.2g')}, {fmt(r.get(f'mse_hi@{c}'), '.2g')}]"
                 for c in (c1, c2, c3)]
        ratios = [fmt(r.get(f"ratio_ref_ais@{c}", r.get(f"ratio_baseline@{c}")), ".2f") for c in (c1, c2, c3)]
        lines.append(f"| {r['design']} | " + " | ".join(cells + ratios) +
                     f" | {fmt(r.get(f'coverage@{c3}'), '.2f')} | {fmt(r.get(f'width@{c3}'))} | "
                     f"{fmt(r.get(f'coverage_bayes@{c2}'), '.2f')} | {fmt(r.get(f'coverage_bayes@{c3}'), '.2f')} | "
                     f"{fmt(r.get(f'width_bayes@{c3}'))} | {r['sec_per_run'] * 1000:.1f} |")
    if peers:
        lines += ["", "Reference figures (`peers.json`):", "", "| method | mse@500 | mse@1000 | mse@2000 | s/run |",
                  "|---|---|---|---|---|"]
        for k, v in peers.items():
            lines.append(f"| {k} | {v['mse@500']:.3g} | {v['mse@1000']:.3g} | {v['mse@2000']:.3g} | "
                         f"{v.get('sec_per_run', '')} |")
        if best is not None:
            lines.append(f"\nBest reference MSE at 2000 labels: {best:.3g}.")
    with open(stem + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    # one colour per design family; the tree-only variants dashed in their family's colour
    bases = list(dict.fromkeys(n.replace("-tree-only", "") for n in curves))
    palette = plt.get_cmap("tab10")
    for name, (labels, mse) in curves.items():
        base = name.replace("-tree-only", "")
        ax.plot(labels, mse, label=name, lw=1.5, color=palette(bases.index(base) % 10),
                ls="--" if name.endswith("-tree-only") else "-")
    markers = "os^vDP"
    for i, (k, v) in enumerate(peers.items()):
        ax.scatter(CHECKPOINTS, [v[f"mse@{c}"] for c in CHECKPOINTS], color="k", marker=markers[i % len(markers)],
                   zorder=5, label=f"reference {k}")
    ax.set_yscale("log")
    ax.set_xlabel("labels spent")
    ax.set_ylabel(f"MSE of {measure}" + (" (first 16 components)" if measure == "pr_curve" else ""))
    if measure == "pr_curve":  # the run history keeps the first 16 components only
        ax.text(0.01, 0.01, "curves: precision at the 16 lowest thresholds (what the run history keeps);\n"
                "the table's MSE averages all 2048 components", transform=ax.transAxes, fontsize=7,
                va="bottom")
    ax.set_title(f"{measure} on {pool_name}: MSE against labels")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=110)
    plt.close(fig)


def speed(out, pools, peers, repeats=100, big_repeats=1000, big_n=150_000, quick=False):
    """Seconds per AIS depth-8 run, 100 vmapped repeats, compilation excluded."""
    rows = []
    f1 = M.f1()
    big = demo_pool(n_items=big_n, positive_rate=0.001, seed=11)
    # "tree-only" is 001's design, the one the reference implements: the like-for-like speed
    # comparison; "ais8" adds the calibrated companion model (the default)
    for variant, companion in (("ais8-tree-only", "none"), ("ais8", "auto")):
        for name, pool in pools.items():
            res, _ = run_simulation(pool, f1, "ais", budget=2000, batch=50, repeats=repeats, seed=0, track_kl=False,
                                    depth=8, checkpoints=(2000,), companion=companion)
            ref = peers.get(name, {}).get("ours8", {}).get("sec_per_run")
            per = res.seconds / repeats
            rows.append({"pool": name, "design": variant, "n_items": pool.n_items, "repeats": repeats,
                         "sec_per_run": per, "compile_s": res.compile_seconds, "reference_sec_per_run": ref,
                         "speedup": (ref / per) if ref else None})
            print(f"  speed {variant} {name}: {per * 1000:.1f} ms/run, compile {res.compile_seconds:.1f} s, "
                  f"speed-up {ref / per if ref else float('nan'):.0f}x", flush=True)
        res, _ = run_simulation(big, f1, "ais", budget=2000, batch=50, repeats=big_repeats, seed=0, track_kl=False,
                                depth=8, checkpoints=(2000,), companion=companion)
        rows.append({"pool": f"synthetic-{big_n}", "design": variant, "n_items": big_n, "repeats": big_repeats,
                     "sec_per_run": res.seconds / big_repeats, "compile_s": res.compile_seconds, "total_s": res.seconds,
                     "reference_sec_per_run": None if quick else 10.0,
                     "speedup": None if quick else 10.0 / (res.seconds / big_repeats)})
        print(f"  speed {variant} {big_n} items × {big_repeats} repeats: {res.seconds:.1f} s "
              f"(+{res.compile_seconds:.1f} s compile)", flush=True)
    with open(os.path.join(out, "speed.json"), "w") as f:
        json.dump(rows, f, indent=2)
    write_speed_md(out, rows)
    return rows


def write_speed_md(out, rows):
    lines = ["# Speed: AIS with the depth-8 Dirichlet tree, 2000 labels (40 × 50), F1", "",
             "Seconds per run of the jit-compiled simulation, vmapped over the repeats, compilation excluded "
             "(reported apart); the reference's seconds per run from `peers.json` (10 s for the 150k pool, from "
             "the issue).", "",
             "`ais8-tree-only` is 001's design (the Dirichlet tree alone), the one the reference implements; "
             "`ais8` adds the calibrated companion model (the default; `bayes_eval.designs.sweep_share`).", ""]
    lines += md_table(["design", "pool", "items", "vmapped repeats", "s/run", "total s", "compile s", "reference s/run",
                       "speed-up"],
                      [[r.get("design", "ais8-tree-only"), r["pool"], r["n_items"], r["repeats"],
                        f"{r['sec_per_run']:.4f}", f"{r['sec_per_run'] * r['repeats']:.1f}", f"{r['compile_s']:.1f}",
                        fmt(r["reference_sec_per_run"]), fmt(r["speedup"], ".0f")] for r in rows])
    write_lines(os.path.join(out, "speed.md"), lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=500)
    ap.add_argument("--pr-repeats", type=int, default=None, help="repeats for the PR curve (default: --repeats)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--measures", default="f1,accuracy,pr_curve")
    ap.add_argument("--designs", default=",".join(DESIGNS))
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    ap.add_argument("--peers", default=os.path.join(ROOT, "..", "shared", "benchmarks", "peers.json"))
    ap.add_argument("--pools", default=None, help="comma-separated pool files (default: every *.parquet in --data)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--bayes", action="store_true", default=True)
    ap.add_argument("--no-bayes", dest="bayes", action="store_false")
    ap.add_argument("--bayes-designs", default="ais8,poisson-adaptive",
                    help="designs whose runs also get the finite-pool Bayesian interval (it is design-agnostic "
                         "and costs ~0.1-0.2 s per run and checkpoint)")
    ap.add_argument("--bayes-measures", default="f1,accuracy")
    ap.add_argument("--no-speed", dest="speed", action="store_false", default=True)
    ap.add_argument("--quick", action="store_true", help="smoke run: a small synthetic pool, few repeats")
    ap.add_argument("--synthetic", action="store_true",
                    help="run on synthetic pools of prevalence 0.5, 0.1, 0.01 (50,000 items) and the demo pool instead of the shared "
                         "pools: how the designs fare on balanced and moderately imbalanced pools")
    ap.add_argument("--merge", action="store_true",
                    help="keep the rows of designs not run now from the existing tables (rerun a few designs)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    peers = {}
    if os.path.exists(args.peers):
        with open(args.peers) as fh:
            peers = json.load(fh)
    if args.quick:
        pools = {"synthetic": demo_pool(n_items=5000, positive_rate=0.01, seed=2)}
        checkpoints, budget = (100, 200), 200
        args.repeats = min(args.repeats, 8)
    elif args.synthetic:
        pools = {f"synthetic-p{p:g}": synthetic_pool(p) for p in SYNTHETIC_PREVALENCES}
        # the demo pool: 0.2% positive, a third of them hidden among the bulk of negatives
        pools["synthetic-demo"] = demo_pool()
        checkpoints, budget = CHECKPOINTS, 2000
    else:
        if args.pools:
            paths = args.pools.split(",")
        else:
            paths = sorted(os.path.join(args.data, f) for f in os.listdir(args.data) if f.endswith(".parquet"))
        pools = {os.path.splitext(os.path.basename(p))[0]: Pool.from_file(p) for p in paths}
        checkpoints, budget = CHECKPOINTS, 2000
    from bayes_eval.registry import design_names

    known = set(design_names())
    bayes_designs = set(args.bayes_designs.split(","))
    bayes_measures = set(args.bayes_measures.split(","))
    designs = [d for d in args.designs.split(",") if d in DESIGNS and DESIGNS[d][0] in known]
    for measure_name in args.measures.split(","):
        for pool_name, pool in pools.items():
            print(f"{measure_name} on {pool_name}:", flush=True)
            measure = measure_of(measure_name, pool)
            reps = args.pr_repeats if (measure_name == "pr_curve" and args.pr_repeats) else args.repeats
            rows, curves = [], {}
            for d in designs:
                try:
                    if d == "oasis" and measure_name == "pr_curve":
                        raise ValueError("OASIS is defined for F-measures; on a PR curve its 2000 one-label "
                                         "stages each redo the (cells x 2048) importance")
                    row, curve = run_one(pool, measure, d, reps, args.seed,
                                         bayes=(args.bayes and d in bayes_designs and pool.n_classes == 2
                                                and measure_name in bayes_measures),
                                         checkpoints=checkpoints, budget=budget)
                except ValueError as exc:  # a design that does not support this measure
                    print(f"  {d}: skipped ({exc})")
                    continue
                rows.append(row)
                curves[d] = curve
                last = checkpoints[-1]
                print(f"  {d:<17} mse@{last}={fmt(row.get(f'mse@{last}'))} cov={fmt(row.get(f'coverage@{last}'), '.2f')} "
                      f"covB={fmt(row.get(f'coverage_bayes@{last}'), '.2f')} {row['sec_per_run'] * 1000:.1f} ms/run",
                      flush=True)
            if args.merge:
                rows, curves = merge_previous(args.out, measure_name, pool_name, rows, curves)
            write_outputs(args.out, measure_name, pool_name, rows, curves,
                          {} if args.quick else peers_of(peers, pool_name, measure_name), checkpoints)
    if args.speed and not args.synthetic:
        speed(args.out, pools, peers, repeats=10 if args.quick else 100,
              big_repeats=10 if args.quick else 1000, big_n=20_000 if args.quick else 150_000, quick=args.quick)
    print(f"results in {args.out}")


if __name__ == "__main__":
    main()
