"""Plots of knowledge-base results (`%kbsql_plot`), in the spirit of JupySQL's `%sqlplot`.

Three pictures people would rather look at than read:
- `relevance`: the relevance of each row of a search, best first (where does it drop?);
- `map`: a 2-D projection (PCA) of a knowledge base's chunk embeddings, coloured by a metadata
  column, with a query placed on it (do the groups separate? where does the query land?);
- `recall`: the recall@k curve of a set of questions with known answers (how deep must a
  search go to find the right document?).

matplotlib draws them (a dependency for this: it is what the notebook's inline backend
renders and saves as PNG, so plots survive in saved notebooks and nbconvert exports). Each
function takes plain data and returns a Figure; fetching the data is separate, so every plot
is testable by image comparison without a kernel. The PCA is plain numpy SVD with fixed
component signs: the same knowledge base always gives the same map.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

FIGSIZE = (6.4, 4.0)
MAX_LABEL = 28


def _figure(size: tuple[float, float] = FIGSIZE) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=size, dpi=100, layout="constrained")  # no pyplot: no global state


def _short(text: Any) -> str:
    text = str(text)
    return text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 1] + "…"


def relevance_figure(labels: Sequence[Any], relevance: Sequence[float], *, title: str = "") -> Any:
    """Horizontal bars, best result on top, each labelled by its row's id."""
    values = np.asarray(relevance, dtype=float)
    fig = _figure((6.4, max(2.0, 0.32 * len(values) + 1.2)))
    ax = fig.add_subplot()
    positions = np.arange(len(values))
    ax.barh(positions, values, color="#1a73e8")
    ax.set_yticks(positions, [_short(v) for v in labels])
    ax.invert_yaxis()
    ax.set_xlim(0, max(1.0, float(np.nanmax(values)) if len(values) else 1.0))
    ax.set_xlabel("relevance")
    for y, v in zip(positions, values, strict=True):
        ax.text(v, y, f" {v:.3f}", va="center", fontsize=8)
    ax.set_title(title or f"relevance of {len(values)} results", fontsize=10)
    return fig


def project_2d(vectors: np.ndarray, extra: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """PCA to 2-D by SVD of the centred vectors; `extra` (the query) goes through the same
    projection. Component signs are fixed (largest loading positive) so maps are stable."""
    data = np.asarray(vectors, dtype=np.float64)
    mean = data.mean(axis=0)
    _, _, vt = np.linalg.svd(data - mean, full_matrices=False)
    components = vt[:2]
    if components.shape[0] < 2:  # fewer than two chunks: a degenerate but drawable map
        components = np.vstack([components, np.zeros((2 - components.shape[0], data.shape[1]))])
    signs = np.sign(components[np.arange(2), np.abs(components).argmax(axis=1)])
    components = components * np.where(signs == 0, 1, signs)[:, None]
    points = (data - mean) @ components.T
    placed = None if extra is None else (np.asarray(extra, dtype=np.float64) - mean) @ components.T
    return points, placed


QUERY_COLOUR = "#202124"
"""The query's star and label on a map: in red (#d93025) they sat unreadable on the red dots
of the fourth category (search-your-own-csv's "my parcel is late" among the shipping tickets)."""


def map_figure(points: np.ndarray, colours: Sequence[Any] | None, *, colour_by: str = "",
               query: str | None = None, query_point: np.ndarray | None = None, title: str = "") -> Any:
    """Chunks as dots coloured by a metadata value (categories get a legend, numbers a
    colour bar); the query, if any, as a labelled star."""
    fig = _figure()
    ax = fig.add_subplot()
    if colours is None:
        ax.scatter(points[:, 0], points[:, 1], s=14, color="#1a73e8", alpha=0.75)
    elif all(isinstance(c, int | float) and not isinstance(c, bool) for c in colours):
        dots = ax.scatter(points[:, 0], points[:, 1], s=14, c=np.asarray(colours, float), cmap="viridis")
        fig.colorbar(dots, ax=ax, label=colour_by)
    else:
        values = ["(none)" if c is None else str(c) for c in colours]
        categories = sorted(set(values))
        cmap = _categorical(len(categories))
        for i, category in enumerate(categories):
            mask = np.array([v == category for v in values])
            ax.scatter(points[mask, 0], points[mask, 1], s=14, color=cmap[i], label=_short(category))
        # beside the map, never over its dots
        ax.legend(title=colour_by, fontsize=8, title_fontsize=8, loc="upper left", markerscale=1.2,
                  bbox_to_anchor=(1.02, 1), borderaxespad=0)
    if query_point is not None:  # black on a white rim: no category's colour (tab10's 4th is red)
        ax.scatter([query_point[0]], [query_point[1]], marker="*", s=260, color=QUERY_COLOUR,
                   edgecolors="white", linewidths=1.2, zorder=5)
        ax.annotate(_short(query or "query"), (query_point[0], query_point[1]), xytext=(7, 7),
                    textcoords="offset points", fontsize=8, color=QUERY_COLOUR, zorder=6,
                    bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.85,
                          "edgecolor": "none"})
    ax.set_xlabel("component 1")
    ax.set_ylabel("component 2")
    ax.set_title(title or f"{len(points)} chunks", fontsize=10)
    return fig


def _categorical(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def recall_figure(ks: Sequence[int], recall: Sequence[float], *, title: str = "",
                  ylabel: str = "recall@k", others: Sequence[tuple[str, Sequence[float]]] = (),
                  label: str = "") -> Any:
    """recall@k for k = 1..K, a step up wherever a deeper search finds more answers.
    `others` adds labelled curves (several saved evaluations); then a legend names each."""
    fig = _figure()
    ax = fig.add_subplot()
    if not others:
        ax.plot(list(ks), list(recall), marker="o", color="#188038", label=label or None)
    else:  # curves often coincide: a thick line with rings, then thinner dashed ones with dots
        ax.plot(list(ks), list(recall), marker="o", markersize=10, markerfacecolor="none",
                linewidth=3, color="#188038", label=label or None)
        colours = _categorical(len(others) + 1)
        for i, (name, values) in enumerate(others):
            ax.plot(list(ks), list(values), marker="os^D"[i % 4], markersize=4, linewidth=1.5,
                    linestyle=("--", ":", "-.")[i % 3], color=colours[i + 1], label=name)
        ax.legend(fontsize=8, loc="lower right")
    ax.set_xticks(list(ks))
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("k (rows searched)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.set_title(title or "recall@k", fontsize=10)
    return fig


def evaluation_curve(row: dict[str, Any], k_max: int) -> tuple[str, list[float]]:
    """(y label, values for k = 1..k_max) from one EVALUATE KNOWLEDGE_BASE result row:
    `cumulative_recall` (version doc_id: JSON {k: recall@k}, k from 1; a result with a key
    "0" comes from MindsDB, which numbers positions from 0) gives recall@k;
    `hit_at_k` (version llm_relevancy: JSON list, k from 1) gives hit@k. Asking deeper than
    the evaluation searched is an error, not a shorter curve."""
    import json

    def parsed(value: Any) -> Any:
        return json.loads(value) if isinstance(value, str | bytes) else value

    if row.get("cumulative_recall") is not None:
        by_key = {int(k): float(v) for k, v in parsed(row["cumulative_recall"]).items()}
        shift = 1 if 0 in by_key else 0  # MindsDB's keys are positions from 0
        values, label = [by_key.get(k - shift) for k in range(1, k_max + 1)], "recall@k"
    elif row.get("hit_at_k") is not None:
        hits = [float(v) for v in parsed(row["hit_at_k"])]
        values, label = [hits[k - 1] if k <= len(hits) else None for k in range(1, k_max + 1)], \
            "hit@k (llm relevancy)"
    else:
        raise ValueError("not an EVALUATE KNOWLEDGE_BASE result: it has no cumulative_recall "
                         "(version doc_id) or hit_at_k (version llm_relevancy) column")
    depth = next((k for k, v in enumerate(values) if v is None), None)
    if depth is not None:
        raise ValueError(f"the evaluation holds {label} up to k = {depth}, not {k_max}: use -k {depth}")
    return label, [float(v) for v in values if v is not None]


def recall_at_k(ranked_ids: Sequence[Sequence[Any]], expected: Sequence[Any], k_max: int) -> list[float]:
    """Share of questions whose expected id is among the first k ranked ids, k = 1..k_max
    (ids compared as text: a search returns ids as strings)."""
    hits = []
    for ids, want in zip(ranked_ids, expected, strict=True):
        ids = [str(i) for i in ids]
        hits.append(ids.index(str(want)) + 1 if str(want) in ids else None)
    n = max(len(hits), 1)
    return [sum(1 for h in hits if h is not None and h <= k) / n for k in range(1, k_max + 1)]
