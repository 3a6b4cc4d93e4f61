"""Files for annotators: CSV / JSONL / Label Studio export and import (issue 5)."""
import json

import numpy as np
import pandas as pd
import pytest

from bayes_eval import annotate
from bayes_eval.pool import Pool, demo_pool
from bayes_eval.session import (
    EmptyInputError,
    InvalidLabelError,
    LabelConflictError,
    MalformedInputError,
    Session,
    SessionError,
)


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
    s.export_batch(str(g), n=5)  # the open batch again, as a JSON list
    assert json.loads(g.read_text()) == tasks
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


def _write(path, text):
    path.write_text(text)
    return str(path)
