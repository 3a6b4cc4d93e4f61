"""A session's two kinds of stage, one interface: :class:`ReplacementStages` (with-replacement
draws: passive, stratified, is, oasis, ais) and :class:`PoissonRounds` (Poisson rounds:
poisson, poisson-adaptive).  :func:`stages_for` picks one from the compiled core, once, when
a :class:`~bayes_eval.session.Session` is built; the session then drives it without asking
which it is.

The interface (what the session calls, in the order of a stage's life):

* :meth:`draw` ``(stage, n, labeled, lab) -> StageDraw`` -- open a stage: the items of the
  next batch (a pure function of the seed, the stage and the labels so far), their
  proposal probability ``q`` and weight ``p/q``; ``status`` ``"open"``, ``"empty"`` (a
  Poisson round that drew nothing: recorded closed, then the next one is drawn) or
  ``"stalled"`` (nothing left to draw).  :meth:`frame_attrs` adds the kind's own
  ``DataFrame.attrs`` to the batch.
* :meth:`open_stage` -- a stage's draws are in the session: on replay, recompute what they
  were drawn with and refuse a file that disagrees.
* :meth:`close` -- the labels of the open stage are in: the new design state and proposal,
  with the session's tallies (pure: nothing changes until :meth:`commit`, after the session
  file has the labels).
* :meth:`estimate` ``(snapshots, i, j)`` -- the estimate of measure ``j`` after closed
  stage ``i``.
* :attr:`prop`, :meth:`proposal`, :attr:`rounds`, :meth:`is_exact`, :meth:`status_info`,
  :meth:`require_draws` -- what the session reports.

With-replacement stages (001 Alg. 1): a stage draws i.i.d. from the fixed proposal
q_{t-1} until its new items are in (:func:`~bayes_eval.drawing.draw_stage`); closing it
runs the core's compiled step -- R̂ with q_N = the proposal just used, ``design.update``,
``design.propose``; the estimate is importance-weighted (post-stratified for
``stratified``) from the per-(cell, class) tallies.

Poisson rounds (000 §3): round r with budget n has inclusion probabilities ``b`` per cell
-- ``poisson-adaptive``: :func:`~bayes_eval.poisson_designs.adaptive_round` with the oracle
model refitted to all labels after every round; ``poisson`` (static, 000 Alg. 2):
:func:`~bayes_eval.poisson_designs.static_proposal` at the cumulative budget, nested (round
r draws ``(b_r - b_{r-1}) / (1 - b_{r-1})`` among the unlabeled items).  The adaptive round
is *complete* (``b = 1`` on every unlabeled item that can matter) when the budgets reach
the number of such items, or none is left.  Items are selected by
:func:`~bayes_eval.drawing.poisson_pick`.  Each closed round keeps its cell-level
:class:`~bayes_eval.poisson_designs.RoundRecord`; the estimate after round t is
:func:`~bayes_eval.poisson_estimators.combine` over the records (static: the single Poisson
sample with ``b_t``).
"""
from __future__ import annotations

import json
import shlex
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401  (float64)
from .drawing import draw_stage, poisson_pick, stage_rng
from .errors import LabelConflictError, MalformedInputError, NotDrawnError, SessionError

__all__ = ["effective_draws", "stage_tallies", "StageSnapshot", "StageDraw", "Closing", "LabeledItems", "DrawLog", "StageKind", "ReplacementStages",
           "PoissonRounds", "stages_for", "match_deterministic", "match_stochastic"]


class StageSnapshot(NamedTuple):
    """The state after a closed stage: per-(cell, class) sums of the estimator, the
    proposal the stage used and the one it produced, and weight diagnostics."""

    stage: int
    n_new: int
    labels: int
    draws: int
    labeled: np.ndarray  # (X, C)
    draw_counts: np.ndarray  # (X, C)
    wsum: np.ndarray  # (X, C) Σ w
    w2sum: np.ndarray  # (X, C) Σ w² (the martingale variance, kernel.Tallies)
    prop_used: Any
    prop: Any
    sum_w: float
    sum_w2: float
    max_weight: float
    opened_at: float
    closed_at: float | None
    skip_w: float = 0.0  # Σ w of the draws of skipped items (outside the measure's population)
    # the model-assisted variance (kernel.Tallies.ew2_lab / ew2_unl) and the design state
    # after the stage (its Design.shares); None for Poisson rounds
    ew2_lab: np.ndarray | None = None
    ew2_unl: np.ndarray | None = None
    design_state: Any = None

    @property
    def n_eff(self) -> float:
        """The estimator's number of draws: all draws, scaled by the estimated share of the
        pool's mass that can be labeled, (Σw − Σw_skipped)/Σw (1 without skips, exactly), so
        that R̂ estimates the mean loss over the items that can be labeled (``Session.skip``)."""
        return effective_draws(self.draws, self.sum_w, self.skip_w)

    @property
    def ess(self) -> float:
        """Effective sample size (Σw)²/Σw² of all draws so far."""
        return self.sum_w**2 / self.sum_w2 if self.sum_w2 > 0 else 0.0


def stage_tallies(idx, w, keep, obs, n_cells: int, n_classes: int):
    """One stage's per-(cell, class) sums, each (X, C), from its draws (``idx`` = cell × C +
    class, ``w`` the weights p/q): the labels it brought (draws in ``obs``), and over the draws
    inside the population (``keep``) the draws, Σ w and Σ w² -- what closing a stage adds to
    the session's tallies (``Session._close_state``) and what a correction recomputes
    (``session_corrections``)."""
    size = n_cells * n_classes

    def count(mask, weights=None):
        return np.bincount(idx[mask], weights=None if weights is None else weights[mask],
                           minlength=size).reshape(n_cells, n_classes)

    return count(obs), count(keep), count(keep, w), count(keep, w * w)


def effective_draws(draws: int, sum_w: float, skip_w: float) -> float:
    """``draws`` × (Σw − Σw_skipped) / Σw: see :attr:`StageSnapshot.n_eff`."""
    if not skip_w:
        return float(draws)
    return float(draws) * max(sum_w - skip_w, 0.0) / sum_w


class LabeledItems(NamedTuple):
    """The labeled items of the closed stages (deterministic oracle), in label order: pool
    row, cell, class and position in the core's ``order``."""

    rows: np.ndarray
    cells: np.ndarray
    classes: np.ndarray
    gpos: np.ndarray

    @classmethod
    def empty(cls) -> "LabeledItems":
        return cls(*(np.zeros(0, np.int64) for _ in range(4)))

    def extend(self, rows, cells, classes, gpos) -> "LabeledItems":
        return LabeledItems(np.concatenate([self.rows, rows]), np.concatenate([self.cells, cells]),
                            np.concatenate([self.classes, classes]), np.concatenate([self.gpos, gpos]))


class DrawLog:
    """Growing per-draw arrays (every draw of every stage, in draw order)."""

    def __init__(self):
        self.stage, self.row, self.cell, self.new, self.q, self.w = [], [], [], [], [], []

    def __len__(self):
        return len(self.row)

    def extend(self, stage, rows, cells, new, q, w):
        self.stage.extend([stage] * len(rows))
        self.row.extend(int(r) for r in rows)
        self.cell.extend(int(c) for c in cells)
        self.new.extend(bool(b) for b in new)
        self.q.extend(float(v) for v in q)
        self.w.extend(float(v) for v in w)

    def arrays(self, lo=0, hi=None):
        sl = slice(lo, hi)
        return (np.asarray(self.row[sl], np.int64), np.asarray(self.cell[sl], np.int64),
                np.asarray(self.new[sl], bool), np.asarray(self.q[sl], np.float64),
                np.asarray(self.w[sl], np.float64))


class StageDraw(NamedTuple):
    """A stage as drawn, before anything is stored."""

    status: str  # "open" (items to label), "empty" (drew nothing: record it closed), "stalled" (nothing to draw)
    rows: np.ndarray  # (k,) pool rows in draw order
    cells: np.ndarray  # (k,)
    new: np.ndarray  # (k,) bool: asks for a label
    q: np.ndarray  # (k,) proposal (inclusion) probability of the item
    w: np.ndarray  # (k,) weight p/q
    stalled: bool  # fewer new items than asked (the proposal reaches no more)
    rng_state: str | None  # the generator's state after the draw (JSON)
    round: dict | None = None  # Poisson: the round's proposal (see PoissonRounds.propose_round)
    exhausted: bool = False  # Poisson: no unlabeled item that can matter is left


class Closing(NamedTuple):
    """What closing a stage changes in its kind's state (see ``commit``)."""

    state: Any  # the design's (Poisson: the oracle model's) state
    prop_used: Any
    prop: Any
    round: dict | None = None  # Poisson: the closed round's record


_EMPTY_I = np.zeros(0, np.int64)


def _nothing(status="stalled", stalled=True, rng_state=None, rnd=None, exhausted=False) -> StageDraw:
    return StageDraw(status, _EMPTY_I, _EMPTY_I, np.zeros(0, bool), np.zeros(0), np.zeros(0), stalled, rng_state,
                     rnd, exhausted)


class StageKind(Protocol):
    """The interface of both kinds of stage (see the module docstring)."""

    sampling: str  # "draws" or "rounds" (as ``bayes_eval.registry.DesignSpec.kind``)
    state: Any  # the design's state (Poisson: the oracle model's)
    prop: Any  # the proposal of the next stage (Poisson: of the last closed round; None before any)
    rounds: list  # Poisson: the closed rounds' records

    def draw(self, stage: int, n: int, labeled, lab: LabeledItems, skipped=None) -> StageDraw: ...

    def frame_attrs(self, draw: StageDraw | None, empty_rounds: int) -> dict: ...

    def open_stage(self, st: dict, rows, cells, q, rnd, labeled): ...

    def close(self, labeled_before, hits, labeled, draw_counts, wsum, n_draws: int, rnd) -> Closing: ...

    def commit(self, closing: Closing) -> None: ...

    def estimate(self, snapshots, i: int, j: int): ...

    def proposal(self, open_round=None): ...

    def is_exact(self, labeled) -> bool: ...

    def status_info(self, design_config: dict, labeled) -> dict: ...

    def require_draws(self, design_name: str) -> None: ...


def stages_for(core, *, seed: int, stochastic: bool, ids, path: str) -> StageKind:
    """The stage kind of a session's compiled core: :class:`PoissonRounds` for the Poisson
    designs, :class:`ReplacementStages` for the others."""
    kind = PoissonRounds if core.poisson is not None else ReplacementStages
    return kind(core, seed=seed, stochastic=stochastic, ids=ids, path=path)


class ReplacementStages:
    """With-replacement stages (passive, stratified, is, oasis, ais): the design's state and
    its current proposal ``Proposal(unl, lab)``."""

    sampling = "draws"

    def __init__(self, core, *, seed: int, stochastic: bool, ids, path: str):
        self.core = core
        self.seed = int(seed)
        self.stochastic = bool(stochastic)
        self.state, self.prop = core.init()
        self.rounds: list = []

    def proposal(self, open_round=None):
        return self.prop

    def is_exact(self, labeled) -> bool:
        return False

    def status_info(self, design_config: dict, labeled) -> dict:
        """Where the next stage's draws go (deterministic oracle): ``unlabeled_share``, the
        proposal's mass on items not labeled yet -- about one draw in ``1 / share`` asks for a
        new label, the rest re-draw labeled items for free -- and, for AIS, its audit floor and
        whether the floor holds the share up (:func:`~bayes_eval.designs.unlabeled_floor`:
        without it the stage would draw still more often for each new label)."""
        if self.stochastic:
            return {}
        unl = np.maximum(self.core.size - np.asarray(labeled).sum(1), 0.0)
        share = float(np.sum(unl * np.asarray(self.prop.unl)))
        out = {"unlabeled_share": share}
        floor = design_config.get("audit_floor")
        if floor is not None:
            out["audit_floor"] = float(floor)
            # once it binds the share is the floor (or below it where the mix is capped at 1/2)
            out["audit_floor_binds"] = bool(floor > 0 and share <= floor * (1 + 1e-9))
        return {"proposal": out}

    def require_draws(self, design_name: str) -> None:
        """Raise unless the estimate rests on importance-weighted draws."""

    def draw(self, stage: int, n: int, labeled, lab: LabeledItems, skipped=None) -> StageDraw:
        """I.i.d. draws from the current proposal until ``n`` new items (see
        :func:`~bayes_eval.drawing.draw_stage`; ``skipped`` row -> cell: items nobody can
        label, drawn but never asked for)."""
        core = self.core
        rng = stage_rng(self.seed, stage)
        prop = self.prop
        res = draw_stage(rng, np.asarray(prop.unl), np.asarray(prop.lab), core.size, core.order, core.cell_start,
                         int(n), self.stochastic, lab.cells, lab.classes, lab.rows, lab.gpos, skipped=skipped)
        if not res.new.any():
            return _nothing()
        w = core.p_cell[res.cells] / res.q
        return StageDraw("open", res.rows, res.cells, res.new, res.q, w, bool(res.stalled),
                         json.dumps(rng.bit_generator.state))

    def frame_attrs(self, draw: StageDraw | None, empty_rounds: int) -> dict:
        return {}

    def open_stage(self, st: dict, rows, cells, q, rnd, labeled):
        return None

    def close(self, labeled_before, hits, labeled, draw_counts, wsum, n_draws: int, rnd) -> Closing:
        """The compiled step of 001 Alg. 1 on the tallies after the stage."""
        prop_used = self.prop
        state, prop = self.core.step(self.state, jnp.asarray(labeled), jnp.asarray(draw_counts), jnp.asarray(wsum),
                                     jnp.asarray(float(n_draws)), prop_used)
        jax.block_until_ready(prop)
        return Closing(state, prop_used, prop)

    def commit(self, closing: Closing) -> None:
        self.state, self.prop = closing.state, closing.prop

    def estimate(self, snapshots, i: int, j: int):
        s = snapshots[i]
        ew2 = None if s.ew2_lab is None else (jnp.asarray(s.ew2_lab), jnp.asarray(s.ew2_unl))
        # projected onto what the labels allow unless items were skipped (bayes_eval.feasible)
        return self.core.estimate_fns[j](jnp.asarray(s.labeled), jnp.asarray(s.draw_counts), jnp.asarray(s.wsum),
                                         jnp.asarray(s.w2sum), jnp.asarray(s.n_eff), s.prop, ew2, s.design_state,
                                         project=not s.skip_w > 0)


class PoissonRounds:
    """Poisson rounds (poisson, poisson-adaptive): the oracle model's state, the closed
    rounds' records, the budgets so far and the round that labeled every item that can
    matter (``complete_round``, -1 before)."""

    sampling = "rounds"

    def __init__(self, core, *, seed: int, stochastic: bool, ids, path: str):
        self.core = core
        self.pc = core.poisson
        self.seed = int(seed)
        self.ids = ids
        self.path = path
        self.state, self.prop = core.init()
        self.rounds: list[dict] = []  # one record per closed round (RoundRecord fields and more, numpy)
        self.cum_budget = 0.0  # sum of the rounds' budgets n (closed and open)
        self.complete_round = -1

    def proposal(self, open_round=None):
        """The open round's :class:`~bayes_eval.poisson_designs.RoundProposal`, else the
        last closed one's (None before any)."""
        return open_round["prop"] if open_round is not None else self.prop

    def is_exact(self, labeled) -> bool:
        if self.complete_round < 0:
            return False
        if self.pc.design.adaptive:
            return True
        unl = self.core.size - labeled.sum(1)
        return bool(np.sum(unl * self.pc.support) == 0)

    def status_info(self, design_config: dict, labeled) -> dict:
        dkw = design_config
        return {"poisson": {
            "rounds": len(self.rounds),
            "round_size": "random" if dkw.get("fixed_size") is None else dkw.get("fixed_size"),
            "estimator": dkw.get("estimator"), "weights": dkw.get("weights"), "variance": dkw.get("variance"),
            "exact": self.is_exact(labeled),
        }}

    def require_draws(self, design_name: str) -> None:
        raise SessionError(f"estimate_draws is for importance-sampling designs; the Poisson design "
                           f"{design_name!r} estimates its measures from the round records (estimate())",
                           cli=f"the design's estimate of a measure the session was not created with needs an "
                               f"importance-sampling design's draws; the Poisson design {design_name!r} estimates "
                               f"only its own measures, from its round records (create the session with --measure "
                               f"pr_curve for the design's curve; without --no-bayesian the report draws the "
                               f"posterior's)")

    def propose_round(self, n: int, labeled) -> dict:
        """The next round's inclusion probabilities given the closed rounds (pure): the
        stage kernel's :func:`~bayes_eval.kernel.open_round`, as the simulation's scan.

        Adaptive: the round proposal with the model's predictive after the last refit,
        budget ``n``; the round is *complete* (``b = 1`` on every unlabeled item that can
        matter) when the budgets so far reach the number of such items — the simulation's
        rule — or when none is left.  Static: the proposal at the cumulative budget; the
        round draws the increment ``(b_t - b_{t-1}) / (1 - b_{t-1})`` among the unlabeled
        items (nested Poisson samples).
        """
        pc = self.pc
        cum = self.cum_budget + float(n)
        unl = self.core.size - labeled.sum(1)
        u_sup = float(np.sum(unl * pc.support))
        adaptive = pc.design.adaptive
        complete = bool(cum >= pc.n_support or u_sup <= 0) if adaptive else bool(cum >= pc.n_support)
        b_prev = self.rounds[-1]["b"] if self.rounds else np.zeros(unl.shape[0])
        prop, pi, draw_b = pc.open(self.state, jnp.asarray(labeled), jnp.asarray(b_prev),
                                   jnp.asarray(float(n) if adaptive else cum), jnp.asarray(complete))
        prop = jax.tree_util.tree_map(np.asarray, prop)
        return {"budget": float(n), "cum": cum, "complete": complete, "prop": prop, "b": prop.b,
                "draw_b": np.asarray(draw_b), "pi": np.asarray(pi), "u_sup": u_sup}

    def draw(self, stage: int, n: int, labeled, lab: LabeledItems, skipped=None) -> StageDraw:
        """Round ``stage`` of budget ``n`` (see :func:`~bayes_eval.drawing.poisson_pick`;
        ``skipped`` is unused: rounds refuse skips)."""
        core = self.core
        adaptive = self.pc.design.adaptive
        rd = self.propose_round(n, labeled)
        if rd["u_sup"] <= 0 and not (adaptive and self.complete_round < 0):
            return _nothing()
        rng = stage_rng(self.seed, stage)
        rows = poisson_pick(rng, core.item_cell, lab.rows, rd["draw_b"], int(n),
                            self.pc.design.fixed_size if adaptive else None)
        cells = core.item_cell[rows]
        q = rd["b"][cells]
        w = core.p_cell[cells] / q
        return StageDraw("open" if rows.size else "empty", rows, cells, np.ones(rows.size, bool), q, w, False,
                         json.dumps(rng.bit_generator.state), rd, rd["u_sup"] <= 0)

    def frame_attrs(self, draw: StageDraw | None, empty_rounds: int) -> dict:
        if draw is None:
            return {"complete": False, "expected_size": 0.0, "empty_rounds": empty_rounds}
        return {"complete": bool(draw.round["complete"]), "expected_size": float(draw.round["budget"]),
                "empty_rounds": empty_rounds}

    def open_stage(self, st: dict, rows, cells, q, rnd, labeled):
        """On replay (``rnd`` None) recompute the round's proposal from the labels so far
        and check it against the inclusion probabilities the stored items were drawn with."""
        if rnd is None:
            rnd = self.propose_round(int(st["n_requested"]), labeled)
            self.check_round(st, np.asarray(rows, np.int64), np.asarray(cells, np.int64), np.asarray(q, np.float64),
                             rnd)
        self.cum_budget = rnd["cum"]
        return rnd

    def check_round(self, st, rows, cells, q, rnd):
        """Replay check: the stored items' inclusion probabilities are those recomputed
        from the labels (else the file was written under other settings or code)."""
        if cells.size == 0:
            return
        want = rnd["b"][cells]
        if not np.allclose(q, want, rtol=1e-9, atol=0.0):
            k = int(np.flatnonzero(~np.isclose(q, want, rtol=1e-9, atol=0.0))[0])
            item = self.ids[int(rows[k])] if getattr(self.ids, "lazy", False) else np.asarray(self.ids)[rows[k]]
            item = item.item() if isinstance(item, np.generic) else item
            raise SessionError(
                f"{self.path}: round {st['stage']} cannot be replayed: its items were drawn with inclusion "
                f"probability {float(q[k])!r} (item {item!r}) but the labels so far give "
                f"{float(want[k])!r}; "
                f"the file was written by another version of bayes_eval or is damaged")

    def close(self, labeled_before, hits, labeled, draw_counts, wsum, n_draws: int, rnd) -> Closing:
        """The round's cell-level record and the model refitted to all labels: the stage
        kernel's :func:`~bayes_eval.kernel.step`, as the simulation's scan."""
        pc = self.pc
        prop = rnd["prop"]
        b_prev = self.rounds[-1]["b"] if self.rounds else np.zeros(labeled.shape[0])
        lb = np.asarray(labeled_before, np.float64)
        sampled = np.asarray(labeled, np.float64) - lb
        mstate, info = pc.close(self.state, jnp.asarray(lb), jnp.asarray(b_prev), prop, jnp.asarray(rnd["pi"]),
                                jnp.asarray(sampled))
        jax.block_until_ready(mstate)
        rec = info.record
        record = {"b": rnd["b"], "mean": np.asarray(rec.mean), "pi": rnd["pi"],
                  "labeled_before": np.asarray(rec.labeled_before), "sampled": np.asarray(rec.sampled),
                  "pred_var": np.asarray(rec.pred_var), "pi_after": np.asarray(info.pi_after),
                  "pi_check": np.asarray(info.pi_check),
                  "complete": rnd["complete"], "budget": rnd["budget"], "cum": rnd["cum"]}
        return Closing(mstate, prop, prop, record)

    def commit(self, closing: Closing) -> None:
        rnd = closing.round
        self.rounds.append(rnd)
        if rnd["complete"] and self.complete_round < 0:
            self.complete_round = len(self.rounds) - 1
        self.state, self.prop = closing.state, closing.prop

    def estimate(self, snapshots, i: int, j: int):
        """The estimate after round ``i`` for measure ``j``: the stage kernel's
        :func:`~bayes_eval.kernel.round_estimate` on the stacked round records, as the
        simulation computes it.  The records are zero-padded to a power of two (rounds
        after ``i`` get weight 0), so that a few compilations serve every round count."""
        pc = self.pc
        fn = pc.estimate_fns[j]
        snap = snapshots[i]
        rr = self.rounds
        cap = 8
        while cap < i + 1:
            cap *= 2

        def stack(key):
            first = np.asarray(rr[0][key], np.float64)
            out = np.zeros((cap,) + first.shape)
            for k in range(i + 1):
                out[k] = rr[k][key]
            return jnp.asarray(out)

        cr = self.complete_round if 0 <= self.complete_round <= i else -1
        return fn(stack("b"), stack("mean"), stack("pi"), stack("labeled_before"), stack("sampled"),
                  stack("pred_var"), jnp.asarray(i), jnp.asarray(snap.labeled), jnp.asarray(rr[i]["pi_after"]),
                  jnp.asarray(cr), jnp.asarray(rr[i]["pi_check"]))


def match_deterministic(pending, label_of, label_stage, items, rows, y, where, labels, skipped=(), path="DB"):
    """Deterministic oracle: which of the open stage's items (``pending``: row -> draw)
    the labels ``y`` of pool ``rows`` answer.  Returns ``(new, n_dup)``: row -> (label,
    where) and the harmless repeats; raises (naming both places and both labels) for a
    second, different label and for an item never drawn (or ``skipped``: rows set aside by
    ``session skip``).  Nothing is changed."""
    new: dict[int, tuple] = {}
    first: dict[int, int] = {}
    n_dup = 0

    def raw(j):  # the label as given, and the class it maps to where they differ
        return f"{labels[j]!r}" + (f" (label {y[j]})" if str(labels[j]) != str(y[j]) else "")

    def said(j):
        return f"{where[j]} says {raw(j)}"

    for i, (r, lab) in enumerate(zip(rows.tolist(), y.tolist())):
        if r in new:
            if new[r][0] != lab:
                msg = (f"two different labels for item {items[i]!r}: {said(first[r])}; {said(i)} — a deterministic "
                       f"oracle gives one label per item; nothing was ingested (resolve the disagreement in the file")
                raise LabelConflictError(msg + ", or label with oracle='stochastic' in a new session)",
                                         cli=msg + ", or label with --oracle stochastic in a new session)")
            n_dup += 1
            continue
        if r in label_of:
            if label_of[r] != lab:
                msg = (f"{where[i]}: item {items[i]!r} already has label {label_of[r]} (stage {label_stage.get(r)}), "
                       f"refusing the conflicting label {raw(i)} — nothing was ingested (a deterministic oracle's "
                       f"label, once ingested, stands against an ingest: if the new label is the right one, correct "
                       f"it")
                rest = "; else restore the annotation in the labeling tool or drop that row)"
                raise LabelConflictError(
                    msg + " with Session.correct, or ingest the file with correct=True" + rest,
                    cli=msg + f": bayes-eval session correct {shlex.join([str(path), str(items[i]), str(labels[i])])} (a reviewed file or "
                              f"project: session ingest FILE --correct, session pull ... --correct)" + rest)
            n_dup += 1
            continue
        if r in pending:
            new[r], first[r] = (lab, where[i]), i
            continue
        if r in skipped:
            raise _skipped_item(where[i], items[i])
        raise NotDrawnError(f"{where[i]}: item {items[i]!r} was never drawn (it is in no batch of this session); "
                            f"only items of a batch can be labeled — nothing was ingested")
    return new, n_dup


def _skipped_item(where, item):
    return NotDrawnError(f"{where}: item {item!r} was skipped as impossible to label (session skip), so its label is "
                         f"not taken; remove that row — nothing was ingested")


def match_stochastic(pending, log: DrawLog, draw_label, items, rows, y, draws, where, surplus=None, skipped=()):
    """Stochastic oracle: which draws of the open stage (``pending``: draw -> row) the
    labels answer -- the draw given (``draws[i]``), else the item's first draw still
    waiting.  Returns ``(new, n_dup)``: draw -> (label, where); raises for a draw that
    does not exist or already has another label.  ``surplus`` (a list): labels without a
    draw of their item awaiting one are appended there (``where``) instead of refused.
    A label of a skipped item (``skipped``: rows) is refused, as :func:`match_deterministic` does.
    Nothing is changed."""
    new: dict[int, tuple] = {}
    n_dup = 0
    free: dict[int, list] = {}
    for did, r in pending.items():
        free.setdefault(r, []).append(did)
    explicit = [i for i in range(len(items)) if draws is not None and draws[i] is not None]
    implicit = [i for i in range(len(items)) if i not in set(explicit)]
    n_total = len(log)
    for i in explicit:
        try:
            did = int(draws[i])
        except (TypeError, ValueError):
            raise MalformedInputError(f"{where[i]}: draw id {draws[i]!r} is not an integer") from None
        r, lab = int(rows[i]), int(y[i])
        if not 0 <= did < n_total or log.row[did] != r or not log.new[did]:
            raise NotDrawnError(f"{where[i]}: item {items[i]!r} has no draw {did} in this session — nothing "
                                f"was ingested")
        known = draw_label.get(did, new.get(did, (None,))[0])
        if known is None and did not in pending and r in skipped:
            raise _skipped_item(where[i], items[i])
        if known is not None:
            if known != lab and did in draw_label:
                raise LabelConflictError(f"{where[i]}: draw {did} of item {items[i]!r} already has label "
                                         f"{known} (stored), refusing {lab} — nothing was ingested (if the new "
                                         f"label is the right one, correct it: ingest the file with --correct, or "
                                         f"session correct --file with its draw column)")
            if known != lab:
                raise LabelConflictError(
                    f"{where[i]}: draw {did} of item {items[i]!r} is labeled {known} by {new[did][1]} and {lab} "
                    f"here: one label per draw — nothing was ingested (several annotators' labels of one task are "
                    f"taken from a Label Studio export, which names each annotation; in a CSV give each its own "
                    f"row without a draw, and they answer the item's draws still awaiting a label)")
            n_dup += 1
            continue
        new[did] = (lab, where[i])
        if did in free.get(r, []):
            free[r].remove(did)
    for i in implicit:
        r, lab = int(rows[i]), int(y[i])
        if not free.get(r) and r in skipped:
            raise _skipped_item(where[i], items[i])
        if not free.get(r) and surplus is not None:
            surplus.append(where[i])
            continue
        if not free.get(r):
            drawn = sum(1 for k in range(n_total) if log.row[k] == r)
            raise NotDrawnError(
                f"{where[i]}: item {items[i]!r} has no draw awaiting a label (drawn {drawn} time(s) in this "
                f"session) — nothing was ingested")
        did = free[r].pop(0)
        new[did] = (lab, where[i])
    return new, n_dup
