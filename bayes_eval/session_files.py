"""Labels in from files and annotation tools, batches out to files: ``ingest_file``,
``ingest_records`` and ``export_batch`` of :class:`~bayes_eval.session.Session` (a mixin:
it uses the session's ``add_labels``, ``_next``, ``_correct_from``, ``_files``, ``_label_of``,
``_store``, ``_core``, ``pool`` and ``config``).  The formats are :mod:`bayes_eval.annotate`'s;
every file is one transaction of :meth:`~bayes_eval.session.Session.add_labels`.
"""
from __future__ import annotations

import os
from typing import NamedTuple

import pandas as pd

from . import annotate
from .annotate_resolve import resolve as resolve_annotations
from .errors import SessionError
from .session_core import item_rows

__all__ = ["SessionFiles", "IngestResult", "after_files"]


class IngestResult(NamedTuple):
    """What one ``add_labels`` / ``ingest_file`` did.

    ``n_rows`` labels given (a file's rows or annotations with a label, before ``resolve``
    reduced an item's several to one); ``n_new`` accepted and stored; ``n_duplicate`` already
    known (harmless repeats); ``n_skipped`` rows without a label (files only);
    ``stage_closed`` whether this completed the open batch (and so updated the design);
    ``pending`` labels the open batch still needs; ``labels`` labels in the session;
    ``already_ingested`` the content adds nothing: every row was ingested before with the same
    label (the same content again; nothing done); ``n_resolved``,
    ``n_cancelled``, ``n_unused``, ``n_corrected``: :meth:`Session.ingest_records`.
    """

    n_rows: int
    n_new: int
    n_duplicate: int
    n_skipped: int
    stage_closed: bool
    stage: int | None
    pending: int
    labels: int
    already_ingested: bool = False
    n_resolved: int = 0
    n_cancelled: int = 0
    n_unused: int = 0
    n_corrected: int = 0


def after_files(exc: SessionError, files: list) -> SessionError:
    """``exc`` (a refused file), saying which files were ingested before it and stay so."""
    if not files:
        return exc
    done = ", ".join(f"{p} ({n} new label{'' if n == 1 else 's'})" for p, n in files)
    note = f"; ingested before it and kept (each file is one transaction): {done}"
    return type(exc)(str(exc) + note, cli=None if exc.cli is None else exc.cli + note)



class SessionFiles:
    """``ingest_file``, ``ingest_records`` and ``export_batch`` (module docstring)."""

    def ingest_file(self, path: str, *, fmt: str | None = None, label_map: dict | None = None,
                    from_name: str | None = None, resolve: str = "error", correct: bool = False,
                    records: annotate.LabelRecords | None = None) -> IngestResult:
        """Read a labeled file (CSV, JSONL, Label Studio JSON export) and ingest it as one
        transaction (see :mod:`bayes_eval.annotate` for the formats; items under ``item`` or the
        pool's own id column).  A refused file changes nothing; its error names the files this
        Session ingested before it, which stay ingested (each file is its own transaction).
        ``records``: the file's records where the caller has read it already
        (:func:`bayes_eval.annotate.read_labels`, as ``bayes-eval session ingest`` does for every
        file before it replays the session), so it is not read twice."""
        recs = records if records is not None else annotate.read_labels(
            path, fmt=fmt, from_name=from_name, id_column=getattr(self.pool, "id_column", None))
        try:
            r = self.ingest_records(recs, label_map=label_map, resolve=resolve, source=os.path.abspath(path),
                                    correct=correct)
        except SessionError as exc:
            raise after_files(exc, self._files) from None
        self._files.append((os.fspath(path), r.n_new))
        return r

    def ingest_records(self, recs: annotate.LabelRecords, *, label_map: dict | None = None, resolve: str = "error",
                       source: str | None = None, correct: bool = False) -> IngestResult:
        """Ingest labels read from a file or from Label Studio (one transaction); several
        annotations of an item are reconciled by ``resolve`` (:func:`bayes_eval.annotate_resolve.resolve`;
        ``n_resolved`` counts them), cancelled annotations are counted (``n_cancelled``), and
        labels beyond an item's draws awaiting one (stochastic oracle) are not used (``n_unused``); with
        ``correct``, a label that differs from one in force is a correction (:meth:`correct`, ``n_corrected``)."""
        lmap = {**(self.config.get("label_map") or {}), **(annotate.parse_label_map(label_map) or {})}
        def held(item):   # deterministic: a disagreement resolved by an earlier ingest stays resolved
            try:
                return self._label_of.get(int(item_rows(self._core, self.pool.ids, [item], ["a label"])[0]))
            except SessionError:   # an unknown id: add_labels below refuses it with its row
                return None

        n_rows = len(recs.items)   # the file's labeled rows (resolve may reduce them to fewer labels)
        recs, n_res = resolve_annotations(recs, resolve, self._n_classes, lmap, self._stochastic, held=held,
                                          rule_first=correct)
        n_fix = self._correct_from(recs, lmap, source or recs.source) if correct else 0
        draws = recs.draws if any(d is not None for d in recs.draws) else None
        r = self.add_labels(recs.items, recs.labels, draws=draws, label_map=label_map, where=recs.where,
                            source=source or recs.source, n_skipped=recs.skipped, surplus=recs.meta is not None)
        return r._replace(n_rows=n_rows, n_resolved=n_res, n_cancelled=recs.cancelled, n_corrected=n_fix)

    def export_batch(self, path: str, n: int = 50, fmt: str | None = None, fields=None,
                     show_score: bool = False, preannotate: bool = False, from_name: str = "label") -> pd.DataFrame:
        """Draw the next batch (or re-issue the open one) and write it for annotators:
        ``item`` (``draw`` for a stochastic oracle) and the pool's own columns chosen by
        ``fields`` — model scores and probabilities only with ``show_score`` — and with
        ``preannotate`` the classifier's prediction (:func:`bayes_eval.annotate.task_frame`)."""
        fmt = annotate.prepare_output(path, fmt)  # before anything is drawn
        own = annotate.task_columns(annotate.pool_columns(self.pool), fields, show_score)
        tag = annotate.session_tag(self._store, create=True) if fmt == "json" else None  # Label Studio's import

        def write(df):  # to a temporary file, renamed into place once the stage is stored
            df, preds = annotate.task_frame(self.pool, df, own, show_score, preannotate, self.config)
            tmp = annotate.write_batch_tmp(df, path, fmt, preds, from_name, own, tag)

            def finish(ok):
                if not ok:
                    return os.remove(tmp) if os.path.exists(tmp) else None
                try:
                    os.replace(tmp, path)
                except OSError as exc:
                    raise SessionError(f"cannot write {path}: {annotate.os_problem(exc)}; the batch is "
                                       f"recorded and the next call re-issues it") from None
            return finish

        return self._next(n, write)
