"""docs/mindsdb_sql/knowledge_bases/{create,insert_data,alter,evaluate,hybrid_search,examples,
overview}.mdx (mindsdb/mindsdb): the examples of each page, embedded and over HTTP.

Hosted models are the loopback fake (`Doc.openai`): embeddings from the hash embedder, chat
scores from word overlap, so rankings are deterministic.
"""

from __future__ import annotations

import json

from tests.dialect.conftest import HASH, Doc

CREATE = "docs/mindsdb_sql/knowledge_bases/create.mdx"
INSERT = "docs/mindsdb_sql/knowledge_bases/insert_data.mdx"
ALTER = "docs/mindsdb_sql/knowledge_bases/alter.mdx"
EVALUATE = "docs/mindsdb_sql/knowledge_bases/evaluate.mdx"
HYBRID = "docs/mindsdb_sql/knowledge_bases/hybrid_search.mdx"
EXAMPLES = "docs/mindsdb_sql/knowledge_bases/examples.mdx"


def reranker(doc: Doc) -> str:
    return ('{"provider": "openai", "model_name": "gpt-4o", "api_key": "sk-rr-key", '
            f'"base_url": "{doc.provider.url}/v1"}}')


# ---- create.mdx ------------------------------------------------------------------------------
def test_create_full_syntax_with_openai_models(doc: Doc) -> None:
    """create.mdx: CREATE KNOWLEDGE_BASE with embedding_model, reranking_model, metadata_columns,
    content_columns, id_column; then SHOW KNOWLEDGE_BASES and DESCRIBE KNOWLEDGE_BASE."""
    doc.sql(f"CREATE KNOWLEDGE_BASE my_kb USING embedding_model = {doc.openai()}, "
            f"reranking_model = {reranker(doc)}, metadata_columns = ['product'], "
            "content_columns = ['notes'], id_column = 'order_id';")
    shown = doc.rows("SHOW KNOWLEDGE_BASES;")
    assert [r["NAME"] for r in shown] == ["my_kb"]
    described = doc.rows("DESCRIBE KNOWLEDGE_BASE my_kb;")[0]
    assert described["NAME"] == "my_kb" and described["PROJECT"] == doc.project
    text = json.dumps(described)
    assert "sk-doc-key" not in text and "sk-rr-key" not in text  # keys masked
    assert json.loads(described["METADATA_COLUMNS"]) == ["product"]
    doc.sql("DROP KNOWLEDGE_BASE my_kb;")
    assert doc.rows("SHOW KNOWLEDGE_BASES;") == []


def test_create_in_a_project(doc: Doc) -> None:
    """create.mdx: CREATE PROJECT my_project; CREATE KNOWLEDGE_BASE my_project.my_kb."""
    doc.sql(f"CREATE PROJECT {doc.project}_x")
    doc.sql(f"CREATE KNOWLEDGE_BASE {doc.project}_x.my_kb USING embedding_model = {HASH}")
    assert [r["NAME"] for r in doc.rows(f"SHOW KNOWLEDGE_BASES FROM {doc.project}_x")] == ["my_kb"]


def test_reranking_model_false(doc: Doc) -> None:
    """create.mdx: `reranking_model = false` creates a knowledge base without reranking."""
    doc.orders_kb(extra=", reranking_model = false")
    rows = doc.rows("SELECT id, relevance, distance FROM my_kb WHERE content = 'color'")
    assert all(abs(r["relevance"] - 1 / (1 + r["distance"])) < 1e-9 for r in rows)
    assert json.loads(doc.rows("DESCRIBE KNOWLEDGE_BASE my_kb")[0]["RERANKING_MODEL"] or "null") is None


def test_reranked_kb_keeps_rows_by_default_and_relevance_lowers_or_raises_the_cut(doc: Doc) -> None:
    """query.mdx Note: with a reranking model the default relevance bound is >= 0."""
    doc.orders_kb(extra=f", reranking_model = {reranker(doc)}")
    rows = doc.rows("SELECT id, relevance FROM my_kb WHERE content = 'color black'")
    assert len(rows) == 3 and rows[0]["id"] == "A1B" and rows[0]["relevance"] == 1.0
    assert [r["id"] for r in doc.rows("SELECT id FROM my_kb WHERE content = 'color black' "
                                      "AND relevance >= 0.5")] == ["A1B"]


def test_sample_data_columns(doc: Doc) -> None:
    """create.mdx: metadata_columns / content_columns / id_column over the orders sample."""
    doc.orders_kb()
    row = doc.rows("SELECT * FROM my_kb WHERE id = 'Q7P'")[0]
    assert row["chunk_content"] == "Prefer aluminum finish"
    assert row["metadata"]["product"] == "Aluminum Laptop Stand"
    assert "notes" not in row["metadata"]


# ---- insert_data.mdx -------------------------------------------------------------------------
def test_insert_select_and_upsert(doc: Doc) -> None:
    """insert_data.mdx: INSERT INTO my_kb SELECT ...; inserting an existing id updates it."""
    doc.orders_kb()
    doc.sql("INSERT INTO my_kb SELECT order_id, product, 'Prefer a steel finish' AS notes "
            "FROM sample_data.orders WHERE order_id = 'Q7P';")
    rows = doc.rows("SELECT chunk_content FROM my_kb WHERE id = 'Q7P'")
    assert rows == [{"chunk_content": "Prefer a steel finish"}]
    assert doc.rows("SELECT count(*) AS n FROM my_kb") == [{"n": 3}]


def test_insert_using_batch_options(doc: Doc) -> None:
    """insert_data.mdx: USING batch_size, track_column, threads, error."""
    doc.sql(f"CREATE KNOWLEDGE_BASE my_kb USING embedding_model = {HASH}, metadata_columns = ['product'], "
            "content_columns = ['notes'], id_column = 'order_id'")
    done = doc.background("INSERT INTO my_kb SELECT order_id, product, notes FROM sample_data.orders "
                          "USING batch_size = 200, track_column = order_id, threads = 10, error = 'skip';")
    assert done["PROCESSED_ROWS"] == 3 and done["ERROR"] is None
    assert doc.rows("SELECT count(*) AS n FROM my_kb") == [{"n": 3}]
    assert "batch_size" in doc.error("INSERT INTO my_kb SELECT * FROM sample_data.orders "
                                     "USING batch_size = 0")
    assert "track_column" in doc.error("INSERT INTO my_kb SELECT * FROM sample_data.orders "
                                       "USING track_column = nope")
    assert "bogus" in doc.error("INSERT INTO my_kb SELECT * FROM sample_data.orders USING bogus = 1")


def test_insert_skip_existing_and_no_upsert(doc: Doc) -> None:
    """insert_data.mdx: kb_skip_existing keeps stored ids; kb_no_upsert loads new ids only."""
    doc.orders_kb()
    doc.sql("INSERT INTO my_kb SELECT order_id, product, 'changed' AS notes FROM sample_data.orders "
            "USING kb_skip_existing = true;")
    assert "changed" not in {r["chunk_content"] for r in doc.rows("SELECT chunk_content FROM my_kb")}
    message = doc.error("INSERT INTO my_kb SELECT * FROM sample_data.orders USING kb_no_upsert = true;")
    assert "kb_no_upsert" in message
    doc.sql(f"CREATE KNOWLEDGE_BASE fresh USING embedding_model = {HASH}, content_columns = ['notes'], "
            "id_column = 'order_id'")
    doc.sql("INSERT INTO fresh SELECT * FROM sample_data.orders USING kb_no_upsert = true")
    assert doc.rows("SELECT count(*) AS n FROM fresh") == [{"n": 3}]


def test_insert_content_alias_and_delete(doc: Doc) -> None:
    """insert_data.mdx: `SELECT order_id, notes AS content`; DELETE FROM my_kb WHERE id = 'A1B'."""
    doc.sql(f"CREATE KNOWLEDGE_BASE my_kb USING embedding_model = {HASH}, id_column = 'order_id'")
    doc.sql("INSERT INTO my_kb SELECT order_id, notes AS content FROM sample_data.orders;")
    assert doc.rows("SELECT count(*) AS n FROM my_kb") == [{"n": 3}]
    doc.sql("DELETE FROM my_kb WHERE id = 'A1B';")
    assert sorted(r["id"] for r in doc.rows("SELECT id FROM my_kb")) == ["3XZ", "Q7P"]


def test_chunking_preprocessing(doc: Doc) -> None:
    """insert_data.mdx: preprocessing = {"text_chunking_config": {"chunk_size": ..., ...}}."""
    doc.sql(f"CREATE KNOWLEDGE_BASE my_kb USING embedding_model = {HASH}, preprocessing = "
            '{"text_chunking_config": {"chunk_size": 20, "chunk_overlap": 5}}')
    doc.sql("INSERT INTO my_kb (id, content) VALUES (1, 'one two three four five six seven eight nine ten')")
    rows = doc.rows("SELECT chunk_id FROM my_kb")
    assert len(rows) > 1 and rows[0]["chunk_id"].startswith("1:content:1of")


def test_create_index_on_kb(doc: Doc) -> None:
    """insert_data.mdx: CREATE INDEX ON KNOWLEDGE_BASE my_kb."""
    doc.orders_kb()
    doc.sql("CREATE INDEX ON KNOWLEDGE_BASE my_kb;")  # rebuilds with the default knobs
    assert len(doc.rows("SELECT * FROM my_kb WHERE content = 'color'")) == 3


# ---- alter.mdx -------------------------------------------------------------------------------
def test_alter_embedding_api_key_rotation(doc: Doc) -> None:
    """alter.mdx: embedding_model = {'api_key': 'new-api-key'}; the provider cannot change."""
    doc.orders_kb(embedding=doc.openai())
    doc.sql("ALTER KNOWLEDGE_BASE my_kb USING embedding_model = { 'api_key': 'new-api-key' };")
    before = len(doc.provider.requests)
    doc.rows("SELECT id FROM my_kb WHERE content = 'color'")
    assert doc.provider.requests[before][2]["Authorization"] == "Bearer new-api-key"
    assert "new-api-key" not in json.dumps(doc.rows("DESCRIBE KNOWLEDGE_BASE my_kb"))
    message = doc.error("ALTER KNOWLEDGE_BASE my_kb USING embedding_model = {'provider': 'ollama'}")
    assert "api_key" in message


def test_alter_reranking_model(doc: Doc) -> None:
    """alter.mdx: change the reranking model, or turn it off with `reranking_model = false`."""
    doc.orders_kb()
    doc.sql(f"ALTER KNOWLEDGE_BASE my_kb USING reranking_model = {reranker(doc)};")
    top = doc.rows("SELECT relevance FROM my_kb WHERE content = 'color black' LIMIT 1")[0]
    assert top["relevance"] == 1.0
    doc.sql("ALTER KNOWLEDGE_BASE my_kb USING reranking_model = false;")
    row = doc.rows("SELECT relevance, distance FROM my_kb WHERE content = 'color black' LIMIT 1")[0]
    assert abs(row["relevance"] - 1 / (1 + row["distance"])) < 1e-9


def test_alter_columns_and_id_column(doc: Doc) -> None:
    """alter.mdx: content_columns, metadata_columns, id_column (also `ALTER KNOWLEDGE BASE`)."""
    doc.orders_kb()
    doc.sql("ALTER KNOWLEDGE_BASE my_kb USING metadata_columns = ['product', 'order_id'];")
    doc.sql("ALTER KNOWLEDGE_BASE my_kb USING content_columns = ['product'];")
    doc.sql("ALTER KNOWLEDGE BASE my_kb USING id_column = 'my_id';")
    described = doc.rows("DESCRIBE KNOWLEDGE_BASE my_kb")[0]
    assert json.loads(described["CONTENT_COLUMNS"]) == ["product"]
    assert described["ID_COLUMN"] == "my_id"
    doc.sql("INSERT INTO my_kb (my_id, product) VALUES ('Z9', 'Desk Lamp')")
    assert doc.rows("SELECT chunk_content FROM my_kb WHERE id = 'Z9'") == [{"chunk_content": "Desk Lamp"}]
    assert "storage" in doc.error("ALTER KNOWLEDGE_BASE my_kb USING storage = my_db.tbl")


# ---- evaluate.mdx ----------------------------------------------------------------------------
def _questions(doc: Doc) -> None:
    import pandas as pd

    doc.client.register("kb_test", pd.DataFrame({
        "question": ["color black", "gift wrap", "aluminum finish"], "doc_id": ["A1B", "3XZ", "Q7P"],
        "answer": ["Request color: black", "Gift wrap requested", "Prefer aluminum finish"]}))


def test_evaluate_doc_id(doc: Doc) -> None:
    """evaluate.mdx: version = 'doc_id' over a test table; the documented result columns."""
    doc.orders_kb()
    _questions(doc)
    rows = doc.rows("EVALUATE KNOWLEDGE_BASE my_kb USING test_table = df.kb_test, version = 'doc_id', "
                    "save_to = df.kb_eval_result")
    row = rows[0]
    for column in ("total", "total_found", "retrieved_in_top_10", "cumulative_recall", "avg_query_time",
                   "name", "created_at"):
        assert column in row, column
    assert row["total"] == 3 and row["total_found"] == 3 and row["retrieved_in_top_10"] == 3
    assert json.loads(row["cumulative_recall"])["1"] == 1.0  # every answer is the top hit: recall@1
    assert "0" not in json.loads(row["cumulative_recall"])  # keys are k, from 1
    saved = doc.rows("SELECT total FROM df.kb_eval_result")
    assert saved == [{"total": 3}]


def test_evaluate_generate_data_then_llm_relevancy(doc: Doc) -> None:
    """evaluate.mdx: generate_data (from_sql, count), evaluate = false, then
    version = 'llm_relevancy' with an llm; the documented result columns."""
    doc.orders_kb()
    done = doc.rows("EVALUATE KNOWLEDGE_BASE my_kb USING test_table = df.kb_gen, "
                    "generate_data = {'from_sql': 'SELECT order_id AS id, notes AS content FROM "
                    "sample_data.orders', 'count': 2}, evaluate = false, llm = {'provider': 'kbsql'}")
    assert done[0]["generated_rows"] == 2
    generated = doc.rows("SELECT question, doc_id FROM df.kb_gen")
    assert len(generated) == 2
    llm = reranker(doc)
    rows = doc.rows(f"EVALUATE KNOWLEDGE_BASE my_kb USING test_table = df.kb_gen, "
                    f"version = 'llm_relevancy', llm = {llm}")
    row = rows[0]
    for column in ("avg_relevancy", "avg_relevance_score_by_k", "avg_first_relevant_position", "mean_mrr",
                   "hit_at_k", "bin_precision_at_k", "avg_entropy", "avg_ndcg", "avg_query_time",
                   "name", "created_at"):
        assert column in row, column
    assert row["mean_mrr"] == 1.0  # generated questions are the texts' own words
    doc_id = doc.rows("EVALUATE KNOWLEDGE_BASE my_kb USING test_table = df.kb_gen")[0]
    assert doc_id["total"] == 2 and doc_id["total_found"] == 2


def test_evaluate_errors(doc: Doc) -> None:
    doc.orders_kb()
    assert "test_table" in doc.error("EVALUATE KNOWLEDGE_BASE my_kb USING version = 'doc_id'")
    assert "version" in doc.error("EVALUATE KNOWLEDGE_BASE my_kb USING test_table = df.x, version = 'v9'")
    message = doc.refused("EVALUATE KNOWLEDGE_BASE my_kb USING test_table = sample_data.t, "
                          "generate_data = true, llm = {'provider': 'kbsql'}", "sample_data.t")
    assert "df.t" in message


# ---- hybrid_search.mdx -----------------------------------------------------------------------
def test_hybrid_search_forms(doc: Doc) -> None:
    """hybrid_search.mdx: hybrid_search_alpha = 0.8; hybrid_search = true; alpha with reranking = false."""
    doc.sql(f"CREATE KNOWLEDGE_BASE my_kb USING embedding_model = {HASH}, reranking_model = {reranker(doc)}")
    doc.sql("INSERT INTO my_kb (id, content) VALUES (1, 'Part ACME-213 is a valve'), "
            "(2, 'valves and pumps'), (3, 'the ACME catalogue')")
    for where in ("content = 'ACME-213' AND hybrid_search_alpha = 0.8",
                  "content = 'ACME-213' AND hybrid_search = true",
                  "content = 'ACME-213' AND hybrid_search_alpha = 0.4 AND reranking = false"):
        rows = doc.rows(f"SELECT * FROM my_kb WHERE {where};")
        assert rows[0]["id"] == "1", where


# ---- examples.mdx / overview.mdx -------------------------------------------------------------
def test_examples_orders_flow(doc: Doc) -> None:
    """examples.mdx / overview.mdx: create with a reranker, insert the orders, search with
    metadata and `relevance > 0.5`; `relevance >= 0.2502` keeps the rows at or above it."""
    doc.orders_kb(embedding=doc.openai(), extra=f", reranking_model = {reranker(doc)}")
    rows = doc.rows("SELECT * FROM my_kb WHERE product = 'Wireless Mouse' AND content = 'color' "
                    "AND relevance > 0.5;")
    assert [r["id"] for r in rows] == ["A1B"]
    rows = doc.rows("SELECT * FROM my_kb WHERE content = 'color preference'")
    assert rows[0]["id"] == "A1B"
    rows = doc.rows("SELECT * FROM my_kb WHERE content = 'color' AND relevance >= 0.2502;")
    assert all(r["relevance"] >= 0.2502 for r in rows) and rows[0]["id"] == "A1B"


def test_examples_headlines_batch_insert(doc: Doc) -> None:
    """examples.mdx: INSERT ... USING batch_size = 500, threads = 10; search with LIMIT 20 and
    `relevance >= 0.8 LIMIT 20`."""
    import pandas as pd

    doc.client.register("headlines", pd.DataFrame({
        "headline": [f"investors buy stock {i}" if i % 2 else f"rain falls on town {i}" for i in range(30)],
        "sentiment_labelled": [i % 3 for i in range(30)]}))
    doc.sql(f"CREATE KNOWLEDGE_BASE my_kb USING embedding_model = {HASH}, "
            "metadata_columns = ['sentiment_labelled'], content_columns = ['headline']")
    assert doc.background("INSERT INTO my_kb SELECT * FROM df.headlines USING batch_size = 500, "
                          "threads = 10;")["PROCESSED_ROWS"] == 30
    assert len(doc.rows("SELECT * FROM my_kb WHERE content = 'investors';")) == 10
    assert len(doc.rows("SELECT * FROM my_kb WHERE content = 'investors' LIMIT 20;")) == 20
    rows = doc.rows("SELECT * FROM my_kb WHERE content = 'investors' AND relevance >= 0.8 LIMIT 20;")
    assert rows and all(r["relevance"] >= 0.8 for r in rows)


def test_json_chunking(doc: Doc) -> None:
    """insert_data.mdx "Chunking Data / JSON": type json_chunking with its config keys."""
    doc.sql(f"CREATE KNOWLEDGE_BASE jkb USING embedding_model = {HASH}, preprocessing = "
            '{"type": "json_chunking", "json_chunking_config": {"flatten_nested": true, '
            '"exclude_fields": ["secret"], "metadata_fields": ["author.name", "year"]}}')
    doc.sql("INSERT INTO jkb (id, content) VALUES (1, '[{\"title\": \"Dune\", \"year\": 1965, "
            "\"author\": {\"name\": \"Herbert\"}, \"secret\": \"x\"}, {\"title\": \"Emma\", \"year\": 1815, "
            "\"author\": {\"name\": \"Austen\"}}]')")
    rows = doc.rows("SELECT chunk_id, chunk_content, metadata FROM jkb")
    assert [r["chunk_id"] for r in rows] == ["1:content:1of2:0to43", "1:content:2of2:0to42"]
    assert rows[0]["chunk_content"] == "title: Dune\nyear: 1965\nauthor.name: Herbert"
    assert rows[0]["metadata"]["author.name"] == "Herbert" and rows[0]["metadata"]["year"] == 1965
    assert "secret" not in rows[0]["chunk_content"]
    assert [r["id"] for r in doc.rows("SELECT id FROM jkb WHERE year < 1900")] == ["1"]
    message = doc.error("INSERT INTO jkb (id, content) VALUES (2, 'not json at all')")
    assert "JSON" in message
    assert "bogus" in doc.error(f"CREATE KNOWLEDGE_BASE j2 USING embedding_model = {HASH}, preprocessing = "
                                '{"type": "json_chunking", "json_chunking_config": {"bogus": 1}}')


def test_a_json_chunking_key_is_read_by_name_beside_declared_metadata_columns(doc: Doc) -> None:
    """A `metadata_fields` path filtered by name (`info.category = 'x'`) was Unknown column when
    selected by name in a knowledge base that also declares metadata columns."""
    doc.sql(f"CREATE KNOWLEDGE_BASE jkc USING embedding_model = {HASH}, metadata_columns = ['product'], "
            "preprocessing = {'type': 'json_chunking', 'json_chunking_config': {'metadata_fields': "
            "['info.category']}}")
    doc.sql("INSERT INTO jkc (id, content, product) VALUES ('a', '{\"text\": \"red shoes\", \"info\": "
            "{\"category\": \"wear\"}}', 'shoe')")
    assert doc.rows("SELECT product, `info.category` AS c FROM jkc WHERE `info.category` = 'wear'") == [
        {"product": "shoe", "c": "wear"}]
    searched = doc.rows("SELECT `info.category` AS c FROM jkc WHERE content = 'shoes'")
    assert [r["c"] for r in searched] == ["wear"]


def test_show_columns_and_describe(doc: Doc) -> None:
    """SHOW [FULL] COLUMNS FROM a knowledge base or a table answers MindsDB's shape (its
    command executor's `answer_show_columns`: MySQL type names, FULL's three columns last)
    and names what a SELECT can read (metadata columns too); DESCRIBE keeps the engine's
    types; DESCRIBE KNOWLEDGE_BASE is create.mdx's listing."""
    doc.orders_kb()
    columns = doc.rows("SHOW COLUMNS FROM my_kb")
    assert [c["Field"] for c in columns] == ["id", "chunk_id", "chunk_content", "metadata", "relevance",
                                             "distance", "product"]
    assert list(columns[0]) == ["Field", "Type", "Null", "Key", "Default", "Extra"]
    assert [c["Type"] for c in columns][3:5] == ["json", "double"]
    table = doc.rows("SHOW COLUMNS FROM sample_data.orders")
    assert [(c["Field"], c["Type"], c["Null"]) for c in table] == [
        ("order_id", "text", "YES"), ("product", "text", "YES"), ("notes", "text", "YES")]
    assert doc.rows("SHOW COLUMNS FROM orders FROM sample_data") == table
    assert doc.rows("SHOW COLUMNS FROM orders IN sample_data") == table
    full = doc.rows("SHOW FULL COLUMNS FROM sample_data.orders LIKE 'pro%'")
    assert full == [{"Field": "product", "Type": "text", "Null": "YES", "Key": None, "Default": None,
                     "Extra": None, "Collation": None, "Privileges": "select", "Comment": None}]
    assert [c["Field"] for c in doc.rows("SHOW FIELDS FROM sample_data.orders WHERE Field <> 'notes'")] == [
        "order_id", "product"]
    described = doc.rows("DESCRIBE sample_data.orders")[0]
    assert (described["COLUMN_NAME"], described["DATA_TYPE"]) == ("order_id", "VARCHAR")
    assert doc.rows("DESCRIBE KNOWLEDGE_BASE my_kb")[0]["NAME"] == "my_kb"


def test_a_pgvector_storage_that_cannot_be_reached_is_one_clear_line(doc: Doc) -> None:
    """create.mdx: `CREATE DATABASE my_pgvector WITH ENGINE = 'pgvector'` then
    `storage = my_pgvector.storage_table`. kbsql stores the KB there for real (issue 13; see
    tests/knowledge/test_pgvector_storage.py against a live server); here nothing listens on
    the documented port, so the statement fails in one line and no knowledge base is made."""
    message = doc.error("CREATE DATABASE my_pgvector WITH ENGINE = 'pgvector', PARAMETERS = {"
                        "\"host\": \"127.0.0.1\", \"port\": 9, \"database\": \"postgres\", "
                        "\"user\": \"user\", \"password\": \"password\", \"distance\": \"cosine\"};")
    assert "Cannot connect" in message and "password" not in message.replace("Cannot connect", "")
    doc.error(f"CREATE KNOWLEDGE_BASE my_kb USING embedding_model = {HASH}, "
              "storage = my_pgvector.storage_table")
    assert "my_kb" not in [r["NAME"].lower() for r in doc.rows("SHOW KNOWLEDGE_BASES")]


def test_reading_the_vector_store_is_refused(doc: Doc) -> None:
    """insert_data.mdx "Underlying Vector Store": the store is the engine's own here."""
    doc.orders_kb()
    doc.refused("SELECT id, content, metadata, embeddings FROM my_kb_chromadb.storage_table;", "my_kb")
    storage = doc.rows("DESCRIBE KNOWLEDGE_BASE my_kb")[0]["STORAGE"]
    doc.refused(f"SELECT id, content, metadata, embeddings FROM {storage};", "vector store")


def test_insert_with_generated_ids(doc: Doc) -> None:
    """create.mdx: `INSERT INTO my_kb (SELECT ROW_NUMBER() OVER (ORDER BY order_id) AS id, *
    FROM sample_data.orders)` when the data has no id column of its own."""
    doc.sql(f"CREATE KNOWLEDGE_BASE my_kb USING embedding_model = {HASH}, metadata_columns = ['product'], "
            "content_columns = ['notes']")
    doc.sql("INSERT INTO my_kb (SELECT ROW_NUMBER() OVER (ORDER BY order_id) AS id, * "
            "FROM sample_data.orders);")
    rows = doc.rows("SELECT id, chunk_content FROM my_kb ORDER BY id")
    assert rows == [{"id": "1", "chunk_content": "Gift wrap requested"},
                    {"id": "2", "chunk_content": "Request color: black"},
                    {"id": "3", "chunk_content": "Prefer aluminum finish"}]
