"""The README's headline table, from the suite's CSVs (no simulation is rerun).

    python benchmarks/run.py && python benchmarks/scale.py && python benchmarks/headline.py

Reads ``results/suite_f1_<pool>.csv`` (and ``suite_accuracy_*``), ``results/speed.json`` and
``results/scale.json`` (and ``results/bayes_record/*.json``: every interval kind of this
release, ``interval_study/bayes_record.py``); writes ``results/headline.md``: per pool, for our main designs, the
MSE of F1 at 2000 labels as a ratio to the best reference figure of ``peers.json`` (the
the project's target is ≤ 0.1) and at 500 / 1000 (target ≤ 1), the coverage of the 95% CLT
and Bayesian intervals at 500 / 1000 / 2000 labels, and the speed-up over the reference AIS.
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MAIN = ("ais8", "ais8-tree-only", "poisson-adaptive", "poisson-adaptive-tree-only", "is-lam1")


def _f(x, spec):
    return "–" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, spec)


POOL_ORDER = ("abt-buy", "dblp-acm", "dblp-acm-draws1000", "p0.5", "p0.1", "p0.1-draws1000", "p0.01", "demo",
              "demo-seed1", "demo-seed2", "demo-draws1000", "demo-seed1-draws1000", "demo-seed2-draws1000",
              "balanced_prob", "balanced_prob-draws1000", "prob_ties", "prob_ties-draws1000")


def interval_table(folder):
    """Every interval kind of this release, from ``interval_study/bayes_record.py``'s runs
    (``bayes-eval simulate ... --bayes yes``, 500 runs per pool and design): per checkpoint the
    coverage and mean width ÷ RMSE of the CLT interval (all runs; and where its check passed,
    with the share that passed), the confidence sequence and the Bayesian interval (issue 15:
    coverage 0.93–0.97 at ≤ 6 × RMSE).  Empty where the folder holds no runs."""
    rows = []
    have = sorted(f for f in os.listdir(folder) if f.endswith(".json")) if os.path.isdir(folder) else []
    for f in have:
        with open(os.path.join(folder, f)) as fh:
            rows.append(json.load(fh))
    # a (pool, design) not rerun since the band walk's scale is learned (stop 59): the fixed-scale
    # release's runs, marked; then, not rerun since the highest-density interval, the equal-tailed ones
    have = list(have)
    # and first, not rerun since the posterior model's own slope prior (stop 83): the runs under N(1, 1.5²)
    for suffix, mark in (("_b15", "prior_before"), ("_scale1", "scale_before"), ("_et", "interval_before")):
        before = folder + suffix
        for f in sorted(os.listdir(before)) if os.path.isdir(before) else ():
            if f.endswith(".json") and f not in have:
                with open(os.path.join(before, f)) as fh:
                    rows.append(dict(json.load(fh), **{mark: True}))
                have.append(f)
    if not rows:
        return []

    def name(d):
        return os.path.splitext(os.path.basename(d["pool"]))[0]

    rows.sort(key=lambda d: (POOL_ORDER.index(name(d)) if name(d) in POOL_ORDER else 99, d["design"]))
    out = ["", "| intervals (this release; runs) | design | RMSE of F1 @500 / 1000 / 2000 | CLT coverage (width ÷ RMSE) "
           "| CLT check passed: share, coverage there | confidence sequence coverage (÷ RMSE) "
           "| Bayesian coverage (÷ RMSE) |", "|---|---|---|---|---|---|---|"]
    for d in rows:
        cps = d["checkpoints"]
        rmse = [c["mse"] ** 0.5 for c in cps]

        def kind(cov, width):
            covs = " / ".join(_f(c.get(cov), ".2f") for c in cps)
            rel = " / ".join(_f(c[width] / r if c.get(width) is not None and r > 0 else None, ".1f")
                             for c, r in zip(cps, rmse))
            return f"{covs} ({rel})"

        checked = " / ".join(f"{_f(c.get('clt_check_passed'), '.2f')}, {_f(c.get('coverage_checked'), '.2f')}"
                             for c in cps) if any(c.get("clt_check_passed") is not None for c in cps) else "–"
        bayes = kind("coverage_bayes", "mean_width_bayes") + (" equal-tailed (the release before)"
                                                               if d.get("interval_before") else "") + (
            " (band walk's scale fixed at 1: stop 58's release)" if d.get("scale_before") else "") + (
            " (slope prior N(1, 1.5²): before stop 83)" if d.get("prior_before") else "")
        out.append(f"| {name(d)} ({d['repeats']}) | {d['design']} | {' / '.join(_f(r, '.4f') for r in rmse)} | "
                   f"{kind('coverage', 'mean_width')} | {checked} | {kind('coverage_cs', 'mean_width_cs')} | "
                   f"{bayes} |")
    return out


def stopping_table(folder, widths=(0.1, 0.05, 0.02)):
    """Issue 15 item 3, from the saved per-stage intervals (``stopping.py --bayes --save-stages``,
    ``stages/<pool>_<design>.npz``): per pool and design, the session's stopping rule
    (``read-first``: the confidence sequence where the CLT check passes, else the design's Bayesian rule,
    :func:`bayes_eval.results.bayes_stop_rule` -- with AIS ``bayes-checked``, the Bayesian interval at most W
    wide where the check's ratio is at most 60; with poisson-adaptive ``bayes``, narrow once (stop 88);
    otherwise ``bayes-stable``, at 3 stage ends in a row), that
    Bayesian rule alone (``--bayesian``) and the CLT-based one (the confidence sequence, with the CLT check)
    at each W — share of runs
    stopped within 2000 labels, coverage at the stop over the stopped runs, labels at the stop.
    Empty where the folder holds no runs."""
    if not os.path.isdir(folder):
        return []
    from stopping_rules import SavedStages  # benchmarks/stopping_rules.py (this folder)

    from bayes_eval.results import STOP_CHECK_MAX, bayes_stop_rule, stopping

    files = sorted(f for f in os.listdir(folder) if f.endswith(".npz"))
    if not files:
        return []

    def key(f):
        pool = f[:-4].rsplit("_", 1)[0]
        return (POOL_ORDER.index(pool) if pool in POOL_ORDER else 99, f)

    out = ["", "| stopping at width W (runs) | design | rule | " + " | ".join(f"W = {w:g}: stopped, coverage at the stop, labels"
                                                                   for w in widths) + " |",
           "|---|---|---|" + "---|" * len(widths)]
    for f in sorted(files, key=key):
        pool, design = f[:-4].rsplit("_", 1)
        res = SavedStages(os.path.join(folder, f))
        # stages saved before the highest-density interval (stopping.py's ``bayes_interval``) hold the equal-tailed one
        kind = "Bayesian" if res.bayes_interval == "highest-density" else "Bayesian (equal-tailed, the release before)"
        bayes_rule = bayes_stop_rule(design, res.history.check)
        how = {"bayes-checked": f"where the check's ratio ≤ {STOP_CHECK_MAX:g}",
               "bayes": "narrow once"}.get(bayes_rule, "3 in a row")
        for rule, label in (("read-first", f"read first: confidence sequence where the check passes, else {kind}, "
                                           f"{how} (the session's)"),
                            (bayes_rule, f"{kind}, {how} (`--bayesian`)"),
                            ("clt-cs", "confidence sequence, with the CLT check")):
            cells = []
            for w in widths:
                st = stopping(res, w, rule)
                cells.append("never" if not st["stopped_runs"] else
                             f"{st['stopped']:.2f}, {st['coverage']:.2f}, {st['mean_labels']:.0f}")
            out.append(f"| {pool} ({res.history.value.shape[0]}) | {design} | {label} | "
                       + " | ".join(cells) + " |")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--peers", default=os.path.join(ROOT, "..", "shared", "benchmarks", "peers.json"))
    ap.add_argument("--readme", default=None, help="also replace the headline block of this README")
    args = ap.parse_args(argv)
    with open(args.peers) as fh:
        peers = json.load(fh)
    lines = ["| pool | design | MSE F1 @2000 | ÷ best reference @500 / 1000 / 2000 | CLT coverage @500 / 1000 / 2000 "
             "| confidence sequence coverage @500 / 1000 / 2000 | Bayesian coverage @500 / 1000 / 2000 |",
             "|---|---|---|---|---|---|---|"]
    pools = sorted(f[len("suite_f1_"):-4] for f in os.listdir(args.results)
                   if f.startswith("suite_f1_") and f.endswith(".csv") and not f.startswith("suite_f1_synthetic"))
    for pool in pools:
        df = pd.read_csv(os.path.join(args.results, f"suite_f1_{pool}.csv")).set_index("design")
        block = {k: v for k, v in peers.get(pool, {}).items()
                 if isinstance(v, dict) and isinstance(v.get("mse@2000"), (int, float))}
        best = {c: min(v[f"mse@{c}"] for v in block.values()) for c in (500, 1000, 2000)} if block else None
        for d in MAIN:
            if d not in df.index:
                continue
            r = df.loc[d]
            ratios = " / ".join(_f(r[f"mse@{c}"] / best[c], ".2g") if best else "–" for c in (500, 1000, 2000))
            clt = " / ".join(_f(r.get(f"coverage@{c}"), ".2f") for c in (500, 1000, 2000))
            cs = " / ".join(_f(r.get(f"coverage_cs@{c}"), ".2f") for c in (500, 1000, 2000))
            bay = " / ".join(_f(r.get(f"coverage_bayes@{c}"), ".2f") for c in (500, 1000, 2000))
            lines.append(f"| {pool} | {d} | {_f(r['mse@2000'], '.2g')} | {ratios} | {clt} | {cs} | {bay} |")
    out = ["# Headline figures", "",
           "Produced by `python benchmarks/headline.py` from the suite's tables (`python benchmarks/run.py`, "
           "500 repeats, 40 stages × 50 labels, deterministic oracle).", "", *lines]
    synth = sorted(f for f in os.listdir(args.results) if f.startswith("suite_f1_synthetic") and f.endswith(".csv"))
    if synth:
        out += ["", "| synthetic pool (`run.py --synthetic`) | design | MSE F1 @2000 | ÷ best of passive / static IS "
                "@500 / 1000 / 2000 | CLT coverage @500 / 1000 / 2000 | confidence sequence coverage @500 / 1000 / 2000 |",
                "|---|---|---|---|---|---|"]
        for f in synth:
            df = pd.read_csv(os.path.join(args.results, f)).set_index("design")
            for d in MAIN:
                if d not in df.index or d == "is-lam1":
                    continue
                r = df.loc[d]
                ratios = " / ".join(_f(r.get(f"ratio_baseline@{c}"), ".2g") for c in (500, 1000, 2000))
                clt = " / ".join(_f(r.get(f"coverage@{c}"), ".2f") for c in (500, 1000, 2000))
                cs = " / ".join(_f(r.get(f"coverage_cs@{c}"), ".2f") for c in (500, 1000, 2000))
                out.append(f"| {f[len('suite_f1_'):-4]} | {d} | {_f(r['mse@2000'], '.2g')} | {ratios} | {clt} | {cs} |")
    out += interval_table(os.path.join(args.results, "bayes_record"))
    out += stopping_table(os.path.join(args.results, "stages"))
    sp = os.path.join(args.results, "speed.json")
    if os.path.exists(sp):
        with open(sp) as fh:
            speed = json.load(fh)
        out += ["", "| speed: AIS depth 8, 2000 labels | design | items | vmapped repeats | ms per run "
                "| reference s per run | speed-up | total s |", "|---|---|---|---|---|---|---|---|"]
        for r in speed:
            out.append(f"| {r['pool']} | {r.get('design', 'ais8-tree-only')} | {r['n_items']} | {r['repeats']} | "
                       f"{1000 * r['sec_per_run']:.1f} | "
                       f"{_f(r.get('reference_sec_per_run'), '.1f')} | {_f(r.get('speedup'), '.0f')}× | "
                       f"{_f(r['sec_per_run'] * r['repeats'], '.1f')} |")
    sc = os.path.join(args.results, "scale.json")
    if os.path.exists(sc):
        with open(sc) as fh:
            scale = json.load(fh)
        out += ["", "| session scale | items | stage ms (next_batch 50 + ingest + update) | peak memory ÷ pool arrays "
                "| strata s |", "|---|---|---|---|---|"]
        for r in scale:
            if "error" in r:
                continue
            out.append(f"| synthetic | {r['n_items']:.0e} | {r['stage_ms_median']:.0f} | {r['peak_over_pool']:.2f} | "
                       f"{r['strata_s']:.1f} |")
    path = os.path.join(args.results, "headline.md")
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")
    print("\n".join(out))
    if args.readme:
        # the README carries the same tables between two markers
        with open(args.readme) as fh:
            text = fh.read()
        a, b = "<!-- headline:start -->", "<!-- headline:end -->"
        if a not in text or b not in text:
            raise SystemExit(f"{args.readme} has no {a} ... {b} block")
        body = "\n".join(out[4:])
        text = text[: text.index(a) + len(a)] + "\n" + body + "\n" + text[text.index(b):]
        with open(args.readme, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
