"""The read side of an on-demand evaluation (seed ``003``): estimates and the status table.

:func:`status_of` turns the rows of an :class:`~bayes_eval.ondemand_session.OnDemand`
file into the estimators of :mod:`bayes_eval.ondemand`: the verification draws whose
instance has a known label (a verification, or found by exhaustive annotation) are the
samples X̂ⱼ; the exhaustive sample's units are Ŷ₀ (003 §"Problem statement").  Pure of
I/O: it reads the state dictionary it is given.
"""
from __future__ import annotations

import numpy as np

from . import ondemand as od
from .ondemand_domain import domain_precision

__all__ = ["status_of", "MEASURES", "ESTIMATOR_OF", "headline_estimator", "weighted_systems", "tallies",
           "complete_rounds", "precision_half_widths", "counted"]

MEASURES = ("precision", "recall", "f1")


def counted(n, noun: str, plural: str | None = None) -> str:
    """``"1 instance"``, ``"3 instances"``: a count and its noun, singular for exactly one."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def _interval(v, hw):
    if v is None or not np.isfinite(v):
        return None
    return {"estimate": float(v), "lo": float(v - hw), "hi": float(v + hw), "half_width": float(hw)}


#: the session protocols (``ondemand new --protocol``) and the estimator each leads with
ESTIMATOR_OF = {"joint": "joint", "post": "post", "post-fill": "post"}


def headline_estimator(config: dict, weighted=()) -> str:
    """The estimator a session's sizing, ``reached`` and pairs use: 003's ``joint`` for the
    ``joint`` protocol (and files made before protocols existed), the post-stratified
    ``post`` for ``post`` and ``post-fill`` — unless a system has ``weighted`` predictions
    (:func:`weighted_systems`): then ``joint`` under every protocol.

    Why: post-strata are the cells of equal pⱼ(x) over the systems (:func:`bayes_eval.ondemand.
    post_strata`, so that a draw landing in one is uniform on it), and a weighted system's
    distinct weights cut its predictions into strata of one or a few instances, each with its
    own rate from its own one or two draws and the +½ prior's variance.  Measured
    (``benchmarks/ondemand_weighted.py``: three systems of the synthetic universe, weights uniform
    in [0.5, 1.5], ε = 0.05, 100 scripted sessions): post-fill bought 841 verifications with
    coverage 1.00 (intervals far wider than the error), the joint estimator leading 665 with
    coverage 0.92-0.94; unweighted, post-fill 532 and 003's protocol 606."""
    return "joint" if len(weighted) else ESTIMATOR_OF[config.get("protocol", "joint")]


def weighted_systems(S: dict) -> list:
    """The names of the systems whose pᵢ is not uniform over their predictions (a ``weight``
    column that is not constant)."""
    P = S["P"]
    out = []
    for m, s in enumerate(S["systems"]):
        p = P[P[:, m] > 0, m]
        if len(p) and np.ptp(p) > 1e-9 * p.max():
            out.append(s[1])
    return out


def complete_rounds(S: dict) -> set:
    """The (system, round) pairs whose every draw has a known label.  Only these enter the
    estimates: the draws of a round still awaiting verifications that are labeled already are
    the ones whose instances earlier systems had verified, not a random part of the round
    (a system whose first round is out would be estimated from its overlap with the others
    alone: a precision of 0.26 ± 0.015 for a true 0.42)."""
    done, skipped = {}, S.get("skipped", ())
    for _, s, it, rnd, _ in S["draws"]:
        done[(s, rnd)] = done.get((s, rnd), True) and (it in S["known"] or it in skipped)
    return {k for k, v in done.items() if v}


def tallies(S: dict):
    """(T, n, drawn, new, (strata, cells, labels), U): the tallies T[j, c, f] of the verified draws in
    complete rounds (:func:`complete_rounds`), their number n[j] with the skipped ones, all draws and new
    verifications per system, and U[j, c] the skipped draws in complete rounds -- None where no drawn
    instance was skipped, so that every estimator is the plain one (``ondemand skip``,
    :mod:`bayes_eval.ondemand_domain`)."""
    systems, cell, index, known, sidx = S["systems"], S["cell"], S["index"], S["known"], S["sidx"]
    M, C = len(systems), len(S["cells"].size)
    strata, cs, fs, us = [], [], [], []
    drawn = np.zeros(M)
    new = np.zeros(M)
    complete = complete_rounds(S)
    for _, s, it, rnd, nw in S["draws"]:
        drawn[sidx[s]] += 1
        new[sidx[s]] += nw
        if (s, rnd) in complete:
            if it in known:
                strata.append(sidx[s])
                cs.append(cell[index[it]])
                fs.append(known[it])
            else:              # a complete round's instance is verified or skipped
                us.append((sidx[s], cell[index[it]]))
    T = od.tally(M, C, np.array(strata, dtype=np.int64), np.array(cs, dtype=np.int64),
                 np.array(fs, dtype=np.int64)) if M else np.zeros((0, C, 2))
    U = None
    if us:
        U = np.zeros((M, C))
        np.add.at(U, tuple(np.array(us, dtype=np.int64).T), 1.0)
    n = (T.sum((-1, -2)) + (0 if U is None else U.sum(-1))) if M else np.zeros(0)
    return T, n, drawn, new, (strata, cs, fs), U


def precision_half_widths(S: dict, estimator: str) -> np.ndarray:
    """z √Var π̂ᵢ of every system under ``estimator`` ("joint" or "post") from the labeled draws
    (the session's top-up after its sizing rounds reads it)."""
    T, n, _, _, _, U = tallies(S)
    if estimator == "post":
        _, cov, _ = od.post_precision(S["cells"], T, n, Rp=S.get("Rp"), skipped=U)
        return od.Z95 * np.sqrt(np.maximum(np.diagonal(cov), 0.0))
    _, psi, T = domain_precision(od.precision_influence(S["cells"], n, Rp=S.get("Rp")), T, U)
    return od.precision_half_width(T, psi)


def _post_covered(cells, n, Rp) -> np.ndarray:
    """Per system: every post-stratum of Xᵢ can get a draw (P(n_g ≥ 1) > 0) — else the
    post-stratified π̂ᵢ leaves part of Xᵢ out."""
    ps = od.post_strata(cells)
    P1, _ = od.nonempty_prob(ps, n, od.stratum_mass(cells, ps, Rp))
    return ~np.any((ps.P > 0) & (P1 <= 0)[:, None], axis=0)


def status_of(S: dict, config: dict) -> dict:
    """Estimates with 95% intervals per system (``simple``, 003's ``joint`` and the
    post-stratified ``post``), the paired differences (headline estimator), labels and costs."""
    systems = S["systems"]
    M = len(systems)
    eps, cv, ce = config["epsilon"], config["cost_verify"], config["cost_exhaustive"]
    cells, cell, index = S["cells"], S["cell"], S["index"]
    Rp = S.get("Rp")
    weighted = weighted_systems(S)
    head = headline_estimator(config, weighted)
    C = len(cells.size)
    T, n, drawn, new, (strata, cs, fs), U = tallies(S)
    # exhaustive sample: per unit, found instances in the pool X (systems with labeled draws), in each Xᵢ
    units = {}
    for it, u in S["found"]:
        units.setdefault(u, []).append(it)
    pooled = (cells.P[:, n > 0] > 0).any(1) if M and C else np.zeros(C, dtype=bool)
    t = np.zeros((len(units), 1 + M))
    m_u = np.zeros(len(units))
    for k, its in enumerate(units.values()):
        m_u[k] = len(its)
        for it in its:
            j = index.get(it)
            if j is not None:
                t[k, 0] += pooled[cell[j]]
                t[k, 1:] += cells.P[cell[j]] > 0
    have_recall = len(units) >= 2
    out = {"config": config, "estimator": head, "weighted_systems": weighted, "n_units": len(units), "n_found": int(m_u.sum()),
           "skipped": len(S.get("skipped", ())),
           "labels": {"verifications": int(S["n_verified"]),
                      "exhaustive": int(m_u.sum())},
           "cost": {"verify": float(new.sum() * cv), "exhaustive": float(m_u.sum() * ce)}}
    out["cost"]["total"] = out["cost"]["verify"] + out["cost"]["exhaustive"]
    # verifications drawn and not yet labeled are in the cost (committed), not in the labels
    # (a skipped instance was a new draw too: its verification was tried, and is no longer awaited)
    out["cost"]["awaiting"] = float(max(int(new.sum()) - int(S["n_verified"]) - len(S.get("skipped", ())), 0) * cv)
    if M == 0 or n.sum() == 0:
        out["systems"] = [{"name": s[1], "items": int(s[2]), "draws": int(drawn[k]), "labeled_draws": 0,
                           "awaiting_draws": int(drawn[k]),
                           "new_verifications": int(new[k]), "cost": float(new[k] * cv)}
                          for k, s in enumerate(systems)]
        out["pairs"] = []
        return out
    est_e, cov_e = od.exhaustive_stats(t, m_u) if have_recall else (np.full(1 + M, np.nan),
                                                                     np.zeros((1 + M, 1 + M)))
    parts_j = od.joint_parts(cells, T, n, Rp=Rp, skipped=U)
    parts_p = od.post_parts(cells, T, n, Rp=Rp, skipped=U)
    est = {"joint": od.joint_estimates(cells, T, n, est_e[0], cov_e[0, 0], parts=parts_j),
           "post": od.joint_estimates(cells, T, n, est_e[0], cov_e[0, 0], parts=parts_p),
           "simple": od.simple_estimates(cells, T, n, est_e[1:], cov_e[1:, 1:], Rp=Rp, skipped=U)}
    Q = od.proposals(cells, od.mixture_weights(cells, n, Rp=Rp), Rp)
    cover = {"joint": ~np.any((cells.P > 0) & (Q <= 0), axis=0), "post": _post_covered(cells, n, Rp)}
    covered = cover[head]
    parts = parts_p if head == "post" else parts_j
    rows = []
    for i, s in enumerate(systems):
        row = {"name": s[1], "items": int(s[2]), "draws": int(drawn[i]), "labeled_draws": int(n[i]),
               "awaiting_draws": int(drawn[i] - n[i]),
               "new_verifications": int(new[i]), "cost": float(new[i] * cv), "covered": bool(covered[i])}
        for k, meas in enumerate(MEASURES):
            j = k * M + i
            row[meas] = {}
            for kind in ("joint", "simple", "post"):
                ok = (cover[kind][i] if kind != "simple" else n[i] > 0) and (k == 0 or have_recall)
                e = est[kind]
                row[meas][kind] = _interval(e.value[j], e.half_width[j]) if ok else None
        u_i = 0 if U is None else int(U[i].sum())
        if u_i:
            row["skipped_draws"] = u_i
        if n[i] > u_i and (Rp is None or np.allclose(Rp[i], cells.P[:, i])):   # own draws from pᵢ
            k1 = sum(fs[d] for d in range(len(fs)) if strata[d] == i)
            lo, hi = od.wilson(k1, n[i] - u_i)
            row["precision"]["simple_wilson"] = {"lo": float(lo), "hi": float(hi)}
        row["reached"] = bool(row["precision"][head] is not None and row["precision"][head]["half_width"] <= eps)
        rows.append(row)
    out["systems"] = rows
    pairs = []
    for a in range(M):
        for b in range(a + 1, M):
            if not (covered[a] and covered[b]):
                continue
            d, hw = od.differences(est[head], a, b, M)
            entry = {"a": systems[a][1], "b": systems[b][1]}
            for k, meas in enumerate(MEASURES):
                entry[meas] = _interval(d[k], hw[k]) if (k == 0 or have_recall) else None
            pairs.append(entry)
    out["pairs"] = pairs
    if have_recall:
        var_nu = np.diagonal(parts[2])[M:]
        sm = (t.sum(0) + 1) / (m_u.sum() + 2)
        nj, reach = od.required_exhaustive(np.array(sm[0]), parts[1], var_nu, None, eps, 10 ** 6)
        ns, _ = od.required_exhaustive(None, None, None, sm[1:], eps, 10 ** 6, joint=False)
        out["exhaustive_needed"] = {"joint": int(nj) if reach else None, "simple": int(ns),
                                    "joint_reachable": bool(reach)}
    return out
