"""Coverage of the Bayesian interval on pools of several classes (the calibrated model for C > 2,
``models/calibrated_classes.py``) beside AIS's CLT interval.

Pools (synthetic, seeded; the shared pools are binary):

* ``flat3``: 2,000 items, 3 balanced classes, predictions 80% right, the score uninformative
  (no probabilities: every unit's prior is the same) -- the pool of stop 52's finding;
* ``probs4``: 20,000 items, 4 classes with shares 0.6 / 0.25 / 0.1 / 0.05, softmax probabilities
  of a noisy linear classifier (calibrated), the predicted class the argmax, the score its
  probability;
* ``sharp4``: the same classifier's probabilities sharpened (temperature 0.4: overconfident),
  so the curve must recalibrate;
* ``conf4``: the ``probs4`` pool as a file of ``pred`` and ``score`` gives it (the score the
  predicted class's probability, no class probabilities);
* ``rare5``: 50,000 items, 5 classes, one of them 0.5% of the pool; ``conf5`` the same as a file
  of ``pred`` and ``score`` gives it;
* ``shift4``: the ``probs4`` mixture scored by a classifier that ignores the class shares (the
  Bayes classifier of balanced classes, as one trained on balanced data is): its probabilities
  are calibrated on no class of this pool alike -- the rare classes are predicted too often and
  too confidently (the new-user walk of stop 57 found the per-class precision intervals missing
  on such a pool); ``shiftconf4`` the same as a file of ``pred`` and ``score`` gives it.

Run: ``python benchmarks/interval_study/several_classes.py POOL [--measure macro_f1]
[--repeats 100] [--design ais] [--budget 1000] [--checkpoints 200,500,1000] [--model calibrated]
[--stop-widths 0.1,0.05] [--pool-seed S] [--realization] [--each-class] [--oracle stochastic]`` (``--pool-seed``: another realization of
the pool, its generator's seed; 0 the record's; ``--each-class``: also every class's F1, precision and recall
interval from the same posterior draws -- the session report's "Each class" table, ``per_class.per_class_table`` --
with the design run for macro-F1 as a session of it is; one line per class and checkpoint).
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np


def make_pool(name: str, seed: int = 0):
    from bayes_eval.pool import Pool

    rng = np.random.default_rng(seed)
    if name == "flat3":
        n = 2000
        y = rng.integers(0, 3, n)
        pred = np.where(rng.random(n) < 0.8, y, rng.integers(0, 3, n))
        return Pool.from_arrays(scores=rng.random(n), preds=pred, labels=y, n_classes=3, name=name)
    shares = {"probs4": [0.6, 0.25, 0.1, 0.05], "sharp4": [0.6, 0.25, 0.1, 0.05], "conf4": [0.6, 0.25, 0.1, 0.05],
              "rare5": [0.5, 0.3, 0.15, 0.045, 0.005], "conf5": [0.5, 0.3, 0.15, 0.045, 0.005],
              "shift4": [0.6, 0.25, 0.1, 0.05], "shiftconf4": [0.6, 0.25, 0.1, 0.05]}[name]
    n = 50000 if name in ("rare5", "conf5") else 20000
    c = len(shares)
    y = rng.choice(c, n, p=shares)
    means = rng.normal(0, 1.0, (c, 6)) * 1.6
    x = means[y] + rng.normal(0, 1.0, (n, 6))
    # the Bayes classifier of this Gaussian mixture: calibrated probabilities
    logit = -0.5 * ((x[:, None, :] - means[None]) ** 2).sum(-1)
    if name not in ("shift4", "shiftconf4"):        # shift*: the Bayes classifier of balanced classes
        logit = logit + np.log(shares)[None]
    if name == "sharp4":
        logit = logit / 0.4
    p = np.exp(logit - logit.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    pred = p.argmax(1)
    if name in ("conf4", "conf5", "shiftconf4"):   # as a file of pred and confidence gives it: no class probabilities
        return Pool.from_arrays(scores=p[np.arange(n), pred], preds=pred, labels=y, n_classes=c, name=name)
    return Pool.from_arrays(scores=p[np.arange(n), pred], preds=pred, probs=p, labels=y, n_classes=c, name=name)


def realization(pool, n_redraws: int = 2000, seed: int = 123):
    """Where the pool's macro-F1 sits among redraws of every item's label from its class
    probabilities (the generator's own: the Bayes classifier of the mixture): (truth, mean, sd,
    percentile) -- is a pool's shortfall its luck?"""
    p = np.asarray(pool.probs).reshape(-1, pool.n_classes)
    y, pred, c = np.asarray(pool.labels).ravel(), np.asarray(pool.preds).ravel(), pool.n_classes

    def macro_f1(lab):
        f = [2 * np.sum((lab == k) & (pred == k), -1)
             / np.maximum(np.sum((lab == k) | (pred == k), -1) + np.sum((lab == k) & (pred == k), -1), 1)
             for k in range(c)]
        return np.mean(f, 0)

    rng, cum, d = np.random.default_rng(seed), p.cumsum(1), []
    for _ in range(n_redraws // 100):
        d.append(macro_f1((rng.random((100, p.shape[0], 1)) > cum[None]).sum(-1)))
    d, t = np.concatenate(d), float(macro_f1(y))
    return t, float(d.mean()), float(d.std()), float(np.mean(d < t))


def _each_class_intervals(n_classes):
    """Make the simulation's posterior intervals also those of :func:`measures.per_class_scores`:
    its loss is macro-F1's (the same cells and draws), so the checkpoints' posterior draws give
    both g's at once.  The simulation keeps the measure's own intervals; the classes' go to the
    returned dict (``bayes_lower`` / ``bayes_upper``, (runs, checkpoints, 3C))."""
    import jax.numpy as jnp
    import bayes_eval.simulate as S
    from bayes_eval.measures import per_class_scores

    g_each, orig, out = per_class_scores(n_classes).g, S.intervals_at_checkpoints, {}

    def both(cells, model, g, n_strata, labeled, seed, n_draws, level=0.95, **kw):
        if out:                                       # the stages' posteriors (stopping): the measure's alone
            return orig(cells, model, g, n_strata, labeled, seed, n_draws, level, **kw)
        res = orig(cells, model, lambda r: jnp.concatenate([jnp.atleast_1d(g(r)), g_each(r)]), n_strata, labeled,
                   seed, n_draws, level, **kw)
        m = res["bayes_lower"].shape[-1] - 3 * n_classes
        out.update({k: res[k][..., m:] for k in ("bayes_lower", "bayes_upper")})
        return {k: (v[..., :m] if v.ndim == 3 else v) for k, v in res.items()}

    S.intervals_at_checkpoints = both
    return out


def _each_class_rows(args, pool, cps, each):
    """One row per class and checkpoint: each of F1 / precision / recall's coverage and mean width."""
    from bayes_eval.measures import per_class_scores

    c = pool.n_classes
    truth = np.asarray(pool.true_value(per_class_scores(c)))
    rows = []
    for i, cp in enumerate(cps):
        for k in range(c):
            row = {"pool": args.pool, "measure": "each_class", "design": args.design, "labels": cp, "class": k,
                   "share": round(float(np.mean(pool.labels == k)), 4)}
            for j, kind in enumerate(("f1", "precision", "recall")):
                t = truth[j * c + k]
                lo, hi = each["bayes_lower"][:, i, j * c + k], each["bayes_upper"][:, i, j * c + k]
                row[f"{kind}_truth"] = round(float(t), 4)
                row[f"{kind}_coverage"] = float(np.mean((lo <= t) & (t <= hi)))
                row[f"{kind}_width"] = float(np.mean(hi - lo))
                row[f"{kind}_above"] = float(np.mean(lo > t))
            rows.append(row)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("pool")
    ap.add_argument("--measure", default="macro_f1")
    ap.add_argument("--design", default="ais")
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--checkpoints", default="200,500,1000")
    ap.add_argument("--model", default="calibrated")
    ap.add_argument("--oracle", default="deterministic", choices=("deterministic", "stochastic"),
                    help="stochastic: every draw a label, the measure of the oracle's expected answer (stop 76)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pool-seed", type=int, default=0,
                    help="the pool's realization (its generator's seed; 0: the record's pool)")
    ap.add_argument("--stop-widths", default=None,
                    help="W[,W]: also stop each run at the first stage end where the interval read first "
                         "(read-first, and bayes-stable) is at most W wide (a posterior after every stage)")
    ap.add_argument("--realization", action="store_true",
                    help="print where the pool's macro-F1 sits among redraws of its labels from the class "
                         "probabilities, and stop (pools with probabilities: probs4, sharp4, rare5, shift4)")
    ap.add_argument("--each-class", action="store_true",
                    help="also each class's F1 / precision / recall coverage from the same posterior draws (the "
                         "report's 'Each class' table), the design run for --measure")
    args = ap.parse_args(argv)
    if args.realization:
        t, mean, sd, pct = realization(make_pool(args.pool, args.pool_seed))
        print(json.dumps({"pool": args.pool, "pool_seed": args.pool_seed, "truth": round(t, 4), "redraws_mean": round(mean, 4),
                          "redraws_sd": round(sd, 4), "percentile": round(pct, 3)}))
        return
    from bayes_eval.registry import measure_from_args
    from bayes_eval.simulate import run_simulation

    if args.each_class and args.oracle != "deterministic":
        ap.error("--each-class completes the pool from labeled items: a deterministic oracle's only")
    pool = make_pool(args.pool, args.pool_seed)
    measure = measure_from_args(args.measure, pool)
    cps = tuple(int(v) for v in args.checkpoints.split(","))
    each = _each_class_intervals(pool.n_classes) if args.each_class else None
    t0 = time.perf_counter()
    res, cells = run_simulation(pool, measure, args.design, budget=args.budget, repeats=args.repeats, seed=args.seed,
                                checkpoints=cps, bayes=True, posterior_model=args.model,
                                bayes_stages=args.stop_widths is not None,
                                **({"oracle": args.oracle} if args.oracle != "deterministic" else {}))
    truth = float(np.atleast_1d(res.true_value)[0])
    rows = []
    for i, cp in enumerate(cps):
        est = np.asarray(res.checkpoint_value)[:, i, 0]
        row = {"pool": args.pool, **({"pool_seed": args.pool_seed} if args.pool_seed else {}),
               **({"oracle": args.oracle} if args.oracle != "deterministic" else {}), "measure": args.measure, "design": args.design, "labels": cp, "truth": round(truth, 4),
               "rmse": float(np.sqrt(np.nanmean((est - truth) ** 2)))}
        for kind, lo, hi in (("clt", res.checkpoint_lower, res.checkpoint_upper), ("bayes", res.bayes_lower, res.bayes_upper)):
            if lo is None:
                continue
            lo_i, hi_i = np.asarray(lo)[:, i, 0], np.asarray(hi)[:, i, 0]
            row[f"{kind}_coverage"] = float(np.mean((lo_i <= truth) & (truth <= hi_i)))
            row[f"{kind}_width"] = float(np.mean(hi_i - lo_i))
            row[f"{kind}_above"] = float(np.mean(lo_i > truth))    # misses high: the interval above the truth
        rows.append(row)
    if each is not None:
        rows += _each_class_rows(args, pool, cps, each)
    if args.stop_widths:
        from bayes_eval.results import stopping

        for w in (float(v) for v in args.stop_widths.split(",")):
            for rule in ("read-first", "bayes-stable"):
                st = stopping(res, w, rule)
                rows.append({"pool": args.pool, "measure": args.measure, "stop_width": w, "rule": rule,
                             **{k: st[k] for k in ("stopped", "coverage", "coverage_se", "mean_labels", "stopped_runs")}})
    for r in rows:
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}))
    print(f"# {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
