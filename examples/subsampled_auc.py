"""AUC from data whose negatives were thinned, and how many negatives to keep (seed 004).

    .venv/bin/python examples/subsampled_auc.py [--rows 100000] [--keep-rate 0.02] [--budget 2000] [--seed 0]

A synthetic scored set (``--rows`` rows, 2% positives); its negatives are kept with
probability ``--keep-rate``.  Printed:

1. the AUC of the kept rows (unbiased under oblivious thinning: the weights cancel) with the
   three intervals of ``subsampled_auc.auc`` — DeLong (CLT, truth = the full data), DeLong
   and Hanley–McNeil (CLT, truth = the population) and the Agarwal et al. deviation bound
   (distribution-free, at δ = 0.05: a bound, far wider) — beside the full data's AUC;
2. a score-dependent thinning (each row kept with its own probability, higher for high
   scores): the unweighted AUC is then biased, the weighted one (``keep_prob=``) is not;
3. the planning tool (``subsampled_auc.plan``): for a budget of ``--budget`` labeled rows, the
   bound's width and the CLT width at several positive shares ρ, and the best choice (ρ = 1/2,
   the seed's 1:1, when enough positives exist) with how many negatives to keep and at which
   keep rate.

``main(argv)`` returns the numbers it prints (the test reads them).
"""
import argparse

import numpy as np

from bayes_eval import subsampled_auc as SA


def show(label, est, truth):
    lo, hi = est.interval[0][0], est.interval[1][0]
    print(f"  {label:<40} {est.estimate[0]:.4f}  [{lo:.4f}, {hi:.4f}]  ({est.interval_kind})"
          f"  {'covers' if lo <= truth <= hi else 'MISSES'} {truth:.4f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--keep-rate", type=float, default=0.02)
    ap.add_argument("--budget", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    y = (rng.random(a.rows) < 0.02).astype(int)
    s = rng.normal(size=a.rows) + 1.5 * y
    truth = SA.auc(y, s).estimate[0]
    l = a.keep_rate
    keep = (y == 1) | (rng.random(a.rows) < l)
    print(f"1. {a.rows:,} rows, {int(y.sum()):,} positives, full-data AUC {truth:.4f}; negatives kept with "
          f"probability l = {l}: {int(keep.sum()):,} rows")
    out = {"truth": truth}
    for label, kw in (("DeLong, truth = the full data", {"interval": "delong"}),
                      ("DeLong, truth = the population", {"interval": "delong", "target": "population"}),
                      ("Hanley-McNeil (population)", {"interval": "hanley-mcneil"}),
                      ("Agarwal et al. bound, delta = 0.05", {"interval": "agarwal"})):
        est = SA.auc(y[keep], s[keep], keep_rate=l, **kw)
        show(label, est, truth)
        out[kw["interval"] + ("-pop" if "target" in kw else "")] = est

    b = np.clip(0.01 + 0.5 / (1 + np.exp(-2 * (s - 1))), 0, 1)  # kept more often at high scores
    b[y == 1] = 1.0
    k2 = rng.random(a.rows) < b
    w = SA.auc(y[k2], s[k2], keep_prob=b[k2])
    u = SA.auc(y[k2], s[k2], target="population")  # as if nothing had been thinned: plain i.i.d. DeLong
    print(f"\n2. negatives kept with a score-dependent probability (0.01 .. 0.51): {int(k2.sum()):,} rows")
    show("weighted (keep_prob = each row's b)", w, truth)
    show("unweighted (wrong)", u, truth)
    out.update(score_weighted=w, score_unweighted=u)

    n_pos = int(y.sum())
    p = SA.plan(a.budget, n_pos_available=n_pos, n_neg_available=int((y == 0).sum()), auc_guess=truth)
    t = p["table"]
    print(f"\n3. planning a labeled set of {a.budget:,} rows ({n_pos:,} positives available), delta = {p['delta']}:")
    print("  rho    positives  negatives  neg. keep rate  bound width  CLT width  feasible")
    for i in range(len(t["rho"])):
        if round(t["rho"][i] * 50) % 5 == 0 or abs(t["rho"][i] - p["best"]["rho"]) < 1e-9:
            print(f"  {t['rho'][i]:<5.2f}  {t['n_pos'][i]:>9}  {t['n_neg_keep'][i]:>9}  {t['neg_keep_rate'][i]:>14.5f}"
                  f"  {t['bound_width'][i]:>11.4f}  {t['clt_width'][i]:>9.4f}  {bool(t['feasible'][i])}")
    bst = p["best"]
    print(f"  best: rho = {bst['rho']:.3f}: {bst['n_pos']} positives, keep {bst['n_neg_keep']} negatives "
          f"(keep rate {bst['neg_keep_rate']:.5f}); bound width {bst['bound_width']:.4f}, "
          f"CLT width {bst['clt_width']:.4f}")
    ok = np.flatnonzero(t["feasible"])
    j = ok[np.argmin(t["clt_width"][ok])]
    print(f"  (the bound is narrowest at 1:1 whatever the AUC; the CLT width at AUC {truth:.2f} is narrowest "
          f"at rho = {t['rho'][j]:.2f}, width {t['clt_width'][j]:.4f})")
    out["plan"] = p
    return out


if __name__ == "__main__":
    main()
