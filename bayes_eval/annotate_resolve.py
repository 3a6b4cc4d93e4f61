"""Several annotations of one item reconciled to one label: :func:`resolve` (``--resolve`` of
``session ingest`` and ``session pull``), split from :mod:`bayes_eval.annotate` at stop 74 (it
had reached the 850-line limit).  The records are :func:`bayes_eval.annotate.read_labels`'s.
"""
from __future__ import annotations

from .annotate import LabelRecords, parse_labels
from .store import LabelConflictError

__all__ = ["resolve"]


def _is_annotator(who, rule) -> bool:
    """Whether ``--resolve rule`` names annotator ``who``: the whole name, an email's local part,
    or a Label Studio user id (``user 9``)."""
    return who is not None and (who == rule or who.split("@")[0] == rule or who == f"user {rule}")


def _who(m):
    return (m or {}).get("annotator")


def _describe(recs, idx, classes):
    parts = []
    for i in idx:
        m = (recs.meta or [None] * len(recs.items))[i] or {}
        a = recs.where[i] + (" (ground truth)" if m.get("ground_truth") else "")
        same = str(recs.labels[i]) == str(classes[i])
        parts.append(f"{a} says {recs.labels[i]!r}" + ("" if same else f" (label {classes[i]})"))
    return "; ".join(parts)


def _undecided(recs, idx, classes, rule, why, meta, stochastic_hint=True) -> LabelConflictError:
    """The refusal of item ``idx``'s disagreement that ``rule`` could not decide, offering only
    the rules that can decide it (not ``rule``; an annotator or ground truth only where the file
    records them) and the fix by hand."""
    labs = [int(classes[i]) for i in idx]
    top = sorted((labs.count(c) for c in set(labs)), reverse=True)
    by: dict = {}
    for i in idx:
        by.setdefault(_who(meta[i]), set()).add(int(classes[i]))
    names = [w for w, ls in by.items() if w is not None and len(ls) == 1 and not _is_annotator(w, rule)]
    # a labeling tool's export (tasks, annotators, ground truth), not a plain item,label file
    tool = any(v is not None for m in meta for v in (m or {}).values())
    gt = {int(classes[i]) for i in idx if (meta[i] or {}).get("ground_truth")}
    # ground truth decides only where exactly one label is marked so; where the export can mark it
    # (Label Studio's JSON: a ground_truth flag per annotation) and none is, marking one is a way to reconcile
    rules = [r for r, ok in (("majority", top[0] > top[1]), ("ground-truth", len(gt) == 1), ("first", True))
             if ok and r != rule]
    markable = not gt and rule != "ground-truth" and any("ground_truth" in (meta[i] or {}) for i in idx)
    ann = [f"an annotator's email ({', '.join(names)})"] if names else []

    def one_of(words):
        return ", ".join(words[:-1]) + (" or " if len(words) > 1 else "") + words[-1]
    msg = (f"two different labels for item {recs.items[idx[0]]!r}: {_describe(recs, idx, classes)}"
           + (f"; rule {rule!r} cannot decide: {why}" if why else "")
           + " — a deterministic oracle gives one label per item; nothing was ingested ("
           + ("reconcile them in the labeling tool" if tool else "correct the file to one label per item"))

    def marked(flag):
        return (f" (or mark one annotation as ground truth there, export or pull again and {flag})"
                if markable else "")
    rest = "; or a rule that decides this item: "
    return LabelConflictError(msg + marked("resolve='ground-truth'") + rest + "resolve="
                              + one_of([repr(r) for r in rules] + ann)
                              + ("; or label with oracle='stochastic' in a new session)" if stochastic_hint else ")"),
                              cli=msg + marked("--resolve ground-truth") + rest + "--resolve " + one_of(rules + ann)
                              + ("; or label with --oracle stochastic in a new session)" if stochastic_hint else ")"))


def resolve(recs: LabelRecords, rule: str, n_classes: int, label_map: dict | None = None,
            stochastic: bool = False, held=None, rule_first: bool = False,
            stochastic_hint: bool = True) -> tuple[LabelRecords, int]:
    """Reconcile several annotations of one item (Label Studio's overlap).

    Deterministic oracle: the annotations of one item that disagree are reduced to one
    label by ``rule``: ``"error"`` (refuse, naming the task, the annotation ids and the
    annotators), ``"majority"`` (the most frequent label; a tie is refused),
    ``"ground-truth"`` (the annotation marked ground truth in Label Studio),
    ``"first"`` (the earliest annotation: ``created_at``, else the annotation id, else the
    file's order) or an annotator's email / username / ``user ID`` (that annotator's
    label; items they did not annotate fall back to ``"error"``).  Agreeing annotations
    are one label.  Stochastic oracle: every annotation is a label (nothing is reduced);
    the first annotation of a task answers its draw, the others the item's other draws
    awaiting a label.  ``held`` (``item -> label or None``: the label the session already
    holds), asked only of items whose annotations disagree: a disagreement whose held label
    is one of the annotations' was resolved by an earlier ingest and takes that label again,
    whatever ``rule`` is (pulling a project again after ``--resolve`` needs no rule); with ``rule_first``
    (``--correct`` with a rule other than ``error``) the rule decides first -- a reviewer's ground-truth
    annotation corrects the held label -- and the held label settles only what the rule cannot.
    Returns the records and the number of disagreements resolved now; raises :class:`LabelConflictError`
    (``stochastic_hint``: whether its message offers a stochastic-oracle session, as a session's does;
    the on-demand evaluation has none).
    """
    if stochastic:
        seen, draws = set(), list(recs.draws)
        for i, m in enumerate(recs.meta or []):
            key = ((m or {}).get("task"), draws[i])
            if m and m.get("task") is not None and key in seen:
                draws[i] = None  # another annotation of the same draw: a label for another draw of the item
            seen.add(key)
        return recs._replace(draws=draws), 0
    classes = parse_labels(recs.labels, n_classes, label_map, recs.where)
    groups: dict = {}
    for i, item in enumerate(recs.items):
        groups.setdefault(str(item), []).append(i)
    keep, n_resolved = [], 0
    meta = recs.meta or [None] * len(recs.items)
    whos = sorted({w for w in map(_who, meta) if w is not None})   # every annotator the records name
    for item, idx in groups.items():
        labs = {int(classes[i]) for i in idx}
        if len(labs) == 1:
            keep.append(idx[0])
            continue
        before = held(recs.items[idx[0]]) if held is not None else None
        if before in labs and not (rule_first and rule != "error"):   # resolved when it was first ingested
            keep.append(next(i for i in idx if int(classes[i]) == before))
            continue
        pick, why = None, None
        if rule == "majority":
            counts = {c: sum(1 for i in idx if classes[i] == c) for c in labs}
            top = max(counts.values())
            best = [c for c, k in counts.items() if k == top]
            if len(best) == 1:
                pick = next(i for i in idx if classes[i] == best[0])
            else:
                why = f"no majority ({' vs '.join(f'{k}×{c}' for c, k in counts.items())})"
        elif rule == "ground-truth":
            gt = [i for i in idx if (meta[i] or {}).get("ground_truth")]
            if gt and len({int(classes[i]) for i in gt}) == 1:
                pick = gt[0]
            else:
                why = "no annotation is marked ground truth" if not gt else "the ground-truth annotations disagree"
        elif rule == "first":
            def when(i):
                m = meta[i] or {}
                ann = m.get("annotation")
                return (str(m.get("created") or ""), int(ann) if str(ann).isdigit() else 0, i)
            pick = min(idx, key=when)
        elif rule != "error":
            mine = [i for i in idx if _is_annotator(_who(meta[i]), rule)]
            if mine and len({int(classes[i]) for i in mine}) == 1:
                pick = mine[0]
            elif not mine and not any(_is_annotator(w, rule) for w in whos):
                # not one annotation by that name anywhere: most likely a mistyped rule
                why = ("it is not a rule (majority, ground-truth, first, error) and "
                       + (f"no annotation here is by an annotator of that name (annotators: {', '.join(whos)})" if whos
                          else "the file records no annotators"))
            else:
                why = (f"annotator {rule!r} did not annotate it" if not mine
                       else f"annotator {rule!r} gave it different labels")
        if pick is None and before in labs:   # rule_first: what the rule cannot decide stays as held
            keep.append(next(i for i in idx if int(classes[i]) == before))
            continue
        if pick is None:
            raise _undecided(recs, idx, classes, rule, why, meta, stochastic_hint)
        keep.append(pick)
        n_resolved += 1
    keep.sort()

    def sel(v):
        return None if v is None else [v[i] for i in keep]

    return LabelRecords(sel(recs.items), sel(recs.labels), sel(recs.draws), sel(recs.where), recs.skipped, recs.source,
                        sel(recs.meta), recs.cancelled, recs.cancelled_items), n_resolved
