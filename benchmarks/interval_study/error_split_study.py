"""The error split of the calibrated model for several classes (``models/calibrated_classes.py``)
on captured runs: which classes a top class's wrong labels fall on, and how the prior of that
split sets the Bayesian interval of macro-F1 where a class is rare (stop 53's ``conf5``).

    python benchmarks/interval_study/error_split_study.py capture conf5 --repeats 100 --out /tmp/es/conf5.npz
    python benchmarks/interval_study/error_split_study.py variants conf5 /tmp/es/conf5.npz --variants library,shares

``capture`` runs ``several_classes.make_pool(POOL)`` under AIS (macro-F1, checkpoints 200 / 500 /
1000, the library's Bayesian interval) and keeps every run's labeled table at the checkpoints;
``variants`` recomputes the Bayesian interval on the same labels with other error priors
(:data:`VARIANTS`) and prints coverage, width, the posterior mean's offset and the side of the
misses.  ``mass1`` / ``mass0.3``: the shares with 1 / 0.3 pseudo-counts in all instead of C − 1
(η learned as in the library); ``mass-grid``: the shares' mass s learned beside η on their product
grid (:data:`MASS_GRID` × the library's η grid); ``reverse1`` / ``reverse0.5``: λ × the reverse
confusion's wrong labels added to each row's prior (stop 55: both measured, not kept);
``reverse-ht0.5`` / ``reverse-ht0`` / ``shares-only``: the prior shares half / wholly / not at all the
reverse confusion's estimated pool counts (w fixed at 0.5 / 0 / 1: ``calibrated_classes.SHARE_WEIGHTS``
set to that one point; stop 55's lead, the library's in stops 56-63; ``shares-only`` = stop 55's
library); ``w-grid``: w learned beside η, the library's since stop 64 (stop 64's library).  Every other variant runs on ``shares-only`` as it was measured (stops 53-55), and every variant but ``library`` at the prior's mass 1 (``calibrated_classes.SHARE_MASSES``, learned since stop 65: ``error_split_variants.py``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from bayes_eval.models.calibrated_classes import error_prior as _LIB  # noqa: E402  (the library's, before patching)


def _run(pool_name, repeats, seed, draws):
    """Simulate with the library's interval, returning what the variants need."""
    from bayes_eval import simulate as S
    from bayes_eval.registry import measure_from_args
    from several_classes import make_pool

    captured = {}
    real_int, real_make = S.intervals_at_checkpoints, S.make_oracle_model

    def spy_int(cells, model, g, n_units, labeled, *args, **kw):
        captured.update(cells=cells, g=g, n_units=n_units, labeled=np.asarray(labeled))
        return real_int(cells, model, g, n_units, labeled, *args, **kw)

    def spy_make(name, probs, *a, **k):
        captured["probs"] = np.asarray(probs)
        return real_make(name, probs, *a, **k)

    S.intervals_at_checkpoints, S.make_oracle_model = spy_int, spy_make
    try:
        pool = make_pool(pool_name)
        measure = measure_from_args("macro_f1", pool)
        res, _ = S.run_simulation(pool, measure, "ais", budget=1000, repeats=repeats, seed=seed,
                                  checkpoints=(200, 500, 1000), bayes=True, bayes_draws=draws)
    finally:
        S.intervals_at_checkpoints, S.make_oracle_model = real_int, real_make
    return pool, res, captured


def capture(args):
    t0 = time.perf_counter()
    pool, res, cap = _run(args.pool, args.repeats, args.seed, args.draws)
    np.savez_compressed(args.out, labeled=cap["labeled"], probs=cap["probs"], true_value=np.asarray(res.true_value),
                        value=np.asarray(res.checkpoint_value), bayes_lower=np.asarray(res.bayes_lower),
                        bayes_upper=np.asarray(res.bayes_upper), checkpoints=np.asarray(res.checkpoints))
    print(f"saved {args.out} {cap['labeled'].shape} in {time.perf_counter() - t0:.0f} s")


def _even(p, top):
    c = p.shape[1]
    return (1.0 - np.eye(c))


def _floor(level):
    def prior(p, top):
        a = _LIB(p, top)
        c = p.shape[1]
        return np.where(np.eye(c) > 0, 0.0, np.maximum(a, level))
    return prior


def _mix(p, top):
    """Half the C − 1 pseudo-counts even, half as the shares."""
    return 0.5 * _LIB(p, top) + 0.5 * _even(p, top)


def _jeffreys(p, top):
    return 0.5 * _even(p, top)


def _mass(total):
    """The shares with ``total`` pseudo-counts in all instead of C − 1."""
    def prior(p, top):
        a = _LIB(p, top)
        return a * total / (p.shape[1] - 1)
    return prior


#: (s, η) pairs for the variant that learns the shares' total mass s beside η (``mass-grid``)
MASS_GRID = np.logspace(-1.0, 1.5, 11)


def _pairs():
    s, e = np.meshgrid(MASS_GRID, np.logspace(-3.0, 1.0, 25), indexing="ij")
    return s.ravel(), e.ravel()


def _reverse_posterior(lam):
    """``error_posterior`` with λ × the reverse confusion added to the prior of every row: the
    wrong labels of top class c that fell on t count λ each for class c in top class t's split
    (confusions tend to run both ways; the labels of each row enter its own likelihood as before)."""
    def error_posterior(leaf_probs, counts, unit_size=None):
        import jax.numpy as jnp

        from bayes_eval.models import calibrated_classes as CC

        p = np.asarray(leaf_probs, np.float64)
        alpha0 = CC.error_prior(p, CC.top_classes(p))
        wrong = CC.wrong_labels(p, counts)
        base = jnp.asarray(alpha0) + lam * wrong.T * (jnp.asarray(alpha0) > 0)
        a = CC.spread_alphas(base)
        return jnp.where(a > 0, a + wrong[None], 0.0), CC.spread_log_weights(base, wrong)
    return error_posterior


#: name -> (the error prior α_t, the grid of η; None: the library's)
VARIANTS = {"reverse-ht0.5": ("share-weight", 0.5), "reverse-ht0": ("share-weight", 0.0),
            "shares-only": ("share-weight", 1.0), "w-grid": ("w-grid", None),
            "reverse1": ("reverse", 1.0), "reverse0.5": ("reverse", 0.5),
            "mass1": (_mass(1.0), None), "mass0.3": (_mass(0.3), None), "mass-grid": ("pairs", None),
            "shares": (_LIB, [0.0]), "even": (_even, [0.0]), "mix": (_mix, [0.0]), "jeffreys": (_jeffreys, [0.0]),
            "floor0.5": (_floor(0.5), [0.0]), "floor0.25": (_floor(0.25), [0.0]), "floor0.1": (_floor(0.1), [0.0]),
            "grid-0.1-3": (None, np.logspace(-1, np.log10(3), 15)), "grid-0.001-1": (None, np.logspace(-3, 0, 19)),
            # stop 57: the curve's offset per top class (the library's, scale 1), off or at other scales
            "no-class-offsets": ("class-offsets", 0.0), "class-offsets0.5": ("class-offsets", 0.5),
            "class-offsets2": ("class-offsets", 2.0),
            # stop 58: the offsets' scale τ learned over a grid (uniform prior on it)
            "class-offsets-learned": ("class-offsets", (0.125, 0.25, 0.5, 1.0, 2.0, 4.0)),
            "class-offsets-learned4": ("class-offsets", (0.25, 0.5, 1.0, 2.0)),
            # stop 59: the band walk's scale learned over a grid (uniform prior on it)
            "band-scale-learned": ("band-scale", (0.25, 0.5, 1.0, 2.0, 4.0)), "band-scale1": ("band-scale", (1.0,))}


def variants(args):
    import jax.numpy as jnp

    from bayes_eval.models import calibrated as CAL
    from bayes_eval.models import calibrated_classes as CC
    from bayes_eval.models.registry import make_oracle_model
    from bayes_eval.posterior import intervals_at_checkpoints
    from bayes_eval import simulate as S

    d = np.load(args.capture)
    # rebuild the posterior units as the capture's run built them: one tiny run (same pool, seed)
    _, _, cap = _run(args.pool, 2, args.seed, 16)
    assert np.allclose(cap["probs"], d["probs"]), "the capture is of another pool or build"
    labeled = jnp.asarray(d["labeled"][: args.max_runs])
    truth = float(np.atleast_1d(d["true_value"])[0])
    cps = d["checkpoints"]
    rows = [("library (capture)", d["bayes_lower"][: args.max_runs, :, 0], d["bayes_upper"][: args.max_runs, :, 0], None)]
    lib_prior, lib_grid = CC.error_prior, CC.SPREAD_GRID
    for name in args.variants.split(","):
        prior, grid = VARIANTS.get(name, (None, None)) if name != "library" else (None, None)
        if name not in VARIANTS and name != "library":
            raise SystemExit(f"unknown variant {name!r}: library, {', '.join(VARIANTS)}")
        lib_alphas, lib_post = CC.spread_alphas, CC.error_posterior
        lib_weight, lib_offsets, lib_gscale, lib_bscale = CC.SHARE_WEIGHTS, CC.CLASS_OFFSETS, CAL.GROUP_SCALE, CAL.BAND_SCALE
        lib_mass = CC.SHARE_MASSES
        if name != "library":        # every variant was measured at the prior's mass 1 (before stop 65)
            CC.SHARE_MASSES = np.array([1.0])
        if prior == "band-scale":       # grid holds the band walk's scales
            CAL.BAND_SCALE = tuple(grid)
            prior, grid = None, None
        elif prior == "class-offsets":    # grid holds the offsets' scale (0: none)
            on = np.max(grid) > 0
            CC.CLASS_OFFSETS = bool(on)
            CAL.GROUP_SCALE = (grid if np.ndim(grid) else float(grid)) if on else lib_gscale
            prior, grid = None, None
        elif prior == "share-weight":  # grid holds w, the classifier's share in the prior (fixed)
            CC.SHARE_WEIGHTS = np.array([float(grid)])
            prior, grid = None, None
        elif prior == "w-grid":      # w learned beside η (stop 56: measured, not kept): the library's since stop 64
            prior, grid = None, None
        elif name != "library":      # the other variants were measured on stop 55's library: the shares alone
            CC.SHARE_WEIGHTS = np.array([1.0])
        if prior == "reverse":     # grid holds λ here
            CC.error_posterior = _reverse_posterior(float(grid))
            prior, grid = None, None
        if prior == "pairs":       # the shares' total mass s learned beside η: α = s share / (C − 1) + η
            s_pairs, e_pairs = _pairs()
            prior, grid = _mass(1.0), e_pairs

            def pair_alphas(alpha0, grid_=None):
                alpha0 = jnp.asarray(alpha0, dtype=jnp.float64)
                return (jnp.asarray(s_pairs)[:, None, None] * alpha0[None]
                        + jnp.asarray(e_pairs)[:, None, None] * (alpha0 > 0)[None])
            CC.spread_alphas = pair_alphas
        CC.error_prior = prior or lib_prior
        CC.SPREAD_GRID = lib_grid if grid is None else np.asarray(grid, np.float64)
        try:
            model = make_oracle_model("calibrated", cap["probs"])
            out = intervals_at_checkpoints(cap["cells"], model, cap["g"], cap["n_units"], labeled, args.seed, args.draws)
        finally:
            CC.error_prior, CC.SPREAD_GRID, CC.spread_alphas, CC.error_posterior = lib_prior, lib_grid, lib_alphas, lib_post
            CC.SHARE_WEIGHTS, CC.CLASS_OFFSETS, CAL.GROUP_SCALE, CAL.BAND_SCALE = lib_weight, lib_offsets, lib_gscale, lib_bscale
            CC.SHARE_MASSES = lib_mass
        rows.append((name, out["bayes_lower"][..., 0], out["bayes_upper"][..., 0], out["bayes_mean"][..., 0]))
        _print(rows[-1:], truth, cps)
    del S
    _print(rows[:1], truth, cps)


def _print(rows, truth, cps):
    for name, lo, hi, mean in rows:
        for i, cp in enumerate(cps):
            cov = (lo[:, i] <= truth) & (truth <= hi[:, i])
            r = {"variant": name, "labels": int(cp), "runs": int(lo.shape[0]), "coverage": float(cov.mean()),
                 "width": float(np.mean(hi[:, i] - lo[:, i])), "miss_low": float(np.mean(hi[:, i] < truth)),
                 "miss_high": float(np.mean(lo[:, i] > truth))}
            if mean is not None:
                r["mean_minus_truth"] = float(np.mean(mean[:, i]) - truth)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}))


def main(argv=None):
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("pool")
    c.add_argument("--repeats", type=int, default=100)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--draws", type=int, default=200)
    c.add_argument("--out", required=True)
    v = sub.add_parser("variants")
    v.add_argument("pool")
    v.add_argument("capture")
    v.add_argument("--variants", default="library,shares")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--draws", type=int, default=200)
    v.add_argument("--max-runs", type=int, default=None)
    args = ap.parse_args(argv)
    capture(args) if args.cmd == "capture" else variants(args)


if __name__ == "__main__":
    main()
