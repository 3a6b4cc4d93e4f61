"""Variants of the error split of the several-class model (``models/calibrated_classes.py``), run
through ``several_classes.py`` on the same AIS runs as the library (stop 65).

    python benchmarks/interval_study/error_split_variants.py VARIANT POOL [several_classes.py's flags]
    python benchmarks/interval_study/error_split_variants.py true-split shiftconf4 --repeats 100 --each-class

The designs' label choices do not read the variants (the model's label-free ``predictive`` and the
companion model are untouched; ``classes_pi`` / ``error_posterior`` are only read by the finite-pool
posterior), so each variant's runs are the library's, label for label, and a row of this script pairs
with the same row of ``several_classes.py POOL`` (same flags, same seed).

Variants (each replaces one function of :mod:`bayes_eval.models.calibrated_classes` for the run):

* ``library``: nothing replaced (the control);
* ``true-split``: every draw's error split φ_t is the pool's own (its confusion matrix's rows without
  the diagonal, normalised) -- the ceiling of any error-split prior: what is left is the top split's;
* ``row-weight``: the prediction rates' weight w learned per row (uniform on ``SHARE_WEIGHTS`` in each
  top class's row; η shared: the rows' likelihoods factor given η, so η's posterior is the product
  over rows of each row's sum over w, then each row's w from its conditional) instead of one w for all;
* ``mass-grid[:m1,m2,..]``: the prior's mass m × (C − 1) learned beside (w, η) on their product grid
  (default m on 0.1, 0.3, 1, 3; stop 55 measured it with the shares alone; ``mass-grid:0.3,1`` is the
  library since stop 65, ``calibrated_classes.SHARE_MASSES``, and ``mass-grid:1`` stop 64's model);
* ``row-mass[:m1,..]``: the mass learned per row, (w, η) shared (as ``row-weight`` factors);
* ``band-split[:B]``: an error split per band of the top class's confidence (B bands, default 2), pooled
  across a row's bands by a learned λ (stop 66; :func:`band_split`);
* ``weighted-labels``: each row's wrong labels reweighted by their unit's size over its labels (000 §2's
  ratio estimate) before they enter the Dirichlet-multinomial, their total kept -- whether the design's
  uneven labeling within a top class biases the split (AIS labels a row's low-confidence units most).

``row-weight``, ``row-mass`` and ``weighted-labels`` build on stop 64's model (the mass fixed at 1, whatever
``SHARE_MASSES`` says); stop 65 measured every variant against stop 64's model (``several_classes.md``).
"""
from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

DEFAULT_MASSES = (0.1, 0.3, 1.0, 3.0)


def _row_log_likelihood(a, wrong):
    """(…, C): each row's Dirichlet-multinomial log likelihood of ``wrong`` (C, C) under ``a`` (…, C, C)."""
    import jax
    import jax.numpy as jnp

    gl = jax.scipy.special.gammaln
    on = a > 0
    a_safe = jnp.where(on, a, 1.0)
    return (gl(a.sum(-1)) - gl(a.sum(-1) + wrong.sum(-1))
            + jnp.sum(jnp.where(on, gl(a_safe + wrong) - gl(a_safe), 0.0), axis=-1))


def _bases(CC, p, counts, unit_size):
    """(W, C, C) α_t(w) of the library for every w of ``SHARE_WEIGHTS``."""
    import jax
    import jax.numpy as jnp

    parts = CC._base_parts(p, counts, unit_size)
    return jax.vmap(lambda w: CC._mixed_base(parts, w))(jnp.asarray(CC.SHARE_WEIGHTS, dtype=jnp.float64))


def _pi(CC, p, rho, phi):
    import jax.numpy as jnp

    top = CC.top_classes(p)
    on_top = jnp.asarray(np.eye(p.shape[1])[top])
    return rho[..., None] * on_top + (1.0 - rho)[..., None] * phi[:, top, :]


def true_split(CC, pool):
    import jax.numpy as jnp

    y, pred, c = np.asarray(pool.labels).ravel(), np.asarray(pool.preds).ravel(), pool.n_classes
    conf = np.zeros((c, c))
    np.add.at(conf, (pred, y), 1.0)
    np.fill_diagonal(conf, 0.0)
    truth = jnp.asarray(conf / np.maximum(conf.sum(1, keepdims=True), 1.0))
    lib = CC.classes_pi

    def classes_pi(key, leaf_probs, counts, rho, unit_size=None):
        _, phi, eta, w, m = lib(key, leaf_probs, counts, rho, unit_size)
        phi = jnp.broadcast_to(truth, phi.shape)
        return _pi(CC, np.asarray(leaf_probs, np.float64), rho, phi), phi, eta, w, m
    CC.classes_pi = classes_pi


def _per_row(CC, row_grid):
    """``classes_pi`` with one factor of the prior learned per row: ``row_grid(p, counts, unit_size)`` gives
    the Dirichlet parameters (S, R, C, C) on a shared grid S times a per-row grid R, each shared point's
    (w, η) (S,) and the per-row factor's values (R,) where it is w, then where it is the mass (else None);
    uniform priors; the shared point from its exact marginal, then each row's point given it.  The draws'
    w and m: the rows' mean."""
    import jax
    import jax.numpy as jnp

    lib = CC.classes_pi

    def classes_pi(key, leaf_probs, counts, rho, unit_size=None):
        if unit_size is None:
            return lib(key, leaf_probs, counts, rho, unit_size)
        p = np.asarray(leaf_probs, np.float64)
        c = p.shape[1]
        wrong = CC.wrong_labels(p, counts)
        a, w_of, eta_of, row_w, row_m = row_grid(p, counts, unit_size)         # (S, R, C, C), (S,), (S,), (R,) | None
        rows = _row_log_likelihood(a, wrong)                                      # (S, R, C)
        shared = jax.scipy.special.logsumexp(rows, axis=1).sum(-1)               # (S,)
        k1, k2, k3 = jax.random.split(key, 3)
        s = jax.random.categorical(k1, jax.nn.log_softmax(shared), shape=(rho.shape[0],))
        r = jax.random.categorical(k2, jnp.moveaxis(rows[s], 1, -1))             # (n, C)
        alpha = jnp.where(a > 0, a + wrong, 0.0)[s[:, None], r, jnp.arange(c)[None, :]]
        phi = CC._gamma_split(k3, alpha)
        return (_pi(CC, p, rho, phi), phi, eta_of[s], (w_of[s] if row_w is None else row_w[r].mean(-1)),
                jnp.ones_like(eta_of[s]) if row_m is None else row_m[r].mean(-1))
    CC.classes_pi = classes_pi


def row_weight(CC):
    import jax.numpy as jnp

    ws, etas = jnp.asarray(CC.SHARE_WEIGHTS, dtype=jnp.float64), jnp.asarray(CC.SPREAD_GRID, dtype=jnp.float64)

    def grid(p, counts, unit_size):
        a = jnp.moveaxis(jax_spread(CC, _bases(CC, p, counts, unit_size)), 0, 1)   # (E, W, C, C): η shared, w per row
        return a, jnp.zeros_like(etas), etas, ws, None
    _per_row(CC, grid)


def jax_spread(CC, bases):
    import jax

    return jax.vmap(CC.spread_alphas)(bases)                                     # (W, E, C, C)


def row_mass(CC, masses):
    import jax.numpy as jnp

    m = jnp.asarray(masses, dtype=jnp.float64)
    ws, etas = jnp.asarray(CC.SHARE_WEIGHTS, dtype=jnp.float64), jnp.asarray(CC.SPREAD_GRID, dtype=jnp.float64)

    def grid(p, counts, unit_size):
        bases = _bases(CC, p, counts, unit_size)[:, None] * m[None, :, None, None]        # (W, M, C, C)
        a = bases[:, :, None] + etas[None, None, :, None, None] * (bases > 0)[:, :, None]  # (W, M, E, C, C)
        a = jnp.moveaxis(a, 1, 2).reshape((-1, m.shape[0]) + a.shape[-2:])                # (W·E, M, C, C)
        return a, jnp.repeat(ws, etas.shape[0]), jnp.tile(etas, ws.shape[0]), None, m
    _per_row(CC, grid)


def mass_grid(CC, masses):
    import jax
    import jax.numpy as jnp

    m = jnp.asarray(masses, dtype=jnp.float64)
    n_e = len(CC.SPREAD_GRID)

    def error_posterior(leaf_probs, counts, unit_size=None):
        p = np.asarray(leaf_probs, np.float64)
        wrong = CC.wrong_labels(p, counts)
        if unit_size is None:
            bases = jnp.broadcast_to(jnp.asarray(CC.error_prior(p)), (len(CC.SHARE_WEIGHTS),) + (p.shape[1],) * 2)
        else:
            bases = _bases(CC, p, counts, unit_size)
        bases = (bases[:, None] * m[None, :, None, None]).reshape((-1,) + bases.shape[1:])   # (W·M, C, C)
        a = jax_spread(CC, bases)
        log_lik = jax.vmap(lambda b: CC.spread_log_likelihood(b, wrong))(bases)
        a = a.reshape((-1,) + a.shape[2:])
        return jnp.where(a > 0, a + wrong[None], 0.0), jax.nn.log_softmax(log_lik.reshape(-1))

    def grid_point(g):
        g = jnp.asarray(g)
        return (jnp.asarray(CC.SHARE_WEIGHTS, dtype=jnp.float64)[g // (n_e * m.shape[0])], m[(g // n_e) % m.shape[0]],
                jnp.asarray(CC.SPREAD_GRID, dtype=jnp.float64)[g % n_e])
    CC.error_posterior, CC.grid_point = error_posterior, grid_point


def weighted_labels(CC):
    import jax
    import jax.numpy as jnp

    def error_posterior(leaf_probs, counts, unit_size=None):
        p = np.asarray(leaf_probs, np.float64)
        raw = CC.wrong_labels(p, counts)
        if unit_size is None:
            wrong = raw
            bases = jnp.broadcast_to(jnp.asarray(CC.error_prior(p)), (len(CC.SHARE_WEIGHTS),) + (p.shape[1],) * 2)
        else:
            cnt = jnp.asarray(counts, dtype=jnp.float64)
            n = cnt.sum(1)
            scale = jnp.where(n > 0, jnp.asarray(unit_size, dtype=jnp.float64) / jnp.maximum(n, 1.0), 0.0)
            ht = CC.wrong_labels(p, cnt * scale[:, None])
            wrong = ht / jnp.maximum(ht.sum(1, keepdims=True), 1e-300) * raw.sum(1, keepdims=True)
            bases = _bases(CC, p, counts, unit_size)
        a = jax_spread(CC, bases)
        log_lik = jax.vmap(lambda b: CC.spread_log_likelihood(b, wrong))(bases)
        a = a.reshape((-1,) + a.shape[2:])
        return jnp.where(a > 0, a + wrong[None], 0.0), jax.nn.log_softmax(log_lik.reshape(-1))

    def grid_point(g):                 # the grid of stop 64: (w, η), the mass 1
        g = jnp.asarray(g)
        e = len(CC.SPREAD_GRID)
        return (jnp.asarray(CC.SHARE_WEIGHTS, dtype=jnp.float64)[g // e], jnp.ones(g.shape),
                jnp.asarray(CC.SPREAD_GRID, dtype=jnp.float64)[g % e])
    CC.error_posterior, CC.grid_point = error_posterior, grid_point


LAMBDAS = (0.0, 0.3, 1.0)


def band_split(CC, n_bands: int = 2, lambdas=LAMBDAS):
    """The error split per band of the top class's confidence (stop 66): each top class's units cut
    into ``n_bands`` bands at the item-weighted quantiles of their top-class probability; band b of
    top class t has its own split φ_{t,b} ~ Dirichlet(m α_t(w) + η + λ · the row's wrong labels in
    its other bands + its own), λ on ``lambdas`` (0: the bands apart; 1: each band's prior holds the
    rest of the row's labels, the library's pooling) learned beside (w, m, η) from the bands'
    leave-one-band-out Dirichlet-multinomial likelihood (a pseudo-likelihood: empirical Bayes).
    Why: AIS labels a top class's low-confidence units most, and on ``conf5`` the class mix of a top
    class's errors changes with its confidence (top class 2: class 3 is 55% of the errors in its
    lowest quartile of confidence, 68% in the highest)."""
    import jax
    import jax.numpy as jnp
    from bayes_eval import posterior
    from bayes_eval.models import registry as RG

    lam = jnp.asarray(lambdas, dtype=jnp.float64)
    gl = jax.scipy.special.gammaln
    lib_factory = RG.calibrated_classes_model

    def factory(leaf_probs, **kw):
        lib = lib_factory(leaf_probs, **kw)
        p = np.asarray(leaf_probs, np.float64)
        k, c = p.shape
        top = CC.top_classes(p)
        conf = p[np.arange(k), top]
        top_j = jnp.asarray(top, dtype=jnp.int32)
        on_top = jnp.asarray(np.eye(c)[top])
        order = np.lexsort((conf, top))                  # units by row, then confidence

        def bands(size):
            """(K,) each unit's band: cut at the item-weighted quantiles of its row's confidence."""
            size = jnp.asarray(size, dtype=jnp.float64)[order]
            row = jnp.asarray(top[order])
            tot = jax.ops.segment_sum(size, row, num_segments=c)
            before = jnp.cumsum(size) - size - (jnp.cumsum(tot) - tot)[row]   # items of the row before the unit
            mid = (before + 0.5 * size) / jnp.maximum(tot[row], 1e-300)
            b_sorted = jnp.clip(jnp.floor(mid * n_bands), 0, n_bands - 1).astype(jnp.int32)
            return jnp.zeros(k, jnp.int32).at[jnp.asarray(order)].set(b_sorted)

        def sample(key, counts, unlabeled, n_draws, state=None):
            k0, k1, k2, k3 = jax.random.split(key, 4)
            s = lib.sample(k0, counts, unlabeled, n_draws, state)
            counts = jnp.asarray(counts, dtype=jnp.float64)
            size = CC.unit_sizes(counts, unlabeled)
            band = bands(size)
            cell = top_j * n_bands + band                                         # (K,) row-band
            wrong_u = counts * (1.0 - on_top)
            wrong_rb = jax.ops.segment_sum(wrong_u, cell, num_segments=c * n_bands).reshape(c, n_bands, c)
            others = wrong_rb.sum(1, keepdims=True) - wrong_rb                    # the row's other bands
            a_post, log_w = CC.error_posterior(p, counts, size)                  # (G, C, C) base + row's wrong
            wrong_row = CC.wrong_labels(p, counts)
            base = jnp.where(a_post > 0, a_post - wrong_row[None], 0.0)           # (G, C, C)
            on = (base > 0)[:, None, :, None, :]                                   # (G, 1, C, 1, C)
            prior = base[:, None, :, None, :] + lam[None, :, None, None, None] * others[None, None]   # (G, L, C, B, C)
            prior = jnp.where(on, prior, 0.0)
            safe = jnp.where(on, prior, 1.0)
            ll = (gl(prior.sum(-1)) - gl(prior.sum(-1) + wrong_rb.sum(-1)[None, None])
                  + jnp.sum(jnp.where(on, gl(safe + wrong_rb[None, None]) - gl(safe), 0.0), -1)).sum((-1, -2))   # (G, L)
            joint = jax.nn.log_softmax(ll.reshape(-1))              # uniform prior over (w, m, η) and λ
            pick = jax.random.categorical(k1, joint, shape=(n_draws,))
            g, li = pick // lam.shape[0], pick % lam.shape[0]
            alpha = jnp.where(on[g][:, 0], prior[g, li] + wrong_rb[None], 0.0)     # (n, C, B, C)
            phi_rb = CC._gamma_split(k2, alpha)                                  # (n, C, B, C)
            phi_u = phi_rb[:, top_j, band, :]                                    # (n, K, C)
            rho = s["pi"][:, jnp.arange(k), top_j]                               # (n, K)
            pi = rho[..., None] * on_top + (1.0 - rho)[..., None] * phi_u
            m_top = jnp.sum(s["unlabeled_counts"] * on_top, -1)
            m = posterior.multinomial_counts(k3, unlabeled[None, :] - m_top, phi_u) * (1.0 - on_top) + m_top[..., None] * on_top
            return dict(s, pi=pi, unlabeled_counts=m, band_lambda=lam[li])
        return lib._replace(sample=sample)
    RG.calibrated_classes_model = factory


def apply(variant: str, pool_name: str, pool_seed: int = 0):
    """Replace the library's functions for ``variant`` (module docstring)."""
    from bayes_eval.models import calibrated_classes as CC

    name, _, arg = variant.partition(":")
    masses = tuple(float(v) for v in arg.split(",")) if arg else DEFAULT_MASSES
    if name == "library":
        return
    if name == "true-split":
        from several_classes import make_pool
        true_split(CC, make_pool(pool_name, pool_seed))
    elif name == "row-weight":
        row_weight(CC)
    elif name == "mass-grid":
        mass_grid(CC, masses)
    elif name == "row-mass":
        row_mass(CC, masses)
    elif name == "weighted-labels":
        weighted_labels(CC)
    elif name == "band-split":
        band_split(CC, int(arg) if arg else 2)
    else:
        raise SystemExit(f"unknown variant {variant!r}: library, true-split, row-weight, mass-grid[:m,..], "
                         "row-mass[:m,..], weighted-labels, band-split[:B]")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2:
        raise SystemExit(__doc__)
    variant, rest = argv[0], argv[1:]
    seed = int(rest[rest.index("--pool-seed") + 1]) if "--pool-seed" in rest else 0
    apply(variant, rest[0], seed)
    import several_classes
    print(f"# variant {variant}")
    several_classes.main(rest)


if __name__ == "__main__":
    main()
