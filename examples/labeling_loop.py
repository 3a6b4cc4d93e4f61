"""A scripted labeling loop: a Python function plays the annotator.

    python examples/labeling_loop.py [POOL.parquet] [--budget 1000] [--batch 50] [--db loop.db] [--target-width W]
                                     [--design ais]

Without a pool file it uses the built-in synthetic demo pool, whose known labels play the
oracle.  The session lives in one SQLite file: stop the script at any point (even with
kill -9) and run it again — it reopens the file and carries on exactly where it stopped.
With ``--target-width W`` the loop stops earlier, once the stopping rule of ``bayes-eval session
status --target-width`` is met (for AIS and the Poisson designs: the Bayesian interval, the one
the status reads first, at most W wide after each of the last 3 stages).
"""
import argparse
import os

import bayes_eval as be
from bayes_eval import measures as M
from bayes_eval.session_cli_text import stopping_line
from bayes_eval.session import Session


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("pool", nargs="?", default=None)
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--design", default="ais")
    ap.add_argument("--db", default="labeling_loop.db")
    ap.add_argument("--target-width", type=float, default=None, help="stop once the interval is this narrow")
    args = ap.parse_args(argv)
    pool = be.demo_pool() if args.pool is None else be.Pool.from_file(args.pool)

    def oracle(batch):
        """The annotator: here the pool's ground truth; in real life, a person or a model."""
        return pool.labels[pool.index_of(batch["item"].to_numpy())]

    if os.path.exists(args.db):
        session = Session.open(args.db, pool)                      # resume where it stopped
    else:
        session = Session.create(args.db, pool, ["f1", "precision", "recall"], args.design, seed=0)

    while session.n_labels < args.budget:                           # the loop, spelled out
        batch = session.next_batch(min(args.batch, args.budget - session.n_labels))
        if batch.empty:
            break
        session.add_labels(batch["item"], oracle(batch))            # one transaction per batch
        if args.target_width and session.stopping(args.target_width)["reached"]:
            break                                                   # narrow enough: stop labeling
    # (or simply: session.run(oracle, budget=args.budget, batch=args.batch, target_width=args.target_width))

    print(session.summary().round(4).to_string(index=False))
    truth = pool.true_value(M.stack(*session.measures))
    print("true values:", {c: round(float(v), 4) for c, v in zip(session.components, truth)})
    w = args.target_width or 0.05
    stop = session.stopping(target_width=w)                        # the rule session status --target-width applies
    print(f"{session.n_labels} labels; {stopping_line(stop, 95)}")   # as session status prints it
    session.close()


if __name__ == "__main__":
    main()
