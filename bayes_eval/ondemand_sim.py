"""Simulated on-demand evaluation (seed ``003``): settings and a vectorized driver.

Two settings (issue 17 item 4):

* :func:`synthetic_setting` — a KBP-like universe: 10⁵ candidate instances of which ~5,000
  are correct; every instance has a shared "ease"; system i ranks instances by ease plus
  its own noise (σᵢ) and predicts its top correct and incorrect ones in the amounts that
  give it precision πᵢ ∈ [0.2, 0.8] and recall ρᵢ ∈ [0.1, 0.6].  Easy instances are
  shared by many systems; the noise makes system-specific ones.
* :func:`pool_setting` — a scored pool (``score``, ``label``): system i is the top-kᵢ set of
  a noisy copy of the score (kᵢ and the noise varied), so the shared entity-resolution
  pools serve too.
* :func:`with_unverifiable` — either, with instances nobody can verify (``ondemand skip``):
  a drawn one is skipped and the estimands are those on the verifiable instances.

:func:`simulate` runs both protocols of 003 — the simple estimator and the joint one — on
the same universe, repeats vectorized with NumPy: systems are submitted one at a time; for
each, the number of draws is chosen by bisection on the variance bound given every label
so far (003 §"Adaptively choosing the number of samples"; :func:`bayes_eval.ondemand.
required_draws`), draws already verified are reused at no cost; after the last system the
exhaustive sample is sized from a pilot (:func:`bayes_eval.ondemand.required_exhaustive`).
The comparison is of costs *to reach ε*: after the sized rounds, each protocol tops up the new
system's draws alike until its realized half-width is ≤ ε (:func:`bayes_eval.ondemand.top_up`;
the bound alone left the simple estimator short of ε in a quarter of the runs).
Alternatives to 003's joint protocol are in :data:`PROTOCOLS`.
Pure functions of (setting, seed): no files.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from . import ondemand as od
from .ondemand_domain import domain_precision

__all__ = ["PROTOCOLS", "Setting", "synthetic_setting", "pool_setting", "with_unverifiable", "simulate", "summarize",
           "truth_of"]

COST_VERIFY = 0.18
COST_EXHAUSTIVE = 1.60


class Setting(NamedTuple):
    """A universe: ``truth[u]`` (f), ``G[u, i]`` (x ∈ Xᵢ; uniform pᵢ), system ``names``;
    ``unverifiable[u]``: instances nobody can verify (:func:`with_unverifiable`; None: none)."""

    name: str
    truth: np.ndarray
    G: np.ndarray
    names: list
    unverifiable: np.ndarray | None = None


def synthetic_setting(n_systems: int = 10, n_candidates: int = 100_000, n_correct: int = 5_000,
                      seed: int = 0) -> Setting:
    """The KBP-like universe of the module docstring (only instances that are correct or
    predicted are kept: the others never enter any estimator)."""
    rng = np.random.default_rng(seed)
    truth = np.zeros(n_candidates, dtype=bool)
    truth[:n_correct] = True
    ease = rng.normal(size=n_candidates)
    prec = rng.uniform(0.2, 0.8, n_systems)
    rec = rng.uniform(0.1, 0.6, n_systems)
    sigma = rng.uniform(0.5, 1.5, n_systems)
    pos, neg = np.flatnonzero(truth), np.flatnonzero(~truth)
    G = np.zeros((n_candidates, n_systems), dtype=bool)
    for i in range(n_systems):
        s = ease + sigma[i] * rng.normal(size=n_candidates)
        k_pos = max(1, int(round(rec[i] * n_correct)))
        k_neg = int(round(k_pos * (1 - prec[i]) / prec[i]))
        G[pos[np.argsort(-s[pos])[:k_pos]], i] = True
        G[neg[np.argsort(-s[neg])[:k_neg]], i] = True
    keep = truth | G.any(1)
    return Setting("synthetic", truth[keep], G[keep], [f"sys{i + 1}" for i in range(n_systems)])


def pool_setting(frame, n_systems: int = 10, seed: int = 0, name: str = "pool") -> Setting:
    """Systems from a scored pool (columns ``score``, ``label``): top-kᵢ sets of noisy
    copies of the score, kᵢ from 0.5 to 3 times the number of positives, noise 0–1 score
    standard deviations."""
    score = np.asarray(frame["score"], dtype=np.float64)
    truth = np.asarray(frame["label"]).astype(np.int64) == 1
    rng = np.random.default_rng(seed)
    n_pos = max(int(truth.sum()), 1)
    sd = float(np.std(score)) or 1.0
    G = np.zeros((len(score), n_systems), dtype=bool)
    for i in range(n_systems):
        k = max(2, int(round(n_pos * rng.uniform(0.5, 3.0))))
        s = score + rng.uniform(0.0, 1.0) * sd * rng.normal(size=len(score))
        G[np.argsort(-s)[:k], i] = True
    keep = truth | G.any(1)
    return Setting(name, truth[keep], G[keep], [f"sys{i + 1}" for i in range(n_systems)])


def with_unverifiable(setting: Setting, share: float, share_correct: float | None = None,
                      seed: int = 0) -> Setting:
    """The universe with instances nobody can verify (``ondemand skip``): each incorrect instance
    independently with probability ``share``, each correct one with ``share_correct`` (``share``
    when None) -- the two differ where what cannot be judged is more often one kind (then the
    precision on the verifiable instances differs from the precision on all).  Being unverifiable
    is a property of the instance: a draw of one is skipped, an exhaustive sample never finds one,
    and the estimands become those on the verifiable instances D (:func:`truth_of`)."""
    share_correct = share if share_correct is None else share_correct
    for what, v in (("share", share), ("share_correct", share_correct)):
        if not 0 <= v < 1:
            raise ValueError(f"{what} of unverifiable instances must be in [0, 1), got {v}")
    rng = np.random.default_rng([seed, 3])
    unv = rng.random(len(setting.truth)) < np.where(setting.truth, share_correct, share)
    return setting._replace(unverifiable=unv)


def truth_of(setting: Setting) -> np.ndarray:
    """True (precision (M), recall (M), F1 (M)); with unverifiable instances those on the verifiable
    ones D: precision |Xᵢ ∩ 𝒴 ∩ D| / |Xᵢ ∩ D|, recall |Xᵢ ∩ 𝒴 ∩ D| / |𝒴 ∩ D| (``ondemand skip``)."""
    G, y = setting.G, setting.truth
    if setting.unverifiable is not None:
        G, y = G[~setting.unverifiable], y[~setting.unverifiable]
    pi = (G & y[:, None]).sum(0) / np.maximum(G.sum(0), 1)
    rho = (G & y[:, None]).sum(0) / max(int(y.sum()), 1)
    return np.concatenate([pi, rho, od.f1_of(pi, rho)])


def _fill(cells, cell, verified, truth, group=None):
    """f̃ per cell and repeat: known labels, FILL for the unverified (ondemand.variance_bound).
    ``group[c]``: pool the cells' labels by post-stratum first (the posterior mean of the
    stratum for its unverified instances; ondemand.post_variance_bound)."""
    R = verified.shape[0]
    C = len(cells.size)
    inx = cell >= 0
    c = cell[inx]
    flat = (np.arange(R)[:, None] * C + c[None, :]).ravel()
    v = verified[:, inx]
    pos = np.bincount(flat, weights=(v & truth[inx][None, :]).ravel(), minlength=R * C).reshape(R, C)
    ver = np.bincount(flat, weights=v.ravel(), minlength=R * C).reshape(R, C)
    if group is None:
        return od.cell_fill(cells.size, pos, ver)
    K = int(group.max()) + 1
    ind = np.zeros((C, K))
    ind[np.arange(C), group] = 1.0
    return od.cell_fill(cells.size @ ind, pos @ ind, ver @ ind)[:, group]


def _tally_so_far(cells, cell, truth, draws, n, n_max, unv=None):
    """(T, U): the tallies of the verified draws and the skipped draws of unverifiable instances
    ``unv`` (U[..., j, c]; None without any)."""
    R, M, _ = draws.shape
    mask = np.arange(n_max)[None, None, :] < n[:, :, None]
    strata = np.broadcast_to(np.arange(M)[None, :, None], draws.shape).reshape(R, -1)
    d = np.maximum(draws, 0)
    c, y = cell[d].reshape(R, -1), truth[d].astype(np.int64).reshape(R, -1)
    if unv is None:
        return od.tally(M, len(cells.size), strata, c, y, mask.reshape(R, -1)), None
    skip = unv[d]
    return (od.tally(M, len(cells.size), strata, c, y, (mask & ~skip).reshape(R, -1)),
            od.tally(M, len(cells.size), strata, c, np.zeros_like(y), (mask & skip).reshape(R, -1))[..., 0])


#: the protocols :func:`simulate` knows: (stratum proposal, estimator rule).  "simple" and
#: "joint" are 003's estimators; the others are our extensions (issue 17, measured in
#: benchmarks/results/ondemand.md): "joint_post" draws from pₘ like 003 but estimates precision
#: post-stratified over the cells of the systems submitted so far and sizes each system by that
#: estimator's bound (:func:`bayes_eval.ondemand.post_parts`,
#: :func:`bayes_eval.ondemand.post_required_draws`); "joint_post_fill" the same estimator with
#: system m drawn from :func:`bayes_eval.ondemand.post_fill_proposal` (constant on the post-strata
#: of the systems so far; it tops up the ones earlier strata under-sample) and sized by the bound
#: under that proposal; "joint_post_fill_session" is the ``post-fill`` session's protocol
#: (:data:`SESSION_TOP_UP`).  Measured and removed (code at commit 50942ac, figures in the
#: benchmark notes): water-filling over cells, balance-heuristic weights, the remainder proposal,
#: final top-up passes after the last submission (on the realized width: biased; by the bound:
#: 11% of intervals above ε), smaller sizing steps (biased), sizing for every earlier system's
#: bound (0.74 × simple).
PROTOCOLS = {"simple": ("p", None), "joint": ("p", "overlap"), "joint_post": ("p", "post"),
             "joint_post_fill": ("postfill", "post"), "joint_post_fill_session": ("postfill", "post")}
#: joint_post_fill's proposal: the share mixed in of pₘ (defensive)
POST_FILL_DEFENSIVE = od.POST_FILL_DEFENSIVE
#: the protocol of an ``ondemand`` session with ``--protocol post-fill`` (the default): after each
#: submission's rounds and top-up, top-up passes over the earlier systems whose realized
#: half-width the new post-strata pushed above ε (``OnDemand.next`` does this at every call)
SESSION_TOP_UP = frozenset({"joint_post_fill_session"})
#: a session's protocol (``ondemand_session.PROTOCOLS``) -> the simulated protocol that runs it
SESSION_TWIN = {"post-fill": "joint_post_fill_session", "post": "joint_post", "joint": "joint"}


def _realized_hw(kind, cells, T, n, m, Rp=None, U=None):
    """The realized half-width of π̂ₘ from the draws so far (the estimator's own variance);
    ``m`` None: of every system (post-stratified protocols only, all systems active); ``U``: the
    skipped draws (the precision on the verifiable instances)."""
    prop, rule = PROTOCOLS[kind]
    if rule == "post":
        M = cells.P.shape[1]                                  # systems (n may hold extra strata)
        active = np.ones(M, dtype=bool) if m is None else np.arange(M) <= m
        _, cov, _ = od.post_precision(cells, T, n, active, Rp=Rp if prop == "postfill" else None, skipped=U)
        var = np.diagonal(cov, axis1=-2, axis2=-1) if m is None else cov[..., m, m]
        return od.Z95 * np.sqrt(np.maximum(var, 0.0))
    if kind == "simple":
        psi = od.simple_precision_influence(cells, n)
    else:
        psi = od.precision_influence(cells, n, Rp=Rp, rule=rule)
    _, psi, T = domain_precision(psi, T, U)
    return od.precision_half_width(T, psi[..., m:m + 1, :, :, :])[..., 0]


def _cell_draws(rng, r, cells, order, offset, n_max):
    """n_max draws per repeat from per-instance probabilities ``r[R, C]``: a cell by its
    mass size·r, then an instance uniformly inside it."""
    R = r.shape[0]
    mass = cells.size[None, :] * r
    cdf = np.cumsum(mass, 1)
    cdf /= cdf[:, -1:]
    u1 = rng.random((R, n_max))
    c = np.stack([np.minimum(np.searchsorted(cdf[k], u1[k], side="right"), len(cells.size) - 1)
                  for k in range(R)])
    k = np.minimum((rng.random((R, n_max)) * cells.size[c]).astype(np.int64), cells.size[c].astype(np.int64) - 1)
    return order[offset[c] + k]


def _protocol(setting, cells, cell, draws, exh, epsilon, n_max, n0_pilot, n0_max, kind, rounds, rng=None,
              fair=True):
    """One protocol (:data:`PROTOCOLS`) on R repeats.  Systems in turn: the sized rounds, then
    (``fair``) top-ups until the realized half-width of π̂ₘ is ≤ ε (or n_max draws), the same
    rule for every protocol.  Returns draws, new labels per system, exhaustive size, estimates."""
    truth, G, unv = setting.truth, setting.G, setting.unverifiable
    R, M, _ = draws.shape
    if kind not in PROTOCOLS:
        raise ValueError(f"unknown protocol {kind!r}; known: {sorted(PROTOCOLS)}")
    prop, rule = PROTOCOLS[kind]
    postfill = prop == "postfill"
    Rp = np.broadcast_to(cells.P.T, (R, M, len(cells.size))).copy()
    if postfill:
        draws = np.full_like(draws, -1)
        inX = cell >= 0
        order = np.flatnonzero(inX)[np.argsort(cell[inX], kind="stable")]
        offset = np.concatenate([[0], np.cumsum(cells.size)[:-1]]).astype(np.int64)
    verified = np.zeros((R, len(truth)), dtype=bool)   # sent: verified, or skipped where unverifiable
    can = None if unv is None else ~unv[None, :]      # the sizing counts a skipped one as unverified
    n = np.zeros((R, M))
    new = np.zeros((R, M))
    rows = np.broadcast_to(np.arange(R)[:, None], (R, n_max))
    hw_at = np.zeros((R, M))

    def add(m, k):
        n[:, m] += k
        mask = (np.arange(n_max)[None, :] < n[:, m, None]) & (draws[:, m] >= 0)
        verified[rows[mask], draws[:, m][mask]] = True

    for m in range(M):
        before = verified.sum(1)
        act = np.arange(M) <= m
        if postfill:
            D_prev = np.einsum("rj,rjc->rc", n, Rp)
            fill = _fill(cells, cell, verified if can is None else verified & can, truth,
                         od.post_strata(cells, act).group)

            def prop_of(k):
                return od.post_fill_proposal(cells, D_prev, m, k, act, POST_FILL_DEFENSIVE)
            n_plan = od.post_required_draws(cells, n, m, fill, epsilon, n_max, act, Rp=Rp, fill_prop=prop_of)
            Rp[:, m] = prop_of(np.maximum(n_plan, 1))
            draws[:, m] = _cell_draws(rng, Rp[:, m], cells, order, offset, n_max)
        for rnd in range(rounds):
            group = od.post_strata(cells, act).group if rule == "post" else None
            fill = _fill(cells, cell, verified if can is None else verified & can, truth, group)
            if rule == "post":
                req = od.post_required_draws(cells, n, m, fill, epsilon, n_max, act, Rp=Rp if postfill else None)
            else:
                req = od.required_draws(cells, n, m, fill, epsilon, n_max, joint=kind != "simple", Rp=Rp,
                                        rule=rule or "overlap")
            add(m, od.round_size(req, n[:, m], rnd == rounds - 1))
        for _ in range(12 if fair else 0):
            T, U = _tally_so_far(cells, cell, truth, draws, n, n_max, unv)
            k = od.top_up(_realized_hw(kind, cells, T, n, m, Rp, U), n[:, m], epsilon, n_max)
            if not np.any(k > 0):
                break
            add(m, k)
        T, U = _tally_so_far(cells, cell, truth, draws, n, n_max, unv)
        hw_at[:, m] = _realized_hw(kind, cells, T, n, m, Rp, U)
        new[:, m] = verified.sum(1) - before
        for _ in range(12 if kind in SESSION_TOP_UP and m > 0 else 0):   # earlier systems, as `next` does
            T, U = _tally_so_far(cells, cell, truth, draws, n, n_max, unv)
            _, cov, _ = od.post_precision(cells, T, n, act, Rp=Rp, skipped=U)
            hw = od.Z95 * np.sqrt(np.maximum(np.diagonal(cov, axis1=-2, axis2=-1)[:, :m], 0.0))
            k = od.top_up(hw, n[:, :m], epsilon, n_max)
            if not np.any(k > 0):
                break
            for i in np.flatnonzero(np.any(k > 0, axis=0)):
                before_i = verified.sum(1)
                add(i, k[:, i])
                new[:, i] += verified.sum(1) - before_i
    T, U = _tally_so_far(cells, cell, truth, draws, n, n_max, unv)
    # exhaustive: one instance per unit (document), uniform over 𝒴
    t = np.concatenate([G[exh].any(-1, keepdims=True), G[exh]], axis=-1).astype(np.float64)
    ones = np.ones(exh.shape)
    tp = t[:, :n0_pilot].sum(1)
    smooth = (tp + 1) / (n0_pilot + 2)                      # sizing only: never 0 or 1
    joint = kind != "simple"
    if joint:
        if rule == "post":
            parts = od.post_parts(cells, T, n, Rp=Rp if postfill else None, skipped=U)
        else:
            parts = od.joint_parts(cells, T, n, Rp, rule, skipped=U)
        var_nu = np.diagonal(parts[2], axis1=-2, axis2=-1)[:, M:]
        n0, reach = od.required_exhaustive(smooth[:, 0], parts[1], var_nu, None, 0.0 + epsilon, n0_max)
    else:
        n0, reach = od.required_exhaustive(None, None, None, smooth[:, 1:], epsilon, n0_max, joint=False)
    n0 = np.clip(n0, n0_pilot, n0_max)
    umask = np.arange(n0_max)[None, :] < n0[:, None]
    est_e, cov_e = od.exhaustive_stats(t, ones, umask)
    if joint:
        est = od.joint_estimates(cells, T, n, est_e[:, 0], cov_e[:, 0, 0], parts=parts)
    else:
        est = od.simple_estimates(cells, T, n, est_e[:, 1:], cov_e[:, 1:, 1:], skipped=U)
    return {"value": est.value, "hw": est.half_width, "n": n, "new": new, "n0": n0, "reach": reach,
            "cov": est.cov, "hw_at": hw_at, "skipped": np.zeros((R, M)) if U is None else U.sum(-1)}


def simulate(setting: Setting, epsilon: float = 0.05, repeats: int = 100, seed: int = 0, chunk: int = 25,
             n0_pilot: int = 50, n0_max: int | None = None, n_max: int | None = None,
             pairs: tuple = ((0, 1),), rounds: int = 4, protocols: tuple = ("simple", "joint"),
             fair: bool = True) -> dict:
    """Run the ``protocols`` ``repeats`` times on the same draws from the pₘ (the post-fill
    protocols draw their own); returns per-repeat arrays (see :func:`summarize`).
    ``protocols``: names of :data:`PROTOCOLS` ("simple" and "joint" are 003's estimators);
    ``fair``: after the sized rounds, top up every protocol alike until the realized
    half-width of the new system's precision is ≤ ε (or n_max draws) — the costs compared
    are then costs of reaching ε (issue 17).  A setting with instances nobody can verify
    (:func:`with_unverifiable`) skips their draws, every estimator then on the verifiable ones."""
    t0 = time.perf_counter()
    truth, G = setting.truth, setting.G
    M = G.shape[1]
    if n_max is None:
        n_max = int(np.ceil(2 * od.Z95 ** 2 / epsilon ** 2))
    if n0_max is None:
        n0_max = int(np.ceil(od.Z95 ** 2 / (4 * epsilon ** 2))) * 2
    inX = G.any(1)
    cells, cx = od.cells_of(G[inX] / np.maximum(G.sum(0), 1))
    cell = np.full(len(truth), -1)
    cell[inX] = cx
    members = [np.flatnonzero(G[:, m]) for m in range(M)]
    # the exhaustive sample: uniform over the correct instances an annotator can find (the verifiable)
    Y = np.flatnonzero(truth if setting.unverifiable is None else truth & ~setting.unverifiable)
    if not len(Y):
        raise ValueError(f"{setting.name}: no correct instance that can be verified: recall is undefined")
    rng = np.random.default_rng(seed)
    out = {k: [] for k in protocols}
    for start in range(0, repeats, chunk):
        R = min(chunk, repeats - start)
        draws = np.stack([members[m][rng.integers(0, len(members[m]), (R, n_max))] for m in range(M)], axis=1)
        exh = Y[rng.integers(0, len(Y), (R, n0_max))]
        for key in out:
            res = _protocol(setting, cells, cell, draws, exh, epsilon, n_max, n0_pilot, n0_max, key,
                            rounds, rng=rng, fair=fair)
            diffs = [od.differences(od.Estimates(res["value"], res["cov"]), a, b, M) for a, b in pairs]
            res["diff"] = np.stack([d[0] for d in diffs], 1) if diffs else None
            res["diff_hw"] = np.stack([d[1] for d in diffs], 1) if diffs else None
            del res["cov"]
            out[key].append(res)
    runs = {k: {f: (np.concatenate([r[f] for r in v]) if v[0][f] is not None else None) for f in v[0]}
            for k, v in out.items()}
    return {"setting": setting, "epsilon": epsilon, "runs": runs, "truth": truth_of(setting),
            "pairs": pairs, "seconds": time.perf_counter() - t0, "n_max": n_max, "n0_max": n0_max,
            "cells": len(cells.size)}


def _stats(est, hw, true):
    err = est - true
    R = len(est)
    cover = np.abs(err) <= hw
    return {"mean": float(est.mean()), "mse": float(np.mean(err ** 2)), "bias": float(err.mean()),
            "bias_se": float(err.std(ddof=1) / np.sqrt(R)) if R > 1 else None,
            "coverage": float(cover.mean()), "coverage_se": float(np.sqrt(cover.mean() * (1 - cover.mean()) / R)),
            "mean_width": float(2 * hw.mean())}


def summarize(sim: dict, cost_verify: float = COST_VERIFY, cost_exhaustive: float = COST_EXHAUSTIVE) -> dict:
    """The JSON of ``bayes-eval ondemand simulate`` (issue 17 item 4): per system precision,
    recall, F1 (true; simple and joint: mean, mse, bias, coverage, mean width), the mean
    cost to reach half-width ε on every system's precision (verifications) and on every
    recall (exhaustive), labels, and the mean cost after each submission."""
    setting, runs, truth = sim["setting"], sim["runs"], sim["truth"]
    M, unv = setting.G.shape[1], setting.unverifiable
    systems = []
    for i, name in enumerate(setting.names):
        row = {"name": name, "size": int(setting.G[:, i].sum())}
        for k, meas in enumerate(("precision", "recall", "f1")):
            j = k * M + i
            row[meas] = {"true": float(truth[j])}
            for key, r in runs.items():
                row[meas][key] = _stats(r["value"][:, j], r["hw"][:, j], truth[j])
        for key, r in runs.items():
            row.setdefault("draws", {})[key] = float(r["n"][:, i].mean())
            row.setdefault("new_labels", {})[key] = float(r["new"][:, i].mean())
        if unv is not None:   # draws of instances nobody can verify (in draws and new_labels: sent, then skipped)
            row["unverifiable"] = int((setting.G[:, i] & unv).sum())
            row["skipped_draws"] = {key: float(r["skipped"][:, i].mean()) for key, r in runs.items()}
        systems.append(row)
    cost = {k: float(r["new"].sum(1).mean() * cost_verify) for k, r in runs.items()}
    cost_recall = {k: float(r["n0"].mean() * cost_exhaustive) for k, r in runs.items()}
    pairs = []
    for p, (a, b) in enumerate(sim["pairs"]):
        row = {"a": setting.names[a], "b": setting.names[b]}
        for k, meas in enumerate(("precision", "recall", "f1")):
            true = truth[k * M + b] - truth[k * M + a]
            row[meas] = {"true": float(true)}
            for key, r in runs.items():
                row[meas][key] = _stats(r["diff"][:, p, k], r["diff_hw"][:, p, k], true)
        pairs.append(row)
    eps = sim["epsilon"]
    return {
        "setting": setting.name, "epsilon": eps, "repeats": int(len(runs["joint"]["n"])),
        "systems": systems, "pairs": pairs,
        "cost": cost, "cost_recall": cost_recall,
        "cost_ratio": cost["joint"] / cost["simple"] if cost["simple"] else None,
        "cost_after": {k: (np.cumsum(r["new"], 1).mean(0) * cost_verify).tolist() for k, r in runs.items()},
        "labels": {"verify": {k: float(r["new"].sum(1).mean()) for k, r in runs.items()},
                   "exhaustive": {k: float(r["n0"].mean()) for k, r in runs.items()}},
        "reached": {k: float(np.mean(r["hw"][:, :M] <= eps + 1e-12)) for k, r in runs.items()},
        "reached_at_submission": {k: float(np.mean(r["hw_at"] <= eps + 1e-12)) for k, r in runs.items()},
        "recall_reachable": {k: float(np.mean(r["reach"])) for k, r in runs.items()},
        "cells": sim["cells"], "seconds": sim["seconds"],
        # instances nobody can verify (with_unverifiable): the truths above are those on the verifiable ones
        "unverifiable": None if unv is None else {
            "instances": int(unv.sum()), "predicted": int((unv & setting.G.any(1)).sum()),
            "predicted_correct": int((unv & setting.G.any(1) & setting.truth).sum()),
            "correct": int((unv & setting.truth).sum())},
    }
