"""Files for annotators: export a batch, read the labeled file back.

Formats (chosen by the file's extension, or ``fmt``):

``.csv``
    One row per item: ``item`` (the stable item id), the pool's own columns, and an empty
    ``label`` column for the annotator to fill.  Read back: columns ``item`` and ``label``
    (any others are ignored; rows whose label is still empty are skipped and counted).
``.jsonl``
    One Label Studio task per line, ``{"data": {"item": ..., <pool columns>...}}``.  Read
    back: lines ``{"item": ..., "label": ...}`` or Label Studio tasks with annotations.
``.json``
    A JSON list of the same tasks — Label Studio's documented task import format — and,
    read back, Label Studio's JSON export: a list of tasks, each with ``"data"`` and
    ``"annotations": [{"result": [{"type": "choices", "value": {"choices": ["1"]}, ...}],
    "was_cancelled": false, ...}]``.  Cancelled annotations and tasks not yet annotated
    are skipped; a task with several annotations gives several labels (a deterministic
    oracle then requires them to agree).

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

__all__ = [
    "LabelRecords",
    "FORMATS",
    "format_of",
    "prepare_output",
    "os_problem",
    "write_batch",
    "write_batch_tmp",
    "read_labels",
    "label_mapping",
    "parse_labels",
    "parse_label_map",
    "label_studio_config",
]

FORMATS = ("csv", "jsonl", "json")
_INT_RE = re.compile(r"^[+-]?\d+(\.0*)?$")


class LabelRecords(NamedTuple):
    """Labels read from a file, before they are checked against a session.

    ``items`` raw ids as written in the file; ``labels`` raw label values (strings,
    numbers); ``draws`` draw ids or None per record (stochastic-oracle files);
    ``where`` a human-readable position per record ("line 4", "task 2 (id 17)");
    ``skipped`` rows/tasks without a label; ``source`` the file name.
    """

    items: list
    labels: list
    draws: list
    where: list
    skipped: int
    source: str


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
                       f"use .csv, .jsonl or .json (or pass fmt=)",
                       cli=f"{path}: cannot tell the format from the extension {ext!r}; "
                           f"name the file .csv, .jsonl or .json")


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
def _jsonable(v):
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


def write_batch_tmp(frame: pd.DataFrame, path: str, fmt: str | None = None) -> str:
    """Write the annotator's view of a batch to a temporary file beside ``path`` and return
    its name (``os.replace`` it into place to finish; :func:`write_batch` does both).  A
    failure removes the temporary file and raises :class:`SessionError` saying what it
    was (disk full, permission denied, ...)."""
    fmt = format_of(path, fmt)
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        if fmt == "csv":
            out = frame.copy()
            out["label"] = ""
            out.to_csv(tmp, index=False)
        else:
            cols = list(frame.columns)
            tasks = [{"data": {c: _jsonable(v) for c, v in zip(cols, row)}}
                     for row in frame.itertuples(index=False, name=None)]
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
                        fields: Sequence[str] = ("item",)) -> str:
    """A Label Studio labeling configuration for exported batches: the ``fields`` shown
    as text and one single-choice control named ``label`` whose choice values map back
    to the labels (``label_map`` inverse, default ``"0"``, ``"1"``, ...)."""
    inv = {}
    for k, v in (label_map or {}).items():
        inv.setdefault(int(v), k)
    choices = "\n".join(f'    <Choice value="{inv.get(c, str(c))}"/>' for c in range(n_classes))
    texts = "\n".join(f'  <Text name="{f}" value="${f}"/>' for f in fields)
    return (f'<View>\n{texts}\n  <Choices name="label" toName="{fields[0]}" choice="single" required="true">\n'
            f"{choices}\n  </Choices>\n</View>\n")


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
        if lab is None or not 0 <= lab < n_classes:
            known = ", ".join(repr(k) for k in mapping)
            raise InvalidLabelError(
                f"{pos}: label {v!r} is outside the label set {{0..{n_classes - 1}}} (accepted values: {known})")
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
        raise MalformedInputError(f"{path}: not a UTF-8 text file ({exc})") from None


def _read_csv(path: str, text: str):
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise EmptyInputError(f"{path}: the file is empty") from None
    except csv.Error as exc:
        raise MalformedInputError(f"{path}: line 1: {exc}") from None
    header = [h.strip() for h in header]
    for col in ("item", "label"):
        if col not in header:
            raise MalformedInputError(f"{path}: no {col!r} column (columns are {header}); "
                                      f"a labels file needs columns 'item' and 'label'")
    i_item, i_label = header.index("item"), header.index("label")
    i_draw = header.index("draw") if "draw" in header else None
    items, labels, draws, where = [], [], [], []
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
        where.append(f"{path}: line {line} (item {item})")
    if n_rows == 0:
        raise EmptyInputError(f"{path}: no rows (only a header)")
    return items, labels, draws, where, skipped


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


def _annotation_where(task_where, k, ann):
    """``task_where`` with the annotation named: its place in the task, its id and who
    made it (Label Studio's ``completed_by``: a user id, or an object with an email)."""
    out = f"{task_where}, annotation {k}"
    if ann.get("id") is not None:
        out += f" (id {ann['id']})"
    who = ann.get("completed_by")
    if isinstance(who, dict):
        who = who.get("email") or who.get("username") or who.get("id")
    if who is not None and not isinstance(who, (dict, list)):
        out += f" by {'user ' if isinstance(who, int) else ''}{who}"
    return out


def _records_of_object(obj, where, from_name):
    """(item, label, draw, where) records of one JSON object; [] when not yet labeled."""
    if not isinstance(obj, dict):
        raise MalformedInputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    data = obj.get("data")
    if "annotations" in obj or isinstance(data, dict):
        if not isinstance(data, dict) or "item" not in data:
            raise MalformedInputError(f"{where}: task has no data.item (was it exported by bayes-eval?)")
        item = data["item"]
        draw = data.get("draw")
        tid = obj.get("id")
        w = f"{where}{f' (task id {tid})' if tid is not None else ''} (item {item!r})"
        anns = obj.get("annotations")
        if anns is None:
            label = obj.get("label", data.get("label"))
            return [] if _blank(label) else [(item, label, draw, w)]
        if not isinstance(anns, list):
            raise MalformedInputError(f"{w}: 'annotations' is not a list")
        out = []
        for k, ann in enumerate(anns, 1):
            if not isinstance(ann, dict):
                raise MalformedInputError(f"{w}: annotation {k} is not an object")
            if ann.get("was_cancelled"):
                continue
            wa = _annotation_where(w, k, ann) if len(anns) > 1 else w
            choice = _choices_of(ann, from_name, wa)
            if choice is not None:
                out.append((item, choice, draw, wa))
        return out
    if "item" not in obj:
        raise MalformedInputError(f"{where}: no 'item' field (keys: {sorted(obj)})")
    item = obj["item"]
    if _blank(item):
        raise MalformedInputError(f"{where}: empty item id")
    label = obj.get("label")
    if _blank(label):
        return []
    return [(item, label, obj.get("draw"), f"{where} (item {item!r})")]


def read_labels(path: str, fmt: str | None = None, from_name: str | None = None) -> LabelRecords:
    """Read a labeled file (CSV, JSONL, or JSON incl. Label Studio's export).

    Raises :class:`EmptyInputError` for a file without labels and
    :class:`MalformedInputError` for unreadable rows, naming the line or task.
    """
    fmt = format_of(path, fmt)
    path = os.fspath(path)
    text = _read_text(path)
    if not text.strip():
        raise EmptyInputError(f"{path}: the file is empty")
    if fmt == "csv":
        items, labels, draws, where, skipped = _read_csv(path, text)
    else:
        recs = []
        skipped = 0
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
        for obj, w in objs:
            r = _records_of_object(obj, w, from_name)
            if not r:
                skipped += 1
            recs.extend(r)
        items = [r[0] for r in recs]
        labels = [r[1] for r in recs]
        draws = [r[2] for r in recs]
        where = [r[3] for r in recs]
    if not items:
        raise EmptyInputError(f"{path}: no labels (all {skipped} rows/tasks are without a label)")
    return LabelRecords(items, labels, draws, where, skipped, path)
