"""Score strata (CSF, 001 §5.2) and the tree over them."""
import numpy as np
import pytest

from bayes_eval.strata import csf_strata, tree_shape, uniform_strata


def _check_partition(st, scores):
    assert st.sizes.sum() == scores.size
    assert np.all(st.sizes > 0)
    np.testing.assert_array_equal(np.bincount(st.index, minlength=st.n_strata), st.sizes)
    # score order: every stratum's scores lie above the previous stratum's
    assert np.all(st.lower[1:] > st.upper[:-1])


def test_csf_partition_in_score_order():
    rng = np.random.default_rng(1)
    s = np.concatenate([rng.normal(-3, 0.5, 20000), rng.normal(1, 1, 100)])
    st = csf_strata(s, 256)
    _check_partition(st, s)
    assert 50 <= st.n_strata <= 256
    # CSF puts relatively more strata in the sparse tail than equal-frequency binning
    assert st.sizes[-1] < s.size / 256
    tail = st.lower > 0
    assert tail.sum() >= 10  # the 100 high scores get many narrow strata
    # a fine histogram of one item per bin degenerates to equal-frequency strata
    eq = csf_strata(s, 256, n_fine=10**6)
    assert eq.sizes[-1] > st.sizes[-1]


def test_keep_empty_keeps_codes_in_place():
    rng = np.random.default_rng(2)
    s = np.concatenate([rng.normal(-3, 0.5, 5000), rng.normal(1, 1, 30)])
    dense = csf_strata(s, 64)
    full = csf_strata(s, 64, keep_empty=True)
    assert full.n_strata == 64 and full.sizes.sum() == s.size
    assert (full.sizes == 0).sum() == 64 - dense.n_strata
    # same partition, codes in score order
    np.testing.assert_array_equal(np.unique(full.index, return_inverse=True)[1].reshape(-1), dense.index)
    assert np.all(np.diff(full.index[np.argsort(s)]) >= 0)


def test_ties_share_a_stratum():
    s = np.repeat(np.arange(10.0), 100)
    st = csf_strata(s, 256)
    _check_partition(st, s)
    for v in range(10):
        assert np.unique(st.index[s == v]).size == 1


def test_fewer_distinct_scores_than_strata():
    s = np.array([0.0, 0.0, 1.0, 2.0, 2.0, 2.0])
    st = csf_strata(s, 256)
    _check_partition(st, s)
    assert st.n_strata <= 3
    st1 = csf_strata(np.zeros(50), 8)
    assert st1.n_strata == 1


def test_uniform_strata():
    s = np.linspace(0, 1, 1000)
    st = uniform_strata(s, 10)
    _check_partition(st, s)
    assert st.n_strata == 10
    np.testing.assert_array_equal(st.sizes, 100)


def test_stratify_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        csf_strata(np.array([]), 4)
    with pytest.raises(ValueError, match="finite"):
        csf_strata(np.array([0.0, np.nan]), 4)


def test_tree_shape():
    assert tree_shape(256, depth=8) == (8, 2)
    assert tree_shape(200, depth=8).n_leaves >= 200
    assert tree_shape(256, depth=1) == (1, 256)
    assert tree_shape(256, depth=4) == (4, 4)
    with pytest.raises(ValueError, match="fewer than"):
        tree_shape(300, depth=8, branching=2)
