"""`%kbsql_plot`: relevance of a search, a 2-D map of a knowledge base, recall@k, each checked
by image comparison against a checked-in PNG (matplotlib.testing.compare) and by what the
figure holds; relevance and recall embedded and over HTTP give the same picture.

Regenerate the baselines after a deliberate change: KBSQL_UPDATE_BASELINES=1 pytest this file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

BASELINE = Path(__file__).parent / "baseline"
TOLERANCE = 8.0
"""RMS difference (0-255) allowed: absorbs font hinting across matplotlib/freetype builds,
far below what a missing bar, point or curve step costs."""

DOCS = [(f"p{i}", f"pump {w} oil pressure motor", "pump") for i, w in enumerate("abcdef")] + \
       [(f"v{i}", f"valve {w} seal closing spring", "valve") for i, w in enumerate("abcdef")] + \
       [(f"o{i}", f"office {w} hours desk coffee", "office") for i, w in enumerate("abcdef")]


@pytest.fixture(params=["embedded", "http"])
def where(request: pytest.FixtureRequest, cells) -> str:
    if request.param == "http":
        url = request.getfixturevalue("server_url")
        assert cells.run(f"%kbsql_connect {url} -a remote")[0].success
    cells.ok("%kbsql CREATE KNOWLEDGE_BASE notes USING embedding_model = "
             "{'provider': 'kbsql', 'model_name': 'hash-64'}, metadata_columns = ['topic']")
    values = ", ".join(f"('{i}', '{t}', '{m}')" for i, t, m in DOCS)
    cells.ok(f"%kbsql INSERT INTO notes (id, content, topic) VALUES {values}")
    return request.param


def same_as_baseline(plot, name: str, tmp_path: Path) -> None:
    from matplotlib.testing.compare import compare_images

    actual = tmp_path / f"{name}.png"
    actual.write_bytes(plot._repr_png_())
    expected = BASELINE / f"{name}.png"
    if os.environ.get("KBSQL_UPDATE_BASELINES"):
        expected.write_bytes(actual.read_bytes())
    difference = compare_images(str(expected), str(actual), tol=TOLERANCE)
    assert difference is None, difference


def test_relevance_of_a_search(cells, where, tmp_path):
    plot = cells.ok("%kbsql_plot relevance SELECT * FROM notes WHERE content = 'pump oil' LIMIT 8")
    ax = plot.figure.axes[0]
    assert len(ax.patches) == 8 and ax.get_xlabel() == "relevance"
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0].startswith("p")  # best first, and it is a pump document
    same_as_baseline(plot, "relevance", tmp_path)


def test_recall_at_k_of_questions(cells, where, tmp_path):
    cells.ns["qs"] = pd.DataFrame({"question": ["pump oil pressure", "valve seal", "coffee desk",
                                                "office hours"],
                                   "id": ["p0", "v3", "o2", "p5"]})
    plot = cells.ok("%kbsql_plot recall notes --questions qs -k 6  # four questions")
    line = plot.figure.axes[0].lines[0]
    recall = list(line.get_ydata())
    assert len(recall) == 6 and recall == sorted(recall) and 0 < recall[-1] <= 1
    same_as_baseline(plot, "recall", tmp_path)


def _evaluate(cells) -> None:
    """EVALUATE over the same four questions as above, its result saved as df.notes_eval."""
    from kbsql.notebook import current_client

    current_client().register("notes_qs", pd.DataFrame({
        "question": ["pump oil pressure", "valve seal", "coffee desk", "office hours"],
        "doc_id": ["p0", "v3", "o2", "p5"]}))
    cells.ok("%kbsql ev << EVALUATE KNOWLEDGE_BASE notes USING test_table = df.notes_qs, "
             "save_to = df.notes_eval")


def test_a_mindsdb_evaluate_result_numbered_from_0_draws_the_same_curve():
    """MindsDB's cumulative_recall keys are positions from 0; kbsql's are k from 1: both give
    recall@1 first."""
    from kbsql.notebook.plots import evaluation_curve

    ours = {"cumulative_recall": json.dumps({"1": 0.5, "2": 0.75, "3": 1.0})}
    theirs = {"cumulative_recall": json.dumps({"0": 0.5, "1": 0.75, "2": 1.0})}
    assert evaluation_curve(ours, 3) == evaluation_curve(theirs, 3) == ("recall@k", [0.5, 0.75, 1.0])


def test_recall_at_k_of_an_evaluate_result(cells, where, tmp_path, monkeypatch):
    """The curve EVALUATE measured, drawn from its frame or its saved df.<name>, searching
    nothing: the same picture as the questions' own searches above (same questions, ids)."""
    _evaluate(cells)
    ev = cells.ns["ev"]
    expected = json.loads(ev["cumulative_recall"][0])
    cells.ns["qs"] = pd.DataFrame({"question": ["pump oil pressure", "valve seal", "coffee desk",
                                                "office hours"], "id": ["p0", "v3", "o2", "p5"]})
    searched = cells.ok("%kbsql_plot recall notes --questions qs -k 6").figure.axes[0].lines[0].get_ydata()
    import kbsql.notebook.plot_magic as plot_magic

    def no_search(*args, **kwargs):
        raise AssertionError("an EVALUATE result is drawn, not searched again")

    monkeypatch.setattr(plot_magic, "_ranked_ids", no_search)
    for source in ("ev", "df.notes_eval"):
        plot = cells.ok(f"%kbsql_plot recall {source} -k 6  # EVALUATE measured it")
        ax = plot.figure.axes[0]
        assert list(ax.lines[0].get_ydata()) == [expected[str(k)] for k in range(1, 7)] == list(searched)
        assert ax.get_ylabel() == "recall@k" and "of 4 questions (EVALUATE)" in ax.get_title()
        same_as_baseline(plot, "recall_evaluate", tmp_path)


def test_recall_of_an_evaluate_result_refuses_what_it_cannot_draw(cells, where):
    _evaluate(cells)
    cells.ns["not_eval"] = pd.DataFrame({"x": [1]})
    for line, says in [("%kbsql_plot recall ev -k 30", "up to k = 20, not 30: use -k 20"),
                       ("%kbsql_plot recall not_eval", "no cumulative_recall"),
                       ("%kbsql_plot recall nowhere", "not a DataFrame or df.<name>"),
                       ("%kbsql_plot recall ev --hybrid", "--hybrid is for searches")]:
        result, out = cells.run(line)
        assert not result.success and says in out, (line, out)


def test_map_of_a_knowledge_base(cells, where, tmp_path):
    if where == "http":
        result, out = cells.run("%kbsql_plot map notes --color topic")
        assert not result.success and "needs the embedded engine" in out
        return
    # a misspelt --color drew every dot "(none)" under the misspelt name
    result, out = cells.run("%kbsql_plot map notes --color topc")
    assert not result.success and "--color topc: no chunk of notes has that metadata key; its keys " \
        "are topic, chunk_index" in out, out
    plot = cells.ok("%kbsql_plot map notes --color topic --query 'pump oil'")
    ax = plot.figure.axes[0]
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["office", "pump", "valve"]
    assert sum(len(c.get_offsets()) for c in ax.collections) == len(DOCS) + 1  # chunks + the query
    same_as_baseline(plot, "map", tmp_path)


def test_the_query_on_a_map_has_no_category_colour():
    """The query's star and label stay readable among dots of any category: they were the red
    of tab10's fourth category, so "my parcel is late" vanished among the shipping tickets."""
    import numpy as np
    from matplotlib.colors import to_rgba

    from kbsql.notebook.plots import _categorical, map_figure

    points = np.random.default_rng(0).normal(size=(40, 2))
    colours = [("account", "product", "refund", "shipping")[i % 4] for i in range(40)]
    figure = map_figure(points, colours, colour_by="category", query="my parcel is late",
                        query_point=np.zeros(2))
    ax = figure.axes[0]
    palette = np.array(_categorical(4))[:, :3]

    def unlike_every_category(colour) -> bool:  # far in RGB from each (#d93025 is 0.04 from red)
        return bool(np.linalg.norm(palette - np.asarray(to_rgba(colour))[:3], axis=1).min() > 0.3)

    assert unlike_every_category(ax.collections[-1].get_facecolor()[0])  # the star
    (label,) = ax.texts
    assert unlike_every_category(label.get_color())
    assert label.get_bbox_patch() is not None  # a white box under the words


def test_plot_usage_errors(cells, where):
    cells.ns["asked"] = pd.DataFrame({"q": ["pump oil"], "doc": ["1"]})  # not the default names
    for line, says in [("%kbsql_plot pie x", "KIND is one of"),
                       ("%kbsql_plot relevance SELECT * FROM notes", "no relevance to plot"),
                       ("%kbsql_plot recall notes --questions nowhere",
                        "--questions nowhere: no variable of that name in the notebook"),
                       ("%kbsql_plot recall notes --questions asked", "its columns are ['q', 'doc'] "
                        "(name yours with --question-column C and --id-column C)")]:
        result, out = cells.run(line)
        assert not result.success and says in out, (line, out)
