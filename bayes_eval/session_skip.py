"""Items nobody can label: :meth:`SessionSkips.skip` (``bayes-eval session skip``), a mixin of
:class:`~bayes_eval.session.Session`.

**What the estimate then means.**  Some items cannot be labeled (an unreadable record, a
pair nobody can decide).  Being unlabelable is a property of the item, not of the draw, so
the pool splits into the items that can be labeled, D, and those that cannot, U (mostly
unknown: an item of U is found only when it is drawn).  A session that skips estimates the
measure **on D** — the measure of the items that can be labeled — and says so in every
report (``status``: ``skipped``).  How (domain estimation):

* a skipped item stays in the pool and keeps its proposal probability; its draws — the
  one that was skipped and every later one, which is answered "skipped" from the store at
  no cost, never asked again — are draws outside the population: they add nothing to the
  importance-weighted sums Σ w ℓ (a zero indicator of D);
* the estimator divides by the number of draws scaled by the estimated share of mass that
  can be labeled, n (Σw − Σ_U w)/Σw (:func:`~bayes_eval.stages.effective_draws`), so
  R̂ = Σ_D w ℓ / n̂_D → E_p[ℓ | D] for every measure; for the ratio measures (precision,
  recall, F-scores: g homogeneous of degree 0) the scale cancels and the estimate and its
  delta-method variance are those of the plain importance-sampling estimator with ℓ = 0 on
  U — unbiased for the sums, consistent for g(R_D);
* without a skip every number is the same as before (the scale is exactly 1), and a
  session file with skips replays to the same state (the skips are stored with their
  stage and applied on reopen).

The design goes on: a skipped item no longer needs a label, so the open batch closes when
its other items are labeled and ``next`` draws the next one (a skipped item is never
issued again).  Limits: the ``stratified`` design's post-stratified estimator weights
each stratum by its whole mass, so there a skipped item is treated as missing at random
within its stratum; the Bayesian interval completes the whole pool (skipped items' labels
drawn from the oracle model); the Poisson designs refuse skips (a round's
Horvitz–Thompson record has no place for an item outside the population yet).
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
import pandas as pd

from .errors import EmptyInputError, LabelConflictError, NotDrawnError, SessionError
from .session_core import ids_at, item_rows

__all__ = ["SessionSkips", "SkipResult"]


class SkipResult(NamedTuple):
    """What one :meth:`SessionSkips.skip` did: ``n_new`` items recorded as skipped,
    ``n_already`` skipped before (harmless), ``stage_closed`` whether this completed the
    open batch, ``pending`` labels it still needs, ``skipped`` items skipped in the session."""

    n_items: int
    n_new: int
    n_already: int
    stage_closed: bool
    stage: int | None
    pending: int
    skipped: int


class SessionSkips:
    """``skip`` and ``skipped`` of a :class:`~bayes_eval.session.Session` (a mixin: it uses the
    session's ``_open`` batch, ``_skipped`` (row -> cell), ``_label_of`` / ``_draw_label``,
    ``_store``, ``_core`` and ``_close_state`` / ``_commit_close``)."""

    def skip(self, items, reason: str | None = None) -> SkipResult:
        """Record items of the open batch as impossible to label, in one transaction.

        The measure is then estimated on the items that can be labeled (module docstring);
        the batch closes once its other items are labeled, and a skipped item is never
        asked for again.  Refused, with nothing changed: an item that is not in the pool
        (:class:`UnknownItemError`), not awaiting a label in the open batch
        (:class:`NotDrawnError`), or already labeled (:class:`LabelConflictError`); a
        Poisson design.  Skipping an item again is harmless.
        """
        if self._kind.sampling == "rounds":
            raise SessionError(f"skip: the Poisson design {self.design_name!r} cannot leave an item out of a round "
                               f"(its Horvitz–Thompson estimate needs every drawn item's label); label the item, or "
                               f"use a with-replacement design (ais, is, passive, oasis)")
        if isinstance(items, (str, bytes, int, np.integer)):
            items = [items]
        items = [v.item() if isinstance(v, np.generic) else v for v in items]
        if not items:
            raise EmptyInputError("no items to skip")
        where = [f"item {v!r}" for v in items]
        rows = item_rows(self._core, self.pool.ids, items, where)
        op = self._open
        pending = op["pending"] if op is not None else {}
        if self._stochastic:
            waiting = {}
            for did, r in pending.items():
                waiting.setdefault(r, []).append(did)
            labeled = {self._draws.row[d] for d in self._draw_label}
        else:
            waiting = {r: [d] for r, d in pending.items()}
            labeled = set(self._label_of)
        new, n_already = {}, 0
        for item, r in zip(items, rows.tolist()):
            if r in self._skipped or r in new:
                n_already += 1
                continue
            if r in labeled:
                lab = self._label_of.get(r) if not self._stochastic else "given"
                raise LabelConflictError(f"skip: item {item!r} already has a label ({lab}), so it can be labeled "
                                         f"— nothing was skipped")
            if r not in waiting and not pending:
                raise NotDrawnError("skip: no batch is open (only items of the open batch can be skipped: draw one "
                                    "with session next, then skip the items in it) — nothing was skipped")
            if r not in waiting:
                raise NotDrawnError(f"skip: item {item!r} is not awaiting a label in the open batch (only items of "
                                    f"the open batch can be skipped) — nothing was skipped")
            new[r] = int(self._core.item_cell[r])
        if not new:
            return SkipResult(len(items), 0, n_already, False, op and op["stage"], self.n_pending, len(self._skipped))
        gone = [d for r in new for d in waiting[r]]
        closes = len(gone) == len(pending)
        now = time.time()
        skipped_after = {**self._skipped, **new}
        closed = self._close_state(time_closed=now, skipped=skipped_after) if closes else None
        ids = ids_at(self.pool, np.asarray(list(new), np.int64))
        recs = []
        for i, r in enumerate(new):
            item = ids[i]
            recs.append((r, item.item() if isinstance(item, np.generic) else item, op["stage"],
                         None if reason is None else str(reason), now))
        self._store.add_skips(recs, close_stage=op["stage"] if closes else None, closed_at=now,
                              state=self._encoded_state(closed) if closes else None)
        # committed: now the memory
        self._skipped.update(new)
        for r in new:
            if self._stochastic:
                for d in waiting[r]:
                    del op["pending"][d]
            else:
                del op["pending"][r]
        stage = op["stage"]
        if closes:
            self._commit_close(closed)
        return SkipResult(len(items), len(new), n_already, closes, stage, self.n_pending, len(self._skipped))

    @property
    def n_skipped(self) -> int:
        """Items recorded as impossible to label."""
        return len(self._skipped)

    def skipped(self) -> pd.DataFrame:
        """The skipped items: ``item``, ``stage`` (the batch they were skipped in), ``reason``, ``at``."""
        rows = self._store.skips()
        return pd.DataFrame([r[2:] for r in rows], columns=["item", "stage", "reason", "at"])
