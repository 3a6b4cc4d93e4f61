"""Write the synthetic pools of ``benchmarks/run.py --synthetic`` (50%, 10%, 1%, demo) as
Parquet files so that ``bayes-eval simulate FILE`` can run on them; with ``--twin POOL K``
also POOL's *twin*: the same pool with K of its negatives below the top ``--top`` scores
turned positive, chosen uniformly at random (issue 15: a pool no design can tell from POOL
with a few thousand labels, whose F1 differs -- the negative control of any interval tuned
to POOL).

    python benchmarks/interval_study/make_pools.py /tmp/istudy
    python benchmarks/interval_study/make_pools.py /tmp/istudy --twin ../shared/data/abt-buy.parquet 20
    python benchmarks/interval_study/make_pools.py /tmp/istudy --bump ../shared/data/abt-buy.parquet 15 10000 12000

``--kinds``: the held-out kinds (:func:`held_out_kinds`: probability scores with heavy ties,
and a balanced pool of probability scores) instead of the synthetic pools.

``--bump POOL K LO HI``: POOL with K negatives ranked in [LO, HI) by score made positive -- a
bump of positives at low scores, where the positive rate is *not* monotone in the score (the
negative control of the monotone posterior models, ``monotone_restricted.py`` and
``monotone_chain.py`` beside this file).
"""
import os
import sys

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from run import synthetic_pool  # noqa: E402  (benchmarks/run.py)
from bayes_eval.pool import demo_pool  # noqa: E402


def twin(path, k, top=3000, seed=0):
    """POOL with ``k`` negatives ranked below ``top`` by score made positive (uniformly)."""
    df = pd.read_parquet(path)
    rank = np.argsort(np.argsort(-df["score"].to_numpy(), kind="stable"))
    cand = np.flatnonzero((rank >= top) & (df["label"].to_numpy() == 0))
    pick = np.random.default_rng(seed).choice(cand, size=k, replace=False)
    label = df["label"].to_numpy().astype(np.int8).copy()
    label[pick] = 1
    return df.assign(label=label)


def bump(path, k, lo, hi, seed=0):
    """POOL with ``k`` negatives ranked in [lo, hi) by score made positive (uniformly)."""
    df = pd.read_parquet(path)
    rank = np.argsort(np.argsort(-df["score"].to_numpy(), kind="stable"))
    cand = np.flatnonzero((rank >= lo) & (rank < hi) & (df["label"].to_numpy() == 0))
    pick = np.random.default_rng(seed).choice(cand, size=k, replace=False)
    label = df["label"].to_numpy().astype(np.int8).copy()
    label[pick] = 1
    return df.assign(label=label)


def held_out_kinds(seed=7):
    """Two pools of the kinds the project is also checked on and the shared pools are not
    (issue 15's held-out kinds), from one generator in this order:

    * ``prob_ties``: 40,000 items, 0.4% positive, *probability* scores of an over-confident
      classifier (sigmoid of twice the margin) rounded to two decimals -- 80 distinct
      scores, 30,000 items tied at 0.00 (a heavy-ties pool, probability-valued);
    * ``balanced_prob``: 20,000 items, 50% positive, probability scores.
    """
    rng = np.random.default_rng(seed)
    n = 40000
    y = (rng.random(n) < 0.004).astype(np.int8)
    s = np.where(y == 1, rng.normal(0.5, 1.3, n), rng.normal(-3.2, 0.8, n))
    p = np.round(1 / (1 + np.exp(-2.0 * s)), 2)
    yield "prob_ties", pd.DataFrame({"score": p, "pred": (p >= 0.5).astype(np.int8), "label": y})
    n = 20000
    y = (rng.random(n) < 0.5).astype(np.int8)
    s = np.where(y == 1, rng.normal(0.8, 1.0, n), rng.normal(-0.8, 1.0, n))
    p = 1 / (1 + np.exp(-s))
    yield "balanced_prob", pd.DataFrame({"score": p, "pred": (p >= 0.5).astype(np.int8), "label": y})


def main(out, twin_of=None, k=0, bump_range=None, kinds=False):
    os.makedirs(out, exist_ok=True)
    if kinds:
        for name, df in held_out_kinds():
            df.to_parquet(os.path.join(out, f"{name}.parquet"))
            print(name, len(df), int(df.label.sum()), "positives,", df.score.nunique(), "distinct scores")
        return
    if bump_range is not None:
        df = bump(twin_of, k, *bump_range)
        name = f"{os.path.splitext(os.path.basename(twin_of))[0]}-bump{k}"
        df.to_parquet(os.path.join(out, f"{name}.parquet"))
        print(name, len(df), int(df.label.sum()), "positives")
        return
    if twin_of is not None:
        df = twin(twin_of, k)
        name = f"{os.path.splitext(os.path.basename(twin_of))[0]}-twin{k}"
        df.to_parquet(os.path.join(out, f"{name}.parquet"))
        print(name, len(df), int(df.label.sum()), "positives")
        return
    pools = {f"p{p:g}": synthetic_pool(p) for p in (0.5, 0.1, 0.01)}
    pools["demo"] = demo_pool()
    for name, pool in pools.items():
        df = pd.DataFrame({"score": np.asarray(pool.scores[:, 0]), "pred": np.asarray(pool.preds[:, 0]).astype(np.int8),
                           "label": np.asarray(pool.labels).astype(np.int8)})
        df.to_parquet(os.path.join(out, f"{name}.parquet"))
        print(name, len(df), df.label.mean(), df.pred.mean())


def parse(argv=None):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default="/tmp/istudy", help="directory to write the Parquet pools to")
    ap.add_argument("--twin", nargs=2, metavar=("POOL", "K"), help="also POOL with K tail negatives made positive")
    ap.add_argument("--bump", nargs=4, metavar=("POOL", "K", "LO", "HI"),
                    help="POOL with K negatives ranked in [LO, HI) by score made positive")
    ap.add_argument("--kinds", action="store_true",
                    help="the held-out kinds instead: prob_ties (probability scores, heavy ties) and balanced_prob")
    return ap.parse_args(argv)


if __name__ == "__main__":
    a = parse()
    if a.kinds:
        main(a.out, kinds=True)
    elif a.bump:
        main(a.out, a.bump[0], int(a.bump[1]), (int(a.bump[2]), int(a.bump[3])))
    elif a.twin:
        main(a.out, a.twin[0], int(a.twin[1]))
    else:
        main(a.out)
