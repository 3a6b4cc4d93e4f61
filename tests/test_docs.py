"""The documents point at files that exist.

The README and ``docs/*.md`` cite their evidence by path (``benchmarks/results/...``, the scripts
under ``benchmarks/``, the figures under ``docs/``); a renamed or deleted file leaves a number
whose source nobody can find.  Every repository path written in backquotes or as a Markdown
link's target must exist (a path with ``*`` must match at least one file).
"""
from __future__ import annotations

import glob
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP = ("benchmarks", "docs", "examples", "tests", "bayes_eval", "models")
CODE = re.compile(r"`((?:%s)/[^`\s]*)`" % "|".join(TOP))
LINK = re.compile(r"\]\(([^)\s#]+)\)")
DOCS = ["README.md", "benchmarks/README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def cited_paths(doc):
    """Repository paths a document cites, relative to the repository root."""
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        text = f.read()
    found = {m.group(1).rstrip(".,;:").split("::")[0] for m in CODE.finditer(text)}
    base = os.path.dirname(doc)
    for m in LINK.finditer(text):
        target = m.group(1)
        if "://" in target or target.startswith("mailto:"):
            continue
        found.add(os.path.normpath(os.path.join(base, target)))
    return sorted(found)


def missing(doc):
    out = []
    for p in cited_paths(doc):
        full = os.path.join(ROOT, p)
        if "*" in p or "{" in p:
            if not glob.glob(full):
                out.append(p)
        elif not os.path.exists(full):
            out.append(p)
    return out


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_document_cites_exists(doc):
    assert os.path.exists(os.path.join(ROOT, doc))
    assert missing(doc) == []


def test_the_check_finds_a_missing_path(tmp_path, monkeypatch):
    # the check itself: a document citing a file that is not there fails it
    doc = tmp_path / "docs" / "x.md"
    doc.parent.mkdir()
    doc.write_text("see `benchmarks/results/no_such_table.md` and [fig](no_such.png), "
                   "and `docs/x.md` ([here](x.md)).\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path))
    assert missing("docs/x.md") == ["benchmarks/results/no_such_table.md", "docs/no_such.png"]
