"""Stopping rules compared on saved per-stage intervals (issue 15, items 3 and 4).

    python benchmarks/stopping.py --bayes --repeats 100 --pools dblp-acm,abt-buy --designs ais --save-stages
    python benchmarks/stopping_rules.py benchmarks/results/stages/*_ais.npz [--out benchmarks/results/stopping_rules.md]

``benchmarks/stopping.py --save-stages`` keeps every stage's CLT interval, check and Bayesian
interval of each run (the expensive part: one posterior per stage and run); this script reads
them back and applies each rule at W = 0.1, 0.05, 0.02: the library's
(:func:`bayes_eval.results.stopping`: ``clt-cs`` with the CLT check, ``bayes``, ``bayes-cs``,
``bayes-stable``) and variants measured for the record (the Bayesian interval at most W wide
with the confidence sequence at most κW; narrow at k stage ends in a row).  A rule is honest
when the runs it stops hold the truth ≥ 93% of the time (or it stops none: honest by abstention).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bayes_eval.results import STABLE_STAGES, STOP_CHECK_MAX, StageRecord, covers, cs_bounds, stopping  # noqa: E402

WIDTHS = (0.1, 0.05, 0.02)


class SavedStages:
    """The parts of a SimResult that :func:`stopping` reads, from a saved .npz."""

    def __init__(self, path):
        z = np.load(path)
        self.history = StageRecord(n_labels=z["n_labels"], n_draws=z["n_draws"], value=z["value"], lower=z["lower"],
                                   upper=z["upper"], kl=None, n_class=z["n_class"],
                                   check=z["check"] if z["check"].size else None,
                                   # the estimate's sd and what the labels allow (bayes_eval.feasible; saved since stop 37)
                                   sd=z["sd"] if "sd" in z.files else None,
                                   feasible=z["feasible"] if "feasible" in z.files else None)
        self.true_value = z["true_value"]
        # the design, from the file's name (POOL_DESIGN.npz): read-first's Bayesian half depends on it
        self.design = os.path.basename(path)[:-len(".npz")].split("_")[-1]
        self.stage_bayes_lower, self.stage_bayes_upper = z["bayes_lower"], z["bayes_upper"]
        # where each stage's interval collapsed and was widened (posterior.resolved_interval; saved since stop 31)
        c = z["bayes_collapsed"] if "bayes_collapsed" in z.files else np.zeros(0)
        self.stage_bayes_collapsed = c if c.size else None
        # which Bayesian interval the stages hold (posterior.resolved_interval; recorded since stop 44)
        self.bayes_interval = str(z["bayes_interval"]) if "bayes_interval" in z.files else "equal-tailed"
        # the measure's range that stopping() clips the confidence sequence to (results.SimResult.bounds;
        # not saved: None leaves it as the stages hold it, cut to what the labels allow)
        self.bounds = z["bounds"] if "bounds" in z.files else None
        # posterior draws behind each stage's interval (SimResult.bayes_draws; saved since stop 90, None before --
        # the files named *-draws1000* have 1000, the others the simulation's 200)
        self.bayes_draws = (int(z["bayes_draws"]) or None) if "bayes_draws" in z.files else None


def _first(res, narrow, lo, hi):
    stopped = narrow.any(1)
    first = np.argmax(narrow, 1)
    r = np.arange(len(first))
    cov = np.all(covers(lo[r, first], hi[r, first], res.true_value[:lo.shape[2]]), axis=1)
    n = int(stopped.sum())
    return {"stopped": float(stopped.mean()), "coverage": float(cov[stopped].mean()) if n else None,
            "mean_labels": float(res.history.n_labels[r, first][stopped].mean()) if n else None, "stopped_runs": n}


def variant(res, w, kappa=None, consecutive=1, check_max=None):
    """The Bayesian interval ≤ w (and the confidence sequence ≤ κw; and the CLT check's variance ratio ≤
    ``check_max``, stop 86's lead: the demo pool's wrong stops had a ratio of ~98 against ~40), at
    ``consecutive`` stage ends in a row."""
    h = res.history
    m = h.value.shape[2]
    lo, hi = res.stage_bayes_lower[..., :m], res.stage_bayes_upper[..., :m]
    ok = np.all(hi - lo <= w, 2)
    if check_max is not None and h.check is not None:
        # a stage without a check (NaN) is not held back, as in the library's bayes-checked (results._narrow)
        chk = h.check[..., :m]
        ok &= np.all(np.isnan(chk) | (chk <= check_max), 2)
    if kappa is not None:
        cl, ch = cs_bounds(h.value, h.lower, h.upper, h.n_draws[..., None], sd=h.sd, feasible=h.feasible)
        ok &= np.all(np.where(np.isfinite(ch - cl), ch - cl, np.inf) <= kappa * w, 2)
    run = ok.copy()
    for k in range(1, consecutive):
        run[:, k:] &= ok[:, :-k]
        run[:, :k] = False
    return _first(res, run, lo, hi)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                  "stopping_rules_cells.md"))
    ap.add_argument("--all-rules", action="store_true",
                    help="also the variants measured before stop 87 (2 or 5 in a row, the CS gates)")
    a = ap.parse_args(argv)
    rules = [("clt-cs (with the CLT check)", lambda r, w: stopping(r, w, "clt-cs")),
             ("bayes", lambda r, w: stopping(r, w, "bayes")),
             (f"bayes-stable ({STABLE_STAGES} in a row)", lambda r, w: stopping(r, w, "bayes-stable")),
             (f"bayes-checked (check ratio ≤ {STOP_CHECK_MAX:g})", lambda r, w: stopping(r, w, "bayes-checked")),
             ("bayes & check ratio ≤ 30", lambda r, w: stopping(r, w, "bayes-checked", stop_check_max=30.0)),
             ("bayes & check ratio ≤ 100", lambda r, w: stopping(r, w, "bayes-checked", stop_check_max=100.0)),
             ("read-first, stops 62-86 (clt-cs where the check passes, else bayes-stable)",
              lambda r, w: stopping(r, w, "read-first", read_first_bayes="bayes-stable")),
             ("read-first, clt-cs where the check passes, else bayes-checked",
              lambda r, w: stopping(r, w, "read-first", read_first_bayes="bayes-checked")),
             ("read-first, clt-cs where the check passes, else bayes",
              lambda r, w: stopping(r, w, "read-first", read_first_bayes="bayes")),
             ("**read-first** (stop 88: else bayes-checked with ais, bayes with poisson-adaptive, bayes-stable "
              "otherwise)", lambda r, w: stopping(r, w, "read-first"))]
    if a.all_rules:
        rules += [("bayes-cs", lambda r, w: stopping(r, w, "bayes-cs")),
                  ("bayes, 2 in a row", lambda r, w: variant(r, w, consecutive=2)),
                  ("bayes, 5 in a row", lambda r, w: variant(r, w, consecutive=5)),
                  ("bayes & CS ≤ 1.5W", lambda r, w: variant(r, w, kappa=1.5)),
                  ("bayes & CS ≤ 2W", lambda r, w: variant(r, w, kappa=2.0)),
                  (f"bayes & check ratio ≤ 60, {STABLE_STAGES} in a row",
                   lambda r, w: variant(r, w, consecutive=STABLE_STAGES, check_max=60.0))]
    budgets = [int(np.max(SavedStages(f).history.n_labels)) for f in a.files]
    lines = [f"# Stopping rules on saved per-stage intervals (F1, at most {max(budgets)} labels a run, "
             f"batches of 50; the design is in each file's name)", "",
             "`python benchmarks/stopping_rules.py " + " ".join(a.files) + "`", "",
             "Per pool (`benchmarks/stopping.py --bayes --save-stages`; runs: "
             + ", ".join(f"{os.path.basename(f)[:-4]} {SavedStages(f).stage_bayes_lower.shape[0]}" for f in a.files)
             + "): share of runs stopped within "
             "the budget, coverage of the interval the rule stopped on over the stopped runs (runs), labels at the "
             "stop.  A rule is honest at W when its coverage is ≥ 0.93 or it stops no run.", "",
             "| pool | rule | " + " | ".join(f"W = {w:g}" for w in WIDTHS) + " |",
             "|---|---|" + "---|" * len(WIDTHS)]
    for path in a.files:
        res = SavedStages(path)
        name = os.path.basename(path)[:-4]
        for label, fn in rules:
            cells = []
            for w in WIDTHS:
                st = fn(res, w)
                cells.append("never" if not st["stopped_runs"] else
                             f"{st['stopped']:.2f}, {st['coverage']:.2f} ({st['stopped_runs']}), {st['mean_labels']:.0f}")
            lines.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
