"""docs/mindsdb_sql/knowledge_bases/query.mdx (mindsdb/mindsdb): every example of the page.

The page's knowledge base `my_kb` holds three orders (notes as content, product as metadata,
order_id as id); `movies_kb` of its Examples section is built from a few movies.
"""

from __future__ import annotations

from tests.dialect.conftest import HASH, Doc

PAGE = "docs/mindsdb_sql/knowledge_bases/query.mdx"
MOVIES = [
    ("m1", "A bank security expert plots a heist robbery of the vault", "Crime", 7.5,
     "Crime, Drama, Thriller"),
    ("m2", "Aliens invade a distant planet in space", "Sci-Fi", 8.1, "Action, Sci-Fi"),
    ("m3", "A detective investigation of a mystery murder", "Mystery", 7.8, "Crime, Mystery, Thriller"),
    ("m4", "A romance love relationship in Paris", "Romance", 7.2, "Drama, Romance"),
    ("m5", "Car chase driving speed race through the city", "Action", 6.9, "Action, Comedy"),
    ("m6", "Funny comedy with humor to laugh about", "Comedy", 7.6, "Comedy"),
    ("m7", "Historical period drama of the past century era", "Drama", 8.0, "Drama, History"),
    ("m8", "War battle of soldiers and military in a past century", "War", 7.9, "Drama, War"),
    ("m9", "An adventure journey quest for treasure", "Adventure", 7.1, "Adventure, Family"),
]


def movies(doc: Doc) -> None:
    doc.sql(f"CREATE KNOWLEDGE_BASE movies_kb USING embedding_model = {HASH}, "
            "metadata_columns = ['genre', 'rating', 'expanded_genres'], id_column = 'movie_id'")
    values = ", ".join(f"('{i}', '{c}', '{g}', {r}, '{e}')" for i, c, g, r, e in MOVIES)
    doc.sql(f"INSERT INTO movies_kb (movie_id, content, genre, rating, expanded_genres) VALUES {values}")


def ids(rows: list[dict]) -> list[str]:
    return [r["id"] for r in rows]


# ---- SELECT FROM KB syntax ---------------------------------------------------------------
def test_select_star_returns_all_chunks_with_documented_columns(doc: Doc) -> None:
    """query.mdx `SELECT * FROM my_kb;` (contract column order)."""
    doc.orders_kb()
    rows = doc.rows("SELECT * FROM my_kb;")
    assert sorted(ids(rows)) == ["3XZ", "A1B", "Q7P"]
    assert list(rows[0]) == ["id", "chunk_id", "chunk_content", "metadata", "relevance", "distance"]
    a1b = next(r for r in rows if r["id"] == "A1B")
    assert a1b["chunk_content"] == "Request color: black"
    assert a1b["metadata"]["product"] == "Wireless Mouse"
    assert a1b["chunk_id"].startswith("A1B:notes:1of1:0to20")
    assert a1b["relevance"] is None and a1b["distance"] is None


def test_semantic_search_content_equals(doc: Doc) -> None:
    """query.mdx `SELECT * FROM my_kb WHERE content = 'color'`."""
    doc.orders_kb()
    rows = doc.rows("SELECT * FROM my_kb WHERE content = 'color'")
    assert ids(rows)[0] == "A1B" and len(rows) == 3
    assert all(0 < r["relevance"] <= 1 for r in rows)
    relevances = [r["relevance"] for r in rows]
    assert relevances == sorted(relevances, reverse=True)
    assert all(abs(r["relevance"] - 1 / (1 + r["distance"])) < 1e-9 for r in rows)


def test_chunk_content_like_is_a_pattern_filter(doc: Doc) -> None:
    """query.mdx `WHERE chunk_content LIKE '%color%'`: the doc output shows only the row with
    'color' on top; a pattern on chunk_content keeps the rows whose text matches."""
    doc.orders_kb()
    rows = doc.rows("SELECT * FROM my_kb WHERE chunk_content LIKE '%color%'")
    assert ids(rows)[0] == "A1B"


def test_relevance_and_limit_together(doc: Doc) -> None:
    """query.mdx Tip: `content = 'color' AND relevance >= 0.5 LIMIT 20`."""
    doc.orders_kb()
    rows = doc.rows("SELECT * FROM my_kb WHERE content = 'color' AND relevance >= 0.5 LIMIT 20;")
    assert all(r["relevance"] >= 0.5 for r in rows)
    everything = doc.rows("SELECT * FROM my_kb WHERE content = 'color' LIMIT 20")
    assert ids(rows) == [r["id"] for r in everything if r["relevance"] >= 0.5]


def test_relevance_filter(doc: Doc) -> None:
    """query.mdx `content = 'color' AND relevance >= 0.5`: only rows at or above the bound."""
    doc.orders_kb()
    low = doc.rows("SELECT * FROM my_kb WHERE content = 'color' AND relevance >= 0")
    cut = low[0]["relevance"]
    rows = doc.rows(f"SELECT * FROM my_kb WHERE content = 'color' AND relevance >= {cut};")
    assert ids(rows) == ["A1B"] and len(low) == 3


def test_limit_rows(doc: Doc) -> None:
    """query.mdx `content = 'color' LIMIT 2`."""
    doc.orders_kb()
    rows = doc.rows("SELECT * FROM my_kb WHERE content = 'color' LIMIT 2;")
    assert len(rows) == 2 and rows[0]["id"] == "A1B"


def test_default_limit_is_ten(doc: Doc) -> None:
    """query.mdx Note: LIMIT defaults to 10 for a search."""
    doc.sql(f"CREATE KNOWLEDGE_BASE big USING embedding_model = {HASH}")
    values = ", ".join(f"({i}, 'note number {i}')" for i in range(15))
    doc.sql(f"INSERT INTO big (id, content) VALUES {values}")
    assert len(doc.rows("SELECT * FROM big WHERE content = 'note'")) == 10
    assert len(doc.rows("SELECT * FROM big")) == 15  # a plain read returns every chunk


def test_metadata_filter(doc: Doc) -> None:
    """query.mdx `WHERE product = 'Wireless Mouse'`: relevance and distance are null."""
    doc.orders_kb()
    rows = doc.rows("SELECT * FROM my_kb WHERE product = 'Wireless Mouse';")
    assert ids(rows) == ["A1B"]
    assert rows[0]["relevance"] is None and rows[0]["distance"] is None


def test_metadata_and_content(doc: Doc) -> None:
    """query.mdx `product = 'Wireless Mouse' AND content = 'color' AND relevance >= 0.5`."""
    doc.orders_kb()
    rows = doc.rows("SELECT * FROM my_kb WHERE product = 'Wireless Mouse' AND content = 'color' "
                    "AND relevance >= 0.5;")
    assert ids(rows) == ["A1B"] and rows[0]["relevance"] >= 0.5


def test_join_with_a_table(doc: Doc) -> None:
    """query.mdx JOIN syntax: orders joined with the KB on id, with KB search terms."""
    doc.orders_kb()
    rows = doc.rows("SELECT t.order_id, t.product, t.notes, kb.chunk_content, kb.relevance "
                    "FROM sample_data.orders AS t JOIN my_kb AS kb ON t.order_id = kb.id "
                    "WHERE t.order_id = 'A1B' AND kb.content = 'color' AND kb.product = 'Wireless Mouse';")
    assert len(rows) == 1
    row = rows[0]
    assert (row["order_id"], row["product"], row["notes"], row["chunk_content"]) == \
        ("A1B", "Wireless Mouse", "Request color: black", "Request color: black")
    assert 0 < row["relevance"] <= 1


# ---- Supported filtering operators (accordion) -----------------------------------------------
def test_content_like_is_semantic_search(doc: Doc) -> None:
    """query.mdx: `content LIKE 'xxx'` is a standard vector search, like `content = 'xxx'`."""
    doc.orders_kb()
    assert doc.rows("SELECT id, relevance FROM my_kb WHERE content LIKE 'color'") == \
        doc.rows("SELECT id, relevance FROM my_kb WHERE content = 'color'")


def test_id_exclusion(doc: Doc) -> None:
    """query.mdx: exclusions `id != xxx`, `id <> xxx`."""
    doc.orders_kb()
    for op in ("!=", "<>"):
        rows = doc.rows(f"SELECT * FROM my_kb WHERE content = 'color' AND id {op} 'A1B'")
        assert sorted(ids(rows)) == ["3XZ", "Q7P"]


def test_content_not_like_excludes_the_matches_of_a_search(doc: Doc) -> None:
    """query.mdx: `content NOT LIKE 'zzz'` excludes what a search for 'zzz' finds."""
    doc.orders_kb()
    rows = doc.rows("SELECT * FROM my_kb WHERE content = 'requested' "
                    "AND content NOT LIKE 'Gift wrap requested'")
    assert "3XZ" not in ids(rows)
    assert ids(rows)  # the other orders stay


def test_id_not_in_subquery(doc: Doc) -> None:
    """query.mdx: `id NOT IN (SELECT DISTINCT id FROM my_kb WHERE content = 'xxx')`."""
    doc.orders_kb()
    rows = doc.rows("SELECT * FROM my_kb WHERE content = 'color' AND id NOT IN "
                    "(SELECT DISTINCT id FROM my_kb WHERE content = 'color' LIMIT 1)")
    assert sorted(ids(rows)) == ["3XZ", "Q7P"]


def test_content_in_is_a_union_of_searches(doc: Doc) -> None:
    """query.mdx: `content IN ('xxx', 'yyy')` equals `content = 'xxx' OR content = 'yyy'`."""
    doc.orders_kb()
    in_rows = doc.rows("SELECT id FROM my_kb WHERE content IN ('color black', 'gift wrap') LIMIT 1")
    or_rows = doc.rows("SELECT id FROM my_kb WHERE content = 'color black' OR content = 'gift wrap' LIMIT 1")
    assert sorted(ids(in_rows)) == sorted(ids(or_rows))
    # each search keeps its own best row: both orders are in the union
    union = doc.rows("SELECT id FROM my_kb WHERE (content = 'color black' OR content = 'gift wrap') "
                     "AND relevance >= 0.6")
    assert {"A1B", "3XZ"} <= set(ids(union))


def test_content_not_in(doc: Doc) -> None:
    """query.mdx: `content NOT IN ('zzz', 'aaa')`."""
    doc.orders_kb()
    rows = doc.rows("SELECT id FROM my_kb WHERE content = 'requested' AND content NOT IN "
                    "('Gift wrap requested', 'Request color: black')")
    assert ids(rows) == ["Q7P"]


def test_content_and_content_is_an_intersection(doc: Doc) -> None:
    """query.mdx: `content = 'xxx' AND content = 'yyy'` is the intersection of both searches."""
    doc.orders_kb()
    rows = doc.rows("SELECT id FROM my_kb WHERE content = 'color' AND content = 'black'")
    one = set(ids(doc.rows("SELECT id FROM my_kb WHERE content = 'color'")))
    two = set(ids(doc.rows("SELECT id FROM my_kb WHERE content = 'black'")))
    assert set(ids(rows)) == one & two


def test_metadata_operators(doc: Doc) -> None:
    """query.mdx metadata accordion: =, <>, !=, ranges, BETWEEN, LIKE, NOT LIKE, IN, NOT IN,
    AND, OR, NOT."""
    movies(doc)
    cases = {
        "genre = 'Crime'": {"m1"},
        "genre <> 'Crime' AND rating > 7.9": {"m2", "m7"},
        "rating BETWEEN 7.5 AND 7.8": {"m1", "m3", "m6"},
        "expanded_genres NOT LIKE '%Drama%' AND rating >= 7.6": {"m2", "m3", "m6"},
        "genre IN ('War', 'Comedy')": {"m6", "m8"},
        "genre NOT IN ('War', 'Comedy', 'Drama', 'Crime', 'Mystery')": {"m2", "m4", "m5", "m9"},
        "genre = 'War' OR genre = 'Comedy'": {"m6", "m8"},
        "NOT (genre = 'War' OR rating < 7.8)": {"m2", "m3", "m7"},
        "(genre = 'War' OR genre = 'Drama') AND NOT rating > 7.95": {"m8"},
    }
    for condition, expected in cases.items():
        got = set(ids(doc.rows(f"SELECT id FROM movies_kb WHERE {condition}")))
        assert got == expected, condition


# ---- Examples: movies_kb ---------------------------------------------------------------------
def test_example_heist_without_romance(doc: Doc) -> None:
    """query.mdx example 1: semantic LIKE plus !=, NOT LIKE and > on metadata."""
    movies(doc)
    rows = doc.rows("SELECT * FROM movies_kb WHERE content LIKE 'heist bank robbery space alien planet' "
                    "AND genre != 'Romance' AND expanded_genres NOT LIKE '%Romance%' AND rating > 7.0;")
    assert set(ids(rows)[:2]) == {"m1", "m2"}
    assert "m4" not in ids(rows) and "m5" not in ids(rows)


def test_example_action_comedies(doc: Doc) -> None:
    """query.mdx example 2."""
    movies(doc)
    rows = doc.rows("SELECT * FROM movies_kb WHERE content LIKE 'car chase driving speed race' "
                    "AND expanded_genres LIKE '%Action%' AND expanded_genres LIKE '%Comedy%' "
                    "AND rating > 6.5;")
    assert ids(rows) == ["m5"]


def test_example_historical_without_war(doc: Doc) -> None:
    """query.mdx example 3: two `content NOT LIKE` exclusions."""
    movies(doc)
    rows = doc.rows("SELECT * FROM movies_kb WHERE content LIKE 'historical period past century era' "
                    "AND content NOT LIKE 'war battle soldier military' "
                    "AND content NOT LIKE 'fight combat weapon' "
                    "AND expanded_genres LIKE '%Drama%' AND rating > 3.5;")
    assert ids(rows)[0] == "m7" and "m8" not in ids(rows)


def test_example_nested_or(doc: Doc) -> None:
    """query.mdx example 4: OR of two (content AND (metadata OR metadata)) branches."""
    movies(doc)
    rows = doc.rows("SELECT * FROM movies_kb WHERE (content LIKE 'detective mystery investigation' "
                    "AND (genre = 'Mystery' OR expanded_genres LIKE '%Thriller%')) "
                    "OR (content LIKE 'romance love relationship' AND (genre = 'Romance' OR "
                    "expanded_genres LIKE '%Romance%')) AND rating > 7.0;")
    assert set(ids(rows)) == {"m1", "m3", "m4"}
    assert ids(rows)[0] in ("m3", "m4")


def test_example_not_in_genres(doc: Doc) -> None:
    """query.mdx example 5: `genre NOT IN (...)`."""
    movies(doc)
    rows = doc.rows("SELECT * FROM movies_kb WHERE content LIKE 'adventure journey quest treasure' "
                    "AND genre NOT IN ('Horror', 'Romance', 'Family') AND rating > 6.5;")
    assert ids(rows)[0] == "m9" and "m4" not in ids(rows)


def test_example_between(doc: Doc) -> None:
    """query.mdx example 6: `rating BETWEEN 7.0 AND 9.0`."""
    movies(doc)
    rows = doc.rows("SELECT * FROM movies_kb WHERE content LIKE 'comedy funny humor laugh' "
                    "AND rating BETWEEN 7.0 AND 9.0 AND expanded_genres LIKE '%Comedy%';")
    assert ids(rows) == ["m6"]


def test_example_union(doc: Doc) -> None:
    """query.mdx example 7: UNION of three searches."""
    movies(doc)
    rows = doc.rows("SELECT * FROM movies_kb WHERE content LIKE 'detective investigation mystery' "
                    "AND rating > 7.0 UNION "
                    "SELECT * FROM movies_kb WHERE content LIKE 'heist robbery theft steal' "
                    "AND rating > 7.0 UNION "
                    "SELECT * FROM movies_kb WHERE content LIKE 'spy secret agent undercover' "
                    "AND rating > 7.0;")
    assert {"m1", "m3"} <= set(ids(rows))
    assert "m5" not in ids(rows)  # rated 6.9: every branch keeps rating > 7.0 only
    assert all(isinstance(r["metadata"], dict) for r in rows)  # an object, as the contract says


# ---- Reading a KB like a table (issue 12: never a silent wrong result) ----------------------
def test_count_and_aggregates(doc: Doc) -> None:
    movies(doc)
    assert doc.rows("SELECT count(*) AS n FROM movies_kb") == [{"n": 9}]
    rows = doc.rows("SELECT genre, count(*) AS n, max(rating) AS best FROM movies_kb "
                    "WHERE rating > 7.5 GROUP BY genre ORDER BY genre")
    assert [r["genre"] for r in rows] == ["Comedy", "Drama", "Mystery", "Sci-Fi", "War"]
    assert all(r["n"] == 1 for r in rows)


def test_count_of_a_search_is_not_capped(doc: Doc) -> None:
    """A search inside an aggregate sees every matching row, not the default 10."""
    doc.sql(f"CREATE KNOWLEDGE_BASE big USING embedding_model = {HASH}")
    values = ", ".join(f"({i}, 'note number {i}')" for i in range(15))
    doc.sql(f"INSERT INTO big (id, content) VALUES {values}")
    assert doc.rows("SELECT count(*) AS n FROM big WHERE content = 'note' AND relevance >= 0") == [{"n": 15}]


def test_order_by_on_a_kb_and_a_search(doc: Doc) -> None:
    movies(doc)
    rows = doc.rows("SELECT id, rating FROM movies_kb ORDER BY rating DESC LIMIT 3")
    assert ids(rows) == ["m2", "m7", "m8"]
    rows = doc.rows("SELECT id, rating FROM movies_kb WHERE content = 'past century' ORDER BY rating LIMIT 2")
    assert [r["rating"] for r in rows] == sorted(r["rating"] for r in rows)


def test_metadata_columns_by_name_and_case_insensitive(doc: Doc) -> None:
    movies(doc)
    rows = doc.rows("SELECT ID, Genre, rating FROM MOVIES_KB WHERE GENRE = 'Crime'")
    assert len(rows) == 1
    assert list(rows[0].values()) == ["m1", "Crime", 7.5]


def test_unknown_column_is_an_error(doc: Doc) -> None:
    movies(doc)
    message = doc.error("SELECT id, no_such_column FROM movies_kb")
    assert "no_such_column" in message
    message = doc.error("SELECT count(no_such_column) FROM movies_kb")
    assert "no_such_column" in message


def test_join_with_search_without_limit_is_not_capped(doc: Doc) -> None:
    """A search joined with a table must not silently lose rows to the default limit."""
    doc.sql(f"CREATE KNOWLEDGE_BASE big USING embedding_model = {HASH}")
    values = ", ".join(f"({i}, 'note number {i}')" for i in range(15))
    doc.sql(f"INSERT INTO big (id, content) VALUES {values}")
    rows = doc.rows("SELECT k.id FROM big AS k JOIN big AS j ON k.id = j.id "
                    "WHERE k.content = 'note' AND k.relevance >= 0")
    assert len(rows) == 15


def test_names_are_case_insensitive(doc: Doc) -> None:
    """Knowledge base, project and column names resolve case-insensitively as in the reference."""
    doc.orders_kb()
    rows = doc.rows(f"SELECT ID, Chunk_Content FROM {doc.project.upper()}.MY_KB "
                    "WHERE PRODUCT = 'Wireless Mouse'")
    assert rows == [{"ID": "A1B", "Chunk_Content": "Request color: black"}]
