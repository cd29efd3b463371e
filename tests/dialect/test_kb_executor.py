"""MindsDB's executor tests of knowledge bases (tests/unit/executor/test_knowledge_base.py in
mindsdb/mindsdb), the statements of theirs that kbsql answered differently: each test names
the MindsDB test it comes from. Embedded and over HTTP, as the rest of this suite."""

from __future__ import annotations

import json

from tests.dialect.conftest import HASH, Doc


def _inserted_columns_kb(doc: Doc) -> None:
    """test_select_allowed_columns' kb1: no metadata_columns, so each insert's other columns
    become metadata keys (col1 on one row, col2 on another, col4 holding only a null)."""
    doc.sql(f"CREATE KNOWLEDGE_BASE kb1 USING embedding_model = {HASH}")
    doc.sql("INSERT INTO kb1 (id, content, col1) VALUES (1, 'cont1', 'val1')")
    doc.sql("INSERT INTO kb1 (id, content, col2, col4) VALUES (2, 'cont2', 'val2', NULL)")


def test_a_filter_on_a_key_no_chunk_holds_is_an_unknown_column(doc: Doc) -> None:
    """test_select_allowed_columns: `WHERE col3 = 'val2'` on a knowledge base whose rows never
    had col3 raises in MindsDB (its `inserted_metadata`); kbsql answered no rows, as if col3
    were a column that matched nothing (a typo'd column read as an empty answer)."""
    _inserted_columns_kb(doc)
    assert [r["chunk_content"] for r in doc.rows("SELECT * FROM kb1 WHERE col1 = 'val1'")] == ["cont1"]
    assert doc.rows("SELECT * FROM kb1 WHERE col1 = 'not exist'") == []
    assert [r["id"] for r in doc.rows("SELECT * FROM kb1 WHERE col4 IS NULL ORDER BY id")] == ["1", "2"]
    for query in ("SELECT * FROM kb1 WHERE col3 = 'val2'",
                  "SELECT * FROM kb1 WHERE content = 'cont' AND col3 = 'val2'",
                  "SELECT * FROM kb1 WHERE col1 = 'val1' OR col3 = 'val2'",
                  "SELECT count(*) FROM kb1 WHERE col3 = 'val2'",
                  "DELETE FROM kb1 WHERE col3 = 'val2'"):
        assert "Unknown column 'col3'" in doc.error(query), query
    assert len(doc.rows("SELECT * FROM kb1")) == 2  # the DELETE deleted nothing


def test_original_doc_id_is_the_id(doc: Doc) -> None:
    """test_kb_metadata filters by `_original_doc_id` (MindsDB's vector-store name of the
    id column): it reads as `id`, not as a metadata key no chunk has."""
    _inserted_columns_kb(doc)
    assert [r["chunk_content"] for r in doc.rows("SELECT * FROM kb1 WHERE _original_doc_id = 2")] == ["cont2"]
    doc.sql("DELETE FROM kb1 WHERE _original_doc_id = 2")
    assert [r["id"] for r in doc.rows("SELECT * FROM kb1")] == ["1"]


def test_a_metadata_json_operator_in_a_condition_is_the_metadata_column(doc: Doc) -> None:
    """test_kb_metadata: `WHERE metadata->>'product' = 'probook'` filters as `WHERE product =
    'probook'` (MindsDB's KB executor turns `metadata->>'k'` and `metadata->'k'` into column k);
    it was refused. Beside a search or other conditions too, though the parser binds `->>`
    looser than AND and NOT (`content = 'x' AND metadata->>'k' = 'v'` came as
    `((content = 'x' AND metadata) ->> 'k') = 'v'`)."""
    doc.sql(f"CREATE KNOWLEDGE_BASE kb_review USING embedding_model = {HASH}")
    doc.sql("INSERT INTO kb_review (id, content, product, url) VALUES "
            "(1, 'great laptop, long battery', 'probook', 'http://x'), (2, 'bad phone', 'phone', 'http://y')")
    picked = "SELECT metadata->>'product' AS product, metadata->>'url' AS url FROM kb_review"
    assert doc.rows(f"{picked} WHERE metadata->>'product' = 'probook'") == \
        [{"product": "probook", "url": "http://x"}]
    assert doc.rows(f"{picked} WHERE metadata->'product' = 'phone'") == [{"product": "phone", "url": "http://y"}]
    ids = "SELECT id FROM kb_review"
    assert doc.rows(f"{ids} WHERE content = 'laptop' AND metadata->>'product' = 'probook'") == [{"id": "1"}]
    assert doc.rows(f"{ids} WHERE content = 'laptop' AND metadata->>'product' = 'phone'") == [{"id": "2"}]
    assert doc.rows(f"{ids} WHERE id = '1' AND NOT metadata->>'product' = 'probook'") == []
    assert doc.rows(f"{ids} WHERE NOT metadata->>'product' = 'probook' AND id = '2'") == [{"id": "2"}]
    assert doc.rows(f"{ids} WHERE metadata->>'product' LIKE 'pro%' OR metadata->>'url' = 'http://y' "
                    "ORDER BY id") == [{"id": "1"}, {"id": "2"}]
    assert "Unknown column 'color'" in doc.error(f"{ids} WHERE metadata->>'color' = 'red'")
    doc.sql("DELETE FROM kb_review WHERE metadata->>'product' = 'phone'")
    assert doc.rows(ids) == [{"id": "1"}]


def test_a_metadata_key_is_a_column_where_a_query_runs_over_a_knowledge_base(doc: Doc) -> None:
    """MindsDB's knowledge-base rows carry their metadata columns, so `JOIN ... ON t.x =
    k.product` and `GROUP BY product` read them; here they failed with DuckDB's binder error
    ('Values list "k" does not have a column named "product"'). A key is a column typed by its
    values (ORDER BY a number key sorts numbers); a key no chunk holds is the Unknown column;
    `k.metadata->>'key'` in a join's WHERE filters the knowledge base."""
    doc.sql(f"CREATE KNOWLEDGE_BASE kb_items USING embedding_model = {HASH}")
    doc.sql("INSERT INTO kb_items (id, content, product, stock) VALUES "
            "(1, 'a mouse that clicks quietly', 'Wireless Mouse', 120), "
            "(2, 'a speaker for the garden', 'Bluetooth Speaker', 7), (3, 'a plain notebook', 'Notebook', 9)")
    rows = doc.rows("SELECT o.order_id, k.product, k.stock FROM sample_data.orders o "
                    "JOIN kb_items k ON k.product = o.product ORDER BY k.stock")
    assert rows == [{"order_id": "3XZ", "product": "Bluetooth Speaker", "stock": 7},
                    {"order_id": "A1B", "product": "Wireless Mouse", "stock": 120}]
    rows = doc.rows("SELECT o.order_id FROM sample_data.orders o JOIN kb_items k ON k.product = o.product "
                    "WHERE k.metadata->>'product' = 'Wireless Mouse'")
    assert rows == [{"order_id": "A1B"}]
    assert doc.rows("SELECT product, count(*) AS n FROM kb_items GROUP BY product HAVING count(*) = 1 "
                    "ORDER BY product LIMIT 1") == [{"product": "Bluetooth Speaker", "n": 1}]
    message = doc.error("SELECT k.id FROM sample_data.orders o JOIN kb_items k ON k.colour = o.notes")
    assert "Unknown column 'colour'" in message


def test_a_star_with_an_alias_keeps_every_column_s_name(doc: Doc) -> None:
    """test_autobatch inserts `SELECT * content FROM files.ral` into a knowledge base with
    id_column 'ral' and content_columns ['english']: MindsDB reads every column under its
    own name; DuckDB named each of them `content`, so the insert found no `english`."""
    assert doc.columns("SELECT * content FROM sample_data.orders") == ["order_id", "product", "notes"]
    assert doc.columns("SELECT o.* AS x FROM sample_data.orders o") == ["order_id", "product", "notes"]
    doc.sql(f"CREATE KNOWLEDGE_BASE kb_star USING embedding_model = {HASH}, id_column = 'order_id', "
            "content_columns = ['notes']")
    doc.sql("INSERT INTO kb_star SELECT * content FROM sample_data.orders")
    rows = doc.rows("SELECT id, chunk_content, product FROM kb_star WHERE id = 'A1B'")
    assert rows == [{"id": "A1B", "chunk_content": "Request color: black", "product": "Wireless Mouse"}]


def test_altering_the_reranker_s_api_key_keeps_its_model(doc: Doc) -> None:
    """test_alter_kb: `ALTER ... USING reranking_model = {'api_key': 'rerank-key-2'}` rotates the
    key of the reranker in use (MindsDB updates the stored model with what is given, unless a
    new provider replaces it); kbsql refused it as "'reranking_model.provider' is required"."""
    rerank = (f'{{"provider": "openai", "model_name": "gpt-3", "api_key": "rerank-key-1", '
              f'"base_url": "{doc.provider.url}/v1"}}')
    doc.orders_kb(extra=f", reranking_model = {rerank}")
    doc.sql("ALTER KNOWLEDGE_BASE my_kb USING reranking_model = {'api_key': 'rerank-key-2'}")
    described = doc.rows("DESCRIBE KNOWLEDGE_BASE my_kb")[0]["RERANKING_MODEL"]
    assert '"model_name": "gpt-3"' in described and "rerank-key" not in described
    before = len(doc.provider.requests)
    assert doc.rows("SELECT id FROM my_kb WHERE content = 'color black' LIMIT 1") == [{"id": "A1B"}]
    chats = [r for r in doc.provider.requests[before:] if r[0] == "/v1/chat/completions"]
    assert chats and {r[1]["model"] for r in chats} == {"gpt-3"}
    assert {r[2]["Authorization"] for r in chats} == {"Bearer rerank-key-2"}
    # another provider replaces the model: nothing of the old one (its key) is kept
    doc.sql(f"ALTER KNOWLEDGE_BASE my_kb USING reranking_model = {{'provider': 'rerank', "
            f"'model_name': 'bge', 'base_url': '{doc.provider.url}'}}")
    described = doc.rows("DESCRIBE KNOWLEDGE_BASE my_kb")[0]["RERANKING_MODEL"]
    assert '"provider": "rerank"' in described and "api_key" not in described
    doc.sql("ALTER KNOWLEDGE_BASE my_kb USING reranking_model = false")
    assert doc.rows("DESCRIBE KNOWLEDGE_BASE my_kb")[0]["RERANKING_MODEL"] is None


def test_content_is_null_matches_no_chunk_and_is_not_null_every_chunk(doc: Doc) -> None:
    """test_kb_algebra writes `content = 'green' ... AND content IS NOT NULL` and `OR (content
    IS NULL)`: MindsDB answers IS NULL with no rows and IS NOT NULL with every row (a chunk's
    text is never null); kbsql refused both ("content admits =, LIKE, IN ...")."""
    doc.orders_kb()
    search = [r["id"] for r in doc.rows("SELECT id FROM my_kb WHERE content = 'color black'")]
    assert [r["id"] for r in doc.rows(
        "SELECT id FROM my_kb WHERE content = 'color black' AND content IS NOT NULL")] == search
    assert [r["id"] for r in doc.rows(
        "SELECT id FROM my_kb WHERE (content = 'color black' AND product = 'Wireless Mouse') "
        "OR (content IS NULL)")] == ["A1B"]
    assert doc.rows("SELECT id FROM my_kb WHERE content IS NULL") == []
    assert sorted(r["id"] for r in doc.rows("SELECT id FROM my_kb WHERE content IS NOT NULL")) == \
        ["3XZ", "A1B", "Q7P"]
    assert doc.rows("SELECT count(*) AS n FROM my_kb WHERE NOT content IS NOT NULL") == [{"n": 0}]


def test_information_schema_agents_params_hold_the_prompt_and_data(doc: Doc) -> None:
    """test_agent_with_default_llm_params reads `json.loads(PARAMS)["prompt_template"]` from
    information_schema.agents: MindsDB's PARAMS is everything the agent was given but its
    model; kbsql's held only timeout and mode (the prompt read as null there)."""
    doc.sql(f"CREATE KNOWLEDGE_BASE kb_a USING embedding_model = {HASH}")
    doc.sql("CREATE AGENT a1 USING model = {'provider': 'kbsql', 'model_name': 'retrieval'}, "
            "prompt_template = 'Answer the user input in a helpful way', "
            f"data = {{'knowledge_bases': ['{doc.project}.kb_a']}}, timeout = 10")
    doc.sql("CREATE AGENT a2 USING model = {'provider': 'kbsql', 'model_name': 'retrieval'}")
    rows = {r["NAME"]: r for r in doc.rows(
        f"SELECT * FROM information_schema.agents WHERE PROJECT = '{doc.project}'")}
    params = json.loads(rows["a1"]["PARAMS"])
    assert params["prompt_template"] == "Answer the user input in a helpful way"
    assert params["data"]["knowledge_bases"] == [f"{doc.project}.kb_a"] and params["timeout"] == 10
    assert rows["a1"]["PROMPT_TEMPLATE"] == "Answer the user input in a helpful way"
    assert json.loads(rows["a2"]["PARAMS"]) == {}  # nothing given: nothing shown (as MindsDB)


def test_an_evaluate_target_outside_df_is_refused_before_any_model_call(doc: Doc) -> None:
    """test_evaluate writes `test_table = files.eval_test`: kbsql saves test data and results
    as `df.<name>` only, and said so after the model had written every question (and, for
    save_to, after the whole evaluation); now before the first call."""
    doc.orders_kb()
    llm = doc.openai("gpt-4")
    before = len(doc.provider.requests)
    message = doc.refused(f"EVALUATE KNOWLEDGE_BASE my_kb USING test_table = files.eval_test, "
                          f"generate_data = {{'count': 3}}, llm = {llm}", "files.eval_test")
    assert "df.eval_test" in message
    message = doc.refused(f"EVALUATE KNOWLEDGE_BASE my_kb USING test_table = df.eval_test, "
                          f"generate_data = {{'count': 3}}, llm = {llm}, save_to = files.eval_res",
                          "files.eval_res")
    assert doc.provider.requests[before:] == []
