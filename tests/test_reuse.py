"""Sample reuse (001 §3.3.1): a measure the design did not draw for, estimated from its draws --
only where its proposal covers the measure's support (``bayes_eval.reuse``), and then projected
onto what the labels allow (the report's PR curve of a session created for F1)."""
import numpy as np

import bayes_eval as be
from bayes_eval import measures as M
from bayes_eval.reuse import loss_dims_used, reuse_support


def test_reuse_support_by_hand():
    """Precision at a threshold counts every item above it; recall only the positives.  A cell of
    predicted negatives that the proposal never draws (q = 0) and that lies above the threshold
    leaves the precision uncovered (its denominator counts that cell) but not the recall, unless
    the cell may hold positives; a labeled negative's class with q = 0 is harmless where its loss
    is 0 there."""
    pr = M.pr_curve(np.array([0.0]))         # components: precision@0, recall@0; loss [f_t, y f_t, y]
    # cells: 0 above t (f_t = 1), 1 above t, 2 below t (f_t = 0)
    loss = np.zeros((3, 2, 3))
    for x, ft in enumerate([1, 1, 0]):
        for y in (0, 1):
            loss[x, y] = [ft, y * ft, y]
    unl = np.array([0, 5, 5])
    lab = np.array([[4, 1], [0, 0], [0, 0]])
    q_unl = np.array([0.1, 0.1, 0.1])
    q_lab = np.array([[0.1, 0.1], [0.1, 0.1], [0.1, 0.1]])
    np.testing.assert_array_equal(reuse_support(pr.g, loss, unl, lab, q_unl, q_lab), [True, True])
    # cell 1's unlabeled items never drawn: they may be of either class -> both components blind
    np.testing.assert_array_equal(reuse_support(pr.g, loss, unl, lab, np.array([0.1, 0.0, 0.1]), q_lab),
                                  [False, False])
    # cell 0's labeled negatives never drawn: precision counts them (f_t = 1), recall does not (y = 0)
    q0 = q_lab.copy()
    q0[0, 0] = 0.0
    np.testing.assert_array_equal(reuse_support(pr.g, loss, unl, lab, q_unl, q0), [False, True])
    # cell 2's labeled negatives below t never drawn: loss 0 at their class -> nothing blind
    lab2, q2 = lab.copy(), q_lab.copy()
    lab2[2, 0], q2[2, 0] = 3, 0.0
    np.testing.assert_array_equal(reuse_support(pr.g, loss, unl, lab2, q_unl, q2), [True, True])
    used = loss_dims_used(pr.g, loss, lab + unl[:, None] / 2)
    np.testing.assert_array_equal(used, [[True, True, False], [False, True, True]])


def test_the_reports_pr_curve_is_exact_on_a_fully_labeled_pool(tmp_path):
    """The report's PR curve of an AIS session created for F1, with every item labeled: where the
    draws cover a threshold's support the estimate is the truth and the CLT band is cut to it;
    below the session's threshold AIS draws no known negative, so precision there has no design
    estimate (NaN) -- the raw importance-weighted one is far off there (the negative control,
    0.28 for 0.11 in the new-user walk of stop 57)."""
    from bayes_eval.session_report_cli import _pr_curve_table

    rng = np.random.default_rng(3)
    n = 300
    y = (rng.random(n) < 0.12).astype(int)
    score = np.where(y == 1, rng.normal(1.0, 1.0, n), rng.normal(-1.5, 1.0, n))
    pool = be.Pool.from_arrays(scores=score, preds=(score >= 0).astype(int), labels=y)
    s = be.Session.create(str(tmp_path / "r.db"), pool, "f1", "ais", seed=0)
    s.run(lambda b: pool.labels[pool.index_of(b["item"].to_numpy())], budget=n, batch=60)
    assert s.n_labels == n
    df = _pr_curve_table(s, 16, 0.95, bayesian=False)
    t = M.default_thresholds(np.asarray(pool.scores[:, 0]), 16, spacing="uniform")
    pr = M.pr_curve(t)
    truth = np.asarray(pool.true_value(pr))
    L = len(t)
    got = np.concatenate([df["precision"], df["recall"]])
    lo = np.concatenate([df["precision_lower"], df["recall_lower"]])
    hi = np.concatenate([df["precision_upper"], df["recall_upper"]])
    ok = np.isfinite(got)
    assert ok[L:].all() and ok[:L].sum() >= L // 3, ok       # recall everywhere, precision above the threshold
    np.testing.assert_allclose(got[ok], truth[ok], atol=1e-9)
    np.testing.assert_allclose(lo[ok], truth[ok], atol=1e-9)
    np.testing.assert_allclose(hi[ok], truth[ok], atol=1e-9)
    blind = ~ok[:L]
    assert blind.any() and np.all(t[blind] < 0), t[blind]     # only below the session's threshold
    raw = np.asarray(s.estimate_draws(pr).value)[:L]
    assert np.nanmax(np.abs(raw[blind] - truth[:L][blind])) > 0.05
    s.close()
