"""Reading a table of items as users save it: one reader for pools (:meth:`bayes_eval.pool.Pool.from_file`),
systems' files of on-demand evaluation (``seeds/003``; :func:`bayes_eval.ondemand_session.read_system_file`,
``ondemand simulate``) and thinned data (``seeds/004``; ``bayes-eval subsampled``).

Formats, by the file's extension: Parquet (``.parquet``, ``.pq``), JSON lines (``.jsonl``,
``.ndjson``: one object per row), JSON (``.json``: a list of objects), else delimited text —
tabs for ``.tsv`` / ``.tab``, commas otherwise, except that a header with no comma but
semicolons (a spreadsheet's CSV export in many locales), tabs or bars is read with that
separator, and a ;-separated file's decimal commas (``0,53``) as numbers.  Spreadsheets
(``.xlsx``, ``.xls``, ``.ods``) are refused, saying to save the sheet as CSV.  A CSV row cut
short is named (:func:`bayes_eval.checks.refuse_short_csv_rows`) rather than read as missing
values.  Each reader keeps its own conventions on top (a pool's text ids, a system file's
all-text columns).
"""
from __future__ import annotations

import io
import os

import pandas as pd

from .checks import refuse_short_csv_rows
from .errors import PoolError

__all__ = ["read_table", "csv_separator", "SPREADSHEETS"]

SPREADSHEETS = (".xlsx", ".xls", ".xlsm", ".ods")
_PARQUET = (".parquet", ".pq")
_JSON = (".jsonl", ".ndjson", ".json")
_COMPRESSED = (".gz", ".bz2", ".zip", ".xz", ".zst")


def csv_separator(path: str, default: str, header: str | None = None):
    """(separator, note) of a delimited text file: ``default`` unless its header line (read from
    ``path``, or given) holds none of it but semicolons, tabs or bars, then that one, said in the
    note.  Compressed files keep ``default``."""
    if header is None:
        if os.path.splitext(path)[1].lower() in _COMPRESSED:
            return default, None
        try:
            with open(path, encoding="utf-8-sig", errors="replace") as fh:
                header = fh.readline()
        except OSError:
            return default, None
    if default in header:
        return default, None
    for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "bars")):
        if sep != default and sep in header:
            return sep, (f"columns separated by {name} (the header has no {'comma' if default == ',' else 'tab'})"
                         + ("; decimal commas (0,53) read as numbers" if sep == ";" else ""))
    return default, None


def _head(path: str, n: int = 4096) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b"x"       # unreadable: read_table's reading says why


def read_table(path: str, *, what: str = "file", error=PoolError, data: bytes | None = None, text: bool = False,
               dtype=None):
    """``(frame, sep, note)`` of the table at ``path`` (module docstring); ``sep`` is the
    separator of delimited text (None for Parquet and JSON), ``note`` says a separator other
    than the extension's.  ``data``: the file's bytes, already read (the reader hashes them);
    ``text``: every column of delimited text as text, blanks kept as ''; ``dtype``: pandas'
    per-column dtypes for delimited text.  Errors are ``error`` (a :class:`PoolError` by
    default), naming ``what`` and the path."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext in SPREADSHEETS:
        raise error(f"{path}: a spreadsheet; save its sheet as CSV (or Parquet) and give that file")
    src = io.BytesIO(data) if data is not None else path
    sep = note = None
    if ext not in _PARQUET and ext not in _COMPRESSED and (
            (data if data is not None else _head(path)).strip() == b""):
        return pd.DataFrame(), None, None      # an empty file: the caller says so in its words
    try:
        if ext in _PARQUET:
            frame = pd.read_parquet(src)
        elif ext in _JSON:
            frame = pd.read_json(src, lines=ext != ".json", dtype=False)
        else:
            default = "\t" if ext in (".tsv", ".tab") else ","
            head = None if data is None else data.split(b"\n", 1)[0].decode("utf-8-sig", "replace")
            sep, note = csv_separator(path, default, head)
            kw = {"dtype": str, "keep_default_na": False} if text else {"dtype": dtype}
            if sep == ";" and not text:
                kw["decimal"] = ","     # the locales that write ; write decimal commas; '.' still reads as text
            frame = pd.read_csv(src, sep=sep, **kw)
    except Exception as exc:  # pandas and pyarrow raise many kinds for an unreadable file
        kind = "Parquet" if ext in _PARQUET else "JSON" if ext in _JSON else "CSV"
        utf8 = "; save it as UTF-8 (in Excel: 'CSV UTF-8')" if isinstance(exc, UnicodeDecodeError) else ""
        raise error(f"could not read {what} {path} as {kind}: {exc}{utf8}") from None
    if not isinstance(frame, pd.DataFrame):
        raise error(f"could not read {what} {path}: not a table (one row per item)")
    if sep is not None and not text and data is None and frame.isna().to_numpy().any():
        refuse_short_csv_rows(path, sep, frame)
    return frame, sep, note
