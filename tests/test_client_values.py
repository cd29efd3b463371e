"""Values a user passes from pandas arrive the same way embedded and over HTTP."""

from __future__ import annotations

import pandas as pd

HASH_MODEL = {"provider": "kbsql", "model_name": "hash-64"}


def test_missing_timestamps_are_null_on_both_transports(client):
    client.knowledge_bases.create("kb", embedding_model=HASH_MODEL, metadata_columns=["seen"])
    frame = pd.DataFrame({"id": [1, 2], "content": ["one", "two"],
                          "seen": [pd.Timestamp("2024-01-02 03:04:05"), pd.NaT]})
    assert client.knowledge_bases.insert("kb", frame) == 2
    rows = client.query("SELECT id, metadata FROM kb")
    seen = {r.id: r.metadata["seen"] for r in rows.itertuples()}
    assert seen["2"] is None  # never the text 'NaT'
    assert str(seen["1"]).replace("T", " ").startswith("2024-01-02 03:04:05")


def test_query_binds_parameters(client):
    frame = client.query("SELECT :v AS x, :n AS n", params={"v": "it's; DROP", "n": 3})
    assert frame.to_dict("records") == [{"x": "it's; DROP", "n": 3}]
