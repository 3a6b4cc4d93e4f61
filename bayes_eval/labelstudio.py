"""Label Studio, live: push a session's open batch into a project as tasks, pull the finished
annotations back into the session (``bayes-eval session push / pull / label-config``).

Needs ``label-studio-sdk``, the optional extra ``pip install "bayes_eval[labelstudio]"``
(tested against Label Studio 1.23.2 and label-studio-sdk 2.1.2).  The token comes from
``token=`` or the environment's ``LABEL_STUDIO_API_KEY`` (a legacy token or a personal
access token).

* :func:`push` creates one task per item of the open batch (stochastic oracle: per draw)
  that the project does not hold yet — the project's tasks are read first, so pushing
  again creates nothing (Label Studio itself does not de-duplicate imports).  When no
  batch is open, the next one is drawn first (as ``session next``).  The task data is
  :func:`task_data`: ``item``, ``stage`` (``draw``), and the pool's own columns chosen by
  ``fields`` — model scores and probabilities only with ``show_score``; ``preannotate``
  adds the classifier's prediction as a Label Studio prediction.  Pushed tasks also carry
  ``bayes_eval_session``, the session's tag (set at its first push): a project holding
  another session's tasks is refused before anything is drawn.
* :func:`pull` reads every task of the project with its annotations (this session's: its
  tag, or no tag — tasks imported from a file) and ingests them
  (:meth:`~bayes_eval.session.Session.ingest_records`, one transaction; several
  annotations of an item reconciled by ``resolve``).  Cancelled and skipped annotations
  are counted, not ingested; ``skip_cancelled`` records the open batch's items that every
  annotator skipped as impossible to label (:meth:`~bayes_eval.session_skip.SessionSkips.skip`).
  Pulling again is harmless (labels already known are duplicates).
* :func:`label_config` is the matching labeling configuration: a ``Text`` per field and
  one ``Choices`` control (``label`` by default) whose values map back to the classes.

One project per session: the items' ids are the key.
"""
from __future__ import annotations

import contextlib
import os
import re

import numpy as np
import pandas as pd

from . import annotate
from .errors import EmptyInputError, SessionError, UsageError  # noqa: F401

__all__ = ["EXTRA", "require", "connect", "task_fields", "task_data", "label_config", "push", "pull", "tasks_of_project"]

EXTRA = 'pip install "bayes_eval[labelstudio]"'


def require(url: str, token: str | None = None) -> str:
    """Check, before anything else, that Label Studio can be talked to: the SDK (a
    :class:`SessionError` naming the extra when it is missing), a token (naming
    ``LABEL_STUDIO_API_KEY``) and a URL.  Returns the token."""
    try:
        import label_studio_sdk  # noqa: F401
    except ImportError:
        raise SessionError(f"talking to Label Studio needs label-studio-sdk, the optional extra of bayes_eval: "
                           f"{EXTRA}") from None
    token = token or os.environ.get("LABEL_STUDIO_API_KEY")
    if not token:
        raise SessionError("no Label Studio token: pass token= or set LABEL_STUDIO_API_KEY (Label Studio: Account & "
                           "Settings, Access Token)",
                           cli="no Label Studio token: set LABEL_STUDIO_API_KEY or pass --token (Label Studio: "
                               "Account & Settings, Access Token)")
    if not re.match(r"^https?://", str(url)):
        raise UsageError(f"--label-studio {url!r}: expected a URL such as http://localhost:8080")
    return token


@contextlib.contextmanager
def connect(url: str, token: str | None = None):
    """A ``label_studio_sdk.LabelStudio`` client for ``url`` (:func:`require` first), its
    connections closed on exit."""
    token = require(url, token)
    import httpx
    from label_studio_sdk import LabelStudio

    http = httpx.Client(timeout=60)
    try:
        yield LabelStudio(base_url=str(url).rstrip("/"), api_key=token, httpx_client=http)
    finally:
        http.close()


def _call(what, url, fn, *args, **kw):
    """Run one SDK call; connection and API failures as a :class:`SessionError` naming the
    server and what was being done."""
    try:
        return fn(*args, **kw)
    except Exception as exc:  # httpx errors, label_studio_sdk ApiError
        status = getattr(exc, "status_code", None)
        body = getattr(exc, "body", None)
        detail = f"HTTP {status}: {body}" if status is not None else f"{type(exc).__name__}: {exc}"
        hint = (" (is the token right? LABEL_STUDIO_API_KEY / --token)" if status in (401, 403)
                else " (does the project exist? --project ID)" if status == 404 else
                " (is the server running at that address?)" if status is None else "")
        raise SessionError(f"Label Studio at {url}: {what} failed: {detail}{hint}") from None


def task_fields(session, fields=None, show_score: bool = False) -> list[str]:
    """The pool columns that go into the task data (:func:`bayes_eval.annotate.task_columns`)."""
    return annotate.task_columns(annotate.pool_columns(session.pool), fields,
                                 show_score)


def task_data(session, batch: pd.DataFrame, fields=None, show_score: bool = False) -> list[dict]:
    """One Label Studio task ``{"data": {...}}`` per row of a batch (``next_batch``)."""
    cols = task_fields(session, fields, show_score)
    rows = session.pool.index_of(batch["item"].to_numpy())
    own = session.pool.columns
    system = int(session.config.get("system", 0))
    out = []
    for k in range(len(batch)):
        d = {"item": annotate.jsonable_value(batch["item"].iloc[k]), "stage": int(batch["stage"].iloc[k])}
        if "draw" in batch.columns:
            d["draw"] = int(batch["draw"].iloc[k])
        for c in cols:
            if c == "score" and (own is None or "score" not in own.columns):
                d[c] = float(session.pool.scores[rows[k], system])
            else:
                d[c] = annotate.jsonable_value(own[c].iloc[rows[k]])
        out.append({"data": d})
    return out


def label_config(session, fields=None, show_score: bool = False, from_name: str = "label") -> str:
    """The labeling configuration matching the pushed tasks: the item id as a header, a
    ``Text`` per field, one single-choice ``Choices`` named ``from_name``."""
    cols = task_fields(session, fields, show_score)
    shown = cols or ["item"]
    return annotate.label_studio_config(session.pool.n_classes, session.config.get("label_map"), fields=shown,
                                        from_name=from_name, header="item" if cols else None)


def tasks_of_project(ls, url, project: int) -> list[dict]:
    """Every task of the project as a dict: ``id``, ``data``, ``annotations`` (annotators'
    ``completed_by`` as the user's email where the server says it)."""
    pager = _call(f"reading the tasks of project {project}", url, ls.tasks.list, project=int(project), fields="all",
                  page_size=1000)
    tasks = _call(f"reading the tasks of project {project}", url, list, pager)
    out = []
    for t in tasks:
        anns = [dict(a) if not isinstance(a, dict) else a for a in (getattr(t, "annotations", None) or [])]
        out.append({"id": t.id, "data": dict(t.data or {}), "annotations": anns})
    return out


def _emails(ls, url) -> dict:
    try:
        return {u.id: u.email or u.username for u in ls.users.list()}
    except Exception:  # a user without the right to list users: ids stay ids
        return {}


def push(session, url: str, project: int, token: str | None = None, n: int = 50, fields=None,
         show_score: bool = False, preannotate: bool = False, from_name: str = "label") -> dict:
    """Create the open batch's tasks in the project (drawing the next batch when none is
    open), each once however often this is called.  Returns ``created``, ``existing``,
    ``stage``, ``items`` (the batch's size), ``reissued`` (the batch was already open)."""
    _refuse_partitioned(session)
    cols = task_fields(session, fields, show_score)  # refused before anything is drawn
    _one_project(session, project)
    with connect(url, token) as ls:
        return _push(ls, session, url, project, n, cols, show_score, preannotate, from_name)


def _refuse_partitioned(session):
    if getattr(session.pool, "partitioned", False):
        raise SessionError("Label Studio push and pull are not yet on the dask engine: use the file route "
                           "(session next DB --out batch.json, import it into Label Studio, export, session ingest), "
                           "or reopen with --engine memory where the pool fits in memory; nothing changed")


#: the session's meta key for the one project its tasks go to (set by the first push that imports)
PROJECT_KEY = "label_studio_project"


#: the session's meta key for its tag, and the task data field that carries it (:func:`bayes_eval.annotate.session_tag`)
TAG_KEY = annotate.TAG_KEY
TAG_FIELD = annotate.TAG_FIELD


def _tag(session, create: bool = False) -> str | None:
    """The session's tag in task data (``bayes_eval_session``; :func:`bayes_eval.annotate.session_tag`)."""
    return annotate.session_tag(session._store, create)


def _split_by_session(tasks, tag):
    """The project's tasks that carry an item: this session's (its tag, or none — tasks
    imported from a file, or pushed before tags) and another session's."""
    items = [t for t in tasks if "item" in t["data"]]
    theirs = [t for t in items if t["data"].get(TAG_FIELD) not in (None, tag)]
    return [t for t in items if t["data"].get(TAG_FIELD) in (None, tag)], theirs


def _one_project(session, project):
    """One project per session (README): a push or pull to another project than the one
    the session's tasks went to is refused (the same batch in two projects could be
    labeled twice, and a project's other tasks are not this session's)."""
    bound = session._store.meta().get(PROJECT_KEY)
    if bound is not None and int(bound["project"]) != int(project):
        raise SessionError(f"this session's tasks are in project {bound['project']} (at {bound['url']}): one project "
                           f"per session, give --project {bound['project']}; nothing was drawn or ingested")


def _check_config(ls, url, project, keys, from_name=None):
    """The project's labeling configuration must read only task data the pushed tasks
    carry (``$name`` variables), and pre-annotations (``from_name`` given) must name one of
    its Choices controls; checked before the batch is drawn, so a project set up for other
    data draws nothing (Label Studio would refuse every task)."""
    proj = _call(f"reading project {project}", url, ls.projects.get, id=int(project))
    config = getattr(proj, "label_config", None) or ""
    choices = re.findall(r'<Choices[^>]*\sname="([^"]+)"', config)
    if from_name is not None and choices and from_name not in choices:
        raise SessionError(f"project {project}'s choice control is named {', '.join(map(repr, choices))}, not "
                           f"{from_name!r}: the pre-annotations would not show; give from_name (--from-name "
                           f"{choices[0]}); nothing was drawn")
    wanted = sorted(set(re.findall(r'value="\$([A-Za-z_][A-Za-z0-9_]*)"', config)) - set(keys) - {TAG_FIELD})
    if wanted:
        raise SessionError(f"project {project}'s labeling configuration reads {', '.join('$' + w for w in wanted)}, "
                           f"which the tasks do not carry (they carry {', '.join(keys)}): set it to the output of "
                           f"`bayes-eval session label-config DB` (with the same --fields / --show-score), or push "
                           f"--fields with the pool's columns it reads; nothing was drawn")


def _push(ls, session, url, project, n, cols, show_score, preannotate, from_name):
    existing = tasks_of_project(ls, url, project)  # before the batch is drawn: a dead server draws nothing
    data_keys = ["item", "stage"] + (["draw"] if session.oracle == "stochastic" else []) + cols
    _check_config(ls, url, project, data_keys,
                  from_name if preannotate else None)
    existing, theirs = _split_by_session(existing, _tag(session))
    if theirs:
        raise SessionError(f"project {project} holds {len(theirs)} task(s) another session pushed (task data {TAG_FIELD} "
                           f"{theirs[0]['data'][TAG_FIELD]!r}): one project per session, or its labels would mix with "
                           f"this one's; create a project for this session; nothing was drawn")
    batch = session.next_batch(n)
    tag = _tag(session, create=True)   # recorded before any task carries it
    keys = set()
    for t in existing:
        d = t["data"]
        if "item" in d:
            keys.add((str(d["item"]), None if d.get("draw") is None else int(d["draw"])))
    tasks = task_data(session, batch, cols, show_score)
    for t in tasks:
        t["data"][TAG_FIELD] = tag
    stochastic = session.oracle == "stochastic"
    todo = [t for t in tasks if (str(t["data"]["item"]), t["data"].get("draw") if stochastic else None) not in
            {(k[0], k[1] if stochastic else None) for k in keys}]
    if preannotate and todo:
        values = annotate.choice_values(session.pool.n_classes, session.config.get("label_map"))
        system = int(session.config.get("system", 0))
        rows = session.pool.index_of(np.asarray([t["data"]["item"] for t in todo]))
        for t, r in zip(todo, rows):
            t["predictions"] = annotate.preannotation(values[int(session.pool.preds[r, system])], from_name, cols)
    if todo:
        _call(f"importing {len(todo)} task(s) into project {project} (the batch of stage "
              f"{int(batch['stage'].iloc[0])} stays open: the next push sends it again)", url, ls.projects.import_tasks,
              id=int(project), request=todo, return_task_ids=True)
        if PROJECT_KEY not in session._store.meta():
            session._store.set_meta(PROJECT_KEY, {"project": int(project), "url": url})
    return {"created": len(todo), "existing": len(tasks) - len(todo), "items": len(batch),
            "stage": int(batch["stage"].iloc[0]) if len(batch) else None,
            "reissued": bool(batch.attrs.get("reissued")), "stalled": bool(batch.attrs.get("stalled")),
            "fields": cols, "task_data": data_keys + [TAG_FIELD]}


def pull(session, url: str, project: int, token: str | None = None, resolve: str = "error",
         from_name: str | None = None, label_map=None, skip_cancelled: bool = False, correct: bool = False) -> dict:
    """Fetch the project's annotations and ingest them (one transaction).  Returns
    ``result`` (the :class:`~bayes_eval.session.IngestResult`, None when nothing is
    annotated yet), ``tasks``, ``unannotated`` tasks, ``cancelled`` annotations,
    ``cancelled_items`` (open-batch items whose every annotation was cancelled or skipped),
    ``empty_items`` (items with an annotation submitted without a choice) and ``skip``
    (the :class:`~bayes_eval.session_skip.SkipResult` with ``skip_cancelled``), ``missing_tasks`` (open-batch
    items the project holds no task of: deleted there; a push puts them back).  ``correct``: an
    annotation changed after its label was ingested (a review) corrects it (``Session.correct``)."""
    _refuse_partitioned(session)
    _one_project(session, project)
    with connect(url, token) as ls:
        tasks = tasks_of_project(ls, url, project)
        mine, theirs = _split_by_session(tasks, _tag(session))
        if theirs and not mine:
            raise SessionError(f"project {project} holds only tasks another session pushed ({len(theirs)}, task data "
                               f"{TAG_FIELD} {theirs[0]['data'][TAG_FIELD]!r}): nothing of this session's to pull; nothing "
                               f"was ingested")
        emails = _emails(ls, url) if any(len(t["annotations"]) > 1 for t in mine) else {}
    for t in mine:
        for a in t["annotations"]:
            if isinstance(a.get("completed_by"), int) and a["completed_by"] in emails:
                a["completed_by"] = {"id": a["completed_by"], "email": emails[a["completed_by"]]}
    source = f"Label Studio {url} project {project}"
    objs = [(t, f"{source}: task {k} of {len(mine)} read") for k, t in enumerate(mine, 1)]   # then (task id N)
    pending = {str(v) for v in session.pending()["item"]}
    cancelled_items = sorted({str(t["data"]["item"]) for t in mine
                              if t["annotations"] and all(a.get("was_cancelled") for a in t["annotations"])
                              and str(t["data"]["item"]) in pending})
    info = {"tasks": len(mine), "other_tasks": len(tasks) - len(mine) - len(theirs),
            "other_session_tasks": len(theirs), "result": None, "skip": None,
            "cancelled_items": cancelled_items}
    try:
        recs = annotate.records_of_tasks(objs, from_name, source) if objs else None
    except EmptyInputError:
        recs = None
    info["unannotated"] = sum(1 for t in mine if not t["annotations"])
    # submitted (not cancelled) with no choice made: not a label, and worth naming
    info["empty_items"] = sorted({str(t["data"]["item"]) for t in mine for a in t["annotations"]
                                  if not a.get("was_cancelled") and not any(
                                      (r.get("value") or {}).get("choices") for r in (a.get("result") or [])
                                      if isinstance(r, dict))})
    info["cancelled"] = sum(1 for t in mine for a in t["annotations"] if a.get("was_cancelled"))
    # of them, those of items the session already records as skipped: a re-pull's count, nothing to do
    gone = {str(v) for v in session.skipped()["item"]} if session.n_skipped else set()
    info["cancelled_of_skipped"] = sum(1 for t in mine for a in t["annotations"]
                                       if a.get("was_cancelled") and str(t["data"]["item"]) in gone)
    if recs is not None:
        info["result"] = session.ingest_records(recs, label_map=label_map, resolve=resolve, source=source,
                                                correct=correct)
    if skip_cancelled and cancelled_items:
        still = {str(v): v.item() if isinstance(v, np.generic) else v for v in session.pending()["item"]}
        todo = [still[i] for i in cancelled_items if i in still]
        if todo:
            info["skip"] = session.skip(todo, reason="skipped by every annotator in Label Studio")
    # open-batch items with no task in the project (deleted there): a push puts them back
    in_project = {str(t["data"]["item"]) for t in mine}
    info["missing_tasks"] = sorted(str(v) for v in session.pending()["item"] if str(v) not in in_project)
    return info
