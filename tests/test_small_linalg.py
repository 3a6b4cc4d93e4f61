"""The models' plain-JAX linear algebra (``models/small_linalg.py``) and the property it exists
for: the calibrated model's vmapped programs hold no LAPACK custom call (jaxlib's batched LAPACK
kernels can deadlock XLA's CPU thread pool under vmap; the module docstring)."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_eval.models import calibrated as cal
from bayes_eval.models import small_linalg as sl


def _spd(rng, n, cond=1e4):
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (q * np.geomspace(1.0, cond, n)) @ q.T


@pytest.mark.parametrize("n", [1, 3, 9, 20])
def test_factor_solves_inverse_and_logdet_match_numpy(n):
    rng = np.random.default_rng(n)
    a = _spd(rng, n)
    b = rng.normal(size=(n, 4))
    factor = np.asarray(sl.cholesky(jnp.asarray(a)))
    np.testing.assert_allclose(factor, np.linalg.cholesky(a), rtol=1e-9, atol=1e-9 * np.abs(factor).max())
    assert np.all(np.triu(factor, 1) == 0)
    np.testing.assert_allclose(np.asarray(sl.cho_solve(jnp.asarray(factor), jnp.asarray(b))), np.linalg.solve(a, b),
                               rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(np.asarray(sl.solve_lower(jnp.asarray(factor), jnp.asarray(b[:, 0]))),
                               np.linalg.solve(factor, b[:, 0]), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(sl.solve_lower_transpose(jnp.asarray(factor), jnp.asarray(b))),
                               np.linalg.solve(factor.T, b), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(sl.spd_inverse(jnp.asarray(a))), np.linalg.inv(a), rtol=1e-7, atol=1e-11)
    assert abs(float(sl.logdet_of_factor(jnp.asarray(factor))) - np.linalg.slogdet(a)[1]) < 1e-9 * max(1, n)
    assert bool(sl.is_factor(jnp.asarray(factor)))


def test_not_positive_definite_is_flagged():
    rng = np.random.default_rng(7)
    for n in (2, 5, 12):
        s = rng.normal(size=(n, n))
        s = s + s.T
        top = np.linalg.eigvalsh(s).max()
        shifted = s - (top + 1e-3) * np.eye(n)         # negative definite: -shifted is PD
        assert bool(sl.is_factor(sl.cholesky(jnp.asarray(-shifted))))
        indefinite = s - (np.linalg.eigvalsh(s)[n // 2]) * np.eye(n)
        assert not bool(sl.is_factor(sl.cholesky(jnp.asarray(indefinite))))
        assert not bool(sl.is_factor(sl.cholesky(jnp.asarray(-np.eye(n)))))


@pytest.mark.parametrize("n", [1, 2, 3, 9, 19])
def test_jacobi_eigenvalues_match_lapack(n):
    """Symmetric matrices as the Newton steps meet them (indefinite, ill-conditioned, repeated
    eigenvalues, diagonal): eigenvalues within 1e-12 ‖a‖ of numpy's."""
    rng = np.random.default_rng(10 + n)
    s = rng.normal(size=(n, n))
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    cases = [s + s.T, -_spd(rng, n, 1e8), (q * np.r_[np.full(n - n // 2, 2.0), np.full(n // 2, -1.0)]) @ q.T,
             np.diag(rng.normal(size=n)), np.zeros((n, n))]
    for a in cases:
        got = np.asarray(sl.eigvalsh(jnp.asarray(a)))
        np.testing.assert_allclose(got, np.linalg.eigvalsh(a), rtol=0, atol=1e-12 * max(1.0, np.abs(a).max()))


def test_batched_under_vmap_matches_one_at_a_time():
    rng = np.random.default_rng(3)
    a = np.stack([_spd(rng, 6, 100) for _ in range(5)])
    got = np.asarray(jax.jit(jax.vmap(sl.spd_inverse))(jnp.asarray(a)))
    np.testing.assert_allclose(got, np.linalg.inv(a), rtol=1e-8, atol=1e-12)


def test_the_calibrated_models_vmapped_fit_and_sampler_hold_no_lapack_call():
    """The grid posterior (five scales of the band walk) vmapped over repeats, as the SBC and the
    simulation run it: its lowered program calls no LAPACK kernel (``lapack_*_ffi``) — the
    calls that hung the default tier's SBC fixture at stop 59."""
    k = 12
    z = np.linspace(-4, 2, k)
    lp = np.stack([1 / (1 + np.exp(z)), 1 / (1 + np.exp(-z))], -1)
    model = cal.calibrated_model(lp, bands=cal.BANDS, band_scale=(0.5, 1.0, 2.0))
    fixed = cal.calibrated_model(lp, bands=cal.BANDS, band_scale=1.0)

    def one(key, counts):
        unl = jnp.full(k, 50.0)
        return model.sample(key, counts, unl, 20)["pi"], fixed.sample(key, counts, unl, 20)["pi"]

    counts = jnp.asarray(np.stack([np.full((k,), 5.0), np.arange(k, dtype=float)], -1))
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    text = jax.jit(jax.vmap(one, in_axes=(0, None))).lower(keys, counts).as_text()
    calls = set(re.findall(r"custom_call @(\w+)", text))
    assert not {c for c in calls if "lapack" in c or "blas" in c}, calls
