"""``bayes-eval session push / pull`` against a real Label Studio server (issue 16).

Slow tier.  The server is started here on 127.0.0.1 (a fresh data folder; a couple of
minutes).  It needs the ``label-studio`` executable — ``BAYES_EVAL_LABEL_STUDIO`` (its
path; install it in its own environment: ``pip install label-studio``) or on PATH — and
``label-studio-sdk`` (the extra ``bayes_eval[labelstudio]``) here; else the tests skip,
saying so.  ``BAYES_EVAL_LABEL_STUDIO_URL`` (and ``..._TOKEN``) use a server already
running instead.  Tested with Label Studio 1.23.2 and label-studio-sdk 2.1.2.
"""
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request

import numpy as np
import pandas as pd
import pytest

from bayes_eval.cli import main as cli_main
from bayes_eval.pool import demo_pool
from bayes_eval.session import Session

pytestmark = pytest.mark.slow

TOKEN = os.environ.get("BAYES_EVAL_LABEL_STUDIO_TOKEN", "bayes-eval-test-token-0123456789")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _up(url):
    try:
        req = urllib.request.Request(f"{url}/api/projects/", headers={"Authorization": f"Token {TOKEN}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    if os.environ.get("BAYES_EVAL_LABEL_STUDIO_URL"):  # a server already running (its token: ..._TOKEN)
        yield os.environ["BAYES_EVAL_LABEL_STUDIO_URL"]
        return
    exe = os.environ.get("BAYES_EVAL_LABEL_STUDIO") or shutil.which("label-studio")
    if not exe or not os.path.exists(exe):
        pytest.skip("label-studio is not installed: pip install label-studio (in its own environment) and set "
                    "BAYES_EVAL_LABEL_STUDIO to its executable")
    pytest.importorskip("label_studio_sdk", reason='the client needs pip install "bayes_eval[labelstudio]"')
    data = tmp_path_factory.mktemp("label-studio")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "LABEL_STUDIO_BASE_DATA_DIR": str(data), "LABEL_STUDIO_USERNAME": "admin@example.com",
           "LABEL_STUDIO_PASSWORD": "admin-pass-123", "LABEL_STUDIO_USER_TOKEN": TOKEN,
           "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true"}
    log = open(data / "server.log", "w")
    proc = subprocess.Popen([exe, "start", "--internal-host", "127.0.0.1", "--port", str(port), "--no-browser",
                             "--enable-legacy-api-token", "--user-token", TOKEN, "--username", "admin@example.com",
                             "--password", "admin-pass-123", "--data-dir", str(data)],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while not _up(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.skip(f"Label Studio did not start (see {data / 'server.log'})")
            time.sleep(2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def ls(server):
    from bayes_eval import labelstudio

    with labelstudio.connect(server, TOKEN) as client:
        yield client


@pytest.fixture(scope="module")
def pool_file(tmp_path_factory):
    base = demo_pool(n_items=3000, positive_rate=0.1, seed=5)
    d = tmp_path_factory.mktemp("pool")
    frame = pd.DataFrame({"item": [f"pair-{i}" for i in range(base.n_items)], "score": base.scores[:, 0],
                          "pred": base.preds[:, 0], "label": base.labels,
                          "title_a": [f"record A{i}" for i in range(base.n_items)],
                          "title_b": [f"record B{i}" for i in range(base.n_items)],
                          "prob_calibrated": 1 / (1 + np.exp(-base.scores[:, 0]))})
    path = d / "pool.csv"
    frame.to_csv(path, index=False)
    return str(path), dict(zip(frame["item"], frame["label"]))


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("BAYES_EVAL_CACHE_DIR", "")
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", TOKEN)


def _run(capsys, *argv):
    capsys.readouterr()
    rc = cli_main([*argv, "--no-progress"])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _choice(v):
    return [{"from_name": "label", "to_name": "title_a", "type": "choices", "value": {"choices": [str(v)]}}]


def _project(ls, capsys, db, title):
    rc, cfg, err = _run(capsys, "session", "label-config", db, "--fields", "title_a,title_b")
    assert rc == 0, err
    return ls.projects.create(title=title, label_config=cfg).id  # the config is accepted by the server


def test_push_pull_round_trip(tmp_path, capsys, ls, server, pool_file):
    path, truth = pool_file
    db = str(tmp_path / "s.db")
    assert _run(capsys, "session", "new", db, "--pool", path, "--design", "ais")[0] == 0
    pid = _project(ls, capsys, db, "round trip")
    push = ["session", "push", db, "--label-studio", server, "--project", str(pid), "--n", "20",
            "--fields", "title_a,title_b", "--preannotate"]
    rc, out, err = _run(capsys, *push)
    assert rc == 0 and "pushed 20 task(s) of stage 0" in out, err
    assert "task data: item, stage, title_a, title_b, bayes_eval_session" in out, out
    rc, out, err = _run(capsys, *push)  # again: nothing new in the project
    assert rc == 0 and "already in project" in out, err
    tasks = list(ls.tasks.list(project=pid, fields="all"))
    assert len(tasks) == 20 and len({t.data["item"] for t in tasks}) == 20
    assert {frozenset(t.data) for t in tasks} == {frozenset(["item", "stage", "title_a", "title_b", "bayes_eval_session"])}
    assert set(tasks[0].data) == {"item", "stage", "title_a", "title_b", "bayes_eval_session"}  # no score, no probability
    s = Session.open(db)
    assert {t.data["bayes_eval_session"] for t in tasks} == {s._store.meta()["label_studio_session"]}  # the session's tag
    s.close()
    assert tasks[0].predictions and tasks[0].predictions[0].result[0]["value"]["choices"][0] in ("0", "1")
    rc, out, _ = _run(capsys, "session", "pull", db, "--label-studio", server, "--project", str(pid))
    assert rc == 0 and "no finished annotations yet" in out
    # annotators: every task labeled with the truth, except one every annotator skips
    skipped_item = tasks[0].data["item"]
    for t in tasks:
        if t.data["item"] == skipped_item:
            ls.annotations.create(id=t.id, result=[], was_cancelled=True)
        else:
            ls.annotations.create(id=t.id, result=_choice(truth[t.data["item"]]))
    pull = ["session", "pull", db, "--label-studio", server, "--project", str(pid)]
    rc, out, err = _run(capsys, *pull)
    assert rc == 0 and "19 new label(s)" in out and "1 skipped/cancelled" in out, err
    assert f"session skip {db} {skipped_item}" in out and "1 label(s) still missing" in out
    rc, out, err = _run(capsys, *pull, "--skip-cancelled")
    assert rc == 0 and "stage 0 complete" in out and "recorded 1 item(s)" in out, err
    s = Session.open(db)
    stored = {row[2]: row[3] for row in s._store.labels()}
    assert len(stored) == 19 and all(truth[i] == v for i, v in stored.items())
    assert s.n_skipped == 1 and s.n_stages == 1
    before = s._store.dump()
    s.close()
    rc, out, _ = _run(capsys, *pull)  # pulling again changes nothing, and says the cancelled one is done with
    s = Session.open(db)
    assert rc == 0 and s._store.dump() == before
    assert "1 skipped/cancelled annotation(s) not ingested (all of items recorded as skipped)" in out, out
    s.close()
    rc, out, err = _run(capsys, *push)  # the next batch: 20 new tasks, none twice
    assert rc == 0 and "pushed 20 task(s) of stage 1" in out, err
    items = [t.data["item"] for t in ls.tasks.list(project=pid, fields="all")]
    assert len(items) == 40 and len(set(items)) == 40
    # an annotation submitted with no choice made is not a label, and the pull names its item
    blank = [t for t in ls.tasks.list(project=pid, fields="all") if t.data["stage"] == 1][0]
    ls.annotations.create(id=blank.id, result=[], was_cancelled=False)
    rc, out, err = _run(capsys, *pull)
    assert rc == 0 and f"1 item(s) with an annotation submitted without a choice, not a label ({blank.data['item']})" \
        in out, (out, err)
    # a task deleted in the project (stop 81): the pull names its item and the way back, a push restores it
    ls.tasks.delete(id=blank.id)
    rc, out, err = _run(capsys, *pull)
    assert rc == 0 and (f"1 item(s) of the open batch have no task in project {pid} (deleted there?): "
                        f"{blank.data['item']}; session push puts them back") in out, (out, err)
    rc, out, err = _run(capsys, *push)
    assert rc == 0 and "pushed 1 task(s) of stage 1" in out, err
    rc, out, err = _run(capsys, *pull)
    assert rc == 0 and "no task in project" not in out, (out, err)


def test_disagreements_on_the_server(tmp_path, capsys, ls, server, pool_file):
    path, truth = pool_file
    db = str(tmp_path / "d.db")
    assert _run(capsys, "session", "new", db, "--pool", path, "--design", "passive")[0] == 0
    pid = _project(ls, capsys, db, "disagreements")
    assert _run(capsys, "session", "push", db, "--label-studio", server, "--project", str(pid), "--n", "5")[0] == 0
    known = [u.id for u in ls.users.list() if u.email == "bob@example.org"]
    bob = known[0] if known else ls.users.create(email="bob@example.org", username="bob").id
    tasks = list(ls.tasks.list(project=pid, fields="all"))
    ids = {}
    for k, t in enumerate(tasks):
        y = truth[t.data["item"]]
        ids[k] = ls.annotations.create(id=t.id, result=_choice(y)).id
        if k == 2:  # bob disagrees on one task
            ids["bob"] = ls.annotations.create(id=t.id, result=_choice(1 - y), completed_by=bob).id
    pull = ["session", "pull", db, "--label-studio", server, "--project", str(pid)]
    s = Session.open(db)
    before = s._store.dump()
    s.close()
    rc, out, err = _run(capsys, *pull)
    assert rc == 2
    for part in (f"task id {tasks[2].id}", f"(id {ids[2]}) by admin@example.com", f"(id {ids['bob']}) by bob@example.org",
                 "--resolve ground-truth"):   # a 1-1 tie: majority cannot decide it, so it is not offered
        assert part in err, (part, err)
    s = Session.open(db)
    assert s._store.dump() == before  # refused: nothing changed
    s.close()
    # mark bob's annotation as ground truth in Label Studio: --resolve ground-truth takes it
    ls.annotations.update(id=ids["bob"], ground_truth=True)
    rc, out, err = _run(capsys, *pull, "--resolve", "ground-truth", "--format", "json")
    assert rc == 0, err
    info = json.loads(out)
    assert info["result"]["n_resolved"] == 1 and info["result"]["stage_closed"]
    s = Session.open(db)
    stored = {row[2]: row[3] for row in s._store.labels()}
    assert stored[tasks[2].data["item"]] == 1 - truth[tasks[2].data["item"]]
    assert all(stored[t.data["item"]] == truth[t.data["item"]] for k, t in enumerate(tasks) if k != 2)
    after = s._store.dump()
    s.close()
    # a later pull reads the same tasks again: the disagreement stays resolved, no rule needed
    rc, out, err = _run(capsys, *pull)
    assert rc == 0 and "ingested before — nothing changed" in out, (out, err)
    # one project per session: a push or pull to another project is refused before anything is drawn
    text_config = ('<View><Text name="text" value="$text"/><Choices name="label" toName="text">'
                   '<Choice value="0"/><Choice value="1"/></Choices></View>')
    other = ls.projects.create(title="other data", label_config=text_config).id
    for verb in ("push", "pull"):
        rc, out, err = _run(capsys, "session", verb, db, "--label-studio", server, "--project", str(other))
        assert rc == 2 and f"this session's tasks are in project {pid}" in err, (verb, err)
    s = Session.open(db)
    assert s._store.dump() == after
    s.close()
    # a project whose configuration reads data the tasks do not carry: refused, nothing drawn
    db2 = str(tmp_path / "e.db")
    assert _run(capsys, "session", "new", db2, "--pool", path, "--design", "passive")[0] == 0
    rc, out, err = _run(capsys, "session", "push", db2, "--label-studio", server, "--project", str(other), "--n", "5")
    assert rc == 2 and "reads $text, which the tasks do not carry (they carry item, stage, title_a, title_b)" in err, err
    s = Session.open(db2)
    assert s._store.stages() == [] and len(list(ls.tasks.list(project=other))) == 0
    s.close()
    # pre-annotations for a control the project does not have would not show: refused, then given
    named = ls.projects.create(title="named control", label_config=(
        '<View><Text name="t" value="$item"/><Choices name="sentiment" toName="t">'
        '<Choice value="0"/><Choice value="1"/></Choices></View>')).id
    push2 = ["session", "push", db2, "--label-studio", server, "--project", str(named), "--n", "5", "--preannotate"]
    rc, out, err = _run(capsys, *push2)
    assert rc == 2 and "choice control is named 'sentiment', not 'label'" in err and "--from-name sentiment" in err
    rc, out, err = _run(capsys, *push2, "--from-name", "sentiment")
    assert rc == 0 and "pushed 5 task(s) of stage 0" in out and "task data: item, stage, title_a, title_b, bayes_eval_session" in out, err  # every column but the model outputs
    preds = [t.predictions for t in ls.tasks.list(project=named, fields="all")]
    assert len(preds) == 5 and all(p and p[0].result[0]["from_name"] == "sentiment" for p in preds)
    # two sessions, one project: a second session's push and pull are refused, nothing drawn or ingested
    db3 = str(tmp_path / "f.db")
    assert _run(capsys, "session", "new", db3, "--pool", path, "--design", "passive")[0] == 0
    rc, out, err = _run(capsys, "session", "push", db3, "--label-studio", server, "--project", str(named), "--n", "5")
    assert rc == 2 and "holds 5 task(s) another session pushed" in err and "nothing was drawn" in err, err
    rc, out, err = _run(capsys, "session", "pull", db3, "--label-studio", server, "--project", str(named))
    assert rc == 2 and "holds only tasks another session pushed (5" in err, err
    s = Session.open(db3)
    assert s._store.stages() == [] and s._store.labels() == []
    s.close()
    assert len(list(ls.tasks.list(project=named))) == 5


def test_a_review_in_label_studio_corrects_with_pull_correct(tmp_path, capsys, ls, server, pool_file):
    """An annotation changed in Label Studio after its label was ingested (a reviewer's fix):
    a plain pull refuses it and names session correct; pull --correct makes it a correction,
    keeping the label as it arrived."""
    path, truth = pool_file
    db = str(tmp_path / "c.db")
    assert _run(capsys, "session", "new", db, "--pool", path, "--design", "passive")[0] == 0
    pid = _project(ls, capsys, db, "review")
    assert _run(capsys, "session", "push", db, "--label-studio", server, "--project", str(pid), "--n", "5")[0] == 0
    tasks = list(ls.tasks.list(project=pid, fields="all"))
    ann = {}
    for k, t in enumerate(tasks):
        y = truth[t.data["item"]]
        ann[k] = ls.annotations.create(id=t.id, result=_choice(1 - y if k == 1 else y)).id   # task 1 mislabeled
    pull = ["session", "pull", db, "--label-studio", server, "--project", str(pid)]
    rc, out, err = _run(capsys, *pull)
    assert rc == 0 and "5 new label(s)" in out and "stage 0 complete" in out, err
    item = tasks[1].data["item"]
    ls.annotations.update(id=ann[1], result=_choice(truth[item]))   # the reviewer's fix
    s = Session.open(db)
    before = s._store.dump()
    s.close()
    rc, out, err = _run(capsys, *pull)
    assert rc == 2 and f"item {item!r} already has label {1 - truth[item]}" in err and "session correct" in err, err
    s = Session.open(db)
    assert s._store.dump() == before
    s.close()
    rc, out, err = _run(capsys, *pull, "--correct")
    assert rc == 0 and "1 label(s) corrected" in out, (out, err)
    s = Session.open(db)
    lab = s.labels()
    assert all(lab["label"] == [truth[i] for i in lab["item"]]) and lab["corrected"].sum() == 1
    assert {row[2]: row[3] for row in s._store.labels()}[item] == 1 - truth[item]   # as it arrived
    fixes = s.corrections()
    assert fixes["item"].tolist() == [item] and fixes["reason"][0].startswith("ingest Label Studio")
    s.close()
    # a reviewer adds an annotation marked ground truth beside another task's (here: to a wrong
    # label, to see it taken): a plain pull keeps the label held, --resolve ground-truth --correct
    # lets the rule decide first
    other = tasks[3].data["item"]
    ls.annotations.create(id=tasks[3].id, result=_choice(1 - truth[other]), ground_truth=True)
    rc, out, err = _run(capsys, *pull)
    assert rc == 0 and "corrected" not in out, (out, err)
    rc, out, err = _run(capsys, *pull, "--resolve", "ground-truth", "--correct")
    assert rc == 0 and "1 label(s) corrected" in out, (out, err)
    s = Session.open(db)
    lab = s.labels()
    assert dict(zip(lab["item"], lab["label"]))[other] == 1 - truth[other] and len(s.corrections()) == 2
    s.close()


def test_a_stochastic_session_pushes_draws_and_takes_each_annotation_as_a_label(tmp_path, capsys, ls, server, pool_file):
    """A stochastic oracle's tasks are draws (task data ``draw``, named on the push line); two
    annotators' different labels on one task are one label for the draw, the other annotation
    counted as beyond the item's draws (README, "Stochastic-oracle sessions")."""
    path, truth = pool_file
    db = str(tmp_path / "st.db")
    assert _run(capsys, "session", "new", db, "--pool", path, "--design", "ais", "--oracle", "stochastic")[0] == 0
    pid = _project(ls, capsys, db, "stochastic")
    rc, out, err = _run(capsys, "session", "push", db, "--label-studio", server, "--project", str(pid), "--n", "6",
                        "--fields", "title_a,title_b")
    assert rc == 0 and "task data: item, stage, draw, title_a, title_b, bayes_eval_session" in out, (out, err)
    tasks = list(ls.tasks.list(project=pid, fields="all"))
    assert sorted(t.data["draw"] for t in tasks) == list(range(6))
    known = [u.id for u in ls.users.list() if u.email == "bob@example.org"]
    bob = known[0] if known else ls.users.create(email="bob@example.org", username="bob").id
    for k, t in enumerate(tasks):
        y = truth[t.data["item"]]
        ls.annotations.create(id=t.id, result=_choice(y))
        if k == 0:
            ls.annotations.create(id=t.id, result=_choice(1 - y), completed_by=bob)
    rc, out, err = _run(capsys, "session", "pull", db, "--label-studio", server, "--project", str(pid),
                        "--format", "json")
    assert rc == 0, err
    r = json.loads(out)["result"]
    assert r["n_new"] == 6 and r["n_unused"] == 1 and r["stage_closed"], r
