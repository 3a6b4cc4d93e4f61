"""Write the synthetic pools of ``benchmarks/run.py --synthetic`` (50%, 10%, 1%, demo) as
Parquet files so that ``bayes-eval simulate FILE`` can run on them.

    python benchmarks/interval_study/make_pools.py /tmp/istudy
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


def main(out):
    os.makedirs(out, exist_ok=True)
    pools = {f"p{p:g}": synthetic_pool(p) for p in (0.5, 0.1, 0.01)}
    pools["demo"] = demo_pool()
    for name, pool in pools.items():
        df = pd.DataFrame({"score": np.asarray(pool.scores[:, 0]), "pred": np.asarray(pool.preds[:, 0]).astype(np.int8),
                           "label": np.asarray(pool.labels).astype(np.int8)})
        df.to_parquet(os.path.join(out, f"{name}.parquet"))
        print(name, len(df), df.label.mean(), df.pred.mean())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/istudy")
