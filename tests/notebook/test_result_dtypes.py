"""`client.query()` and `%%kbsql` give the same DataFrame dtypes, embedded and over HTTP.

A knowledge-base SELECT returns the same Arrow-backed result as a table SELECT, and the
dtype rules (relevance/distance float64 with NaN for null, metadata a column of dicts) live
in the result's `to_pandas`, so a script and a notebook cell see the same frame on both
transports.
"""

from __future__ import annotations

import math

import pandas as pd

from kbsql.notebook.magics import KbSql

ROWS = [{"id": "1", "content": "the pump moves water", "product": "pump", "units": 3},
        {"id": "2", "content": "a fan moves air", "product": "fan", "units": None}]
QUERIES = [
    "SELECT * FROM kb",                                  # a plain read: scores are all null
    "SELECT * FROM kb WHERE content = 'water'",          # a search: scores are numbers
    "SELECT id, product, units FROM kb",                 # metadata columns, one null
    "SELECT count(*) AS n, max(id) AS top FROM kb",      # run in DuckDB over the rows
    "SELECT * FROM kb WHERE id = '99'",                  # no rows
]


def _client(cells, alias: str | None = None):
    manager = next(c for c in cells.shell.configurables if isinstance(c, KbSql)).manager
    return manager.get(alias).client


def _fill(client) -> None:
    client.knowledge_bases.create("kb", embedding_model={"provider": "kbsql", "model_name": "hash-64"},
                                  metadata_columns=["product", "units"])
    client.knowledge_bases.insert("kb", ROWS)


def _dtypes(frame: pd.DataFrame) -> dict[str, str]:
    return {name: str(dtype) for name, dtype in pd.DataFrame(frame).dtypes.items()}


def test_client_query_and_magic_agree_embedded_and_over_http(cells, server_url):
    local = _client(cells)  # the default embedded engine
    assert local.is_embedded
    _fill(local)
    result, out = cells.run(f"%kbsql_connect {server_url} --alias remote")
    assert result.success, out
    remote = _client(cells, "remote")
    assert not remote.is_embedded
    _fill(remote)

    for query in QUERIES:
        frames = {
            "client embedded": local.query(query),
            "magic embedded": cells.ok(f"%kbsql -c default {query}"),
            "client http": remote.query(query),
            "magic http": cells.ok(f"%kbsql {query}"),
        }
        seen = {where: _dtypes(frame) for where, frame in frames.items()}
        first = seen["client embedded"]
        assert all(d == first for d in seen.values()), f"{query}: {seen}"
        for frame in frames.values():
            if "relevance" in frame.columns:
                assert frame["relevance"].dtype == "float64"
                assert frame["distance"].dtype == "float64"
            if "metadata" in frame.columns:
                assert all(isinstance(m, dict) for m in frame["metadata"])

    plain = local.query("SELECT * FROM kb")
    assert plain["relevance"].isna().all()  # null scores of a plain read are NaN
    search = remote.query("SELECT * FROM kb WHERE content = 'water'")
    assert search["relevance"].notna().all() and search.iloc[0]["id"] == "1"
    assert search.iloc[0]["metadata"]["product"] == "pump"
    units = local.query("SELECT id, units FROM kb ORDER BY id")
    assert units["units"].tolist()[0] == 3 and math.isnan(units["units"].tolist()[1])
