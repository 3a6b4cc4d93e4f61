"""On-demand evaluation of several systems (seed ``003``): the stateful shell.

:class:`OnDemand` is the Python API with the verbs of ``bayes-eval ondemand`` (issue 17
item 3): :meth:`~OnDemand.create` (``new``), :meth:`~OnDemand.submit_file` /
:meth:`~OnDemand.submit` (``submit``), :meth:`~OnDemand.next` (``next``),
:meth:`~OnDemand.ingest` / :meth:`~OnDemand.add_labels` (``ingest``),
:meth:`~OnDemand.add_exhaustive` (``add-exhaustive``), :meth:`~OnDemand.skip` (``skip``: instances
nobody can verify), :meth:`~OnDemand.status` (``status``); ``report`` is :func:`bayes_eval.ondemand_report.write_report`.

Protocol (003 §"Summary"): when system m is submitted, the number of verification draws
it needs is the bisection of the variance bound given every label so far
(:func:`bayes_eval.ondemand.required_draws`, or :func:`~bayes_eval.ondemand.post_required_draws`
for the post-stratified estimator); instances already verified are reused at no cost.  The
draws are made in ``rounds`` (default 4): the first at submission, the next by ``next`` once
the previous round's labels are in, each sized again with them
(:func:`bayes_eval.ondemand.round_size`); after the rounds ``next`` tops up any system whose
realized half-width is still above ε (the protocol ``benchmarks/ondemand.py`` measures).
Which proposal and estimator: :data:`PROTOCOLS`.  An instance found by exhaustive annotation is
correct, so it needs no verification either.  Every write is one transaction of
:class:`bayes_eval.ondemand_store.OnDemandStore`; every check runs before anything is
written, so a refused input changes nothing; re-ingesting a file already ingested is a
no-op.
"""
from __future__ import annotations

import csv
import hashlib
import io
import os
import time

import numpy as np

from . import ondemand as od
from .annotate import parse_label_map, parse_labels, prepare_output, read_labels, write_batch_tmp, os_problem
from .errors import (EmptyInputError, LabelConflictError, MalformedInputError, NotDrawnError, SessionError,
                     UnknownItemError)
from .ondemand_status import counted, headline_estimator, precision_half_widths, weighted_systems
from .ondemand_store import SKIPS_TABLE, OnDemandStore

__all__ = ["OnDemand", "read_system_file", "PROTOCOLS", "DEFAULT_PROTOCOL"]

#: ``ondemand new --protocol``: how each submitted system is sampled and sized, and which
#: estimator leads (``status``'s ``"estimator"``).  ``post-fill`` (default): draws from
#: :func:`bayes_eval.ondemand.post_fill_proposal`, the post-stratified estimator
#: (:func:`bayes_eval.ondemand.post_precision`); ``post``: draws from pₘ, the post-stratified
#: estimator; ``joint``: 003's protocol and joint estimator (files made before protocols existed).
#: The post-stratified estimator and the post-fill proposal are our extensions of 003.
PROTOCOLS = ("post-fill", "post", "joint")
DEFAULT_PROTOCOL = "post-fill"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_system_file(path: str):
    """Instance ids (column ``item``, else the first column) and optional ``weight`` of a
    CSV / TSV (;-separated too), Parquet, JSON lines or JSON file (:func:`bayes_eval.tables.read_table`);
    raises :class:`MalformedInputError` naming the row."""

    from .tables import read_table

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise SessionError(f"predictions file not found: {path}")
    with open(path, "rb") as fh:
        data = fh.read()
    frame, sep, _ = read_table(path, what="predictions file", error=MalformedInputError, data=data, text=True)
    if frame.shape[1] == 0 or len(frame) == 0:
        raise EmptyInputError(f"{path}: no predictions (an empty file)")
    col = "item" if "item" in frame.columns else frame.columns[0]
    items = [str(v).strip() for v in frame[col]]
    weights = None
    if "weight" in frame.columns:
        if sep == ";":   # a ;-separated export writes decimal commas (0,5)
            frame["weight"] = frame["weight"].str.replace(",", ".", regex=False)
        weights = np.array([_weight(v, path, k) for k, v in enumerate(frame["weight"])], dtype=np.float64)
    return items, weights, _sha(data), path


def _weight(v, path, k):
    """One ``weight`` cell as a float, one parser for every cell (``nan`` and ``inf`` parse, and
    ``submit`` refuses them by row); a cell that is not a number names its row."""
    try:
        return float(v)
    except (TypeError, ValueError):
        raise MalformedInputError(f"{path}: row {k + 2}: weight {v!r} is not a number (give a positive "
                                  f"number, or leave the 'weight' column out for equal weights)") from None


class OnDemand:
    """One on-demand evaluation, kept in one SQLite file (module docstring)."""

    def __init__(self, store: OnDemandStore):
        self.store = store
        self.config = store.meta()["config"]
        self.protocol = self.config.get("protocol", "joint")   # files made before protocols: 003's
        self.estimator = headline_estimator(self.config)

    # ------------------------------------------------------------------ files
    @classmethod
    def create(cls, path, epsilon: float = 0.05, cost_verify: float = 0.18, cost_exhaustive: float = 1.60,
               seed: int = 0, rounds: int = 4, protocol: str = DEFAULT_PROTOCOL) -> "OnDemand":
        if protocol not in PROTOCOLS:
            raise SessionError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}",
                               cli=f"--protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
        for name, v, lo in (("epsilon", epsilon, 0), ("cost_verify", cost_verify, 0),
                            ("cost_exhaustive", cost_exhaustive, 0)):
            if not np.isfinite(v) or v <= lo or (name == "epsilon" and v >= 1):
                raise SessionError(f"{name} must be {'in (0, 1)' if name == 'epsilon' else 'positive'}, got {v}",
                                   cli=f"--{name.replace('_', '-')} must be "
                                       f"{'in (0, 1)' if name == 'epsilon' else 'positive'}, got {v}")
        if int(rounds) < 1:
            raise SessionError(f"rounds must be at least 1, got {rounds}")
        cfg = {"epsilon": float(epsilon), "cost_verify": float(cost_verify),
               "cost_exhaustive": float(cost_exhaustive), "seed": int(seed), "rounds": int(rounds), "z": od.Z95,
               "protocol": protocol}
        return cls(OnDemandStore.create(path, cfg))

    @classmethod
    def open(cls, path) -> "OnDemand":
        return cls(OnDemandStore.open(path))

    def close(self):
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ state
    def _state(self):
        """Systems, the universe, cells, known labels and draws, read from the file."""
        st = self.store
        systems = st.rows("SELECT system, name, n_items, source FROM systems ORDER BY system")
        preds = st.rows("SELECT system, item, p FROM predictions")
        items = sorted({r[1] for r in preds})
        index = {it: k for k, it in enumerate(items)}
        sidx = {s[0]: k for k, s in enumerate(systems)}
        P = np.zeros((len(items), len(systems)))
        for s, it, p in preds:
            P[index[it], sidx[s]] = p
        cells, cell = od.cells_of(P) if len(items) else (od.Cells(np.zeros((0, len(systems))), np.zeros(0)),
                                                          np.zeros(0, dtype=np.int64))
        known = {it: int(lab) for it, lab in st.rows("SELECT item, label FROM labels")}
        n_verified = len(known)   # every verification bought, those later found exhaustively too
        found = st.rows("SELECT item, unit FROM exhaustive ORDER BY id")
        for it, _ in found:
            known[it] = 1
        draws = st.rows("SELECT draw, system, item, round, new FROM draws ORDER BY draw")
        Rp = None
        if self.protocol == "post-fill" and len(items):
            Rp = cells.P.T.copy()                     # (M, C): each stratum's per-instance proposal
            for s, it, q in st.rows("SELECT system, item, q FROM proposals"):
                Rp[sidx[s], cell[index[it]]] = q
        return {"systems": systems, "sidx": sidx, "items": items, "index": index, "P": P, "cells": cells,
                "cell": cell, "known": known, "found": found, "draws": draws, "Rp": Rp, "n_verified": n_verified,
                "skipped": set(st.skipped_items())}

    def _fill(self, S, group=None):
        """f̃ per cell for the variance bound (:func:`bayes_eval.ondemand.cell_fill`); ``group``:
        the labels pooled by post-stratum first (the post-stratified bound)."""
        C = len(S["cells"].size)
        pos, ver = np.zeros(C), np.zeros(C)
        for it, lab in S["known"].items():
            k = S["index"].get(it)
            if k is not None:
                ver[S["cell"][k]] += 1
                pos[S["cell"][k]] += lab
        if group is None:
            return od.cell_fill(S["cells"].size, pos, ver)
        sz, ps_, vr = (np.bincount(group, weights=x) for x in (S["cells"].size, pos, ver))
        return od.cell_fill(sz, ps_, vr)[group]

    def _n_draws(self, S):
        n = np.zeros(len(S["systems"]))
        for _, s, _, _, _ in S["draws"]:
            n[S["sidx"][s]] += 1
        return n

    def _n_max(self):
        return int(np.ceil(2 * od.Z95 ** 2 / self.config["epsilon"] ** 2))

    def _required(self, S, m, n, fill_prop=None):
        """Draws system m needs in all by the bound of the protocol's estimator, given every
        label so far (003 §"Adaptively choosing the number of samples")."""
        eps, n_max, cells = self.config["epsilon"], self._n_max(), S["cells"]
        if self._estimator(S) == "joint":
            return int(od.required_draws(cells, n, m, self._fill(S), eps, n_max))
        fill = self._fill(S, od.post_strata(cells).group)
        return int(od.post_required_draws(cells, n, m, fill, eps, n_max, Rp=S["Rp"], fill_prop=fill_prop))

    def _estimator(self, S) -> str:
        """The estimator that leads now: the protocol's, or 003's joint once a system is
        weighted (:func:`bayes_eval.ondemand_status.headline_estimator` says why)."""
        return headline_estimator(self.config, weighted_systems(S))

    def _plan(self, S, m, last):
        """(required draws for system m by the bound, draws to add now)."""
        n = self._n_draws(S)
        req = self._required(S, m, n)
        return req, int(od.round_size(req, n[m], last))

    def _proposal(self, S, m):
        """The ``post-fill`` proposal of a newly submitted system m (constant on the post-strata of
        the systems so far; :func:`bayes_eval.ondemand.post_fill_proposal`), sized by the bound
        under itself: q per cell.  pₘ itself — 003's protocol — once a system is weighted (the
        joint estimator leads then; :func:`bayes_eval.ondemand_status.headline_estimator`)."""
        cells = S["cells"]
        if self._estimator(S) == "joint":
            return cells.P[:, m].copy()
        n = self._n_draws(S)
        D_prev = n @ S["Rp"]                                   # expected draws per instance so far
        weight = od.post_strata(cells).P[:, m]                  # N_g pₘ(g): proportional to pₘ's mass

        def prop_of(k):
            return od.post_fill_proposal(cells, D_prev, m, k, weight=weight)
        n_plan = self._required(S, m, n, fill_prop=prop_of)
        return prop_of(max(n_plan, 1))

    def _draw(self, S, m, k, rnd):
        """k draws from system m's stratum proposal (pₘ, or its stored post-fill proposal): a
        pure function of seed, system, round."""
        system = S["systems"][m][0]
        table = "proposals" if self.protocol == "post-fill" else "predictions"
        col = "q" if self.protocol == "post-fill" else "p"
        rows = self.store.rows(f"SELECT item, {col} FROM {table} WHERE system=? ORDER BY item", (system,))
        items = [r[0] for r in rows]
        p = np.array([r[1] for r in rows])
        rng = np.random.default_rng([self.config["seed"], int(system), int(rnd)])
        picked = rng.choice(len(items), size=int(k), p=p / p.sum())
        pending = {d[2] for d in S["draws"]}
        out = []
        for j in picked:
            it = items[j]
            new = it not in S["known"] and it not in pending
            pending.add(it)
            out.append((system, it, int(rnd), int(new)))
        return out

    # ------------------------------------------------------------------ verbs
    def submit_file(self, name: str, path) -> dict:
        items, weights, sha, source = read_system_file(path)
        return self.submit(name, items, weights, source=source, sha256=sha)

    def submit(self, name: str, items, weights=None, source: str | None = None, sha256: str | None = None) -> dict:
        """Submit system ``name`` predicting ``items`` (optionally weighted: pᵢ ∝ weight);
        draws its first round of verifications; returns what it needs and why."""
        name = str(name).strip()
        if not name:
            raise SessionError("a system needs a non-empty name")
        items = [str(i).strip() for i in items]
        where = source or "items"
        if not items:
            raise EmptyInputError(f"{where}: no predictions")
        for k, it in enumerate(items):
            if not it:
                raise MalformedInputError(f"{where}: row {k + 2}: empty instance id")
        seen = {}
        for k, it in enumerate(items):
            if it in seen:
                raise MalformedInputError(f"{where}: instance {it!r} appears twice (rows {seen[it] + 2} and {k + 2})")
            seen[it] = k
        w = np.ones(len(items)) if weights is None else np.asarray(weights, dtype=np.float64)
        if len(w) != len(items):
            raise MalformedInputError(f"{where}: {len(w)} weights for {len(items)} instances")
        bad = np.flatnonzero(~np.isfinite(w) | (w <= 0))
        if len(bad):
            raise MalformedInputError(f"{where}: row {bad[0] + 2} (instance {items[bad[0]]!r}): weight {w[bad[0]]} "
                                      f"must be a positive number")
        sha256 = sha256 or _sha(("\n".join(items) + "|" + ",".join(map(repr, w))).encode())
        old = self.store.rows("SELECT system, sha256 FROM systems WHERE name=?", (name,))
        if old:
            if old[0][1] == sha256:
                return {**self._describe(name), "already": True}
            raise SessionError(f"a system named {name!r} was already submitted with other predictions; "
                               f"choose another name")
        p = w / w.sum()
        now = time.time()
        with self.store.transaction() as conn:
            cur = conn.execute("INSERT INTO systems(name, sha256, source, n_items, submitted_at) VALUES (?,?,?,?,?)",
                               (name, sha256, source, len(items), now))
            system = cur.lastrowid
            conn.executemany("INSERT INTO predictions(system, item, p) VALUES (?,?,?)",
                             [(system, it, float(pi)) for it, pi in zip(items, p)])
            S = self._state()  # read inside the transaction: sees the new system
            m = S["sidx"][system]
            if self.protocol == "post-fill":
                q = self._proposal(S, m)
                conn.executemany("INSERT INTO proposals(system, item, q) VALUES (?,?,?)",
                                 [(system, it, float(q[S["cell"][S["index"][it]]])) for it in items])
                S["Rp"][m] = q
            req, k = self._plan(S, m, self.config["rounds"] == 1)
            draws = self._draw(S, m, k, 0)
            conn.executemany("INSERT INTO draws(system, item, round, new) VALUES (?,?,?,?)", draws)
        out = self._describe(name)
        out["required"] = req
        out["why"] += (f"; the bound with the labels known now asks for {counted(req, 'draw')} in all, made in up "
                       f"to {counted(self.config['rounds'], 'round')} (each re-sized with the labels of the last): "
                       f"{k} now")
        return out

    def _describe(self, name):
        """What system ``name`` needed and why (for ``submit``)."""
        S = self._state()
        m = next(k for k, s in enumerate(S["systems"]) if s[1] == name)
        system = S["systems"][m][0]
        P = S["P"]
        mine = P[:, m] > 0
        others = (P[:, [j for j in range(P.shape[1]) if j != m]] > 0).any(1) if P.shape[1] > 1 else np.zeros_like(mine)
        shared = float(P[mine & others, m].sum())
        known = np.array([it in S["known"] for it in S["items"]])
        draws = [d for d in S["draws"] if d[1] == system]
        new = sum(d[4] for d in draws)
        n = len(draws)
        eps = self.config["epsilon"]
        why = (f"{name}: {counted(int(mine.sum()), 'instance')}, {shared:.0%} of its mass shared with earlier "
               f"systems, {float(P[mine & known, m].sum()):.0%} already labeled (target half-width {eps}); "
               f"{counted(n, 'draw')} from {name} so far ({n - new} reuse a label already bought or pending, "
               f"{counted(new, 'new verification')}, ${new * self.config['cost_verify']:.2f})")
        return {"name": name, "draws": n, "new_verifications": int(new),
                "cost": new * self.config["cost_verify"], "shared_mass": shared, "why": why}

    def _pending(self, S):
        out = {}
        names = {s[0]: s[1] for s in S["systems"]}
        for _, s, it, _, _ in S["draws"]:
            if it not in S["known"] and it not in S["skipped"]:
                out.setdefault(it, set()).add(names[s])
        return out

    def next(self, out=None, fmt: str | None = None) -> dict:
        """Top up every system whose drawn instances are all labeled and whose precision is
        not yet within ε — the next sizing round while its ``rounds`` last (each re-sized by
        the bound with the labels so far), then, on the realized half-width of the protocol's
        estimator, ``n((hw/ε)² − 1)`` more draws (:func:`bayes_eval.ondemand.top_up`, at most
        2z²/ε² draws per system; earlier systems too, whose intervals later submissions
        widened) — then list, and write to ``out``, Label Studio compatible
        (:func:`bayes_eval.annotate.write_batch`), every instance awaiting a verification.
        The file is written before the draws are stored, so a failed ``next`` writes nothing."""
        import pandas as pd

        if out is not None:
            fmt = prepare_output(out, fmt)
        S = self._state()
        pending = self._pending(S)
        new_draws = []
        # passes until no system gets a draw: a pass whose draws all reuse known labels gives that
        # system no task, so it is planned again at once with those labels (no empty `next`)
        for _ in range(1000):
            made = len(new_draws)
            hw = None
            for m, (system, name, _, _) in enumerate(S["systems"]):
                mine = [d for d in S["draws"] if d[1] == system]
                rnd = max((d[3] for d in mine), default=-1) + 1
                if any(d[2] in pending for d in mine):
                    continue
                k = 0
                if rnd < self.config["rounds"]:
                    _, k = self._plan(S, m, rnd == self.config["rounds"] - 1)
                if k == 0:                    # rounds done or the bound met: top up on the realized width
                    if hw is None:
                        hw = precision_half_widths(S, self._estimator(S))
                    k = int(od.top_up(hw[m], len(mine), self.config["epsilon"], self._n_max()))
                if k > 0:
                    drawn = self._draw(S, m, k, rnd)
                    new_draws += drawn
                    S["draws"] = S["draws"] + [(None,) + tuple(d) for d in drawn]
                    for d in drawn:
                        if d[1] not in S["known"] and d[1] not in S["skipped"]:
                            pending.setdefault(d[1], set()).add(name)
            if len(new_draws) == made:
                break
        frame = pd.DataFrame({"item": list(pending), "systems": [";".join(sorted(v)) for v in pending.values()]})
        # nothing to verify still writes the (empty) file: an older tasks file left in place
        # would be sent to the annotators again
        tmp = write_batch_tmp(frame, out, fmt) if out is not None else None
        try:
            if new_draws:
                with self.store.transaction() as conn:
                    conn.executemany("INSERT INTO draws(system, item, round, new) VALUES (?,?,?,?)", new_draws)
        except BaseException:
            if tmp:
                os.remove(tmp)
            raise
        if tmp:
            try:
                os.replace(tmp, os.fspath(out))
            except OSError as exc:
                os.remove(tmp)
                raise SessionError(f"cannot write {out}: {os_problem(exc)}") from None
        return {"tasks": len(frame), "items": list(pending), "new_draws": len(new_draws), "out": out}

    def ingest(self, path, fmt: str | None = None, from_name: str | None = None, label_map=None,
               resolve: str = "error") -> dict:
        """Verifications from a labels file (CSV ``item,label``; JSONL; Label Studio JSON);
        ``label_map``: other label names, ``{"no": 0, "yes": 1}`` or ``"no=0,yes=1"`` (``--label-map``);
        ``resolve``: the rule for annotators who disagree on an instance, as ``session ingest``'s
        (:func:`bayes_eval.annotate_resolve.resolve`: error, majority, ground-truth, first or an
        annotator; a disagreement resolved by an earlier ingest keeps its label).  In the result,
        ``skipped`` counts its rows without a label (not yet verified), ``resolved`` the disagreements
        the rule decided, ``cancelled`` the annotations cancelled in Label Studio and
        ``cancelled_items`` the instances still awaiting a verification that every annotator skipped."""
        from .annotate_resolve import resolve as resolve_annotations

        recs = read_labels(path, fmt, from_name)
        names = parse_label_map(label_map)
        stored = {str(it): int(lab) for it, lab in self.store.rows("SELECT item, label FROM labels")}
        recs, n_resolved = resolve_annotations(recs, resolve, 2, names, held=lambda it: stored.get(str(it).strip()),
                                               stochastic_hint=False)
        labels = parse_labels(recs.labels, 2, names, recs.where)
        with open(path, "rb") as fh:
            sha = _sha(fh.read())
        out = self.add_labels(recs.items, labels, source=os.fspath(path), sha256=sha, where=recs.where)
        verified = stored.keys() | {str(it).strip() for it in recs.items}
        nobody = [str(it) for it in dict.fromkeys(recs.cancelled_items) if str(it).strip() not in verified]
        return {**out, "skipped": int(recs.skipped), "resolved": n_resolved, "cancelled": int(recs.cancelled),
                "cancelled_items": nobody}

    def add_labels(self, items, labels, source: str | None = None, sha256: str | None = None, where=None) -> dict:
        """Verifications (0/1) of drawn instances, all or none (checks first)."""
        items = [str(i).strip() for i in items]
        labels = [int(v) for v in np.asarray(labels).reshape(-1)]
        where = where or [f"record {k + 1} (item {it!r})" for k, it in enumerate(items)]
        if not items:
            raise EmptyInputError(f"{source or 'add_labels'}: no labels")
        if len(labels) != len(items):
            raise MalformedInputError(f"{len(labels)} labels for {len(items)} items")
        sha256 = sha256 or _sha(repr((items, labels)).encode())
        if self.store.has_ingest(sha256, "labels"):
            return {"new": 0, "already": True, "rows": len(items)}
        S = self._state()
        drawn = {d[2] for d in S["draws"]}
        found = {it for it, _ in S["found"]}
        stored = {it: lab for it, lab in self.store.rows("SELECT item, label FROM labels")}
        batch = {}
        for it, lab, w in zip(items, labels, where):
            if lab not in (0, 1):
                raise MalformedInputError(f"{w}: label {lab} is not 0 or 1")
            if it not in drawn:
                if it in S["index"]:
                    raise NotDrawnError(f"{w}: instance {it!r} was never drawn for verification (ask 'next' for "
                                        f"the instances to verify)")
                raise UnknownItemError(f"{w}: instance {it!r} is not predicted by any submitted system")
            prev = stored.get(it, batch.get(it, (None, None))[0])
            if it in found and lab == 0:
                raise LabelConflictError(f"{w}: instance {it!r} labeled 0, but exhaustive annotation found it "
                                         f"correct")
            if prev is not None and prev != lab:
                first = (f"the label stored earlier is {prev}" if it in stored
                         else f"{batch[it][1]} labels it {prev}")
                raise LabelConflictError(f"{w}: instance {it!r} labeled {lab}, but {first} (a verification, once "
                                         f"given, stands: correct this row or drop it; nothing was ingested)")
            if it in S["skipped"]:
                raise LabelConflictError(f"{w}: instance {it!r} was recorded as beyond any annotator (ondemand "
                                         f"skip), and the estimates describe the instances that can be verified "
                                         f"without it; drop this row (nothing was ingested)")
            if it not in stored:
                batch[it] = (lab, w)
        with self.store.transaction() as conn:
            cur = conn.execute("INSERT INTO ingests(sha256, kind, source, n_rows, n_new, at) VALUES (?,?,?,?,?,?)",
                               (sha256, "labels", source, len(items), len(batch), time.time()))
            conn.executemany("INSERT INTO labels(item, label, ingest) VALUES (?,?,?)",
                             [(it, v[0], cur.lastrowid) for it, v in batch.items()])
        return {"new": len(batch), "already": False, "rows": len(items)}

    def skip(self, items, source: str | None = None) -> dict:
        """Record drawn instances as beyond any annotator (``ondemand skip``), all or none (checks first).

        Being unverifiable is a property of the instance: the estimates then describe the instances that can
        be verified, D (domain estimation, :mod:`bayes_eval.ondemand_domain`) -- precision on D, recall of
        the correct instances of D.  A skipped instance is never sent again; a round whose other draws are
        verified enters the estimates (its skipped draws counted in the round's size, as drawn), and a later
        draw of it costs nothing.  Refused: an instance never drawn or unknown, one already verified or
        found by exhaustive annotation (it was verifiable).  Skipping one already skipped changes nothing."""
        items = list(dict.fromkeys(str(i).strip() for i in items))
        if not items or not all(items):
            raise EmptyInputError("ondemand skip: no instance given" if not items else
                                  "ondemand skip: an empty instance id")
        S = self._state()
        drawn = {d[2] for d in S["draws"]}
        found = {it for it, _ in S["found"]}
        for it in items:
            if it not in drawn:
                if it in S["index"]:
                    raise NotDrawnError(f"instance {it!r} was never drawn for verification (nothing was recorded)")
                raise UnknownItemError(f"instance {it!r} is not predicted by any submitted system (nothing was "
                                       f"recorded)")
            if it in S["known"]:   # verified, or found by exhaustive annotation
                raise LabelConflictError(f"instance {it!r} is already {'found by exhaustive annotation' if it in found else 'verified'}"
                                         f": it can be verified, so it cannot be skipped (nothing was recorded)")
        new = [it for it in items if it not in S["skipped"]]
        if new:
            with self.store.transaction() as conn:
                conn.execute(SKIPS_TABLE)
                cur = conn.execute("INSERT INTO ingests(sha256, kind, source, n_rows, n_new, at) VALUES (?,?,?,?,?,?)",
                                   (_sha(repr(new).encode()), "skips", source, len(items), len(new), time.time()))
                conn.executemany("INSERT INTO skips(item, ingest) VALUES (?,?)", [(it, cur.lastrowid) for it in new])
        return {"new": len(new), "already": len(items) - len(new), "skipped": len(S["skipped"]) + len(new)}

    def add_exhaustive(self, path) -> dict:
        """Instances found by exhaustive annotation: a CSV with columns ``item`` and ``unit``
        (the document it was found in; every correct instance of a unit is listed)."""
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise SessionError(f"exhaustive annotation file not found: {path}")
        with open(path, "rb") as fh:
            data = fh.read()
        sha = _sha(data)
        if self.store.has_ingest(sha, "exhaustive"):
            return {"new": 0, "already": True}
        try:
            rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))
        except (UnicodeDecodeError, csv.Error) as exc:
            raise MalformedInputError(f"{path}: not a readable CSV file ({exc})") from None
        if not rows:
            raise EmptyInputError(f"{path}: the file is empty")
        header = [h.strip() for h in rows[0]]
        for col in ("item", "unit"):
            if col not in header:
                raise MalformedInputError(f"{path}: no {col!r} column (columns are {header}); an exhaustive "
                                          f"annotation file needs columns 'item' and 'unit'")
        ii, iu = header.index("item"), header.index("unit")
        recs = []
        for line, row in enumerate(rows[1:], 2):
            if not any(c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise MalformedInputError(f"{path}: line {line}: {len(row)} fields, the header has {len(header)}")
            it, unit = row[ii].strip(), row[iu].strip()
            if not it or not unit:
                raise MalformedInputError(f"{path}: line {line}: empty {'item' if not it else 'unit'}")
            recs.append((it, unit, line))
        if not recs:
            raise EmptyInputError(f"{path}: no rows (only a header)")
        old_units = {u for _, u in self.store.rows("SELECT item, unit FROM exhaustive")}
        labels = {it: lab for it, lab in self.store.rows("SELECT item, label FROM labels")}
        skips = set(self.store.skipped_items())
        seen = set()
        for it, unit, line in recs:
            if unit in old_units:
                raise SessionError(f"{path}: line {line}: unit {unit!r} was already annotated in an earlier file "
                                   f"(a unit's instances come in one file)")
            if (unit, it) in seen:
                raise MalformedInputError(f"{path}: line {line}: instance {it!r} listed twice in unit {unit!r}")
            seen.add((unit, it))
            if labels.get(it) == 0:
                raise LabelConflictError(f"{path}: line {line}: instance {it!r} was verified incorrect (label 0), "
                                         f"but exhaustive annotation found it")
            if it in skips:
                raise LabelConflictError(f"{path}: line {line}: instance {it!r} was recorded as beyond any "
                                         f"annotator (ondemand skip), but exhaustive annotation found it correct")
        with self.store.transaction() as conn:
            cur = conn.execute("INSERT INTO ingests(sha256, kind, source, n_rows, n_new, at) VALUES (?,?,?,?,?,?)",
                               (sha, "exhaustive", path, len(recs), len(recs), time.time()))
            conn.executemany("INSERT INTO exhaustive(item, unit, ingest) VALUES (?,?,?)",
                             [(it, unit, cur.lastrowid) for it, unit, _ in recs])
        return {"new": len(recs), "units": len({u for _, u, _ in recs}), "already": False}

    # ------------------------------------------------------------------ estimates
    def status(self) -> dict:
        """Per system: precision, recall, F1 (joint and simple) with 95% intervals, draws,
        labels and cost attributable; the paired-difference table (joint); the exhaustive
        sample size each recall estimator needs for ε."""
        from .ondemand_status import status_of

        return status_of(self._state(), self.config)
