"""Bad or odd input to a knowledge base: rows without content, ids that are not scalars,
metadata columns named like internal keys, keys with quotes, chunking settings, LIMIT and
hybrid options, INSERT ... SELECT with a column list. Each gets a clear error (or a
documented skip) and nothing stored is lost."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kbsql.engine import Engine
from kbsql.interface.errors import BadRequest
from tests.knowledge.conftest import HASH_MODEL, sql, sql_error, table


def _kb(engine: Engine, name: str = "kb", **spec) -> object:
    engine.create_knowledge_base("mindsdb", {"name": name, "embedding_model": HASH_MODEL, **spec})
    return engine.catalog.knowledge_base("mindsdb", name)


def _contents(engine: Engine, name: str = "kb") -> dict[str, str]:
    return {r["id"]: r["chunk_content"] for r in table(engine, f"SELECT id, chunk_content FROM {name}")}


# rows without content (finding 2) ---------------------------------------------------------
def test_sql_insert_of_null_or_blank_content_keeps_the_stored_document(engine: Engine) -> None:
    _kb(engine)
    sql(engine, "INSERT INTO kb (id, content) VALUES (1, 'first'), (2, 'second')")
    assert sql(engine, "INSERT INTO kb (id, content) VALUES (2, NULL)").affected_rows == 0
    result = sql(engine, "INSERT INTO kb (id, content) VALUES (1, '   '), (2, ''), (3, 'third')")
    assert result.affected_rows == 1
    assert _contents(engine) == {"1": "first", "2": "second", "3": "third"}


def test_dataframe_with_nan_content_skips_those_rows(engine: Engine) -> None:
    record = _kb(engine, content_columns=["title", "body"])
    engine.insert_rows(record, [{"id": 1, "title": "old title", "body": "old body"}])
    frame = pd.DataFrame({"id": [1, 2, 3], "title": [np.nan, "new two", None],
                          "body": [np.nan, np.nan, "  "]})
    assert engine.insert_rows(record, frame) == 1  # the count says it; the client warns
    rows = table(engine, "SELECT id, chunk_content FROM kb")
    assert sorted((r["id"], r["chunk_content"]) for r in rows) == [
        ("1", "old body"), ("1", "old title"), ("2", "new two")]


def test_a_skipped_row_does_not_undo_an_earlier_row_of_the_same_id(engine: Engine) -> None:
    record = _kb(engine)
    count = engine.insert_rows(record, [{"id": 5, "content": "kept"}, {"id": 5, "content": None}])
    assert count == 1 and _contents(engine) == {"5": "kept"}


# ids (finding 14) ------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [{"a": 1}, [1, 2], True, float("inf"), "   "])
def test_non_scalar_or_blank_ids_are_refused_naming_the_row(engine: Engine, bad: object) -> None:
    record = _kb(engine)
    engine.insert_rows(record, [{"id": "keep", "content": "stored before"}])
    with pytest.raises(BadRequest, match=r"row 1: .*id"):
        engine.insert_rows(record, [{"id": "ok", "content": "fine"}, {"id": bad, "content": "x"}])
    assert _contents(engine) == {"keep": "stored before"}


def test_scalar_ids_keep_their_text_and_integer_floats_read_as_integers(engine: Engine) -> None:
    record = _kb(engine, id_column="doc")
    engine.insert_rows(record, [{"doc": 7.0, "content": "a"}, {"doc": 2.5, "content": "b"},
                                {"doc": "x-1", "content": "c"}, {"doc": np.int64(9), "content": "d"}])
    assert _contents(engine) == {"7": "a", "2.5": "b", "x-1": "c", "9": "d"}


# metadata keys (finding 12) ---------------------------------------------------------------
def test_metadata_columns_named_like_internal_keys_are_refused(engine: Engine) -> None:
    with pytest.raises(BadRequest, match="'source'"):
        _kb(engine, metadata_columns=["lang", "source"])
    assert engine.list_knowledge_bases("mindsdb") == []
    message = sql_error(engine, "CREATE KNOWLEDGE_BASE kb2 USING embedding_model = "
                                '{"provider": "kbsql", "model_name": "hash-256"}, '
                                "metadata_columns = ['chunk_index']")
    assert "chunk_index" in message
    _kb(engine, metadata_columns=["lang"])
    message = sql_error(engine, "ALTER KNOWLEDGE_BASE kb USING metadata_columns = ['start_char']")
    assert "start_char" in message
    assert engine.catalog.knowledge_base("mindsdb", "kb").spec["metadata_columns"] == ["lang"]


def test_inferred_metadata_named_like_an_internal_key_is_refused_at_insert(engine: Engine) -> None:
    record = _kb(engine)
    engine.insert_rows(record, [{"id": 1, "content": "before"}])
    with pytest.raises(BadRequest, match=r"row 0: .*\['source'\]"):
        engine.insert_rows(record, [{"id": 1, "content": "after", "source": "crawler"}])
    assert _contents(engine) == {"1": "before"}


def test_metadata_keys_with_quotes_and_dots_can_be_filtered(engine: Engine) -> None:
    record = _kb(engine)
    engine.insert_rows(record, [{"id": 1, "content": "alpha", 'say "hi"': "yes", "a.b": 1, "it's": "x"},
                                {"id": 2, "content": "beta", 'say "hi"': "no", "a.b": 2, "it's": "y"}])
    assert table(engine, """SELECT id FROM kb WHERE `say "hi"` = 'yes'""") == [{"id": "1"}]
    assert table(engine, "SELECT id FROM kb WHERE `a.b` = 2") == [{"id": "2"}]
    assert table(engine, "SELECT id FROM kb WHERE `it's` = 'y'") == [{"id": "2"}]
    searched = table(engine, """SELECT id FROM kb WHERE content = 'beta' AND `say "hi"` = 'no'""")
    assert searched == [{"id": "2"}]
    record = _kb(engine, "kb_declared", metadata_columns=['say "hi"'])  # indexed columns too
    engine.insert_rows(record, [{"id": 3, "content": "gamma", 'say "hi"': "maybe"}])
    assert table(engine, """SELECT id FROM kb_declared WHERE `say "hi"` = 'maybe'""") == [{"id": "3"}]


# chunking settings (finding 9) ------------------------------------------------------------
@pytest.mark.parametrize("conf", [{"chunk_size": 0}, {"chunk_size": 100, "chunk_overlap": 100},
                                  {"chunk_size": "big"}, {"separators": "\n"}])
def test_bad_chunking_is_refused_at_create(engine: Engine, conf: dict) -> None:
    with pytest.raises(BadRequest, match="text_chunking_config"):
        _kb(engine, preprocessing={"text_chunking_config": conf})
    assert engine.list_knowledge_bases("mindsdb") == []


def test_bad_chunking_is_refused_at_alter_and_inserts_keep_working(engine: Engine) -> None:
    record = _kb(engine, preprocessing={"text_chunking_config": {"chunk_size": 50, "chunk_overlap": 0}})
    message = sql_error(engine, "ALTER KNOWLEDGE_BASE kb USING preprocessing = "
                                '{"text_chunking_config": {"chunk_size": 0}}')
    assert "chunk_size" in message
    assert "not supported" in sql_error(engine, "ALTER KNOWLEDGE_BASE kb USING preprocessing = "
                                                '{"type": "magic"}')
    assert engine.insert_rows(record, [{"id": 1, "content": "still inserts fine"}]) == 1


# INSERT ... SELECT with a column list (finding 7) -----------------------------------------
def test_insert_select_renames_by_the_column_list(engine: Engine) -> None:
    _kb(engine, metadata_columns=["lang"])
    engine.register_dataframe("src", pd.DataFrame({"a": [1, 2], "b": ["one", "two"], "c": ["en", "fr"]}))
    result = sql(engine, "INSERT INTO kb (id, content, lang) SELECT a, b, c FROM df.src")
    assert result.affected_rows == 2
    rows = {r["id"]: r for r in table(engine, "SELECT id, chunk_content, lang FROM kb")}
    assert rows["1"]["chunk_content"] == "one" and rows["2"]["lang"] == "fr"
    message = sql_error(engine, "INSERT INTO kb (id, content) SELECT a, b, c FROM df.src")
    assert "2 columns" in message and "3" in message
    assert "more than once" in sql_error(engine, "INSERT INTO kb (id, id) SELECT a, b FROM df.src")


# LIMIT / OFFSET / hybrid_search_alpha (finding 14) ----------------------------------------
def test_negative_limit_and_out_of_range_alpha_are_sql_errors(engine: Engine) -> None:
    record = _kb(engine)
    engine.insert_rows(record, [{"id": i, "content": f"row {i}"} for i in range(3)])
    assert "LIMIT" in sql_error(engine, "SELECT * FROM kb LIMIT -1")
    assert "LIMIT" in sql_error(engine, "SELECT * FROM kb WHERE content = 'row' LIMIT -1")
    assert "OFFSET" in sql_error(engine, "SELECT * FROM kb LIMIT 2 OFFSET -1")
    for alpha in ("7", "-0.1", "'x'"):
        message = sql_error(engine, "SELECT * FROM kb WHERE content = 'row' AND "
                                    f"hybrid_search_alpha = {alpha}")
        assert "hybrid_search_alpha" in message
    assert len(table(engine, "SELECT id FROM kb WHERE content = 'row' AND hybrid_search_alpha = 1")) == 3
    assert table(engine, "SELECT id FROM kb LIMIT 0") == []


# quoted column names in INSERT (second review A) --------------------------------------------
def test_insert_with_backtick_quoted_columns_stores_their_values(engine: Engine) -> None:
    _kb(engine, name="ks", content_columns=["body"], metadata_columns=["my col", "Year"])
    assert sql(engine, "INSERT INTO ks (id, body, `my col`, `Year`) "
                       "VALUES (2, 'hi', 'q', 2020)").affected_rows == 1
    assert sql(engine, "INSERT INTO ks (`id`, `body`) VALUES (77, 'quoted id')").affected_rows == 1
    assert sql(engine, "INSERT INTO ks (`id`, `body`, `my col`) SELECT 78, 'sel', 'zz'").affected_rows == 1
    rows = {r["id"]: r for r in table(engine, "SELECT id, chunk_content, metadata FROM ks")}
    assert set(rows) == {"2", "77", "78"}  # `id` named the id, not an md5 of the content
    assert {k: rows["2"]["metadata"][k] for k in ("my col", "Year")} == {"my col": "q", "Year": 2020}
    assert rows["77"]["chunk_content"] == "quoted id" and rows["78"]["metadata"]["my col"] == "zz"


def test_unquote_identifier_takes_off_one_layer_and_undoubles() -> None:
    from kbsql.engine.sql.kb.kb_rows import unquote_identifier

    assert unquote_identifier("`my col`") == "my col"
    assert unquote_identifier('"a""b"') == 'a"b'
    assert unquote_identifier("`x``y`") == "x`y"
    assert unquote_identifier("plain") == "plain" and unquote_identifier("`") == "`"


# preprocessing keys (second review C) ---------------------------------------------------------
def _chunk_count(engine: Engine, text: str) -> int:
    record = engine.catalog.knowledge_base("mindsdb", "kb")
    engine.insert_rows(record, [{"id": 1, "content": text}])
    return len(table(engine, "SELECT chunk_id FROM kb"))


def test_flat_chunking_settings_take_effect(engine: Engine) -> None:
    _kb(engine)
    text = " ".join(f"word{i}" for i in range(40))  # ~270 characters: one chunk by default
    assert _chunk_count(engine, text) == 1
    sql(engine, "ALTER KNOWLEDGE_BASE kb USING preprocessing = {'chunk_size': 20, 'chunk_overlap': 2}")
    assert _chunk_count(engine, text) > 10


@pytest.mark.parametrize("preprocessing, unknown", [
    ("{'text_chunking_config': {'chunksize': 10}}", "chunksize"),
    ("{'chunk_sise': 10}", "chunk_sise"),
    ("{'type': 'text_chunking', 'config': {'chunk_size': 10}}", "config")])
def test_unknown_chunking_keys_are_refused_naming_the_accepted_ones(engine: Engine, preprocessing: str,
                                                                    unknown: str) -> None:
    _kb(engine, preprocessing={"text_chunking_config": {"chunk_size": 50, "chunk_overlap": 0}})
    message = sql_error(engine, f"ALTER KNOWLEDGE_BASE kb USING preprocessing = {preprocessing}")
    assert unknown in message and "chunk_size" in message and "chunk_overlap" in message
    assert engine.catalog.knowledge_base("mindsdb", "kb").preprocessing == {
        "text_chunking_config": {"chunk_size": 50, "chunk_overlap": 0}}  # unchanged
    with pytest.raises(BadRequest, match="chunksize"):
        _kb(engine, name="kb2", preprocessing={"text_chunking_config": {"chunksize": 10}})
    with pytest.raises(BadRequest, match="both"):
        _kb(engine, name="kb3", preprocessing={"chunk_size": 10, "text_chunking_config": {"chunk_size": 5}})


# filters on undeclared metadata columns (second review D) -----------------------------------
def test_filter_on_an_undeclared_metadata_column_is_an_error(engine: Engine) -> None:
    record = _kb(engine, metadata_columns=["my col", "lang"])
    engine.insert_rows(record, [{"id": 1, "content": "hi there", "my col": "q", "lang": "en"}])
    message = sql_error(engine, "SELECT id FROM kb WHERE my_typo = 'q' AND content = 'hi'")
    assert "my_typo" in message and "my col" in message and "lang" in message
    assert "my_typo" in sql_error(engine, "DELETE FROM kb WHERE my_typo = 'q'")
    found = table(engine, "SELECT id FROM kb WHERE `my col` = 'q' AND content = 'hi'")
    assert [r["id"] for r in found] == ["1"]
    assert [r["id"] for r in table(engine, "SELECT id FROM kb WHERE content_column = 'content'")] == ["1"]


def test_filter_on_an_inferred_key_passes_and_on_a_key_no_row_holds_fails(engine: Engine) -> None:
    """MindsDB checks a filter against the keys inserts wrote (its executor test
    test_select_allowed_columns): a typo is an error, not an empty answer."""
    record = _kb(engine)
    engine.insert_rows(record, [{"id": 1, "content": "hi there", "lang": "en"}])
    assert "Unknown column 'my_typo'" in sql_error(engine, "SELECT id FROM kb WHERE my_typo = 'q'")
    assert [r["id"] for r in table(engine, "SELECT id FROM kb WHERE lang = 'en'")] == ["1"]


def test_a_key_known_or_unknown_follows_the_writes(engine: Engine) -> None:
    """The keys a filter may name are kept per store version (allowed.KnownKeys): a key an
    insert adds is known at once, and one a delete removes from every chunk is unknown again."""
    record = _kb(engine)
    engine.insert_rows(record, [{"id": 1, "content": "hi there", "lang": "en"}])
    assert "Unknown column 'late'" in sql_error(engine, "SELECT id FROM kb WHERE late = 'x'")
    engine.insert_rows(record, [{"id": 2, "content": "later", "late": "x"}])
    assert [r["id"] for r in table(engine, "SELECT id FROM kb WHERE late = 'x'")] == ["2"]
    sql(engine, "DELETE FROM kb WHERE id = '2'")
    assert "Unknown column 'late'" in sql_error(engine, "SELECT id FROM kb WHERE late = 'x'")
