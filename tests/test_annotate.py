"""Files for annotators: CSV / JSONL / Label Studio export and import (issue 5)."""
import io
import json

import numpy as np
import pandas as pd
import pytest

from bayes_eval import annotate, annotate_resolve
from bayes_eval.pool import Pool, demo_pool
from bayes_eval.session import (
    EmptyInputError,
    InvalidLabelError,
    LabelConflictError,
    MalformedInputError,
    Session,
    SessionError,
)

TAG = annotate.TAG_FIELD  # the session's tag in every task it writes


@pytest.fixture(scope="module")
def pool():
    base = demo_pool(n_items=2000, positive_rate=0.05, seed=3)
    ids = np.array([f"pair-{i:05d}" for i in range(base.n_items)])  # string ids, as in a real project
    cols = pd.DataFrame({"left": [f"record A{i}" for i in range(base.n_items)],
                         "right": [f"record B{i}" for i in range(base.n_items)]}, index=ids)
    return Pool.from_arrays(scores=base.scores[:, 0], preds=base.preds[:, 0], labels=base.labels, ids=ids,
                            columns=cols, name="pairs")


def truth(pool, items):
    return pool.labels[pool.index_of(np.asarray(items))]


def _session(tmp_path, pool, **kw):
    return Session.create(str(tmp_path / "s.db"), pool, "f1", "passive", seed=0, **kw)


def test_csv_export_and_import(tmp_path, pool):
    s = _session(tmp_path, pool)
    f = tmp_path / "batch.csv"
    df = s.export_batch(str(f), n=8)
    out = pd.read_csv(f, keep_default_na=False)
    assert list(out.columns) == ["item", "left", "right", "label"]
    assert list(out["item"]) == list(df["item"]) and (out["label"] == "").all()
    assert out["left"][0] == f"record A{int(out['item'][0][5:])}"
    out["label"] = [str(v) for v in truth(pool, out["item"])]
    out.loc[7, "label"] = ""  # the annotator has not done this one yet
    out.to_csv(f, index=False)
    r = s.ingest_file(str(f))
    assert (r.n_new, r.n_skipped, r.pending, r.stage_closed) == (7, 1, 1, False)
    assert s.next_batch(8)["item"].tolist() == [out["item"][7]]  # the open batch, what is left of it


def test_jsonl_export_is_label_studio_tasks(tmp_path, pool):
    s = _session(tmp_path, pool)
    f = tmp_path / "batch.jsonl"
    df = s.export_batch(str(f), n=5)
    lines = f.read_text().splitlines()
    assert len(lines) == 5
    tasks = [json.loads(line) for line in lines]
    assert all(set(t) == {"data"} for t in tasks)  # Label Studio task import: {"data": {...}}
    assert [t["data"]["item"] for t in tasks] == list(df["item"])
    assert set(tasks[0]["data"]) == {"item", "left", "right"}
    g = tmp_path / "batch.json"
    s.export_batch(str(g), n=5)  # the open batch again, as a JSON list: Label Studio's import
    tasks = json.loads(g.read_text())
    # with the session's tag (Label Studio: a project holding another session's tasks is refused)
    assert {t["data"].pop(annotate.TAG_FIELD) for t in tasks} == {s._store.meta()[annotate.TAG_KEY]}
    assert tasks == [json.loads(line) for line in lines]
    tasks = json.loads(g.read_text())
    # imported into Label Studio by hand, these tasks are this session's: another session's push into that
    # project is refused and its pull leaves them alone (labelstudio._split_by_session)
    from bayes_eval import labelstudio

    (tmp_path / "other").mkdir()
    other = _session(tmp_path / "other", pool)
    other.export_batch(str(tmp_path / "other.json"), n=2)
    in_project = [{"id": k, "data": t["data"], "annotations": []} for k, t in enumerate(tasks)]
    mine, theirs = labelstudio._split_by_session(in_project, labelstudio._tag(other))
    assert not mine and len(theirs) == 5
    assert len(labelstudio._split_by_session(in_project, labelstudio._tag(s))[0]) == 5
    # flat JSONL labels read back
    h = tmp_path / "labels.jsonl"
    h.write_text("\n".join(json.dumps({"item": t["data"]["item"], "label": int(truth(pool, [t["data"]["item"]])[0])})
                           for t in tasks) + "\n\n")
    assert s.ingest_file(str(h)).n_new == 5


def _label_studio_export(tasks, choice_of, from_name="label", extra_result=None, cancelled=()):
    """Tasks as Label Studio's JSON export writes them (labelstud.io/guide/task_format)."""
    out = []
    for n, t in enumerate(tasks, 1):
        item = t["data"]["item"]
        result = [{"id": f"r{n}", "from_name": from_name, "to_name": "item", "type": "choices",
                   "origin": "manual", "value": {"choices": [choice_of(item)]}}]
        if extra_result:
            result.append(extra_result)
        anns = [{"id": 1000 + n, "completed_by": 1, "result": result, "was_cancelled": False,
                 "ground_truth": False, "created_at": "2024-06-11T10:00:00.000000Z",
                 "updated_at": "2024-06-11T10:00:05.000000Z", "lead_time": 4.2, "result_count": 0, "task": n}]
        if item in cancelled:
            anns = [{"id": 2000 + n, "result": [], "was_cancelled": True, "task": n}]
        out.append({"id": n, "data": t["data"], "annotations": anns, "predictions": [], "meta": {},
                    "created_at": "2024-06-11T09:00:00.000000Z", "updated_at": "2024-06-11T10:00:05.000000Z",
                    "inner_id": n, "total_annotations": 1, "cancelled_annotations": 0, "project": 7})
    return out


def test_label_studio_round_trip(tmp_path, pool):
    s = _session(tmp_path, pool, label_map={"negative": 0, "positive": 1})
    f = tmp_path / "tasks.json"
    df = s.export_batch(str(f), n=6)
    tasks = json.loads(f.read_text())
    y = dict(zip(df["item"], truth(pool, df["item"])))
    # one task cancelled, one not yet annotated: both skipped, the rest ingested
    export = _label_studio_export(tasks, lambda i: "Positive" if y[i] else "Negative",
                                  cancelled={tasks[0]["data"]["item"]})
    export[1]["annotations"] = []
    e = tmp_path / "project-7-at-2024-06-11.json"
    e.write_text(json.dumps(export, indent=2))
    r = s.ingest_file(str(e))
    assert (r.n_new, r.n_skipped, r.pending) == (4, 2, 2)
    stored = s.labels().set_index("item")["label"]
    assert all(stored[i] == y[i] for i in stored.index)
    # the default mapping: the label's string form; the same export ingested twice is harmless
    rest = [t for t in tasks[:2]]
    e2 = tmp_path / "export2.json"
    e2.write_text(json.dumps(_label_studio_export(rest, lambda i: str(y[i]))))
    r2 = s.ingest_file(str(e2))
    assert r2.n_new == 2 and r2.stage_closed
    before = s._store.dump()
    assert s.ingest_file(str(e)).n_new == 0 and s._store.dump() == before


def test_label_studio_problems_are_named(tmp_path, pool):
    s = _session(tmp_path, pool)
    f = tmp_path / "tasks.json"
    df = s.export_batch(str(f), n=3)
    tasks = json.loads(f.read_text())
    y = dict(zip(df["item"], truth(pool, df["item"])))
    before = s._store.dump()
    other = {"id": "x", "from_name": "quality", "to_name": "item", "type": "choices", "value": {"choices": ["ok"]}}
    e = tmp_path / "e.json"
    e.write_text(json.dumps(_label_studio_export(tasks, lambda i: str(y[i]), extra_result=other)))
    with pytest.raises(MalformedInputError, match="several choice controls.*label, quality"):
        s.ingest_file(str(e))
    assert s.ingest_file(str(e), from_name="label").n_new == 3  # naming the control resolves it
    s2 = Session.create(str(tmp_path / "t.db"), pool, "f1", "passive", seed=1)
    df2 = s2.export_batch(str(f), n=3)
    tasks2 = json.loads(f.read_text())
    exp = _label_studio_export(tasks2, lambda i: "1")
    exp[0]["annotations"].append({"id": 9, "result": [{"from_name": "label", "to_name": "item", "type": "choices",
                                                        "value": {"choices": ["0"]}}], "was_cancelled": False})
    e.write_text(json.dumps(exp))
    before2 = s2._store.dump()
    with pytest.raises(LabelConflictError, match=f"item '{df2['item'][0]}'"):
        s2.ingest_file(str(e))  # two annotators disagree: a deterministic oracle refuses
    exp = _label_studio_export(tasks2, lambda i: "maybe")
    e.write_text(json.dumps(exp))
    with pytest.raises(InvalidLabelError, match="task 1.*'maybe'"):
        s2.ingest_file(str(e))
    exp = _label_studio_export(tasks2, lambda i: "1")
    exp[2]["annotations"][0]["result"][0]["value"]["choices"] = ["0", "1"]
    e.write_text(json.dumps(exp))
    with pytest.raises(MalformedInputError, match="task 3.*exactly one choice"):
        s2.ingest_file(str(e))
    exp[2]["data"] = {"text": "no id"}
    e.write_text(json.dumps(exp))
    with pytest.raises(MalformedInputError, match="task 3.*data.item"):
        s2.ingest_file(str(e))
    e.write_text("[]")
    with pytest.raises(EmptyInputError):
        s2.ingest_file(str(e))
    e.write_text(json.dumps(_label_studio_export(tasks2, lambda i: "1", cancelled=set(df2["item"]))))
    with pytest.raises(EmptyInputError, match="no labels"):
        s2.ingest_file(str(e))
    e.write_text('{"a": ')
    with pytest.raises(MalformedInputError, match="not valid JSON"):
        s2.ingest_file(str(e))
    assert s2._store.dump() == before2
    assert before != s._store.dump()


def test_parse_labels_and_mapping():
    where = [f"row {i}" for i in range(9)]
    got = annotate.parse_labels(["1", " 0 ", "1.0", 1, 0.0, True, "POSITIVE", "neg", np.int64(1)], 2,
                                {"positive": 1, "neg": 0}, where)
    np.testing.assert_array_equal(got, [1, 0, 1, 1, 0, 1, 1, 0, 1])
    for bad in ("2", "maybe", 0.5, -1, "", None):
        with pytest.raises(InvalidLabelError, match="row 0"):
            annotate.parse_labels([bad], 2, None, where)
    # text booleans read as JSON's true / false are, for a binary label set only
    np.testing.assert_array_equal(annotate.parse_labels(["True", "false", " TRUE "], 2, None, where), [1, 0, 1])
    with pytest.raises(InvalidLabelError, match="outside the label set") as e:
        annotate.parse_labels(["true"], 3, None, where)
    assert "--label-map NAME0=0,NAME1=1,NAME2=2" in e.value.cli
    with pytest.raises(InvalidLabelError, match="outside the label set"):
        annotate.label_mapping(2, {"odd": 3})
    assert annotate.parse_label_map("negative=0, positive=1") == {"negative": 0, "positive": 1}
    with pytest.raises(SessionError, match="NAME=LABEL"):
        annotate.parse_label_map("positive")
    cfg = annotate.label_studio_config(2, {"negative": 0, "positive": 1}, fields=("item", "left"))
    assert '<Choice value="positive"/>' in cfg and 'value="$left"' in cfg


def test_read_labels_errors(tmp_path):
    f = tmp_path / "l.csv"
    cases = [
        ("", EmptyInputError, "empty"),
        ("item,label\n", EmptyInputError, "no rows"),
        ("item,label\na,\nb,\n", EmptyInputError, "all 2 rows"),
        ("item\na\n", MalformedInputError, "'label'"),
        ("item,label\na,1\nb,1,2\n", MalformedInputError, "line 3: 3 fields"),
        ('item,label\n"a,1\n', MalformedInputError, "line"),
    ]
    for text, exc, msg in cases:
        f.write_text(text)
        with pytest.raises(exc, match=msg):
            annotate.read_labels(str(f))
    g = tmp_path / "l.jsonl"
    g.write_text('{"item": "a", "label": 1}\n[1, 2]\n')
    with pytest.raises(MalformedInputError, match="line 2.*JSON object"):
        annotate.read_labels(str(g))
    g.write_text('{"id": "a", "label": 1}\n')
    with pytest.raises(MalformedInputError, match="line 1.*no 'item'"):
        annotate.read_labels(str(g))
    r = annotate.read_labels(_write(tmp_path / "ok.csv", "item,label,note\na,1,x\n"))
    assert (r.items, r.labels, r.skipped) == (["a"], ["1"], 0)
    with pytest.raises(SessionError, match="format"):
        annotate.read_labels(str(tmp_path / "l.xlsx"))


def test_a_spreadsheets_labels_file_reads_as_the_pools_does(tmp_path):
    """A labels file saved by a spreadsheet in a locale with decimal commas separates its columns
    with ';' (and some tools with tabs or '|' under a .csv name): read as the pool's reader reads
    such a file, where before it was refused ("no 'item' column (columns are ['item;label'])");
    a comma in the header keeps the comma; a file not in UTF-8 is refused saying how to save it."""
    for sep in (";", "\t", "|"):
        r = annotate.read_labels(_write(tmp_path / "l.csv", f"\ufeffitem{sep}note{sep}label\r\nrec 1/A{sep}x,y{sep}1\r\n"
                                                           f"rec 2/A{sep}{sep}0\r\n"))
        assert (r.items, r.labels) == (["rec 1/A", "rec 2/A"], ["1", "0"]), sep
    r = annotate.read_labels(_write(tmp_path / "l.csv", "item,label\n\"a;b\",1\n"))
    assert (r.items, r.labels) == (["a;b"], ["1"])
    (tmp_path / "w.csv").write_bytes("item,label\ncafé,1\n".encode("cp1252"))
    with pytest.raises(MalformedInputError, match="not a UTF-8 text file.*save it as UTF-8"):
        annotate.read_labels(str(tmp_path / "w.csv"))
    from bayes_eval.errors import PoolError
    from bayes_eval.registry import load_pool
    (tmp_path / "p.csv").write_bytes("item,score,pred\ncafé,0.5,1\n".encode("cp1252"))
    with pytest.raises(PoolError, match="save it as UTF-8"):
        load_pool(str(tmp_path / "p.csv"))


def _write(path, text):
    path.write_text(text)
    return str(path)


# ---------------------------------------------------------------------------- issue 16: teams and formats
def _ann(aid, who, choice, gt=False, created="2026-01-01T00:00:00Z", cancelled=False):
    return {"id": aid, "completed_by": who, "was_cancelled": cancelled, "ground_truth": gt, "created_at": created,
            "result": [] if cancelled else [{"from_name": "label", "to_name": "item", "type": "choices",
                                             "value": {"choices": [choice]}}]}


def _export(tmp_path, items, anns_of):
    """A Label Studio JSON export: one task per item, annotations from ``anns_of(k, item)``."""
    tasks = [{"id": 100 + k, "data": {"item": it}, "annotations": anns_of(k, it)} for k, it in enumerate(items)]
    f = tmp_path / "export.json"
    f.write_text(json.dumps(tasks))
    return str(f)


def test_disagreements_resolved_by_rule(tmp_path, pool):
    """Three annotators; on task 101 they disagree.  Each rule picks its label; ``error``
    refuses naming the task, the annotation ids and the annotators, with nothing changed."""
    s = _session(tmp_path, pool, label_map={"negative": 0, "positive": 1})
    b = s.next_batch(4)
    items = list(b["item"])
    y = truth(pool, items)
    name = {0: "negative", 1: "positive"}

    def anns(k, it):
        t = name[int(y[k])]
        if k != 1:
            return [_ann(500 + k, {"email": "ann@x.org"}, t), _ann(600 + k, {"email": "bob@x.org"}, t)]
        other = name[1 - int(y[k])]  # on task 101: ann and cid say the truth, bob the other label
        return [_ann(501, {"email": "ann@x.org"}, t, created="2026-01-02T00:00:00Z"),
                _ann(601, {"email": "bob@x.org"}, other, gt=True, created="2026-01-01T00:00:00Z"),
                _ann(701, 9, t, created="2026-01-03T00:00:00Z")]
    f = _export(tmp_path, items, anns)
    before = s._store.dump()
    with pytest.raises(LabelConflictError) as info:
        s.ingest_file(f)
    msg = info.value.cli
    for part in ("task id 101", f"item {items[1]!r}", "(id 501) by ann@x.org", "(id 601) by bob@x.org (ground truth)",
                 "(id 701) by user 9", "--resolve majority"):
        assert part in msg, (part, msg)
    assert s._store.dump() == before
    for typo in ("nobody@x.org", "majorty"):   # a name no annotation carries: read as a mistyped rule, annotators listed
        with pytest.raises(LabelConflictError, match=f"rule '{typo}' cannot decide: it is not a rule .*"
                                                     r"\(annotators: ann@x.org, bob@x.org, user 9\)"):
            s.ingest_file(f, resolve=typo)
        assert s._store.dump() == before
    want = {"majority": int(y[1]), "ann@x.org": int(y[1]), "user 9": int(y[1]), "ground-truth": 1 - int(y[1]),
            "first": 1 - int(y[1]), "bob": 1 - int(y[1])}
    for rule, lab in want.items():
        recs, n = annotate_resolve.resolve(annotate.read_labels(f), rule, 2, {"negative": 0, "positive": 1})
        assert n == 1 and len(recs.items) == 4
        assert annotate.parse_labels([recs.labels[1]], 2, {"negative": 0, "positive": 1})[0] == lab, rule
    r = s.ingest_file(f, resolve="majority")
    assert (r.n_new, r.n_resolved, r.stage_closed) == (4, 1, True)
    stored = {row[2]: row[3] for row in s._store.labels()}
    assert [stored[i] for i in items] == list(y)
    # the same annotations again (a pull reads every task of the project): the disagreement was
    # resolved when it was ingested, so no rule is needed now, and a rule that would pick the
    # other label does not move the stored one
    after = s._store.dump()
    for rule in ("error", "ground-truth"):
        r = s.ingest_file(f, resolve=rule)
        assert (r.n_new, r.n_resolved) == (0, 0) and s._store.dump() == after, rule
    # an annotation changed after its label was ingested (no annotation gives the stored label
    # any more): still refused, nothing changed
    changed = _export(tmp_path, items, lambda k, it: [_ann(800 + k, {"email": "ann@x.org"}, name[1 - int(y[k])]),
                                                      _ann(900 + k, {"email": "bob@x.org"}, name[1 - int(y[k])])]
                      if k == 1 else anns(k, it))
    with pytest.raises(LabelConflictError, match="already has label"):
        s.ingest_file(changed)
    assert s._store.dump() == after


def test_stochastic_oracle_takes_every_annotation(tmp_path, pool):
    s = Session.create(str(tmp_path / "st.db"), pool, "f1", "passive", seed=0, oracle="stochastic")
    b = s.next_batch(3)
    items, draws = list(b["item"]), list(b["draw"])
    y = truth(pool, items)
    tasks = [{"id": 1 + k, "data": {"item": it, "draw": int(d)},
              "annotations": [_ann(10 + k, 1, str(int(y[k])))] + ([_ann(20, 2, str(1 - int(y[k])))] if k == 0 else [])}
             for k, (it, d) in enumerate(zip(items, draws))]
    f = tmp_path / "st.json"
    f.write_text(json.dumps(tasks))
    r = s.ingest_file(str(f))  # no disagreement error: the second annotation is a label too
    assert r.n_new == 3 and r.n_unused == (0 if items.count(items[0]) > 1 else 1) and r.stage_closed
    # a plain CSV (no annotation ids) with two labels for one draw: refused, naming both rows, not a
    # stored label, and saying how several annotators' labels go in
    b = s.next_batch(2)
    c = tmp_path / "two.csv"
    it, d = b["item"].iloc[0], int(b["draw"].iloc[0])
    pd.DataFrame({"item": [it, it], "draw": [d, d], "label": [1, 0]}).to_csv(c, index=False)
    before = s._store.dump()
    with pytest.raises(LabelConflictError) as info:
        s.ingest_file(str(c))
    msg = str(info.value)
    assert "line 2" in msg and "line 3" in msg and "stored" not in msg and "without a draw" in msg
    assert s._store.dump() == before
    # a review changed task 2's annotation after it was ingested: refused as it is, a correction of
    # that task's draw with correct=True (since stop 75), the other draws as they were
    tasks[1]["annotations"][0]["result"][0]["value"]["choices"] = [str(1 - int(y[1]))]
    f.write_text(json.dumps(tasks))
    with pytest.raises(LabelConflictError, match=f"draw {int(draws[1])} .*--correct"):
        s.ingest_file(str(f))
    assert s._store.dump() == before
    r = s.ingest_file(str(f), correct=True)
    assert r.n_corrected == 1 and s.corrections()["draw"].tolist() == [int(draws[1])]
    by_draw = dict(zip(s.labels()["draw"].astype(int), s.labels()["label"]))
    assert by_draw[int(draws[1])] == 1 - int(y[1]) and by_draw[int(draws[2])] == int(y[2])


def test_label_studio_exports_json_min_csv_tsv_with_from_name(tmp_path, pool):
    """Label Studio's JSON_MIN, CSV and TSV exports (the label under the Choices control's
    name, here ``verdict``), as the server writes them."""
    s = _session(tmp_path, pool)
    items = list(s.next_batch(3)["item"])
    y = [str(int(v)) for v in truth(pool, items)]
    rows = [{"item": it, "stage": 0, "id": 3 + k, "verdict": y[k], "annotator": 2, "annotation_id": 7 + k,
             "created_at": "2026-11-24T19:47:48Z", "updated_at": "2026-11-24T19:47:48Z", "lead_time": None}
            for k, it in enumerate(items)]
    jm = tmp_path / "min.json"
    jm.write_text(json.dumps(rows))
    frame = pd.DataFrame(rows)
    frame.to_csv(tmp_path / "e.csv", index=False)
    frame.to_csv(tmp_path / "e.tsv", index=False, sep="\t")
    for f in (jm, tmp_path / "e.csv", tmp_path / "e.tsv"):
        with pytest.raises(MalformedInputError) as info:
            annotate.read_labels(str(f))
        assert "--from-name NAME" in info.value.cli and "verdict" in info.value.cli
        recs = annotate.read_labels(str(f), from_name="verdict")
        assert [str(v) for v in recs.items] == [str(v) for v in items] and list(map(str, recs.labels)) == y
        assert "annotation 7 by user 2" in recs.where[0] and "task id 3" in recs.where[0]
    r = s.ingest_file(str(tmp_path / "e.tsv"), from_name="verdict")
    assert r.n_new == 3 and r.stage_closed


def test_task_content_and_label_config(tmp_path):
    base = demo_pool(n_items=500, positive_rate=0.1, seed=1)
    cols = pd.DataFrame({"title_a": [f"a{i}" for i in range(500)], "title_b": [f"b{i}" for i in range(500)],
                         "prob_calibrated": np.linspace(0, 1, 500), "Gold": base.labels})
    pool = Pool.from_arrays(scores=base.scores[:, 0], preds=base.preds[:, 0], labels=base.labels, columns=cols)
    s = Session.create(str(tmp_path / "c.db"), pool, "f1", "passive", seed=0)
    f = tmp_path / "b.json"
    s.export_batch(str(f), n=3)
    # no model output, and no column named like the ground truth (a 'gold' column went to the annotators)
    assert set(json.loads(f.read_text())[0]["data"]) == {"item", "title_a", "title_b", TAG}
    s.export_batch(str(f), n=3, fields="title_a,Gold")   # asked for by name: taken
    assert set(json.loads(f.read_text())[0]["data"]) == {"item", "title_a", "Gold", TAG}
    s.export_batch(str(f), n=3, show_score=True)
    assert {"prob_calibrated", "score"} <= set(json.loads(f.read_text())[0]["data"])
    s.export_batch(str(f), n=3, fields="title_b")
    assert set(json.loads(f.read_text())[0]["data"]) == {"item", "title_b", TAG}
    with pytest.raises(SessionError, match="not columns of the pool") as info:
        s.export_batch(str(f), n=3, fields="nope")
    assert "beside item, score, pred and label: ['title_a', 'title_b', 'prob_calibrated', 'Gold']" in info.value.cli
    with pytest.raises(SessionError) as info:   # the score is the session's, not a pool column: say how
        s.export_batch(str(f), n=3, fields="score")
    assert "goes in with --show-score" in info.value.cli
    from bayes_eval import labelstudio

    cfg = labelstudio.label_config(s, "title_a,title_b")
    assert 'value="$title_a"' in cfg and 'value="$title_b"' in cfg and 'toName="title_a"' in cfg
    assert '<Choices name="label"' in cfg and '<Header value="item: $item"/>' in cfg
    tasks = labelstudio.task_data(s, s.pending(), "title_a")
    assert tasks[0]["data"].keys() == {"item", "stage", "title_a"}


def test_missing_extra_is_named(tmp_path, pool, monkeypatch, capsys):
    import sys

    from bayes_eval import labelstudio
    from bayes_eval.cli import main as cli_main

    monkeypatch.setitem(sys.modules, "label_studio_sdk", None)  # as if not installed
    with pytest.raises(SessionError, match=r'pip install "bayes_eval\[labelstudio\]"'):
        labelstudio.require("http://localhost:8080", "t")
    monkeypatch.setenv("BAYES_EVAL_CACHE_DIR", "")
    _session(tmp_path, pool).close()
    assert cli_main(["session", "push", str(tmp_path / "s.db"), "--label-studio", "http://localhost:1",
                     "--project", "1", "--no-progress"]) == 2
    assert 'bayes_eval[labelstudio]' in capsys.readouterr().err


def test_cli_next_out_file_chooses_task_content(tmp_path, capsys, monkeypatch):
    """``session next --out FILE`` takes --fields / --show-score / --preannotate as ``session
    push`` does: the batch file holds the chosen columns, the model's output only when asked,
    and pre-annotations that point at the control label-config prints; a CSV with its
    prediction column ingests as before."""
    from bayes_eval.cli import main as cli_main

    monkeypatch.setenv("BAYES_EVAL_CACHE_DIR", "")
    base = demo_pool(n_items=400, positive_rate=0.2, seed=5)
    f = tmp_path / "pool.csv"
    pd.DataFrame({"item": [f"p{i}" for i in range(400)], "score": base.scores[:, 0], "pred": base.preds[:, 0],
                  "title a": [f"a{i}" for i in range(400)], "title_b": [f"b{i}" for i in range(400)],
                  "prob_calibrated": np.linspace(0, 1, 400)}).to_csv(f, index=False)
    db = str(tmp_path / "s.db")
    assert cli_main(["session", "new", db, "--pool", str(f), "--design", "passive", "--label-map",
                     "no=0,yes=1", "--no-progress"]) == 0
    pred_of = dict(zip(pd.read_csv(f)["item"], pd.read_csv(f)["pred"]))
    b = tmp_path / "b.json"
    assert cli_main(["session", "next", db, "--n", "6", "--out", str(b), "--fields", "title a",
                     "--preannotate", "--from-name", "verdict", "--no-progress"]) == 0
    tasks = json.loads(b.read_text())
    assert len(tasks) == 6 and all(set(t["data"]) == {"item", "title a", TAG} for t in tasks)
    capsys.readouterr()
    assert cli_main(["session", "label-config", db, "--fields", "title a", "--from-name", "verdict",
                     "--no-progress"]) == 0
    cfg = capsys.readouterr().out
    for t in tasks:
        (r,) = t["predictions"][0]["result"]
        assert r["value"]["choices"] == [["no", "yes"][pred_of[t["data"]["item"]]]]
        # the prediction names the same control and text the labeling configuration has
        assert f'<Choices name="{r["from_name"]}" toName="{r["to_name"]}"' in cfg
    # the open batch again, as a CSV with the model's output and the prediction column
    c = tmp_path / "b.csv"
    assert cli_main(["session", "next", db, "--out", str(c), "--show-score", "--preannotate", "--no-progress"]) == 0
    d = pd.read_csv(c)
    assert {"score", "prob_calibrated", "title a", "title_b", "prediction", "label"} <= set(d.columns)
    assert sorted(d["item"]) == sorted(t["data"]["item"] for t in tasks)  # the re-issued batch
    assert list(d["prediction"]) == [["no", "yes"][pred_of[i]] for i in d["item"]]
    d2 = pd.read_csv(c)
    d2["label"] = [int(base.labels[int(i[1:])]) for i in d2["item"]]
    d2.to_csv(c, index=False)
    capsys.readouterr()
    assert cli_main(["session", "ingest", db, str(c), "--format", "json", "--no-progress"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["files"][0]["n_new"] == 6 and r["files"][0]["stage_closed"]
    # by default no model output reaches the annotators; on stdout the options are refused
    assert cli_main(["session", "next", db, "--n", "3", "--out", str(b), "--no-progress"]) == 0
    assert set(json.loads(b.read_text())[0]["data"]) == {"item", "title a", "title_b", TAG}
    assert "predictions" not in json.loads(b.read_text())[0]
    capsys.readouterr()
    assert cli_main(["session", "next", db, "--fields", "title_b", "--no-progress"]) == 2
    assert "--out" in capsys.readouterr().err
    # on stdout (no --out) the annotators see what a batch file shows: no model output either
    assert cli_main(["session", "next", db, "--no-progress"]) == 0
    shown = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(shown.columns) == ["item", "title a", "title_b", "label"] and len(shown) == 3


def test_an_id_column_of_the_pool_is_not_read_as_a_label_studio_task_id(tmp_path):
    """A batch file from ``session next`` shows annotators the pool's own columns, which may
    include one named ``id``: an error names the file's line and item, not a "task id" that
    Label Studio never made.  In Label Studio's CSV export (annotation columns beside it)
    ``id`` is the task id."""
    f = tmp_path / "batch.csv"
    f.write_text("item,id,label\n4941,item-4941,1\n837,item-837,0\n")
    recs = annotate.read_labels(str(f))
    assert recs.where[0] == f"{f}: line 2 (item 4941)" and all("task" not in w for w in recs.where)
    g = tmp_path / "export.csv"
    g.write_text("item,id,annotation_id,annotator,label\n4941,17,5,2,1\n")
    assert "(task id 17)" in annotate.read_labels(str(g)).where[0]


def test_cli_ingest_of_an_export_says_what_every_annotator_skipped(tmp_path, capsys, monkeypatch):
    """A Label Studio JSON export ingested as a file says what ``session pull`` says of the same
    annotations: the disagreements a rule resolved, the cancelled annotations, and the open batch's
    items every annotator skipped, with the ``session skip`` command; ``--skip-cancelled`` records
    them (the batch then closes), and on a Poisson session it is refused before any label lands."""
    from bayes_eval.cli import main as cli_main

    monkeypatch.setenv("BAYES_EVAL_CACHE_DIR", "")
    base = demo_pool(n_items=400, positive_rate=0.2, seed=5)
    f = tmp_path / "pool.csv"
    pd.DataFrame({"item": [f"p {i}" for i in range(400)], "score": base.scores[:, 0],
                  "pred": base.preds[:, 0]}).to_csv(f, index=False)
    y = {f"p {i}": int(v) for i, v in enumerate(base.labels)}
    for design in ("passive", "poisson-adaptive"):
        db = str(tmp_path / f"{design}.db")
        assert cli_main(["session", "new", db, "--pool", str(f), "--design", design, "--no-progress"]) == 0
        b = tmp_path / "b.json"
        assert cli_main(["session", "next", db, "--n", "6", "--out", str(b), "--no-progress"]) == 0
        tasks = json.loads(b.read_text())
        first, gone = tasks[0]["data"]["item"], tasks[1]["data"]["item"]
        export = _label_studio_export(tasks, lambda i: str(y[i]), cancelled={gone})
        export[0]["annotations"].append(_ann(7, {"id": 2, "email": "bob@x.org"}, str(1 - y[first]),
                                             created="2030-01-01T00:00:00Z"))
        e = tmp_path / "export.json"
        e.write_text(json.dumps(export))
        capsys.readouterr()
        if design == "poisson-adaptive":
            assert cli_main(["session", "ingest", db, str(e), "--resolve", "first", "--skip-cancelled",
                             "--no-progress"]) == 2
            assert "--skip-cancelled: the Poisson design" in capsys.readouterr().err
            assert cli_main(["session", "status", db, "--format", "json", "--no-bayesian", "--no-progress"]) == 0
            assert json.loads(capsys.readouterr().out)["labels"] == 0   # nothing ingested
            continue
        assert cli_main(["session", "ingest", db, str(e), "--resolve", "first", "--no-progress"]) == 0
        out = capsys.readouterr().out
        assert ("5 new label(s), 1 disagreement(s) resolved by rule 'first', 1 row(s)/task(s) without a label left "
                "out, 1 skipped/cancelled annotation(s) not ingested; 5 labels in the session; 1 label(s) still "
                "missing in the open batch" in out), out
        assert f"every annotator skipped item(s) {gone}: if nobody can label them, record it: bayes-eval session " \
               f"skip {db} '{gone}' (or ingest with --skip-cancelled)" in out
        assert cli_main(["session", "ingest", db, str(e), "--resolve", "first", "--skip-cancelled", "--format",
                         "json", "--no-progress"]) == 0
        r = json.loads(capsys.readouterr().out)["files"][0]
        assert (r["n_new"], r["n_cancelled"], r["cancelled_items"], r["skipped_now"]) == (0, 1, [gone], 1)
        assert cli_main(["session", "status", db, "--format", "json", "--no-bayesian", "--no-progress"]) == 0
        st = json.loads(capsys.readouterr().out)
        assert (st["labels"], st["pending"], st["stages"]) == (5, 0, 1)
        # the first annotation's label was kept, not bob's
        s = Session.open(db)
        assert dict(zip(s.labels()["item"], s.labels()["label"]))[first] == y[first]
        s.close()
