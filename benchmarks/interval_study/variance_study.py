"""Estimated vs empirical variance of the with-replacement estimators, stage by stage.

For every repeat and stage end it records R̂ (both components of F1's loss), Ĝ (F1) and
three estimates of their variance:

* ``cur``   -- the delta-method covariance of ``kernel.estimate`` (whatever the library
  computes now: the q_N plug-in of 001 §3.3.2 before the fix);
* ``own``   -- the martingale estimator (1/n²) [Σ_j w_j² u_j u_jᵀ − n (Dg R̂)(Dg R̂)ᵀ],
  every draw with its own weight p/q_{j−1} (the average of the per-stage conditional
  variances, 001 §3.3.2 / Thm. 1's martingale CLT);
* ``orac``  -- the true average conditional variance (1/n²) Σ_t n_t V_t, V_t the variance of
  one draw under q_{t−1} computed from the truth (linearized at the true R).

and, for the stratified design, the post-stratified estimator's variance.  Prints, at the
checkpoints, the empirical variance over repeats, the mean of each variance estimate, their
ratio, the bias in Monte Carlo SE units and the coverage of the 95 % intervals from each
variance estimate.

    XLA_FLAGS=--xla_force_host_platform_device_count=1 taskset -c 1 \\
        python benchmarks/interval_study/variance_study.py /tmp/istudy/p0.5.parquet --design ais --repeats 200
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from bayes_eval import kernel  # noqa: E402
from bayes_eval import measures as M  # noqa: E402
from bayes_eval.cells import build_cells, prior_key  # noqa: E402
from bayes_eval.designs import resolve_companion  # noqa: E402
from bayes_eval.estimators import stratified_estimate  # noqa: E402
from bayes_eval.registry import build_design, design_spec, load_pool  # noqa: E402
from bayes_eval.results import schedule  # noqa: E402
from bayes_eval.simulate import _draw_stage  # noqa: E402  (a study: the simulation's own stage draw)
from bayes_eval.strata import stratify  # noqa: E402

Z = 1.959963984540054


def build(path, design_name, n_strata=256, lam=0.9, companion="auto"):
    pool = load_pool(path)
    measure = M.get("f1")
    spec = design_spec(design_name)
    strata = stratify(pool, n_strata, keep_empty=True)
    k = strata.n_strata
    cells, _ = build_cells(pool, strata, measure, extra_key=prior_key(pool) if spec.cell_key == "prior" else None)
    settings = dict(model="dirichlet-tree", depth=8, branching=None, lam=lam, eps=1e-3,
                    companion=resolve_companion(companion, cells.loss.shape[1], design_name))
    design = build_design(design_name, measure, cells, k, **settings)
    return pool, measure, cells, design, k


def make_run(cells, design, g, k, batches):
    from bayes_eval.cells import leaf_counts, leaf_probs
    from bayes_eval.models.registry import make_oracle_model

    x, c, d = cells.loss.shape
    # the model-based conditional variance ("modelv"): a draw's variance under the stage's
    # proposal with the unlabeled items' classes from the calibrated model fitted to the
    # labels so far (binary pools), linearized at the current estimate
    cal = make_oracle_model("calibrated", leaf_probs(cells, k)) if c == 2 else None
    true_risk = jnp.einsum("x,xc,xcd->d", cells.weight, cells.truth, cells.loss)
    loss = cells.loss.reshape(x * c, d)

    def gext(r):
        return jnp.concatenate([jnp.atleast_1d(g(r)), r])

    J_true = jax.jacfwd(gext)(true_risk)  # (m, d)
    u_true = loss @ J_true.T  # (XC, m) linearized at the truth
    v_true = J_true @ true_risk

    def run(key):
        st0 = kernel.init(design, cells)
        zero = jnp.zeros((x, c))
        w2 = zero
        orac = jnp.zeros(d + 1)
        modv = jnp.zeros(d + 1)
        mods = jnp.zeros((d, d))
        ta = zero  # Σ_t n_t L q_lab w_a² per (cell, class): the labeled items' part (class known)
        tb = jnp.zeros(x)  # Σ_t n_t U q_unl w_b² per cell: the unlabeled items' part (class from the model)
        risk0 = jnp.einsum("x,xc,xcd->d", cells.weight * cells.size, cells.prior, cells.loss) \
            if getattr(cells, "prior", None) is not None else true_risk

        def stage(carry, inp):
            st, w2, orac, modv, mods, ta, tb, r_prev = carry
            key, n_new = inp
            labeled0 = st.tallies.labeled
            h_a, h_b, n_b, stalled = _draw_stage(key, cells.truth, labeled0, st.proposal, n_new, False, 4096)
            w_a, w_b = kernel.draw_weights(cells, st.proposal)
            w2 = w2 + h_a * w_a**2 + h_b * w_b**2
            tallies = kernel.add_draws(cells, st.tallies, st.proposal, h_a, h_b, n_b)
            # the true conditional variance of one draw of this stage (u at the truth)
            q_b = jnp.broadcast_to(st.proposal.unl[:, None], (x, c))
            cnt_a, cnt_b = labeled0, cells.truth - labeled0
            sec = (cnt_a * st.proposal.lab * w_a**2 + cnt_b * q_b * w_b**2).ravel()  # Σ q w² = Σ p²/q
            v_stage = sec @ (u_true**2) - v_true**2
            n_t = h_a.sum() + h_b.sum()
            ta = ta + n_t * labeled0 * st.proposal.lab * w_a**2
            tb = tb + n_t * (cells.size - labeled0.sum(1)) * st.proposal.unl * w_b[:, 0]**2
            orac = orac + n_t * v_stage
            if cal is not None:
                counts, unl = leaf_counts(cells, labeled0, k)
                pi = cal.posterior_predictive(cal.fit(cal.init_state(), counts, unl), counts)[cells.stratum]
                Jp = jax.jacfwd(gext)(r_prev)
                up = (loss @ Jp.T).reshape(x, c, -1)  # (X, C, m)
                vp = Jp @ r_prev
                unl_x = cells.size - labeled0.sum(1)
                lab_term = jnp.einsum("xc,xc,xcm->m", labeled0 * st.proposal.lab, w_a**2, up**2)
                unl_term = jnp.einsum("x,x,xc,xc,xcm->m", unl_x, st.proposal.unl, w_b**2, pi, up**2)
                modv = modv + n_t * (lab_term + unl_term - vp**2)
                lx = cells.loss  # (X, C, d)
                mods = mods + n_t * (
                    jnp.einsum("xc,xc,xcd,xce->de", labeled0 * st.proposal.lab, w_a**2, lx, lx)
                    + jnp.einsum("x,x,xc,xc,xcd,xce->de", unl_x, st.proposal.unl, w_b**2, pi, lx, lx))
            st, _ = kernel.step(design, cells, k, st, tallies)
            est = kernel.estimate(design, gext, cells, tallies, st.proposal, k, full_cov=False)
            fin = (kernel.estimate_final(design, gext, cells, tallies, st.proposal, k, full_cov=False).var
                   if hasattr(kernel, "estimate_final") else est.var)
            n = jnp.maximum(tallies.n_draws, 1.0)
            risk = est.risk
            if cal is not None:  # "modelf": the tallies ta, tb with the class shares known now
                cnt1, unl1 = leaf_counts(cells, tallies.labeled, k)
                pi1 = cal.posterior_predictive(cal.fit(cal.init_state(), cnt1, unl1), cnt1)[cells.stratum]
                phi = (tallies.labeled + (cells.size - tallies.labeled.sum(1))[:, None] * pi1) \
                    / jnp.maximum(cells.size, 1.0)[:, None]
                mw2 = ta + tb[:, None] * phi
            else:
                mw2 = w2
            Jr = jax.jacfwd(gext)(risk)
            u = loss @ Jr.T
            vv = Jr @ risk
            own = (w2.ravel() @ (u**2) - n * vv**2) / n**2
            modelf = (mw2.ravel() @ (u**2) - n * vv**2) / n**2
            own_tj = (w2.ravel() @ (u_true**2) - n * v_true**2) / n**2  # diagnostic: Jacobian at the truth
            cm_w2 = jnp.where(tallies.draws > 0, tallies.wsum**2 / jnp.maximum(tallies.draws, 1.0), 0.0)
            cm = (cm_w2.ravel() @ (u**2) - n * vv**2) / n**2  # Σw² per cell approximated by (Σw)²/draws
            strat = stratified_estimate(gext, loss, tallies.draws.ravel(), jnp.repeat(cells.stratum, c),
                                        jax.ops.segment_sum(cells.size * cells.weight, cells.stratum,
                                                            num_segments=k), k, full_cov=False)
            rec = dict(value=est.value, cur=est.var, final=fin, own=own, own_tj=own_tj, cm=cm, orac=orac / n**2,
                       modelv=modv / n**2, modelf=modelf,
                       lab_k=jax.ops.segment_sum(tallies.labeled.sum(1), cells.stratum, num_segments=k), maxv=jnp.maximum(own, modv / n**2), n=tallies.n_draws,
                       labels=tallies.labeled.sum(), strat_var=strat.var, strat_value=strat.value,
                       S_own=(w2.ravel()[:, None] * loss).T @ loss / n**2, S_mod=mods / n**2, risk=risk,
                       max_w=jnp.max(jnp.where(tallies.draws > 0, tallies.wsum / jnp.maximum(tallies.draws, 1), 0)))
            r_next = jnp.where(jnp.all(jnp.isfinite(risk)), risk, r_prev)
            return (st, w2, orac, modv, mods, ta, tb, r_next), rec

        keys = jax.random.split(key, len(batches))
        _, recs = jax.lax.scan(stage, (st0, w2, orac, modv, mods, ta, tb, risk0), (keys, jnp.asarray(batches)))
        return recs

    return run, np.asarray(gext(true_risk))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pool")
    ap.add_argument("--design", default="ais")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--companion", default="auto")
    ap.add_argument("--checkpoints", default="500,1000,2000")
    ap.add_argument("--json", default=None)
    ap.add_argument("--npz", default=None, help="save every run's per-stage records (for fieller_study.py)")
    args = ap.parse_args()
    pool, measure, cells, design, k = build(args.pool, args.design, companion=args.companion)
    batches = schedule(args.budget, args.batch)
    run, truth = make_run(cells, design, measure.g, k, batches)
    t0 = time.time()
    recs = jax.jit(jax.vmap(run))(jax.random.split(jax.random.PRNGKey(args.seed), args.repeats))
    recs = jax.tree_util.tree_map(np.asarray, recs)
    if args.npz:
        np.savez_compressed(args.npz, truth=truth, cum=np.cumsum(batches), **recs)
    print(f"# {os.path.basename(args.pool)} design={args.design} repeats={args.repeats} "
          f"({time.time() - t0:.0f}s); truth F1={truth[0]:.4f} R={truth[1:]}")
    cum = np.cumsum(batches)
    names = ["F1", "R1", "R2"]
    out = {}
    for ck in [int(c) for c in args.checkpoints.split(",")]:
        s = int(np.searchsorted(cum, ck))
        val = recs["value"][:, s]
        ok = np.all(np.isfinite(val), axis=1)
        v = val[ok]
        emp = v.var(axis=0, ddof=1)
        bias = v.mean(0) - truth
        bias_se = bias / np.sqrt(emp / ok.sum())
        print(f"\n## {ck} labels (stage {s + 1}); draws {recs['n'][ok, s].mean():.0f}; "
              f"defined runs {ok.sum()}; max mean w per cell {np.median(recs['max_w'][ok, s]):.3g}")
        print("| comp | truth | bias/MCSE | emp var | est var (lib) | ratio | own-weight | ratio | true cond. | ratio "
              "| cov lib | cov own | cov true-cond | own@true Dg: ratio cov | (Σw)²/draws: ratio cov | q_N form (001 §3.3.2): ratio cov "
              "| model-based: ratio cov | max(own, model): ratio cov |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        rows = {}
        for i, nm in enumerate(names):
            cur = recs["cur"][ok, s, i]
            own = recs["own"][ok, s, i]
            orac = recs["orac"][ok, s, i]

            def cov(var):
                sd = np.sqrt(np.clip(var, 0, None))
                return float(np.mean(np.abs(v[:, i] - truth[i]) <= Z * sd))

            r = dict(truth=float(truth[i]), bias_se=float(bias_se[i]), emp=float(emp[i]), cur=float(cur.mean()),
                     own=float(own.mean()), orac=float(orac.mean()), cov_cur=cov(cur), cov_own=cov(own),
                     cov_orac=cov(orac))
            for extra in ("own_tj", "cm", "final", "modelv", "maxv"):
                ev = recs[extra][ok, s, i]
                r[extra] = float(ev.mean())
                r["cov_" + extra] = cov(ev)
            rows[nm] = r
            print(f"| {nm} | {truth[i]:.4f} | {bias_se[i]:+.2f} | {emp[i]:.3g} | {r['cur']:.3g} | "
                  f"{r['cur'] / emp[i]:.2f} | {r['own']:.3g} | {r['own'] / emp[i]:.2f} | {r['orac']:.3g} | "
                  f"{r['orac'] / emp[i]:.2f} | {r['cov_cur']:.3f} | {r['cov_own']:.3f} | {r['cov_orac']:.3f} | "
                  f"{r['own_tj'] / emp[i]:.2f} {r['cov_own_tj']:.3f} | {r['cm'] / emp[i]:.2f} {r['cov_cm']:.3f} | "
                  f"{r['final'] / emp[i]:.2f} {r['cov_final']:.3f} | {r['modelv'] / emp[i]:.2f} {r['cov_modelv']:.3f} "
                  f"| {r['maxv'] / emp[i]:.2f} {r['cov_maxv']:.3f} |")
        out[ck] = rows
    if args.json:
        json.dump(out, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
