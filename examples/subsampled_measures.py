"""F1 and precision from thinned data, and from a session's labeled sample (seed 004).

    .venv/bin/python examples/subsampled_measures.py [--rows 40000] [--keep-rate 0.05] [--seed 0]

1. A synthetic evaluation set (``--rows`` rows, 5% positives) whose negatives are kept with
   probability ``--keep-rate`` (positives all kept) is written as a frame with columns
   ``score, pred, label``.  F1 and precision come from it three ways: weighted
   (``subsampled_frame.estimate(frame, m, keep_rate=l)``: Horvitz–Thompson / Hájek with the
   delta method), and, as the mistake this module exists to avoid, unweighted with the
   plain i.i.d. interval (as if nothing had been thinned).  Both are printed beside the full data's value.
2. A labeled sample of a ``poisson`` session on a pool with known labels: one round of
   ``next_batch`` (its ``q`` column is each item's inclusion probability), labeled from the
   truth, fed to ``subsampled_frame.from_session_sample`` — the same entry point.

Runs in a few seconds; ``main(argv)`` returns the numbers it prints (the test reads them).
"""
import argparse
import os
import tempfile

import numpy as np
import pandas as pd

from bayes_eval import subsampled_frame as SF
from bayes_eval.pool import Pool
from bayes_eval.session import Session


def show(label, est, truth=None):
    lo, hi = est.interval[0][0], est.interval[1][0]
    t = "" if truth is None else f"   full data {truth:.4f}  {'inside' if lo <= truth <= hi else 'OUTSIDE'}"
    print(f"  {label:<28} {est.estimate[0]:.4f}  95% [{lo:.4f}, {hi:.4f}]  ({est.interval_kind}){t}")


def synthetic(n, seed):
    """``n`` rows, 5% positives, a margin score and a classifier with false positives."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.05).astype(int)
    s = rng.normal(size=n) + 2.0 * y
    return pd.DataFrame({"score": s, "pred": (s >= 1.2).astype(int), "label": y})


def thinned(args):
    rng = np.random.default_rng([args.seed, 1])
    n = args.rows
    full = synthetic(n, args.seed)
    y = full.label.to_numpy()
    keep = (full.label == 1) | (rng.random(n) < args.keep_rate)
    frame = full[keep].reset_index(drop=True)
    print(f"1. {n:,} rows, {int(y.sum()):,} positives; negatives kept with probability l = {args.keep_rate}: "
          f"{len(frame):,} rows kept")
    out = {}
    for m in ("f1", "precision"):
        truth = SF.estimate(full, m).estimate[0]  # nothing thinned: the full data's value, exactly
        w = SF.estimate(frame, m, keep_rate=args.keep_rate)
        # the mistake: the kept rows read as if nothing had been thinned, with the plain i.i.d.
        # interval (target="population" with unit weights: the delta method over i.i.d. rows)
        u = SF.estimate(frame, m, target="population")
        print(f" {m}")
        show("weighted (keep_rate=l)", w, truth)
        show("unweighted (wrong)", u, truth)
        out[m] = {"truth": truth, "weighted": w, "unweighted": u}
    w = out["f1"]["weighted"]
    print(f"  effective size η = {w.effective_n:,.0f} rows (the full data had {n:,}); "
          f"Kish size {w.extra['kish_n']:,.0f}; CLT ok: {w.extra['clt_ok']}")
    return out


def session_sample(args):
    full = synthetic(20_000, args.seed + 7)
    pool = Pool.from_arrays(scores=full.score.to_numpy(), preds=full.pred.to_numpy(), labels=full.label.to_numpy())
    db = os.path.join(tempfile.mkdtemp(), "sample.db")
    # a session seed other than the pool's: stage 0 of a session with seed k draws its uniforms
    # from SeedSequence([k, 0]), the same stream as np.random.default_rng(k)
    with Session.create(db, pool, "f1", "poisson", seed=args.seed + 1) as s:
        batch = s.next_batch(400)  # one round: distinct items, q = their inclusion probability
        labels = pool.labels[pool.index_of(batch["item"].to_numpy())]
        s.add_labels(batch["item"], labels)
    rows = pool.index_of(batch["item"].to_numpy())
    frame = pd.DataFrame({"score": pool.scores[rows, 0], "pred": pool.preds[rows, 0], "label": labels,
                          "q": batch["q"].to_numpy()})
    print(f"\n2. a poisson session on a {pool.n_items:,}-item pool: one round of {len(frame)} labeled items "
          f"(q from {frame.q.min():.3g} to {frame.q.max():.3g})")
    out = {}
    for m in ("f1", "precision"):
        truth = SF.estimate(full, m).estimate[0]
        est = SF.from_session_sample(frame, m)  # keep_prob = the q column
        print(f" {m}")
        show("from_session_sample", est, truth)
        out[m] = {"truth": truth, "estimate": est}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=40_000)
    ap.add_argument("--keep-rate", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    return {"thinned": thinned(args), "session": session_sample(args)}


if __name__ == "__main__":
    main()
