"""Semantic search with the default model (all-MiniLM-L6-v2, numpy) on real text, all
through SQL: questions find their topic, filters/bounds/limits hold, upsert and delete."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kbsql.engine import Engine
from tests.knowledge.conftest import sql, table

TOPICS = ["if", "for", "while", "try", "with", "lambda", "import", "assert", "del", "yield",
          "global", "break", "raise", "pass"]
QUESTIONS = {
    "How do I catch an exception and always run cleanup code in a finally clause?": "try",
    "How do I iterate over the elements of a list in a loop?": "for",
    "How can I write a small anonymous function inline?": "lambda",
    "How do I load a module from a package and bind its name?": "import",
    "What does the context manager __enter__ and __exit__ protocol do?": "with",
    "How do I signal an error by throwing an exception?": "raise",
    "How do I remove a variable or a list item?": "del",
}


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@pytest.fixture(scope="module")
def docs_engine(tmp_path_factory: pytest.TempPathFactory, minilm) -> Iterator[Engine]:
    import pydoc_data.topics

    eng = Engine(tmp_path_factory.mktemp("minilm") / "engine")
    sql(eng, "CREATE KNOWLEDGE_BASE docs USING metadata_columns = ['topic', 'size'], "
             "id_column = 'name'")
    values = ", ".join(f"({_sql_text(t)}, {_sql_text(pydoc_data.topics.topics[t])}, {_sql_text(t)}, "
                       f"{len(pydoc_data.topics.topics[t])})" for t in TOPICS)
    result = sql(eng, f"INSERT INTO docs (name, content, topic, size) VALUES {values}")
    assert result.affected_rows == len(TOPICS)
    yield eng
    eng.close()


def test_questions_find_their_topic_first(docs_engine: Engine) -> None:
    for question, topic in QUESTIONS.items():
        got = table(docs_engine, f"SELECT * FROM docs WHERE content = {_sql_text(question)} LIMIT 3")
        assert got[0]["metadata"]["topic"] == topic, (question, [g["id"] for g in got])
        assert got[0]["id"] == topic
        rel = [g["relevance"] for g in got]
        assert rel == sorted(rel, reverse=True)
        for g in got:  # relevance = 1 / (1 + cosine distance)
            assert g["relevance"] == pytest.approx(1 / (1 + g["distance"]))
            assert 0 <= g["distance"] <= 2


def test_distance_is_the_cosine_distance_of_the_model(docs_engine: Engine, minilm) -> None:
    question = "How do I leave a loop early?"
    got = table(docs_engine, "SELECT chunk_content, distance FROM docs "
                             f"WHERE content = {_sql_text(question)}")
    assert len(got) == 10  # the default LIMIT
    q = minilm.encode([question])[0]
    chunks = minilm.encode([g["chunk_content"] for g in got])
    assert [g["distance"] for g in got] == pytest.approx((1 - chunks @ q).tolist(), abs=1e-5)


def test_chunks_have_true_offsets_and_contract_metadata(docs_engine: Engine, topics) -> None:
    result = sql(docs_engine, "SELECT * FROM docs")
    assert result.column_names == ["id", "chunk_id", "chunk_content", "metadata", "relevance", "distance"]
    rows = [dict(zip(result.column_names, r, strict=True)) for r in result.data]
    assert {r["id"] for r in rows} == set(TOPICS)
    per_doc: dict[str, list[dict]] = {}
    for r in rows:
        assert r["relevance"] is None and r["distance"] is None  # plain select
        m = r["metadata"]
        text = topics[r["id"]]
        assert text[m["start_char"]:m["end_char"]] == r["chunk_content"]
        assert len(r["chunk_content"]) <= 1000
        assert m["content_column"] == "content" and m["original_doc_id"] == r["id"]
        assert m["source"] == "TextChunkingPreprocessor" and m["topic"] == r["id"]
        assert m["size"] == len(text) and isinstance(m["original_row_index"], str)
        per_doc.setdefault(r["id"], []).append(r)
    for doc_id, chunks in per_doc.items():
        chunks.sort(key=lambda r: r["metadata"]["chunk_index"])
        total = len(chunks)
        for n, r in enumerate(chunks):
            m = r["metadata"]
            assert m["chunk_index"] == n
            assert r["chunk_id"] == f"{doc_id}:content:{n + 1}of{total}:{m['start_char']}to{m['end_char']}"
    assert len(per_doc["import"]) > 5  # the long topics were really chunked
    covered = per_doc["import"]
    text = topics["import"]
    assert text[:covered[0]["metadata"]["start_char"]].strip() == ""
    for a, b in itertools.pairwise(covered):  # nothing but whitespace is ever skipped
        assert text[a["metadata"]["end_char"]:b["metadata"]["start_char"]].strip() == ""
    assert text[covered[-1]["metadata"]["end_char"]:].strip() == ""


def test_filters_are_applied_before_ranking(docs_engine: Engine) -> None:
    q = _sql_text("How do I catch an exception?")
    got = table(docs_engine, f"SELECT id, metadata FROM docs WHERE content = {q} AND topic != 'try' "
                             "AND topic IN ('with', 'raise', 'assert', 'try') LIMIT 50")
    ids = {g["id"] for g in got}
    assert ids <= {"with", "raise", "assert"} and "raise" in ids
    # every chunk of the allowed topics comes back: a true top-k, not a post-filtered short list
    everything = table(docs_engine, "SELECT id FROM docs WHERE topic IN ('with', 'raise', 'assert')")
    assert len(got) == len(everything)
    got = table(docs_engine, f"SELECT id, metadata FROM docs WHERE content = {q} AND size < 700 LIMIT 3")
    assert len(got) == 3 and all(g["metadata"]["size"] < 700 for g in got)
    got = table(docs_engine, f"SELECT id FROM docs WHERE content = {q} AND id LIKE 'wh%' LIMIT 5")
    assert {g["id"] for g in got} == {"while"}


def test_relevance_bound_and_limit(docs_engine: Engine) -> None:
    q = _sql_text("anonymous function expression")
    every = table(docs_engine, f"SELECT relevance FROM docs WHERE content = {q} LIMIT 100")
    bound = sorted(r["relevance"] for r in every)[len(every) // 2]
    got = table(docs_engine, f"SELECT relevance FROM docs WHERE content = {q} AND relevance >= {bound} "
                             "LIMIT 100")
    assert got and all(g["relevance"] >= bound for g in got)
    assert len(got) == sum(1 for r in every if r["relevance"] >= bound)
    strict = table(docs_engine, f"SELECT relevance FROM docs WHERE content = {q} AND relevance > {bound} "
                                "LIMIT 100")
    assert len(strict) == len(got) - 1
    assert len(table(docs_engine, f"SELECT id FROM docs WHERE content = {q} LIMIT 4")) == 4


def test_hybrid_search_brings_exact_keywords_up(docs_engine: Engine) -> None:
    for word in ("garbage", "overwritten", "exhausted"):  # each in one chunk only
        plain = table(docs_engine, f"SELECT id, chunk_content, relevance FROM docs WHERE content = '{word}'")
        assert word not in plain[0]["chunk_content"].lower()  # the model alone misses it
        hybrid = table(docs_engine, f"SELECT chunk_content, relevance, distance FROM docs "
                                    f"WHERE content = '{word}' AND hybrid_search = true")
        assert word in hybrid[0]["chunk_content"].lower()
        # relevance as MindsDB documents it: the weighted average (alpha 0.5) of the embedding
        # relevance and the keyword score (1 for the only chunk holding the word, else 0)
        for r in hybrid:
            keyword = 1.0 if word in r["chunk_content"].lower() else 0.0
            assert r["relevance"] == pytest.approx(0.5 / (1 + r["distance"]) + 0.5 * keyword, abs=1e-6)
        # so a relevance floor still tells matches from the rest
        floor = table(docs_engine, f"SELECT chunk_content FROM docs WHERE content = '{word}' "
                                   "AND hybrid_search = true AND relevance >= 0.75")
        assert [word in r["chunk_content"].lower() for r in floor] == [True]
        # alpha = 1 is the vector ranking alone
        vector_only = table(docs_engine, f"SELECT id, relevance FROM docs WHERE content = '{word}' "
                                         "AND hybrid_search_alpha = 1")
        assert [r["id"] for r in vector_only] == [r["id"] for r in plain]
        assert [r["relevance"] for r in vector_only] == pytest.approx([r["relevance"] for r in plain])


def test_hybrid_keywords_are_distinct_words_whatever_their_case() -> None:
    """Both keyword indexes match words case-insensitively, so "Loop loop" is one term: counted
    twice it would weigh double in BM25 and shift the keyword side's weight (`weights`)."""
    from kbsql.engine.knowledge.search import keyword_terms, weights

    assert keyword_terms("Loop loop LOOP: how do I break out of the loop?") == ["Loop", "break"]
    assert weights(len(keyword_terms("Garbage garbage collection")), 0.5) == weights(2, 0.5)


def test_upsert_replaces_a_document_and_delete_removes_it(tmp_path: Path, minilm, topics) -> None:
    with Engine(tmp_path / "e") as eng:
        sql(eng, "CREATE KNOWLEDGE_BASE kb")
        sql(eng, f"INSERT INTO kb (id, content) VALUES (1, {_sql_text(topics['for'])}), "
                 f"(2, {_sql_text(topics['while'])})")
        before = table(eng, "SELECT chunk_id FROM kb WHERE id = 1")
        assert len(before) >= 2
        sql(eng, f"INSERT INTO kb (id, content) VALUES (1, {_sql_text(topics['lambda'])})")
        after = table(eng, "SELECT id, chunk_id, chunk_content FROM kb WHERE id = 1")
        assert len(after) == 1 and after[0]["chunk_content"] == topics["lambda"].strip()
        got = table(eng, "SELECT id FROM kb WHERE content = 'loop over a sequence with for' LIMIT 5")
        assert [g["id"] for g in got] == ["2", "1"]  # the old 'for' text is gone from the index
        assert sql(eng, "DELETE FROM kb WHERE id = 2").affected_rows == 1
        got = table(eng, "SELECT id FROM kb WHERE content = 'while loop' LIMIT 5")
        assert [g["id"] for g in got] == ["1"]
        meta = json.dumps(table(eng, "SELECT metadata FROM kb")[0]["metadata"])
        assert "original_doc_id" in meta


def test_python_api_dataframe_insert_matches_sql(tmp_path: Path, minilm, topics) -> None:
    import pandas as pd

    import kbsql

    client = kbsql.connect(data_dir=tmp_path / "api")
    try:
        client.knowledge_bases.create("notes", content_columns=["body", "title"],
                                      metadata_columns=["kind"])
        frame = pd.DataFrame({"id": [10, 11], "title": ["The for statement", "Lambdas"],
                              "body": [topics["for"], topics["lambda"]], "kind": ["loop", np.nan]})
        assert client.knowledge_bases.insert("notes", frame) == 2
        got = client.query("SELECT * FROM notes WHERE content = 'lambda expressions' LIMIT 1")
        assert list(got.columns) == ["id", "chunk_id", "chunk_content", "metadata", "relevance", "distance"]
        assert got.iloc[0]["id"] == "11"
        columns = {r["metadata"]["content_column"] for _, r in client.query("SELECT * FROM notes").iterrows()}
        assert columns == {"body", "title"}  # each content column is chunked on its own
        titles = client.query("SELECT chunk_id, metadata FROM notes WHERE chunk_id LIKE '11:title:%'")
        assert titles.iloc[0]["chunk_id"] == "11:title:1of1:0to7"
        assert titles.iloc[0]["metadata"]["kind"] is None
    finally:
        client.close()
