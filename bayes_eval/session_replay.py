"""Reopening a session: replay from the stored stages, with the design's state stored per
closed stage so that a reopen costs no compiled step (a mixin of
:class:`~bayes_eval.session.Session`; ``docs/architecture.md``, "Sessions").

**Why store the state.**  Every command of the CLI (``session next`` / ``ingest`` /
``status``) is a new process that reopens the session file.  Replaying the stored stages
through the design's compiled step (001 Alg. 1: R̂, ``design.update``, ``design.propose``;
000 §3 for Poisson rounds) costs a trace and lowering of that step in every process
(~1 s on a 2-core machine, measured in ``benchmarks/results/latency.md``), for a result the
session already computed when the stage closed.  So when a stage closes, the state it
produced — the design's state and proposal (Poisson: the refitted model's state and the
round's record), :class:`~bayes_eval.stages.Closing` — is written in the same transaction
as the labels that closed it (``Store.add_labels(..., state=...)``), and a reopen restores
it instead of recomputing it.  The per-(cell, class) tallies are recomputed from the stored
draws and labels (NumPy bincounts), as before.

**Safety.**  A stored state is used only when its key matches (this bayes_eval's version,
JAX's version and the session's measures, :func:`state_key`); otherwise, and for any stage
without one (a file written before stored states, or a stage closed by an empty Poisson
round), the step is run as before, so a file always reopens to the state a replay gives.
The states are encoded without pickle (:func:`encode_closing`): arrays in an ``.npz``
(``allow_pickle=False``) and a JSON description whose only classes are NamedTuples of
bayes_eval's own modules.  Poisson rounds keep the replay check of the stored items'
inclusion probabilities: against the stored round's ``b``.
"""
from __future__ import annotations

import hashlib
import importlib
import io
import json

import numpy as np

from .errors import SessionError
from .stages import Closing

__all__ = ["SessionReplay", "encode_closing", "decode_closing", "state_key"]

_MODULE_PREFIXES = ("bayes_eval.", "bayes_eval")


def state_key(config: dict, measure_names) -> str:
    """The key under which a session's stage states are stored: a state written by
    another bayes_eval or JAX version, or for other measures, is not used."""
    import jax

    from . import __version__

    blob = json.dumps({"bayes_eval": __version__, "jax": jax.__version__, "measures": list(measure_names),
                       "design": config.get("design"), "seed": config.get("seed")}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _enc(obj, arrays: list):
    if obj is None:
        return {"t": "none"}
    if isinstance(obj, (bool, np.bool_)):
        return {"t": "bool", "v": bool(obj)}
    if isinstance(obj, (int, np.integer)):
        return {"t": "int", "v": int(obj)}
    if isinstance(obj, (float, np.floating)):
        arrays.append(np.asarray(obj, np.float64))  # exact, NaN and inf included
        return {"t": "float", "a": len(arrays) - 1}
    if isinstance(obj, str):
        return {"t": "str", "v": obj}
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise TypeError("only dicts with string keys are stored")
        return {"t": "dict", "k": list(obj), "f": [_enc(v, arrays) for v in obj.values()]}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        cls = type(obj)
        if not cls.__module__.startswith(_MODULE_PREFIXES):
            raise TypeError(f"{cls.__module__}.{cls.__qualname__} is not a bayes_eval state")
        return {"t": "nt", "m": cls.__module__, "c": cls.__qualname__, "f": [_enc(v, arrays) for v in obj]}
    if isinstance(obj, (tuple, list)):
        return {"t": type(obj).__name__, "f": [_enc(v, arrays) for v in obj]}
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):  # NumPy or JAX array
        arrays.append(np.asarray(obj))
        return {"t": "array", "a": len(arrays) - 1}
    raise TypeError(f"cannot store a {type(obj).__name__} in a stage state")


def _dec(spec, arrays):
    t = spec["t"]
    if t == "none":
        return None
    if t in ("bool", "int", "str"):
        return spec["v"]
    if t == "float":
        return float(arrays[spec["a"]])
    if t == "array":
        return arrays[spec["a"]]
    if t == "dict":
        return {k: _dec(v, arrays) for k, v in zip(spec["k"], spec["f"])}
    if t in ("tuple", "list"):
        vals = [_dec(v, arrays) for v in spec["f"]]
        return tuple(vals) if t == "tuple" else vals
    if t == "nt":
        if not spec["m"].startswith(_MODULE_PREFIXES) or "." in spec["c"]:
            raise ValueError(f"unexpected class {spec['m']}.{spec['c']} in a stored stage state")
        cls = getattr(importlib.import_module(spec["m"]), spec["c"])
        if not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
            raise ValueError(f"{spec['m']}.{spec['c']} is not a state record")
        return cls(*(_dec(v, arrays) for v in spec["f"]))
    raise ValueError(f"unknown entry {t!r} in a stored stage state")


def encode_closing(closing: Closing) -> bytes:
    """A stage's :class:`~bayes_eval.stages.Closing` as bytes (``.npz``, no pickle)."""
    arrays: list = []
    spec = _enc(tuple(closing), arrays)
    buf = io.BytesIO()
    np.savez(buf, spec=np.asarray(json.dumps(spec)), **{f"a{i}": a for i, a in enumerate(arrays)})
    return buf.getvalue()


def decode_closing(blob: bytes) -> Closing:
    """The inverse of :func:`encode_closing` (bit for bit)."""
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        spec = json.loads(str(z["spec"]))
        arrays = [z[f"a{i}"] for i in range(len(z.files) - 1)]
    return Closing(*_dec(spec, arrays))


class SessionReplay:
    """The replay of :meth:`~bayes_eval.session.Session.open` (uses the session's
    ``_store``, ``_core``, ``_kind`` and its stage bookkeeping)."""

    def _state_key(self) -> str:
        return state_key(self.config, [m.name for m in self.measures])

    def _encoded_state(self, closed) -> tuple | None:
        """``(key, blob)`` of a closed stage's state for the store, or None when the state
        cannot be encoded (then a reopen runs the step for that stage, as without one)."""
        try:
            return self._state_key(), encode_closing(closed[1])
        except (TypeError, ValueError):
            return None

    def _stored_closings(self) -> dict:
        """stage -> Closing of the stored states whose key matches."""
        key = self._state_key()
        out = {}
        for stage, k, blob in self._store.stage_states():
            if k != key:
                continue
            try:
                out[int(stage)] = decode_closing(blob)
            except (ValueError, KeyError, OSError, AttributeError, ImportError):
                continue  # unreadable: recompute that stage
        return out

    def _replay(self, use_states: bool = True):
        store = self._store
        stages = store.stages()
        draws = store.draws()
        for r in store.labels():
            _, row, _, label, draw, stage, _, _ = r
            if self._stochastic:
                self._draw_label[int(draw)] = int(label)
            else:
                self._label_of[int(row)] = int(label)
                self._label_stage[int(row)] = int(stage)
        for _, row, _, _, _, _ in store.skips():
            self._skipped[int(row)] = int(self._core.item_cell[int(row)])
        stored = self._stored_closings() if use_states else {}
        fixes = self._correction_events()  # labels corrected later: applied where they were made
        by_stage: dict[int, list] = {}
        for d in draws:
            by_stage.setdefault(int(d[1]), []).append(d)
        n = len(stages)
        for i, st in enumerate(stages):
            self._progress("replaying stages", i, n)
            s = int(st["stage"])
            ds = by_stage.get(s, [])
            if len(self._draws) != (ds[0][0] if ds else len(self._draws)):
                raise SessionError(f"{self.path}: draws of stage {s} are not contiguous; the file is damaged")
            rows = np.asarray([d[2] for d in ds], np.int64)
            cells = self._core.item_cell[rows] if rows.size else np.zeros(0, np.int64)
            new = np.asarray([bool(d[4]) for d in ds], bool)
            q = np.asarray([d[5] for d in ds], np.float64)
            w = np.asarray([d[6] for d in ds], np.float64)
            closing = stored.get(s)
            pround = None
            if closing is not None and closing.round is not None:  # a Poisson round: its proposal as stored
                pround = {**closing.round, "prop": closing.prop}
                self._kind.check_round(st, rows, cells, q, pround)
            self._begin_stage(st, rows, cells, new, q, w, pround=pround)
            self._replay_corrections(fixes, s, True)
            if not self._open["pending"]:
                self._commit_close(self._close_state(time_closed=st["closed_at"], closing=closing))
                self._replay_corrections(fixes, s, False)
            elif i != n - 1:
                raise SessionError(f"{self.path}: stage {s} is incomplete but later stages exist; the file is damaged")
        self._progress("replaying stages", n, n)
