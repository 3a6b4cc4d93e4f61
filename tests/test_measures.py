"""Tests for bayes_eval.measures: every built-in against a direct computation on a fully
labeled pool (scikit-learn as oracle where it exists), Jacobians against closed forms and
finite differences, stacking, patterns, registry and input handling."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn import metrics as skm

from bayes_eval import measures as M

N = 400
S = 3


@pytest.fixture(scope="module")
def binary_pool():
    rng = np.random.default_rng(20240501)
    y = (rng.random(N) < 0.3).astype(np.int64)
    # scores correlated with the label; rounded so that ties occur (exercises patterns)
    scores = np.round(rng.normal(size=(N, S)) + 1.2 * y[:, None], 1)
    preds = (scores > 0.4).astype(np.int64)
    w = rng.lognormal(sigma=1.5, size=N)
    feats = M.features_from_arrays(preds, scores)
    return dict(y=y, scores=scores, preds=preds, w=w, feats=feats)


@pytest.fixture(scope="module")
def multi_pool():
    rng = np.random.default_rng(7)
    C = 4
    y = rng.integers(0, C, N)
    noise = rng.integers(0, C, N)
    preds = np.where(rng.random((N, 2)) < 0.6, y[:, None], noise[:, None])
    logits = rng.normal(size=(N, 2, C)) + 2.0 * np.eye(C)[preds]
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    w = rng.lognormal(sigma=1.0, size=N)
    feats = M.features_from_arrays(preds, probs=probs, n_classes=C)
    return dict(y=y, preds=preds, probs=probs, w=w, C=C, feats=feats)


def _val(measure, pool, weights):
    return np.asarray(M.value(measure, pool["feats"], pool["y"], weights))


# --------------------------------------------------------------------------------------
# Table 1 measures against scikit-learn
# --------------------------------------------------------------------------------------
SK_BINARY = [
    (M.accuracy, skm.accuracy_score),
    (M.balanced_accuracy, skm.balanced_accuracy_score),
    (M.precision, skm.precision_score),
    (M.recall, skm.recall_score),
    (M.f1, skm.f1_score),
    (lambda system: M.f_beta(2.0, system), lambda y, p, **k: skm.fbeta_score(y, p, beta=2.0, **k)),
    (lambda system: M.f_beta(0.5, system), lambda y, p, **k: skm.fbeta_score(y, p, beta=0.5, **k)),
    (M.mcc, skm.matthews_corrcoef),
]


@pytest.mark.parametrize("system,weighted", [(0, False), (2, True)])
@pytest.mark.parametrize("factory,oracle", SK_BINARY)
def test_binary_measures_match_sklearn(binary_pool, factory, oracle, system, weighted):
    w = binary_pool["w"] if weighted else None
    m = factory(system=system)
    got = _val(m, binary_pool, w)
    want = oracle(binary_pool["y"], binary_pool["preds"][:, system], sample_weight=w)
    assert got.shape == (1,) and len(m.names) == 1
    np.testing.assert_allclose(got[0], want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("weighted", [False, True])
def test_fowlkes_mallows_direct(binary_pool, weighted):
    # sklearn's fowlkes_mallows_score is a clustering index (pairs of items), not TP/sqrt(PP·P)
    y, f = binary_pool["y"], binary_pool["preds"][:, 1]
    w = binary_pool["w"] if weighted else np.ones(N)
    tp, pp, pos = (w * y * f).sum(), (w * f).sum(), (w * y).sum()
    got = _val(M.fowlkes_mallows(system=1), binary_pool, binary_pool["w"] if weighted else None)
    np.testing.assert_allclose(got[0], tp / np.sqrt(pp * pos), rtol=1e-12)
    p = skm.precision_score(y, f, sample_weight=w)
    r = skm.recall_score(y, f, sample_weight=w)
    np.testing.assert_allclose(got[0], np.sqrt(p * r), rtol=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_brier_binary(binary_pool, weighted):
    w = binary_pool["w"] if weighted else None
    p1 = np.asarray(binary_pool["feats"].probs)[:, 0, 1]
    np.testing.assert_allclose(p1, 1 / (1 + np.exp(-binary_pool["scores"][:, 0])), rtol=1e-12)
    got = _val(M.brier(), binary_pool, w)
    want = 2 * skm.brier_score_loss(binary_pool["y"], p1, sample_weight=w)
    np.testing.assert_allclose(got[0], want, rtol=1e-12)


def test_brier_multiclass(multi_pool):
    C, y, w = multi_pool["C"], multi_pool["y"], multi_pool["w"]
    pr = multi_pool["probs"][:, 1, :]
    want = np.average(((pr - np.eye(C)[y]) ** 2).sum(-1), weights=w)
    got = _val(M.brier(system=1, n_classes=C), multi_pool, w)
    np.testing.assert_allclose(got[0], want, rtol=1e-12)


def test_accuracy_multiclass(multi_pool):
    C = multi_pool["C"]
    got = _val(M.accuracy(n_classes=C), multi_pool, multi_pool["w"])
    want = skm.accuracy_score(multi_pool["y"], multi_pool["preds"][:, 0], sample_weight=multi_pool["w"])
    np.testing.assert_allclose(got[0], want, rtol=1e-12)


# --------------------------------------------------------------------------------------
# Curves (001 Ex. 1)
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("weighted", [False, True])
def test_pr_curve_matches_sklearn(binary_pool, weighted):
    y, s = binary_pool["y"], binary_pool["scores"][:, 1]
    w = binary_pool["w"] if weighted else None
    prec, rec, thr = skm.precision_recall_curve(y, s, sample_weight=w)
    m = M.pr_curve(thr, system=1)
    got = _val(m, binary_pool, w)
    L = thr.size
    assert got.shape == (2 * L,) and len(m.names) == 2 * L
    assert m.names[0].startswith("precision@") and m.names[L].startswith("recall@")
    np.testing.assert_allclose(got[:L], prec[:-1], rtol=1e-12)
    np.testing.assert_allclose(got[L:], rec[:-1], rtol=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_roc_curve_matches_sklearn(binary_pool, weighted):
    y, s = binary_pool["y"], binary_pool["scores"][:, 0]
    w = binary_pool["w"] if weighted else None
    fpr, tpr, thr = skm.roc_curve(y, s, sample_weight=w, drop_intermediate=False)
    thr, fpr, tpr = thr[1:], fpr[1:], tpr[1:]  # thr[0] is +inf
    got = _val(M.roc_curve(thr), binary_pool, w)
    L = thr.size
    np.testing.assert_allclose(got[:L], tpr, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got[L:], fpr, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("weighted", [False, True])
def test_auc_exact_grid_matches_roc_auc_score(binary_pool, weighted):
    y, s = binary_pool["y"], binary_pool["scores"][:, 2]
    w = binary_pool["w"] if weighted else None
    grid = np.unique(s)[::-1]  # every distinct score, in any order
    got = _val(M.auc(grid, system=2), binary_pool, w)
    np.testing.assert_allclose(got[0], skm.roc_auc_score(y, s, sample_weight=w), rtol=1e-12)


def test_auc_coarse_grid_is_trapezoid_of_roc_points(binary_pool):
    y, s, w = binary_pool["y"], binary_pool["scores"][:, 0], binary_pool["w"]
    thr = M.default_thresholds(s, 7)
    roc = _val(M.roc_curve(thr), binary_pool, w)
    tpr, fpr = roc[:7], roc[7:]
    xs = np.r_[0.0, fpr[::-1], 1.0]
    ys = np.r_[0.0, tpr[::-1], 1.0]
    want = np.sum(np.diff(xs) * (ys[1:] + ys[:-1]) / 2)
    got = _val(M.auc(thr), binary_pool, w)
    np.testing.assert_allclose(got[0], want, rtol=1e-12)
    # direct numpy ROC points
    pos = (w * y).sum()
    for k, t in enumerate(thr):
        np.testing.assert_allclose(tpr[k], (w * y * (s >= t)).sum() / pos, rtol=1e-12)


def test_pr_curve_direct_at_default_thresholds(binary_pool):
    y, s, w = binary_pool["y"], binary_pool["scores"][:, 0], binary_pool["w"]
    thr = M.default_thresholds(s, 16)
    got = _val(M.pr_curve(thr), binary_pool, w)
    for k, t in enumerate(thr):
        a = s >= t
        np.testing.assert_allclose(got[k], (w * y * a).sum() / (w * a).sum(), rtol=1e-12)
        np.testing.assert_allclose(got[16 + k], (w * y * a).sum() / (w * y).sum(), rtol=1e-12)


def test_default_thresholds():
    s = np.random.default_rng(1).normal(size=1000)
    t = M.default_thresholds(s, 1024)
    assert t.shape == (1024,) and np.all(np.diff(t) >= 0)
    assert t[0] == s.min() and t[-1] == s.max()
    np.testing.assert_allclose(t[511], np.quantile(s, 511 / 1023))
    u = M.default_thresholds(s, 5, spacing="uniform")
    np.testing.assert_allclose(u, np.linspace(s.min(), s.max(), 5))
    with pytest.raises(ValueError):
        M.default_thresholds(s, 5, spacing="log")
    with pytest.raises(ValueError):
        M.default_thresholds(s, 0)


# --------------------------------------------------------------------------------------
# Multi-class (000 App. D)
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("system", [0, 1])
def test_macro_micro_f1_match_sklearn(multi_pool, system, weighted):
    C, y = multi_pool["C"], multi_pool["y"]
    f = multi_pool["preds"][:, system]
    w = multi_pool["w"] if weighted else None
    got_ma = _val(M.macro_f1(C, system=system), multi_pool, w)
    got_mi = _val(M.micro_f1(C, system=system), multi_pool, w)
    np.testing.assert_allclose(got_ma[0], skm.f1_score(y, f, average="macro", sample_weight=w), rtol=1e-12)
    np.testing.assert_allclose(got_mi[0], skm.f1_score(y, f, average="micro", sample_weight=w), rtol=1e-12)
    np.testing.assert_allclose(got_mi[0], skm.accuracy_score(y, f, sample_weight=w), rtol=1e-12)


def test_macro_f1_of_means_000_eq102(multi_pool):
    C, y, f, w = multi_pool["C"], multi_pool["y"], multi_pool["preds"][:, 0], multi_pool["w"]
    P = skm.precision_score(y, f, average="macro", sample_weight=w)
    R = skm.recall_score(y, f, average="macro", sample_weight=w)
    got = _val(M.macro_f1(C, definition="f1_of_means"), multi_pool, w)
    np.testing.assert_allclose(got[0], 2 * P * R / (P + R), rtol=1e-12)
    with pytest.raises(ValueError):
        M.macro_f1(C, definition="weighted")


def test_macro_f1_binary_equals_sklearn(binary_pool):
    got = _val(M.macro_f1(2, system=1), binary_pool, None)
    want = skm.f1_score(binary_pool["y"], binary_pool["preds"][:, 1], average="macro")
    np.testing.assert_allclose(got[0], want, rtol=1e-12)


# --------------------------------------------------------------------------------------
# Jacobians
# --------------------------------------------------------------------------------------
def _fd_jacobian(g, R, h=1e-6):
    R = np.asarray(R, dtype=np.float64)
    g = jax.jit(g)
    cols = []
    for j in range(R.size):
        e = np.zeros_like(R)
        e[j] = h
        cols.append((np.asarray(g(jnp.asarray(R + e))) - np.asarray(g(jnp.asarray(R - e)))) / (2 * h))
    return np.stack(cols, axis=-1)


def test_f1_jacobian_closed_form_and_fd(binary_pool):
    m = M.f1()
    R = np.asarray(M.risk(m, binary_pool["feats"], binary_pool["y"], binary_pool["w"]))
    J = np.asarray(M.jacobian(m, R))
    assert J.shape == (1, 2)
    np.testing.assert_allclose(J, [[1 / R[1], -R[0] / R[1] ** 2]], rtol=1e-12)
    np.testing.assert_allclose(J, _fd_jacobian(m.g, R), rtol=1e-6)


@pytest.mark.parametrize(
    "factory",
    [
        M.accuracy, M.balanced_accuracy, M.precision, M.recall, M.mcc, M.fowlkes_mallows,
        M.brier, lambda: M.f_beta(2.0), lambda: M.auc(np.linspace(-1, 2, 5)),
        lambda: M.pr_curve([0.0, 0.5, 1.0]), lambda: M.roc_curve([0.0, 0.5, 1.0]),
        lambda: M.macro_f1(2), lambda: M.micro_f1(2),
        lambda: M.macro_f1(2, definition="f1_of_means"),
    ],
)
def test_jacobians_match_finite_differences(binary_pool, factory):
    m = factory()
    R = np.asarray(M.risk(m, binary_pool["feats"], binary_pool["y"], binary_pool["w"]))
    J = np.asarray(M.jacobian(m, R))
    assert J.shape == (len(m.names), R.size)
    np.testing.assert_allclose(J, _fd_jacobian(m.g, R), rtol=1e-5, atol=1e-7)


def test_user_defined_g(binary_pool):
    base = M.f1()
    m = M.Measure("custom", base.loss, lambda R: R[:1] / R[1:2] ** 2, 2, ("custom",), base.pattern)
    R = np.asarray(M.risk(m, binary_pool["feats"], binary_pool["y"]))
    np.testing.assert_allclose(np.asarray(M.value(m, binary_pool["feats"], binary_pool["y"])), [R[0] / R[1] ** 2])
    J = np.asarray(M.jacobian(m, R))
    np.testing.assert_allclose(J, [[1 / R[1] ** 2, -2 * R[0] / R[1] ** 3]], rtol=1e-12)
    # scalar-returning g is promoted to 1-D
    m0 = m._replace(g=lambda R: R[0] / R[1])
    assert M.value(m0, binary_pool["feats"], binary_pool["y"]).shape == (1,)
    assert M.jacobian(m0, R).shape == (1, 2)


# --------------------------------------------------------------------------------------
# Stacking
# --------------------------------------------------------------------------------------
def test_stack_two_systems_equals_separate(binary_pool):
    feats, y, w = binary_pool["feats"], binary_pool["y"], binary_pool["w"]
    a, b = M.f1(system=0), M.f1(system=1)
    st = M.stack(a, b)
    got = np.asarray(M.value(st, feats, y, w))
    want = np.r_[np.asarray(M.value(a, feats, y, w)), np.asarray(M.value(b, feats, y, w))]
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert st.names == ("f1", "f1[s1]") and st.n_classes == 2
    assert np.asarray(st.loss(feats)).shape == (N, 2, 4)
    R = M.risk(st, feats, y, w)
    J = np.asarray(M.jacobian(st, R))
    np.testing.assert_allclose(J[0, 2:], 0.0)
    np.testing.assert_allclose(J[1, :2], 0.0)
    np.testing.assert_allclose(J[1, 2:], np.asarray(M.jacobian(b, R[2:]))[0], rtol=1e-14)


def test_stack_mixed_measures_and_names(binary_pool):
    feats, y = binary_pool["feats"], binary_pool["y"]
    thr = [0.0, 1.0]
    parts = [M.precision(), M.recall(), M.pr_curve(thr), M.brier(), M.f1()]
    st = M.stack(*parts)
    got = np.asarray(M.value(st, feats, y))
    want = np.concatenate([np.asarray(M.value(p, feats, y)) for p in parts])
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert len(st.names) == got.size
    assert st.pattern is None  # brier has none
    dup = M.stack(M.f1(), M.f1())
    assert dup.names == ("f1#0", "f1#1")
    with pytest.raises(ValueError, match="n_classes"):
        M.stack(M.f1(), M.macro_f1(3))
    with pytest.raises(ValueError):
        M.stack()


# --------------------------------------------------------------------------------------
# Patterns
# --------------------------------------------------------------------------------------
PATTERN_FACTORIES = [
    M.accuracy, M.balanced_accuracy, M.precision, M.recall, M.f1, M.mcc, M.fowlkes_mallows,
    lambda: M.f_beta(3.0, system=2),
    lambda: M.pr_curve(np.linspace(-1, 2, 9), system=1),
    lambda: M.roc_curve([0.5, -0.5, 1.5]),  # unsorted grid
    lambda: M.auc(np.linspace(-1, 2, 9)),
    lambda: M.macro_f1(2, system=1),
    lambda: M.stack(M.f1(system=0), M.f1(system=1), M.pr_curve([0.0, 0.7], system=2)),
]


def _check_pattern_groups(m, feats):
    ids = m.pattern(feats)
    assert isinstance(ids, np.ndarray) and ids.shape == (N,) and ids.dtype == np.int64
    lo = np.asarray(m.loss(feats))
    uniq = np.unique(ids)
    assert uniq.size < N  # there is real compression on this pool
    for u in uniq:
        rows = lo[ids == u]
        np.testing.assert_array_equal(rows, np.broadcast_to(rows[:1], rows.shape))
    return ids


@pytest.mark.parametrize("factory", PATTERN_FACTORIES)
def test_pattern_groups_identical_loss_rows(binary_pool, factory):
    m = factory()
    assert m.pattern is not None
    _check_pattern_groups(m, binary_pool["feats"])


def test_pattern_multiclass_and_stack_is_finest(multi_pool):
    C, feats = multi_pool["C"], multi_pool["feats"]
    a, b = M.micro_f1(C, system=0), M.macro_f1(C, system=1)
    st = M.stack(a, b)
    ids = _check_pattern_groups(st, feats)
    # combined ids are exactly the pairs of sub-ids
    pairs = set(zip(a.pattern(feats).tolist(), b.pattern(feats).tolist()))
    assert np.unique(ids).size == len(pairs)
    assert M.brier().pattern is None


def test_curve_pattern_counts_thresholds_passed(binary_pool):
    thr = np.array([0.3, -0.2, 1.0])
    s = binary_pool["scores"][:, 0]
    ids = M.pr_curve(thr).pattern(binary_pool["feats"])
    np.testing.assert_array_equal(ids, (s[:, None] >= thr[None, :]).sum(1))


# --------------------------------------------------------------------------------------
# Loss shapes, jit / vmap, nan on zero denominators
# --------------------------------------------------------------------------------------
def test_loss_shapes_and_dtype(binary_pool, multi_pool):
    f = binary_pool["feats"]
    assert M.f1().loss(f).shape == (N, 2, 2)
    assert M.mcc().loss(f).shape == (N, 2, 3)
    assert M.pr_curve(np.arange(5.0)).loss(f).shape == (N, 2, 11)
    assert M.brier().loss(f).shape == (N, 2, 1)
    C = multi_pool["C"]
    lo = M.macro_f1(C).loss(multi_pool["feats"])
    assert lo.shape == (N, C, 3 * C) and lo.dtype == jnp.float64
    # ℓ(x, y) for y = 0 and y = 1 of F1: [y f, (y + f)/2]
    lo = np.asarray(M.f1(system=1).loss(f))
    fp = binary_pool["preds"][:, 1]
    np.testing.assert_array_equal(lo[:, 0, :], np.stack([0 * fp, fp / 2], -1))
    np.testing.assert_array_equal(lo[:, 1, :], np.stack([fp, (1 + fp) / 2], -1))


def test_jit_and_vmap(binary_pool):
    feats, y, w = binary_pool["feats"], binary_pool["y"], binary_pool["w"]
    m = M.stack(M.mcc(), M.auc(np.linspace(-1, 2, 6)), M.f1(system=2))
    R = M.risk(m, feats, y, w)
    np.testing.assert_allclose(jax.jit(m.g)(R), m.g(R), rtol=1e-14)
    np.testing.assert_allclose(jax.jit(m.loss)(feats), m.loss(feats))
    Rs = jnp.stack([R, R * 0.99, R * 1.01])
    np.testing.assert_allclose(jax.jit(jax.vmap(m.g))(Rs)[1], m.g(R * 0.99), rtol=1e-14)
    jitted_value = jax.jit(lambda f, yy, ww: M.value(m, f, yy, ww))
    np.testing.assert_allclose(jitted_value(feats, jnp.asarray(y), jnp.asarray(w)), M.value(m, feats, y, w), rtol=1e-13)
    np.testing.assert_allclose(jax.jit(lambda r: M.jacobian(m, r))(R), M.jacobian(m, R), rtol=1e-13)


def test_zero_denominator_is_nan():
    feats = M.features_from_arrays(np.zeros(5, int), np.linspace(0, 1, 5))
    y = np.array([0, 1, 0, 1, 0])
    assert np.isnan(np.asarray(M.value(M.precision(), feats, y))[0])
    assert np.asarray(M.value(M.recall(), feats, y))[0] == 0.0
    assert np.isnan(np.asarray(M.value(M.recall(), feats, np.zeros(5, int)))[0])
    pr = np.asarray(M.value(M.pr_curve([0.5, 2.0]), feats, y))
    assert np.isnan(pr[1]) and not np.isnan(pr[0])


def test_extreme_weights(binary_pool):
    y, f = binary_pool["y"], binary_pool["preds"][:, 0]
    w = np.where(np.arange(N) % 50 == 0, 1e6, 1e-3)
    got = _val(M.f1(), binary_pool, w)
    np.testing.assert_allclose(got[0], skm.f1_score(y, f, sample_weight=w), rtol=1e-10)


# --------------------------------------------------------------------------------------
# Registry and input handling
# --------------------------------------------------------------------------------------
def test_get_registry(binary_pool):
    kw = {
        "fbeta": dict(beta=2.0),
        "pr_curve": dict(thresholds=[0.0, 1.0]),
        "roc_curve": dict(thresholds=[0.0, 1.0]),
        "auc": dict(thresholds=[0.0, 1.0]),
        "macro_f1": dict(n_classes=2),
        "micro_f1": dict(n_classes=2),
    }
    expected = {
        "accuracy", "balanced_accuracy", "precision", "recall", "f1", "fbeta", "mcc",
        "fowlkes_mallows", "brier", "pr_curve", "roc_curve", "auc", "macro_f1", "micro_f1",
    }
    assert set(M.MEASURE_NAMES) == expected
    for name in M.MEASURE_NAMES:
        m = M.get(name, **kw.get(name, {}))
        assert isinstance(m, M.Measure)
        v = np.asarray(M.value(m, binary_pool["feats"], binary_pool["y"]))
        assert v.ndim == 1 and v.size == len(m.names) and np.all(np.isfinite(v))
    assert M.get("f1", system=1).names == ("f1[s1]",)
    assert M.get("fbeta", beta=1.0).name == "f1"
    assert M.get("fbeta", beta=0.5).name == "f0.5"
    with pytest.raises(ValueError, match="valid names:.*accuracy.*micro_f1"):
        M.get("f2_score")


def test_features_from_arrays_shapes_and_defaults():
    preds = np.array([0, 1, 1, 0])
    f = M.features_from_arrays(preds)
    assert f.preds.shape == (4, 1) and f.preds.dtype == jnp.int64
    np.testing.assert_array_equal(f.scores[:, 0], preds.astype(float))
    assert f.probs.shape == (4, 1, 2) and f.probs.dtype == jnp.float64
    np.testing.assert_allclose(f.probs[:, 0, 1], 1 / (1 + np.exp(-preds)))
    np.testing.assert_allclose(np.asarray(f.probs).sum(-1), 1.0)
    # binary p1 given with the shape of preds
    f = M.features_from_arrays(np.c_[preds, 1 - preds], probs=np.c_[[0.1, 0.9, 0.8, 0.3], [0.5] * 4])
    assert f.probs.shape == (4, 2, 2)
    np.testing.assert_allclose(f.probs[:, 0, 1], [0.1, 0.9, 0.8, 0.3])
    # multi-class (n, C) with 1-D preds, and one-hot default
    f = M.features_from_arrays([0, 2, 1], probs=np.full((3, 3), 1 / 3), n_classes=3)
    assert f.probs.shape == (3, 1, 3)
    f = M.features_from_arrays([0, 2, 1], n_classes=3)
    np.testing.assert_array_equal(f.probs[:, 0, :], np.eye(3)[[0, 2, 1]])
    # integral floats / bools accepted
    assert M.features_from_arrays(np.array([0.0, 1.0])).preds.dtype == jnp.int64
    assert M.features_from_arrays(np.array([True, False])).preds.tolist() == [[1], [0]]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(preds=[0, 2, 1]), "row 1"),
        (dict(preds=[0, 0.5]), "row 1"),
        (dict(preds=[0, 1], scores=[0.1, 0.2, 0.3]), "rows"),
        (dict(preds=np.zeros((2, 2, 2), int)), "shape"),
        (dict(preds=[0, 1], probs=np.ones((2, 3))), "probs"),
        (dict(preds=[0, 1], n_classes=1), "n_classes"),
    ],
)
def test_features_from_arrays_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        M.features_from_arrays(**kwargs)


def test_features_not_called_is_named(binary_pool):
    # Pool.features is a method; passed uncalled it used to fail deep inside with
    # "'function' object has no attribute 'preds'"
    from bayes_eval.pool import Pool

    pool = Pool.from_arrays(scores=np.asarray(binary_pool["feats"].scores)[:, 0], labels=binary_pool["y"], threshold=0.0)
    with pytest.raises(TypeError, match=r"call it, `pool.features\(\)`"):
        M.value(M.f1(), pool.features, binary_pool["y"])
    with pytest.raises(TypeError, match="got ndarray"):
        M.value(M.f1(), np.zeros(N), binary_pool["y"])
    assert np.isfinite(np.asarray(M.value(M.f1(), pool.features(), binary_pool["y"]))).all()


def test_bad_arguments(binary_pool):
    feats = binary_pool["feats"]
    with pytest.raises(ValueError, match="row 3"):
        M.value(M.f1(), feats, np.r_[0, 0, 0, 2, np.zeros(N - 4, int)])
    with pytest.raises(ValueError, match="shape"):
        M.value(M.f1(), feats, np.zeros(N - 1, int))
    with pytest.raises(ValueError, match="weights"):
        M.value(M.f1(), feats, binary_pool["y"], np.ones(3))
    with pytest.raises(ValueError):
        M.f_beta(0.0)
    with pytest.raises(ValueError):
        M.f1(system=-1)
    with pytest.raises(ValueError):
        M.pr_curve([])
    with pytest.raises(ValueError):
        M.pr_curve([0.0, np.nan])


def test_threshold_names_unique_even_with_ties():
    m = M.pr_curve([0.1, 0.1, 0.30000000000000004, 0.3])
    assert len(set(m.names)) == len(m.names) == 8


def test_factories_are_memoized():
    # equal arguments give the same Measure, so jitted code keyed on it compiles once
    assert M.f1() is M.f1()
    assert M.f_beta(2) is M.f_beta(2.0)
    thr = np.linspace(0, 1, 4)
    assert M.pr_curve(thr) is M.pr_curve(list(thr))
    assert M.stack(M.f1(), M.mcc(1)) is M.stack(M.f1(), M.mcc(1))
    assert M.f1(system=1) is not M.f1()


@pytest.mark.parametrize(
    "factory",
    [lambda: M.mcc(system=1), lambda: M.pr_curve(np.linspace(-1, 2, 9), system=2),
     lambda: M.macro_f1(2), lambda: M.stack(M.f1(), M.auc([0.0, 0.5]))],
)
def test_risk_cell_compression_equals_direct_sum(binary_pool, factory):
    m = factory()
    feats, y, w = binary_pool["feats"], binary_pool["y"], binary_pool["w"]
    direct = m._replace(pattern=None)
    for ww in (None, w):
        np.testing.assert_allclose(
            M.risk(m, feats, y, ww), M.risk(direct, feats, y, ww), rtol=1e-13, atol=1e-16
        )
