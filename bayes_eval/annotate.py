"""Files for annotators: export a batch, read the labeled file back.

Formats (chosen by the file's extension, or ``fmt``):

``.csv`` / ``.tsv``
    One row per item: ``item`` (the stable item id), the pool's own columns, and an empty
    ``label`` column for the annotator to fill (Label Studio imports it as tasks).  Read
    back: columns ``item`` and ``label`` — or the column named by ``from_name``, as in
    Label Studio's CSV / TSV export, where the label's column is the Choices control's
    name (any other columns are ignored, except Label Studio's ``id``, ``annotation_id``,
    ``annotator``, ``created_at``, which name the task and annotation; rows whose label is
    still empty are skipped and counted).
``.json``
    A JSON list of tasks ``{"data": {"item": ..., <fields>...}}`` — Label Studio's task
    import format — and, read back, Label Studio's JSON export: a list of tasks, each with
    ``"data"`` and ``"annotations": [{"result": [{"type": "choices", "value": {"choices":
    ["1"]}, ...}], "was_cancelled": false, ...}]``, or its JSON_MIN export (a list of flat
    objects, the label under the Choices control's name: ``from_name``).  Cancelled (and
    skipped) annotations and tasks not yet annotated are not labels; a task with several
    annotations gives several labels, reconciled by :func:`bayes_eval.annotate_resolve.resolve` (``rule``).
``.jsonl``
    The same tasks, one per line — for other tools and scripts (Label Studio does not
    import ``.jsonl``).  Read back: lines ``{"item": ..., "label": ...}`` or tasks.

Choice strings map to labels through a mapping: by default the label's string form
(``"0"``, ``"1"``, ...), extended or overridden by a user mapping such as
``{"negative": 0, "positive": 1}`` (matched exactly, then case-insensitively).

Every problem raises a :class:`~bayes_eval.store.SessionError` subclass naming the file
and the line, row or task; reading never changes a session.
"""
from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import re
from typing import NamedTuple, Sequence

import numpy as np
import pandas as pd

from .store import EmptyInputError, InvalidLabelError, MalformedInputError, SessionError
from .tables import csv_separator

__all__ = ["LabelRecords", "FORMATS", "format_of", "prepare_output", "os_problem", "write_batch", "write_batch_tmp",
           "choice_values", "task_frame", "preannotation", "read_labels", "label_mapping", "parse_labels",
           "parse_label_map", "label_studio_config", "records_of_tasks", "task_columns", "pool_columns", "SCORE_COLUMNS",
           "jsonable_value", "annotator_of", "RULES"]

FORMATS = ("csv", "tsv", "jsonl", "json")
RULES = ("error", "majority", "ground-truth", "first")
_INT_RE = re.compile(r"^[+-]?\d+(\.0*)?$")


class LabelRecords(NamedTuple):
    """Labels read from a file, before they are checked against a session.

    ``items`` raw ids as written in the file; ``labels`` raw label values (strings,
    numbers); ``draws`` draw ids or None per record (stochastic-oracle files);
    ``where`` a human-readable position per record ("line 4", "task 2 (id 17)");
    ``skipped`` rows/tasks without a label; ``source`` the file name; ``meta`` per record
    (Label Studio exports) ``{"task", "annotation", "annotator", "ground_truth",
    "created"}`` or None; ``cancelled`` cancelled or skipped annotations (not labels);
    ``cancelled_items`` the items of tasks whose every annotation was cancelled (Label Studio's
    "Skip": nobody could label them), in file order.
    """

    items: list
    labels: list
    draws: list
    where: list
    skipped: int
    source: str
    meta: list | None = None
    cancelled: int = 0
    cancelled_items: tuple = ()


def format_of(path: str, fmt: str | None = None) -> str:
    if fmt is not None:
        fmt = fmt.lower().lstrip(".")
        if fmt not in FORMATS:
            raise SessionError(f"unknown file format {fmt!r}; use one of {', '.join(FORMATS)}")
        return fmt
    ext = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    if ext in FORMATS:
        return ext
    raise SessionError(f"{path}: cannot tell the format from the extension {ext!r}; "
                       f"use .csv, .jsonl or .json (or .tsv, or pass fmt=)",
                       cli=f"{path}: cannot tell the format from the extension {ext!r}; "
                           f"name the file .csv, .jsonl or .json (or .tsv)")


def os_problem(exc: OSError) -> str:
    """An ``OSError`` in a few plain words (disk full, permission denied, ...)."""
    words = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EACCES: "permission denied",
             errno.EPERM: "permission denied", errno.EROFS: "read-only file system",
             errno.ENOENT: "no such file or folder", errno.EISDIR: "it is a folder",
             errno.ENOTDIR: "a part of the path is not a folder"}
    return words.get(exc.errno, exc.strerror or str(exc))


def prepare_output(path: str, fmt: str | None = None) -> str:
    """Check, before anything is drawn or written, that a batch file can be written at
    ``path``: a known format, an existing writable folder, not a folder itself.  Returns
    the format; raises :class:`SessionError` naming the problem."""
    fmt = format_of(path, fmt)
    path = os.fspath(path)
    if os.path.isdir(path):
        raise SessionError(f"cannot write {path}: it is a folder")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise SessionError(f"cannot write {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise SessionError(f"cannot write {path}: permission denied")
    return fmt


# ------------------------------------------------------------------------------ export
def jsonable_value(v):
    """A pool value as JSON: NumPy scalars as Python numbers, missing and non-finite values
    as None, timestamps as ISO strings."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (pd.Timestamp,)):
        return v.isoformat()
    if v is pd.NaT or v is None:
        return None
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return v


#: pool columns that carry the model's opinion: left out of tasks unless ``show_score``
SCORE_COLUMNS = re.compile(r"(score|prob|logit|margin|confidence|pred)", re.IGNORECASE)
#: columns named like the ground truth (a pool's ``gold`` column went to the annotators with every
#: batch where --label-column was not given: stop 82's walk); --fields still takes them
TRUTH_COLUMNS = re.compile(r"^(y|gt|gold|gold_?labels?|truth|true_?labels?|ground_?truth|target|labels?|is_?match|"
                           r"is_?duplicate)$", re.IGNORECASE)


def pool_columns(pool) -> list[str] | None:
    """The pool's own column names (beside item, score, pred, label); None on the dask
    engine, which does not carry them into batches yet."""
    if getattr(pool, "partitioned", False):
        return None
    return [] if pool.columns is None else [str(c) for c in pool.columns.columns]


def task_columns(columns: Sequence[str] | None, fields=None, show_score: bool = False) -> list[str]:
    """The pool's own ``columns`` that go into the annotators' tasks: ``fields`` (a list,
    or ``"a,b"``), else every column except the model's scores and probabilities (names
    with score, prob, logit, margin, confidence, pred) — they can anchor annotators — and
    columns named like the ground truth (:data:`TRUTH_COLUMNS`: gold, truth, target, ...);
    ``show_score`` keeps them (and adds ``score``: the classifier's score).  ``columns``
    None (:func:`pool_columns` of a pool on the dask engine): ``fields`` are refused."""
    if isinstance(fields, str):
        fields = [f.strip() for f in fields.split(",") if f.strip()]
    if columns is None and [f for f in fields or () if not (f == "score" and show_score)]:
        raise SessionError("the dask engine does not carry the pool's own columns into batches yet: reopen the "
                           "session with engine='memory' where the pool fits in memory",
                           cli="--fields: the dask engine does not carry the pool's own columns into batches yet: "
                               "give --engine memory where the pool fits in memory")
    cols = [str(c) for c in columns or ()]
    if fields:
        unknown = [f for f in fields if f not in cols and not (f == "score" and show_score)]
        if unknown:
            # item, score, pred and label are read by bayes-eval itself; ``cols`` are the rest
            own = (f"the pool's own columns, beside item, score, pred and label: {cols}" if cols else
                   "the pool has no columns beside item, score, pred and label")
            hint = "; the classifier's score goes in with show_score" if "score" in unknown else ""
            raise SessionError(f"fields {unknown} are not columns of the pool ({own}){hint}",
                               cli=f"--fields: {unknown} are not columns of the pool ({own})"
                                   + hint.replace("show_score", "--show-score"))
        out = list(fields)
    else:
        out = [c for c in cols if (show_score or not SCORE_COLUMNS.search(c)) and not TRUTH_COLUMNS.match(c)]
    if show_score and "score" not in out:
        out.append("score")
    return [c for c in out if c not in ("item", "draw", "stage", "q", "weight", "bayes_eval_session")]


def choice_values(n_classes: int, label_map: dict | None = None) -> list[str]:
    """The choice string of each class (the inverse of ``label_map``, default ``"0"``,
    ``"1"``, ...), as the labeling configuration (:func:`label_studio_config`) shows them."""
    inv = {}
    for k, v in (label_map or {}).items():
        inv.setdefault(int(v), str(k))
    return [inv.get(c, str(c)) for c in range(n_classes)]


def preannotation(choice: str, from_name: str = "label", fields: Sequence[str] = ()) -> list[dict]:
    """A Label Studio task's ``predictions``: the classifier's ``choice`` for the ``Choices``
    control ``from_name``, attached to the first shown field (``item`` when none), as in
    :func:`label_studio_config`."""
    to_name = _tag_name(fields[0] if len(fields) else "item")
    return [{"model_version": "bayes_eval-pred", "result": [
        {"from_name": from_name, "to_name": to_name, "type": "choices", "value": {"choices": [str(choice)]}}]}]


def task_frame(pool, batch: pd.DataFrame, own: Sequence[str], show_score: bool = False, preannotate: bool = False,
               config: dict | None = None) -> tuple:
    """The annotators' view of a batch (``Session.next_batch``): ``item`` (``draw``) and the
    pool columns ``own`` (:func:`task_columns`; ``score`` from the pool's scores when
    ``show_score`` and the pool has no such column), and — with ``preannotate`` — the
    classifier's prediction of each row as its choice string (:func:`choice_values` of the
    session's ``label_map``), else None.  ``config``: the session's (``system``, ``label_map``)."""
    config = config or {}
    system = int(config.get("system", 0))
    rows = None
    if (show_score and "score" not in batch.columns) or preannotate:
        if getattr(pool, "partitioned", False):
            raise SessionError("the model's scores and predictions are not put into tasks on the dask engine yet; "
                               "leave out show_score / preannotate",
                               cli="--show-score and --preannotate are not available on the dask engine yet")
        rows = pool.index_of(batch["item"].to_numpy())
    if show_score and "score" not in batch.columns:
        batch = batch.assign(score=pool.scores[rows, system])
    preds = None
    if preannotate:
        values = choice_values(pool.n_classes, config.get("label_map"))
        preds = [values[int(c)] for c in pool.preds[rows, system]]
    return batch[[c for c in batch.columns if c in ("item", "draw") or c in own]], preds


#: the session's meta key for its tag, and the task data field that carries it
TAG_KEY = "label_studio_session"
TAG_FIELD = "bayes_eval_session"


def session_tag(store, create: bool = False) -> str | None:
    """The session's tag in Label Studio task data (``bayes_eval_session``): set once, before the
    first task carries it (a ``session push``, or a ``session next --out batch.json``), so a
    task in a project names the session it came from; None while never set and not ``create``.
    A push into a project that holds another session's tasks is refused, and a pull reads only
    this session's tasks and untagged ones (:mod:`bayes_eval.labelstudio`)."""
    tag = store.meta().get(TAG_KEY)
    if tag is None and create:
        import uuid

        tag = uuid.uuid4().hex[:12]
        store.set_meta(TAG_KEY, tag)
    return tag


def write_batch_tmp(frame: pd.DataFrame, path: str, fmt: str | None = None, predictions: Sequence[str] | None = None,
                    from_name: str = "label", fields: Sequence[str] = (), tag: str | None = None) -> str:
    """Write the annotator's view of a batch to a temporary file beside ``path`` and return
    its name (``os.replace`` it into place to finish; :func:`write_batch` does both).  A
    failure removes the temporary file and raises :class:`SessionError` saying what it
    was (disk full, permission denied, ...).

    ``predictions`` (one choice string per row, the classifier's): pre-annotations — in
    ``.json`` / ``.jsonl`` tasks Label Studio ``predictions`` for the control ``from_name``
    on the first of ``fields`` (:func:`preannotation`), in ``.csv`` / ``.tsv`` a
    ``prediction`` column.  ``tag`` (:func:`session_tag`): carried by ``.json`` tasks (the file
    Label Studio imports) as ``bayes_eval_session``."""
    fmt = format_of(path, fmt)
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    if predictions is not None and len(predictions) != len(frame):
        raise ValueError(f"{len(predictions)} predictions for a batch of {len(frame)} rows")
    try:
        if fmt in ("csv", "tsv"):
            out = frame.copy()
            if predictions is not None:
                out["prediction"] = [str(v) for v in predictions]
            out["label"] = ""
            out.to_csv(tmp, index=False, sep="," if fmt == "csv" else "\t")
        else:
            cols = list(frame.columns)
            tasks = [{"data": {c: jsonable_value(v) for c, v in zip(cols, row)}}
                     for row in frame.itertuples(index=False, name=None)]
            for t in tasks if tag is not None else ():
                t["data"][TAG_FIELD] = tag
            for t, v in zip(tasks, predictions if predictions is not None else ()):
                t["predictions"] = preannotation(v, from_name, fields)
            with open(tmp, "w", encoding="utf-8") as fh:
                if fmt == "jsonl":
                    for t in tasks:
                        fh.write(json.dumps(t, ensure_ascii=False) + "\n")
                else:
                    json.dump(tasks, fh, ensure_ascii=False, indent=1)
                    fh.write("\n")
    except BaseException as exc:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(exc, OSError):
            raise SessionError(f"cannot write {path}: {os_problem(exc)}") from None
        raise
    return tmp


def write_batch(frame: pd.DataFrame, path: str, fmt: str | None = None) -> str:
    """Write the annotator's view of a batch (``item``, pool columns, ...) to ``path``.

    The write goes to a temporary file renamed into place, so a crash never leaves a
    half-written batch file.  Returns the format written.
    """
    fmt = format_of(path, fmt)
    tmp = write_batch_tmp(frame, path, fmt)
    try:
        os.replace(tmp, os.fspath(path))
    except OSError as exc:
        os.remove(tmp)
        raise SessionError(f"cannot write {path}: {os_problem(exc)}") from None
    return fmt


def label_studio_config(n_classes: int = 2, label_map: dict | None = None,
                        fields: Sequence[str] = ("item",), from_name: str = "label", header: str | None = None) -> str:
    """A Label Studio labeling configuration for exported batches: the ``fields`` shown
    as text (each task's data must hold them: ``$field``), ``header`` (a data key, e.g.
    ``item``) shown above them, and one single-choice control named ``from_name`` whose
    choice values map back to the labels (``label_map`` inverse, default ``"0"``,
    ``"1"``, ...)."""
    from xml.sax.saxutils import quoteattr

    choices = "\n".join(f'    <Choice value={quoteattr(v)}/>' for v in choice_values(n_classes, label_map))
    texts = "\n".join(f'  <Text name={quoteattr(_tag_name(f))} value={quoteattr("$" + str(f))}/>' for f in fields)
    head = f'  <Header value={quoteattr(f"{header}: ${header}")}/>\n' if header else ""
    return (f'<View>\n{head}{texts}\n  <Choices name={quoteattr(from_name)} toName={quoteattr(_tag_name(fields[0]))} '
            f'choice="single" required="true">\n{choices}\n  </Choices>\n</View>\n')


def _tag_name(field) -> str:
    """A control name for a data key (letters, digits, ``_`` and ``-``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", str(field))


# ------------------------------------------------------------------------------ labels
def parse_label_map(text: str | dict | None) -> dict | None:
    """``"negative=0,positive=1"`` (CLI form) or a dict -> {str: int}."""
    if text is None or isinstance(text, dict):
        return None if text is None else {str(k): _as_int_label(v, f"label map entry {k!r}") for k, v in text.items()}
    out = {}
    for part in str(text).split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise SessionError(f"label map entry {part.strip()!r} is not of the form NAME=LABEL (e.g. positive=1)")
        k, v = (t.strip() for t in part.split("=", 1))
        if not k:
            raise SessionError(f"label map entry {part.strip()!r} has no name before '='")
        lab = _as_int_label(v, f"label map entry {part.strip()!r}")
        if k in out and out[k] != lab:
            raise SessionError(f"label map: {k!r} is mapped twice, to {out[k]} and to {lab}; give each name one label")
        out[k] = lab
    return out


def _as_int_label(v, what):
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, str) and _INT_RE.match(v.strip()):
        return int(float(v.strip()))
    if isinstance(v, np.generic):
        v = v.item()
    raise SessionError(f"{what}: label {v!r} is not an integer class")


def label_mapping(n_classes: int, label_map: dict | None = None) -> dict:
    """The choice-string -> label mapping: ``"0".."C-1"`` plus the user's entries."""
    m = {str(c): c for c in range(n_classes)}
    for k, v in (label_map or {}).items():
        v = _as_int_label(v, f"label map entry {k!r}")
        if not 0 <= v < n_classes:
            raise InvalidLabelError(f"label map entry {k!r} -> {v}: outside the label set {{0..{n_classes - 1}}}")
        m[str(k)] = v
    return m


def _blank(v) -> bool:
    if v is None:
        return True
    if isinstance(v, str):
        return v.strip() == ""
    if isinstance(v, float):
        return math.isnan(v)
    return False


def parse_labels(values: Sequence, n_classes: int, label_map: dict | None = None,
                 where: Sequence[str] | None = None) -> np.ndarray:
    """Map raw label values to classes 0..C-1, or raise :class:`InvalidLabelError`
    naming the first bad value and its position."""
    mapping = label_mapping(n_classes, label_map)
    lower = {}
    for k, v in mapping.items():
        lower.setdefault(k.lower(), set()).add(v)
    out = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        pos = where[i] if where is not None else f"row {i}"
        if isinstance(v, np.generic):
            v = v.item()
        lab = None
        if _blank(v):
            raise InvalidLabelError(f"{pos}: missing label")
        if isinstance(v, bool):
            lab = int(v)
        elif isinstance(v, int):
            lab = v
        elif isinstance(v, float):
            lab = int(v) if v == int(v) else None
        elif isinstance(v, str):
            s = v.strip()
            if s in mapping:
                lab = mapping[s]
            elif len(lower.get(s.lower(), ())) == 1:
                lab = next(iter(lower[s.lower()]))
            elif _INT_RE.match(s):
                lab = int(float(s))
            elif n_classes == 2 and s.lower() in ("true", "false"):   # as a JSON true / false is read
                lab = int(s.lower() == "true")
        if lab is None or not 0 <= lab < n_classes:
            known = ", ".join([repr(k) for k in mapping] + (["true", "false"] if n_classes == 2 else []))
            msg = f"{pos}: label {v!r} is outside the label set {{0..{n_classes - 1}}} (accepted values: {known}"
            example = ",".join(f"NAME{c}={c}" for c in range(min(n_classes, 3)))
            raise InvalidLabelError(msg + "; other names map with label_map={'NAME0': 0, ...})",
                                    cli=msg + f"; other names map with --label-map {example})")
        out[i] = lab
    return out


# ------------------------------------------------------------------------------ import
def _read_text(path: str) -> str:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise SessionError(f"labels file not found: {path}")
    try:
        with open(path, "r", encoding="utf-8-sig") as fh:
            return fh.read()
    except UnicodeDecodeError as exc:
        raise MalformedInputError(f"{path}: not a UTF-8 text file ({exc}); save it as UTF-8 "
                                  f"(in Excel: 'CSV UTF-8')") from None


_LS_META = {"id": "task", "annotation_id": "annotation", "annotator": "annotator", "created_at": "created"}


def _label_column(path, keys, from_name, where="columns"):
    """The key holding the label: ``from_name`` if given, else ``label``; an error naming
    the keys (and ``from_name``) otherwise."""
    want = from_name or "label"
    if want in keys:
        return want
    extra = [k for k in keys if k not in ("item", "draw", "stage", "id", "annotation_id", "annotator", "created_at",
                                          "updated_at", "lead_time", "bayes_eval_session")]
    def hint(flag):   # (the keys may hold braces: no str.format over them)
        return (f"; is the label under another name (Label Studio names it after the Choices control)? say which: "
                f"{flag} (one of {extra})" if extra and from_name is None else "")
    msg = f"{path}: no {want!r} {'column' if where == 'columns' else 'field'} ({where}: {sorted(keys)})"
    raise MalformedInputError(msg + hint("from_name=NAME"), cli=msg + hint("--from-name NAME"))


def _item_key(keys, id_column):
    """The key holding the item ids: ``item``, else the pool's own id column (``--id-column``)
    where the file has it, else None."""
    if "item" in keys:
        return "item"
    return id_column if id_column is not None and id_column in keys else None


def _or_id_column(id_column):
    return f" (or {id_column!r}, the pool's id column)" if id_column is not None else ""


def _read_csv(path: str, text: str, from_name=None, sep=",", id_column=None):
    # a header without the extension's separator but with ';', tabs or '|' (a spreadsheet's CSV where the
    # decimal mark is a comma, Excel in most of Europe) is read with that one, as the pool's reader does
    sep = csv_separator(path, sep, text.split("\n", 1)[0])[0]
    reader = csv.reader(io.StringIO(text), delimiter=sep)
    try:
        header = next(reader)
    except StopIteration:
        raise EmptyInputError(f"{path}: the file is empty") from None
    except csv.Error as exc:
        raise MalformedInputError(f"{path}: line 1: {exc}") from None
    header = [h.strip() for h in header]
    key = _item_key(header, id_column)
    if key is None:
        also = _or_id_column(id_column)
        raise MalformedInputError(f"{path}: no 'item' column{also} (columns are {header}); "
                                  f"a labels file needs columns 'item'{also} and 'label'")
    i_item, i_label = header.index(key), header.index(_label_column(path, header, from_name))
    i_draw = header.index("draw") if "draw" in header else None
    # ``id`` is Label Studio's task id in its CSV / TSV export (beside its annotation columns);
    # in a batch file from ``session next`` it is one of the pool's own columns shown to annotators
    ls_export = any(k in header for k in _LS_META if k != "id") or "lead_time" in header
    i_meta = {v: header.index(k) for k, v in _LS_META.items() if k in header and (k != "id" or ls_export)}
    items, labels, draws, where, meta = [], [], [], [], []
    skipped = n_rows = 0
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise MalformedInputError(f"{path}: line {reader.line_num}: {exc}") from None
        line = reader.line_num
        if not row or all(not c.strip() for c in row):
            continue
        n_rows += 1
        if len(row) != len(header):
            raise MalformedInputError(f"{path}: line {line}: {len(row)} fields, the header has {len(header)}")
        item, label = row[i_item].strip(), row[i_label].strip()
        if not item:
            raise MalformedInputError(f"{path}: line {line}: empty item id")
        if not label:
            skipped += 1
            continue
        items.append(item)
        labels.append(label)
        draws.append((row[i_draw].strip() or None) if i_draw is not None else None)
        m = {k: (row[j].strip() or None) for k, j in i_meta.items()}
        m.setdefault("task", None)
        if m.get("annotator") is not None and m["annotator"].isdigit():
            m["annotator"] = f"user {m['annotator']}"
        meta.append(m)
        w = f"{path}: line {line}"
        if m.get("task") is not None:
            w += f" (task id {m['task']})"
        w += f" (item {item})"
        if m.get("annotation") is not None:
            w += f", annotation {m['annotation']}"
        if m.get("annotator") is not None:
            w += f" by {m['annotator']}"
        where.append(w)
    if n_rows == 0:
        raise EmptyInputError(f"{path}: no rows (only a header)")
    return items, labels, draws, where, skipped, meta


def _choices_of(annotation, from_name, where):
    """The choice strings of one Label Studio annotation (None if it has none)."""
    results = annotation.get("result")
    if results is None:
        return None
    if not isinstance(results, list):
        raise MalformedInputError(f"{where}: 'result' is not a list")
    picked = []
    names = set()
    for r in results:
        if not isinstance(r, dict):
            raise MalformedInputError(f"{where}: a result is not an object")
        value = r.get("value")
        if not isinstance(value, dict) or "choices" not in value:
            continue
        name = r.get("from_name")
        names.add(name)
        if from_name is None or name == from_name:
            picked.append((name, value["choices"]))
    if from_name is None and len(names) > 1:
        several = f"{where}: several choice controls ({', '.join(sorted(map(str, names)))}); say which one holds the label"
        raise MalformedInputError(f"{several} (from_name=)", cli=f"{several} (--from-name NAME)")
    if not picked:
        return None
    _, choices = picked[0]
    if not isinstance(choices, list) or len(choices) != 1:
        raise MalformedInputError(f"{where}: expected exactly one choice, got {choices!r}")
    return choices[0]


def annotator_of(ann) -> str | None:
    """Who made a Label Studio annotation (``completed_by``: a user id, or an object with an
    email), as a string (an email, a username, or ``user 7``)."""
    who = ann.get("completed_by")
    if isinstance(who, dict):
        who = who.get("email") or who.get("username") or (f"user {who['id']}" if who.get("id") is not None else None)
    elif isinstance(who, int) and not isinstance(who, bool):
        who = f"user {who}"
    return None if who is None or isinstance(who, (dict, list)) else str(who)


def _annotation_where(task_where, k, ann):
    """``task_where`` with the annotation named: its place in the task, its id and who
    made it."""
    out = f"{task_where}, annotation {k}"
    if ann.get("id") is not None:
        out += f" (id {ann['id']})"
    who = annotator_of(ann)
    if who is not None:
        out += f" by {who}"
    return out


def _records_of_object(obj, where, from_name, id_column=None):
    """(item, label, draw, where, meta) records of one JSON object and its cancelled
    annotations: ([], 0) when not yet labeled."""
    if not isinstance(obj, dict):
        raise MalformedInputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    data = obj.get("data")
    if "annotations" in obj or isinstance(data, dict):
        key = _item_key(data, id_column) if isinstance(data, dict) else None
        if key is None:
            raise MalformedInputError(f"{where}: task has no data.item{_or_id_column(id_column)} "
                                      f"(was it exported by bayes-eval?)")
        item = data[key]
        draw = data.get("draw")
        tid = obj.get("id")
        w = f"{where}{f' (task id {tid})' if tid is not None else ''} (item {item!r})"
        anns = obj.get("annotations")
        if anns is None:
            label = obj.get("label", data.get("label"))
            return ([] if _blank(label) else [(item, label, draw, w, {"task": tid})]), 0
        if not isinstance(anns, list):
            raise MalformedInputError(f"{w}: 'annotations' is not a list")
        out, cancelled = [], 0
        for k, ann in enumerate(anns, 1):
            if not isinstance(ann, dict):
                raise MalformedInputError(f"{w}: annotation {k} is not an object")
            if ann.get("was_cancelled"):
                cancelled += 1
                continue
            wa = _annotation_where(w, k, ann) if len(anns) > 1 else w
            choice = _choices_of(ann, from_name, wa)
            if choice is not None:
                out.append((item, choice, draw, wa, {
                    "task": tid, "annotation": ann.get("id"), "annotator": annotator_of(ann),
                    "ground_truth": bool(ann.get("ground_truth")), "created": ann.get("created_at")}))
        return out, cancelled
    key = _item_key(obj, id_column)
    if key is None:
        raise MalformedInputError(f"{where}: no 'item' field{_or_id_column(id_column)} (keys: {sorted(obj)})")
    item = obj[key]
    if _blank(item):
        raise MalformedInputError(f"{where}: empty item id")
    key = from_name or "label"
    if key not in obj and from_name is None and any(k in obj for k in ("annotation_id", "annotator")):
        _label_column(where, list(obj), from_name, where="keys")  # a JSON_MIN export: say which key
    label = obj.get(key)
    if isinstance(label, dict) and "choices" in label:  # JSON_MIN of a multi-choice control
        label = label["choices"][0] if len(label["choices"]) == 1 else label["choices"]
    if _blank(label):
        return [], 0
    m = {v: obj.get(k) for k, v in _LS_META.items()}
    if isinstance(m.get("annotator"), int) or str(m.get("annotator") or "").isdigit():
        m["annotator"] = f"user {m['annotator']}"
    w = where + (f" (task id {m['task']})" if m.get("task") is not None else "") + f" (item {item!r})"
    if m.get("annotation") is not None:
        w += f", annotation {m['annotation']}"
    if m.get("annotator") is not None:
        w += f" by {m['annotator']}"
    return [(item, label, obj.get("draw"), w, m)], 0


def records_of_tasks(objs, from_name=None, source="Label Studio", id_column=None) -> LabelRecords:
    """:class:`LabelRecords` of Label Studio tasks or flat records (``objs``: a list of
    ``(object, where)``); an :class:`EmptyInputError` when none has a label.  The item id is
    under ``item`` or, where that is absent, under ``id_column`` (the pool's own id column)."""
    recs, skipped, cancelled, nobody = [], 0, 0, []
    for obj, w in objs:
        r, c = _records_of_object(obj, w, from_name, id_column)
        cancelled += c
        if not r:
            skipped += 1
            if c and len(obj.get("annotations") or ()) == c:   # every annotation of the task cancelled
                nobody.append(obj["data"][_item_key(obj["data"], id_column)])
        recs.extend(r)
    if not recs:
        raise EmptyInputError(f"{source}: no labels (all {skipped} rows/tasks are without a label"
                              + (f"; {cancelled} annotation(s) cancelled or skipped" if cancelled else "")
                              + (f"; every annotator skipped item(s) {', '.join(map(repr, nobody[:10]))}"
                                 f"{' ...' if len(nobody) > 10 else ''} (in a labeling session: if nobody can label "
                                 f"them, record it with session skip)" if nobody else "") + ")")
    return LabelRecords([r[0] for r in recs], [r[1] for r in recs], [r[2] for r in recs], [r[3] for r in recs],
                        skipped, source, [r[4] for r in recs], cancelled, tuple(nobody))


def read_labels(path: str, fmt: str | None = None, from_name: str | None = None,
                id_column: str | None = None) -> LabelRecords:
    """Read a labeled file (CSV / TSV incl. Label Studio's export, JSONL, JSON incl. Label
    Studio's JSON and JSON_MIN exports).  Items are named in the column (key) ``item``, or,
    in a file without one, in ``id_column`` — the pool's own id column (``--id-column``), so a
    file keyed the way the user's data is keyed is read as it is.

    Raises :class:`EmptyInputError` for a file without labels and
    :class:`MalformedInputError` for unreadable rows, naming the line or task.
    """
    fmt = format_of(path, fmt)
    path = os.fspath(path)
    text = _read_text(path)
    if not text.strip():
        raise EmptyInputError(f"{path}: the file is empty")
    if fmt in ("csv", "tsv"):
        items, labels, draws, where, skipped, meta = _read_csv(path, text, from_name, "," if fmt == "csv" else "\t",
                                                               id_column)
        if not items:
            raise EmptyInputError(f"{path}: no labels (all {skipped} rows/tasks are without a label)")
        return LabelRecords(items, labels, draws, where, skipped, path, meta)
    if fmt == "jsonl":
        objs = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                objs.append((json.loads(line), f"{path}: line {n}"))
            except json.JSONDecodeError as exc:
                raise MalformedInputError(f"{path}: line {n}: not valid JSON ({exc.msg})") from None
    else:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MalformedInputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        if isinstance(doc, dict):
            doc = [doc]
        if not isinstance(doc, list):
            raise MalformedInputError(f"{path}: expected a list of tasks, got {type(doc).__name__}")
        objs = [(o, f"{path}: task {n}") for n, o in enumerate(doc, 1)]
    if not objs:
        raise EmptyInputError(f"{path}: no tasks or rows")
    return records_of_tasks(objs, from_name, path, id_column)


# ------------------------------------------------------------------------------ disagreements
