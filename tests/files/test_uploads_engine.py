"""Uploaded files as MindsDB's `files` database, in the engine: each format MindsDB's file
handler reads becomes `files.<name>` with the rows it reads; the table works in SELECT,
JOIN, `INSERT INTO kb SELECT`, SHOW TABLES, DROP/CREATE TABLE, and stays apart from the
registered DataFrames (`df.<name>`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kbsql.engine import Engine
from kbsql.interface.errors import BadRequest, Conflict, NotFound
from tests.files import makers

HASH = '{"provider": "kbsql", "model_name": "hash-64"}'


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    eng = Engine(tmp_path / "data")
    yield eng
    eng.close()


def rows(engine: Engine, query: str) -> list[dict[str, Any]]:
    result = engine.query(query)
    assert result.type == "table", getattr(result, "error_message", result)
    return [dict(zip(result.column_names, r, strict=True)) for r in result.to_json()["data"]]


def error(engine: Engine, query: str) -> str:
    result = engine.query(query)
    assert result.type == "error", result
    assert "\n" not in result.error_message
    return result.error_message


@pytest.mark.parametrize("filename,raw", [
    ("orders.csv", makers.csv_bytes()), ("orders.tsv", makers.csv_bytes("\t")),
    ("orders.json", makers.json_bytes()), ("orders.parquet", makers.parquet_bytes()),
    ("orders.xlsx", makers.xlsx_bytes()), ("orders.zip", makers.zipped("orders.csv", makers.csv_bytes())),
    # no extension: the content decides (MindsDB's FormatDetector.get_format_by_content)
    ("orders", makers.csv_bytes()), ("orders", makers.parquet_bytes()), ("orders", makers.json_bytes()),
    ("orders", makers.xlsx_bytes()),
])
def test_each_table_format_becomes_the_same_files_table(engine: Engine, filename: str, raw: bytes) -> None:
    meta = engine.upload_file("orders", raw, filename)
    assert meta == {"name": "orders", "row_count": 3, "columns": ["order_id", "product", "notes"]}
    assert rows(engine, "SELECT * FROM files.orders ORDER BY order_id") == \
        sorted(makers.ROWS, key=lambda r: r["order_id"])
    assert engine.list_files() == [meta]


def test_text_becomes_chunks_of_at_most_500_characters_with_metadata(engine: Engine) -> None:
    text = makers.text(8)
    engine.upload_file("notes", text.encode(), "notes.txt")
    got = rows(engine, "SELECT content, metadata FROM files.notes")
    assert len(got) >= 2 and all(0 < len(r["content"]) <= 500 for r in got)
    assert all(r["metadata"] == {"source_file": "notes.txt", "file_format": "txt"} for r in got)
    assert all(r["content"] in text for r in got)  # pieces of the text, in order, none lost
    assert "Paragraph 0." in got[0]["content"] and "Paragraph 7." in got[-1]["content"]


def test_pdf_text_of_every_page_becomes_rows(engine: Engine) -> None:
    raw = makers.pdf_bytes([["Refunds take five business days.", "Exchanges are free."],
                            ["Gift wrap is offered at checkout."]])
    engine.upload_file("policy", raw, "policy.pdf")
    got = rows(engine, "SELECT content, metadata FROM files.policy")
    text = " ".join(r["content"] for r in got)
    assert "Refunds take five business days." in text and "Gift wrap is offered at checkout." in text
    assert got[0]["metadata"] == {"source_file": "policy.pdf", "file_format": "pdf"}


def test_a_workbook_of_several_sheets_lists_them_and_reads_each(engine: Engine) -> None:
    stock = pd.DataFrame({"sku": ["a", "b"], "n": [1, 2]})
    raw = makers.xlsx_bytes({"orders": makers.frame(), "stock": stock})
    meta = engine.upload_file("book", raw, "book.xlsx")
    assert meta["columns"] == ["Tables"] and meta["row_count"] == 2
    assert rows(engine, "SELECT * FROM files.book") == [{"Tables": "orders"}, {"Tables": "stock"}]
    assert rows(engine, "SELECT sum(n) AS n FROM files.book.stock") == [{"n": 3}]
    assert len(rows(engine, "SELECT * FROM files.book.orders")) == 3
    assert "not found" in error(engine, "SELECT * FROM files.book.nope")


@pytest.mark.parametrize("filename,raw,message", [
    ("a.xls", b"\xd0\xcf\x11\xe0 old excel", "Not supported format: xls"),
    ("a.zip", makers.zipped("a.csv", makers.csv_bytes(), {"b.csv": makers.csv_bytes()}),
     "Archive must contain only one data file."),
    ("a.csv", b"a,a \n1,2\n", "Each column should have a unique and non-empty name."),
    ("a.json", b"{not json", "not valid JSON"),
    ("a.pdf", b"%PDF-1.4 broken", "PDF"),
    ("a.xlsx", b"PK\x03\x04 not a workbook", "xlsx"),
    ("noextension", b"\x00\x01\x02\x03", "Unable to detect format"),
])
def test_a_file_that_cannot_be_read_is_one_line_and_stores_nothing(engine: Engine, filename: str,
                                                                    raw: bytes, message: str) -> None:
    with pytest.raises(BadRequest) as caught:
        engine.upload_file("bad", raw, filename)
    assert caught.value.title == "Error" and message in caught.value.detail
    assert "\n" not in caught.value.detail
    assert engine.list_files() == [] and "not found" in error(engine, "SELECT * FROM files.bad")


def test_files_in_sql_show_join_insert_into_kb_drop_and_create(engine: Engine) -> None:
    engine.upload_file("orders", makers.csv_bytes(), "orders.csv")
    engine.register_dataframe("stock", pd.DataFrame({"product": ["Wireless Mouse"], "n": [7]}))
    assert ["files"] == [r["Database"] for r in rows(engine, "SHOW DATABASES") if r["Database"] == "files"]
    assert rows(engine, "SHOW TABLES FROM files") == [{"Tables_in_files": "orders"}]
    joined = "SELECT o.order_id, s.n FROM files.orders o JOIN df.stock s ON o.product = s.product"
    assert rows(engine, joined) == [{"order_id": "A1B", "n": 7}]
    engine.query(f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {HASH}, content_columns = ['notes'], "
                 "id_column = 'order_id'")
    result = engine.query("INSERT INTO kb SELECT order_id, product, notes FROM files.orders")
    assert result.type == "ok" and result.affected_rows == 3
    assert rows(engine, "SELECT count(*) AS n FROM kb") == [{"n": 3}]
    # CREATE TABLE files.x (SELECT ...), a name in use, OR REPLACE, INSERT appends
    assert engine.query("CREATE TABLE files.cheap (SELECT order_id FROM files.orders WHERE "
                        "product LIKE '%Mouse%')").type == "ok"
    assert error(engine, "CREATE TABLE files.cheap (SELECT 1 AS x)") == "Table 'cheap' already exists"
    assert engine.query("CREATE OR REPLACE TABLE files.cheap (SELECT 'Z9' AS order_id)").type == "ok"
    assert engine.query("INSERT INTO files.cheap (order_id) VALUES ('Z10')").affected_rows == 1
    assert rows(engine, "SELECT order_id FROM files.cheap ORDER BY 1") == [{"order_id": "Z10"},
                                                                           {"order_id": "Z9"}]
    # DROP TABLE, IF EXISTS; a project's or a data source's table is not dropped this way
    assert engine.query("DROP TABLE files.cheap").type == "ok"
    assert "Can't delete table 'cheap'" in error(engine, "DROP TABLE files.cheap")
    assert engine.query("DROP TABLE IF EXISTS files.cheap").type == "ok"
    assert "DROP KNOWLEDGE_BASE" in error(engine, "DROP TABLE mindsdb.kb")
    assert [f["name"] for f in engine.list_files()] == ["orders"]
    # registered DataFrames stay df.<name>, apart from files
    assert "not found" in error(engine, "SELECT * FROM files.stock")
    assert engine.query("DROP TABLE df.stock").type == "ok"
    assert "not found" in error(engine, "SELECT * FROM df.stock")


def test_files_are_server_wide_a_name_is_taken_once_and_delete_names_what_is_missing(tmp_path: Path) -> None:
    first = Engine(tmp_path / "shared")
    try:
        first.upload_file("orders", makers.csv_bytes(), "orders.csv")
        with pytest.raises(Conflict, match="File with name 'orders' already exists"):
            first.upload_file("ORDERS", makers.json_bytes(), "orders.json")
        second = Engine(tmp_path / "shared")  # another process on the data directory
        try:
            assert len(rows(second, "SELECT * FROM files.orders")) == 3
            second.delete_file("orders")
            assert "not found" in error(first, "SELECT * FROM files.orders")
            with pytest.raises(NotFound):
                first.delete_file("orders")
        finally:
            second.close()
    finally:
        first.close()


def test_stored_tables_are_not_held_in_memory_between_statements(engine: Engine) -> None:
    """Each uploaded file and registered DataFrame stayed in memory as an Arrow table for
    good (the store's cache, and every pooled cursor that read it): twenty 38 MB uploads to
    a live server took it from 72 MB to 1.16 GB, so one user's uploads could exhaust the
    server. DuckDB now reads the stored Parquet itself: after uploads and reads of several
    tables, Arrow holds less than one of them."""
    import pyarrow as pa

    row = "a fairly long text value that repeats,12345,67.5\n"
    csv = ("txt,num,val\n" + row * 60_000).encode()  # ~3 MB, ~4 MB as Arrow
    one_table = None
    base = pa.total_allocated_bytes()  # what this worker's other tests left alive
    for i in range(5):
        engine.upload_file(f"big{i}", csv, f"big{i}.csv")
        engine.register_dataframe(f"frame{i}", pd.DataFrame({"txt": ["x" * 60] * 60_000}))
        assert rows(engine, f"SELECT count(*) AS n FROM files.big{i}") == [{"n": 60_000}]
        assert rows(engine, f"SELECT count(*) AS n, max(length(txt)) AS w FROM df.frame{i}") == \
            [{"n": 60_000, "w": 60}]
        one_table = one_table or engine.uploads.table(f"big{i}").nbytes
    assert pa.total_allocated_bytes() - base < one_table
    # a replaced table is read anew, and a dropped one is gone
    engine.register_dataframe("frame0", pd.DataFrame({"txt": ["y"]}))
    assert rows(engine, "SELECT txt FROM df.frame0") == [{"txt": "y"}]
    engine.query("DROP TABLE files.big1")
    assert "big1" in error(engine, "SELECT * FROM files.big1")


def test_a_table_that_would_leave_too_little_disk_is_refused_and_nothing_is_lost(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """One user's uploads filled the disk, after which every user's writes answered 507: a
    stored table must now leave `disk_reserve_mb` free. A file past it is refused with the
    setting named and nothing of it stored (a workbook's pages stored before the refused one
    go too); what was stored before stays."""
    import collections

    from kbsql.engine import faults
    from kbsql.interface.errors import InsufficientStorage

    reserve = engine.config.disk_reserve_mb * 2**20
    assert reserve == 256 * 2**20  # the default
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(faults.shutil, "disk_usage",
                        lambda path: usage(0, 0, reserve + 3 * 2**20))
    small = ("n,txt\n" + "1,abc\n" * 1000).encode()
    engine.upload_file("small", small, "small.csv")
    big = ("n,txt\n" + "1,a fairly long text that fills the disk\n" * 100_000).encode()
    with pytest.raises(InsufficientStorage) as refused:
        engine.upload_file("big", big, "big.csv")
    assert "would leave less than 256 MB free" in str(refused.value)
    assert "--disk-reserve-mb" in str(refused.value)
    with pytest.raises(InsufficientStorage):
        engine.register_dataframe("bigframe", pd.DataFrame({"t": ["x" * 50] * 100_000}))
    assert [f["name"] for f in engine.list_files()] == ["small"]
    assert rows(engine, "SELECT count(*) AS n FROM files.small") == [{"n": 1000}]
    assert len(list((engine.data_dir / "uploads").glob("*.parquet"))) == 1
    assert not (engine.data_dir / "frames").exists() or not list((engine.data_dir / "frames").iterdir())


def test_a_stored_table_has_its_own_columns_only(engine: Engine) -> None:
    """Since stored tables are read by DuckDB from their Parquet files, each also answered
    DuckDB's virtual columns: SELECT filename FROM files.t gave '/proc/self/fd/12' (the
    kernel's name of the file the statement opened), file_row_number and file_index 0, for
    columns the table never had. A real column of that name still answers."""
    engine.query("CREATE TABLE files.t (SELECT 1 AS a)")
    engine.register_dataframe("named", pd.DataFrame({"a": [1], "filename": ["mine.txt"]}))
    for column in ("filename", "file_row_number", "file_index"):
        for query in (f"SELECT {column} FROM files.t", f"SELECT x.{column} FROM files.t x"):
            result = engine.query(query)
            assert result.type == "error" and column in result.error_message, (query, result)
            assert "/proc" not in result.error_message
    assert rows(engine, "SELECT a, filename FROM df.named") == [{"a": 1, "filename": "mine.txt"}]
    assert rows(engine, "SELECT * FROM files.t") == [{"a": 1}]


def test_inserts_cannot_grow_a_table_past_what_a_statement_may_return(tmp_path: Path) -> None:
    """Each INSERT INTO files.x writes the whole table again from memory, and only its own
    rows were bounded (the result cap), so inserts grew a table without end: at 10M rows
    (1.3 GB of Parquet) inserting one row took a server to 3.2 GB for 8 s. With 256 MB of
    SQL memory (a 16 MB cap) the insert that would pass the cap is refused, nothing stored."""
    engine = Engine(tmp_path / "data", settings={"sql_memory_mb": 256})
    try:
        engine.register_dataframe("seed", pd.DataFrame({"a": range(100_000), "b": ["x" * 60] * 100_000}))
        assert engine.query("CREATE TABLE files.t (SELECT * FROM df.seed)").type == "ok"
        assert engine.query("INSERT INTO files.t (SELECT * FROM df.seed)").type == "ok"  # ~16 MB
        refused = engine.query("INSERT INTO files.t (SELECT * FROM df.seed)")
        assert refused.type == "error", refused
        assert "the most a table written by SQL may be" in refused.error_message
        assert "sql_memory_mb" in refused.error_message and "nothing was inserted" in refused.error_message
        assert rows(engine, "SELECT count(*) AS n FROM files.t") == [{"n": 200_000}]
    finally:
        engine.close()
