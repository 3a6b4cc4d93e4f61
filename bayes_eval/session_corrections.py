"""Labels corrected after they were accepted: :meth:`SessionCorrections.correct`
(``bayes-eval session correct``), a mixin of :class:`~bayes_eval.session.Session`.

**Why.**  Annotators err, and a disagreement is often settled after the first label was
ingested (a reviewer, an adjudication round).  Under a deterministic oracle a label, once
accepted, stands against a *conflicting ingest* (it is refused, so a stale export cannot
overwrite it); a correction is the explicit way to change it.  Nothing is lost: the
``labels`` table keeps the label as it arrived, the ``corrections`` table adds the new
one with the old one, the time, a reason and where in the session it was made.

**What a correction changes, and what it cannot.**  The importance-sampling estimate
(001 eq. 1) weights every draw by p/q with q the proposal that *drew* it; q was computed
from the labels known then -- the wrong one included -- but it was fixed before the draw,
so it stays a predictable proposal and the estimator stays unbiased with the corrected
label in the loss (001 §3.1, the martingale argument behind the adaptive designs; 000 §3
for the Horvitz-Thompson rounds, whose inclusion probabilities are likewise fixed before
the round).  So:

* the draws, their proposals and weights, and the design's state after each closed stage
  stay as they were (they are what drew the items);
* every per-(cell, class) tally is recomputed from the stored draws with the labels in
  force: the estimates, the CLT intervals, the finite-pool posterior (it conditions on the
  labeled counts per cell) and every closed stage's row of the history (the history then
  reads "what each stage's draws say with the labels as now corrected");
  Poisson rounds: each round's record of labels before it and labels it brought;
* the design learns the correction at the next stage it closes (its update refits to the
  corrected counts, 001 Alg. 1), so the proposals from then on use it.  Until then the model
  fits that a closed stage stored stay as they were fitted: AIS's companion behind the CLT
  check's class shares, and a Poisson round's variance-model and companion predictives after
  it (``pi_after``, ``pi_check``: the last round's variance and check), so those two numbers
  catch up at the next close; the estimates do not wait.

A reopened session replays the corrections where they were made (after the stage that was
then the last was opened or closed), so a design state that has to be recomputed (a file
from another version) is recomputed from the labels known at that time, as the session did.
A stochastic oracle labels draws: there a correction names the draw whose recorded label was
wrong (a data-entry error -- an annotator's disagreement is another observation, not a
correction), and every tally counts each draw's label in force; ``ingest --correct`` there
corrects the records that name a labeled draw (a ``draw`` column, a Label Studio task's first
annotation), the others answering draws still awaiting a label as an ingest reads them (stop 75).
Not corrected: skipped items (they have no label) and items not labeled yet (ingest them).
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
import pandas as pd

from . import annotate, kernel
from .errors import EmptyInputError, LabelConflictError, MalformedInputError, NotDrawnError, SessionError
from .session_core import ids_at, item_rows
from .stages import LabeledItems, match_deterministic, match_stochastic, stage_tallies

__all__ = ["SessionCorrections", "CorrectionResult"]


class CorrectionResult(NamedTuple):
    """What one :meth:`SessionCorrections.correct` did: ``n_items`` given, ``n_changed``
    labels changed, ``n_same`` already at the label given (harmless), ``corrections`` in the
    session so far, ``labels`` labeled items (unchanged by a correction)."""

    n_items: int
    n_changed: int
    n_same: int
    corrections: int
    labels: int


class SessionCorrections:
    """``correct`` and ``corrections`` of a :class:`~bayes_eval.session.Session` (a mixin: it
    uses the session's ``_label_of``, ``_skipped``, ``_open``, ``_stages``, ``_draws``,
    ``_snapshots``, running tallies, ``_kind``, ``_store``, ``_core`` and caches)."""

    def correct(self, items, labels, reason: str | None = None, label_map: dict | None = None,
                where=None, draws=None) -> CorrectionResult:
        """Change the labels of items already labeled, in one transaction (module docstring).

        ``labels`` are read as :meth:`add_labels` reads them (the session's label map,
        ``label_map``).  A stochastic oracle labels draws, not items: ``draws`` names the draw
        whose recorded label was wrong (a data-entry error; a disagreement between annotators
        is another observation, not a correction), and may be left out for an item with one
        labeled draw.  Refused, with nothing changed: an item not in the pool
        (:class:`UnknownItemError`), not labeled (:class:`NotDrawnError`: awaiting its first
        label, skipped or never drawn; stochastic: a draw that is not the item's or has no
        label, or an item with several labeled draws and no draw given), a label outside the
        label set (:class:`InvalidLabelError`), two different labels for one item or draw in
        the call (:class:`LabelConflictError`), nothing given (:class:`EmptyInputError`).  An
        item already at the label given is counted in ``n_same`` and not recorded.
        """
        items = [items] if isinstance(items, (str, bytes, int, np.integer)) else list(items)
        labels = [labels] if isinstance(labels, (str, bytes, int, np.integer)) else list(labels)
        items = [v.item() if isinstance(v, np.generic) else v for v in items]
        if draws is not None:
            draws = [draws] if isinstance(draws, (int, np.integer)) else list(draws)
        if len(items) != len(labels) or (draws is not None and len(draws) != len(items)):
            raise MalformedInputError(f"correct: {len(items)} items but {len(labels)} labels"
                                      + (f" and {len(draws)} draws" if draws is not None else "")
                                      + " -- nothing was changed")
        if not items:
            raise EmptyInputError("correct: no labels given -- nothing was changed")
        where = list(where) if where is not None else [f"correction {i + 1} (item {v!r})" for i, v in enumerate(items)]
        lmap = {**(self.config.get("label_map") or {}), **(annotate.parse_label_map(label_map) or {})}
        y = annotate.parse_labels(labels, self._n_classes, lmap, where)
        rows = item_rows(self._core, self.pool.ids, items, where)
        keys = (self._draws_to_correct(items, rows, draws, where) if self._stochastic
                else self._rows_to_correct(items, rows, where))
        held = self._draw_label if self._stochastic else self._label_of
        change: dict[int, tuple[int, int, int]] = {}   # row (stochastic: draw) -> (old, new, position)
        asked: dict[int, int] = {}
        n_same = 0
        for i, (k, lab) in enumerate(zip(keys, y.tolist())):
            if k in asked:
                if int(y[asked[k]]) != lab:
                    raise LabelConflictError(f"correct: two different labels for item {items[i]!r} ({where[asked[k]]} "
                                             f"and {where[i]}) -- nothing was changed")
                n_same += 1
                continue
            asked[k] = i
            old = int(held[k])
            if old == lab:
                n_same += 1
            else:
                change[k] = (old, int(lab), i)
        if not change:
            return CorrectionResult(len(items), 0, n_same, self._store.n_corrections(), self.n_labels)
        stage = int(self._stages[-1]["stage"])
        stage_open = self._open is not None
        now = time.time()
        crow = np.asarray([self._draws.row[k] if self._stochastic else k for k in change], np.int64)
        ids = ids_at(self.pool, crow)
        recs = [(int(crow[j]), ids[j].item() if isinstance(ids[j], np.generic) else ids[j], old, new, stage,
                 int(stage_open), None if reason is None else str(reason), now, k if self._stochastic else None)
                for j, (k, (old, new, _)) in enumerate(change.items())]
        out = self._retallied({k: new for k, (_, new, _) in change.items()})   # before anything is written
        self._store.add_corrections(recs)
        # committed: now the memory
        self._commit_tallies(out)
        return CorrectionResult(len(items), len(change), n_same, self._store.n_corrections(), self.n_labels)

    def _rows_to_correct(self, items, rows, where) -> list:
        """Deterministic oracle: the rows, each labeled (else :class:`NotDrawnError`)."""
        pending = self._open["pending"] if self._open is not None else {}
        for i, r in enumerate(rows.tolist()):
            if r not in self._label_of:
                why = ("it was skipped as impossible to label" if r in self._skipped else
                       "it awaits its first label in the open batch (ingest it)" if r in pending else
                       "it has not been labeled in this session")
                raise NotDrawnError(f"correct: {where[i]}: {why}, so there is no label to correct -- nothing was "
                                    f"changed")
        return rows.tolist()

    def _draws_to_correct(self, items, rows, draws, where) -> list:
        """Stochastic oracle: the labeled draw of each item to correct -- the one given, else the
        item's only labeled draw (else :class:`NotDrawnError`, naming its draws)."""
        of_row: dict[int, list] = {}
        for did in self._draw_label:
            of_row.setdefault(self._draws.row[did], []).append(did)
        out = []
        for i, r in enumerate(rows.tolist()):
            given = None if draws is None else draws[i]
            if given is None or (isinstance(given, float) and np.isnan(given)):
                mine = sorted(of_row.get(r, []))
                if len(mine) != 1:
                    raise NotDrawnError(
                        f"correct: {where[i]}: item {items[i]!r} has "
                        + ("no labeled draw" if not mine else f"{len(mine)} labeled draws ({', '.join(map(str, mine[:10]))})")
                        + (", so there is no label to correct" if not mine else ": name the draw whose label was wrong "
                           "(draws=, or a draw column in the file)") + " -- nothing was changed")
                out.append(mine[0])
                continue
            try:
                did = int(given)
            except (TypeError, ValueError):
                raise MalformedInputError(f"correct: {where[i]}: draw id {given!r} is not an integer -- nothing was "
                                          f"changed") from None
            if did not in self._draw_label or self._draws.row[did] != r:
                raise NotDrawnError(f"correct: {where[i]}: item {items[i]!r} has no labeled draw {did} -- nothing was "
                                    f"changed")
            out.append(did)
        return out

    def _correct_from(self, recs, lmap: dict, source) -> int:
        """``ingest_records(correct=True)``: the records (one label per item, after ``resolve``)
        whose label differs from the one in force become corrections, recorded first; the ingest
        that follows then finds those items at their labels.  Everything is checked before the
        corrections are written -- the ingest included, as it will see the labels -- so a refused
        file changes nothing.  Returns the number of labels corrected."""
        if self._stochastic:
            return self._correct_draws_from(recs, lmap, source)
        y = annotate.parse_labels(recs.labels, self._n_classes, lmap, recs.where)
        rows = item_rows(self._core, self.pool.ids, recs.items, recs.where)
        fix = [i for i, (r, lab) in enumerate(zip(rows.tolist(), y.tolist()))
               if r in self._label_of and self._label_of[r] != lab]
        if not fix:
            return 0
        after = {**self._label_of, **{int(rows[i]): int(y[i]) for i in fix}}
        pending = self._open["pending"] if self._open is not None else {}
        match_deterministic(dict(pending), after, self._label_stage, recs.items, rows, y, recs.where, recs.labels,
                            self._skipped, self.path)   # the ingest's own checks, on the labels it will see
        r = self.correct([recs.items[i] for i in fix], [recs.labels[i] for i in fix], label_map=lmap,
                         reason=f"ingest {source}" if source else "ingest", where=[recs.where[i] for i in fix])
        return r.n_changed

    def _correct_draws_from(self, recs, lmap: dict, source) -> int:
        """:meth:`_correct_from` under a stochastic oracle: a record that names a labeled draw of
        its item (a ``draw`` column; a Label Studio task's first annotation) with another label
        is a correction of that draw's recorded label; a record without a draw answers a draw
        still awaiting a label, as an ingest reads it (another observation, never a correction).
        The ingest's own checks run first on the labels it will see."""
        y = annotate.parse_labels(recs.labels, self._n_classes, lmap, recs.where)
        rows = item_rows(self._core, self.pool.ids, recs.items, recs.where)
        draws = recs.draws if any(d is not None for d in recs.draws) else None
        fix: dict[int, int] = {}   # draw -> record
        for i, d in enumerate(draws or ()):
            try:
                did = int(d) if d is not None else None
            except (TypeError, ValueError):
                continue   # the ingest's check below names it
            if did in self._draw_label and self._draws.row[did] == rows[i] and self._draw_label[did] != y[i]:
                fix[did] = i
        if not fix:
            return 0
        after = {**self._draw_label, **{did: int(y[i]) for did, i in fix.items()}}
        pending = self._open["pending"] if self._open is not None else {}
        match_stochastic(dict(pending), self._draws, after, recs.items, rows, y, draws, recs.where,
                         [] if recs.meta is not None else None)   # the ingest's own checks, on the labels it will see
        idx = list(fix.values())
        r = self.correct([recs.items[i] for i in idx], [recs.labels[i] for i in idx], label_map=lmap,
                         draws=list(fix), reason=f"ingest {source}" if source else "ingest",
                         where=[recs.where[i] for i in idx])
        return r.n_changed

    def corrections(self) -> pd.DataFrame:
        """The corrected labels, in the order corrected: ``item``, ``old_label``,
        ``new_label``, ``stage`` (the last stage at the time), ``stage_open`` (whether it
        was open), ``reason``, ``at`` (seconds since the epoch), ``draw`` (the draw corrected:
        stochastic oracle; empty for a deterministic one)."""
        rows = self._store.corrections()
        df = pd.DataFrame([r[2:] for r in rows],
                          columns=["item", "old_label", "new_label", "stage", "stage_open", "reason", "at", "draw"])
        df["stage_open"] = df["stage_open"].astype(bool)
        df["draw"] = pd.array(df["draw"], dtype="Int64")
        return df

    # ------------------------------------------------------------------ memory
    def _replay_corrections(self, events: dict, stage: int, stage_open: bool) -> None:
        """On reopen: apply the stored corrections made after ``stage`` was opened
        (``stage_open``) or closed (``events``: (stage, open) -> [(row, new label)], from
        :meth:`_correction_events`)."""
        todo = events.pop((int(stage), bool(stage_open)), None)
        if todo:
            self._apply_corrections(dict(todo))

    def _correction_events(self) -> dict:
        events: dict = {}
        for _, row, _, _, new, stage, stage_open, _, _, draw in self._store.corrections():
            key = int(draw) if self._stochastic else int(row)
            events.setdefault((int(stage), bool(stage_open)), []).append((key, int(new)))
        return events

    def _apply_corrections(self, new_labels: dict) -> None:
        """Set ``new_labels`` (row -> class) and recompute every tally of the closed stages
        from the stored draws (module docstring); the caches of estimates and posteriors go."""
        self._commit_tallies(self._retallied(new_labels))

    def _commit_tallies(self, out) -> None:
        label_of, snaps, rounds, lab = out
        (self._draw_label if self._stochastic else self._label_of).update(label_of)
        self._snapshots[:] = snaps
        if rounds is not None:
            self._kind.rounds[:] = rounds
        if snaps:
            last = snaps[-1]
            self._labeled, self._draw_counts, self._wsum, self._w2sum = (last.labeled, last.draw_counts, last.wsum,
                                                                         last.w2sum)
            if last.ew2_lab is not None:
                self._ew2_lab, self._ew2_unl = last.ew2_lab, last.ew2_unl
        self._lab = lab
        self._est_cache.clear()
        self._post_cache.clear()

    def _retallied(self, new_labels: dict):
        """(labels, snapshots, round records, labeled items) with ``new_labels`` in force (pure):
        the closed stages' per-(cell, class) tallies (and Poisson rounds' records) recomputed
        from the draws stage by stage, as ``Session._close_state`` built them."""
        held = self._draw_label if self._stochastic else self._label_of   # stochastic: draw -> label
        label_of = {**held, **{int(r): int(v) for r, v in new_labels.items()}}
        snaps = list(self._snapshots)
        c = self._n_classes
        cells_t = self._core.cells
        x = cells_t.n_cells
        rows, cells, new, q, w = self._draws.arrays()
        stage_of = np.asarray(self._draws.stage, np.int64)
        y = (np.asarray([label_of.get(k, 0) for k in range(rows.size)], np.int64) if self._stochastic else
             np.asarray([label_of.get(int(r), 0) for r in rows], np.int64))
        keep = np.asarray([int(r) not in self._skipped for r in rows], bool) if self._skipped else np.ones(rows.size, bool)
        idx = cells * c + y
        rounds = list(self._kind.rounds) if self._kind.sampling == "rounds" else None
        if rounds is not None and len(rounds) != len(snaps):
            raise SessionError(f"{self.path}: {len(rounds)} round records for {len(snaps)} closed stages")
        labeled = np.zeros((x, c))
        draw_counts, wsum, w2sum = np.zeros((x, c)), np.zeros((x, c)), np.zeros((x, c))
        ew2_lab, ew2_unl = np.zeros((x, c)), np.zeros(x)
        for i, snap in enumerate(snaps):
            m = (stage_of == snap.stage) & keep
            obs = m if self._stochastic else m & new   # stochastic: every draw is an observation
            hits, d_draws, d_wsum, d_w2sum = stage_tallies(idx, w, m, obs, x, c)
            hits = hits.astype(float)
            before, labeled = labeled, labeled + hits
            draw_counts, wsum, w2sum = draw_counts + d_draws, wsum + d_wsum, w2sum + d_w2sum
            upd = {"labeled": labeled, "draw_counts": draw_counts, "wsum": wsum, "w2sum": w2sum}
            if snap.ew2_lab is not None:
                ew2_lab, ew2_unl = (np.asarray(a) for a in kernel.expected_w2(
                    cells_t, before, ew2_lab, ew2_unl, snap.prop_used, float(m.sum())))
                upd.update(ew2_lab=ew2_lab, ew2_unl=ew2_unl)
            snaps[i] = snap._replace(**upd)
            if rounds is not None:
                rounds[i] = {**rounds[i], "labeled_before": before, "sampled": hits}
        lab = self._lab
        if not self._stochastic:
            lab = LabeledItems(lab.rows, lab.cells, np.asarray([label_of[int(r)] for r in lab.rows], np.int64),
                               lab.gpos)
        return label_of, snaps, rounds, lab
