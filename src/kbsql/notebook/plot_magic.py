"""`%kbsql_plot`: relevance of a search, a 2-D map of a knowledge base, recall@k of questions.

    %kbsql_plot relevance SELECT * FROM kb WHERE content = 'refund' LIMIT 20
    %kbsql_plot map KB [--color COLUMN] [--query TEXT] [--limit N]
    %kbsql_plot recall KB --questions VAR [--question-column C] [--id-column C] [-k K] [--hybrid]
    %kbsql_plot recall RESULT [-k K]     # RESULT: EVALUATE's DataFrame, or its saved df.<name>

Each runs through the current connection (`-c ALIAS` for another) and returns a `Plot`,
which shows as a PNG (so it stays in a saved notebook) and holds the matplotlib Figure
(`.figure`) for more styling. `map` needs the vectors, which only the embedded engine hands
out (the HTTP API never sends embeddings): over HTTP it fails with a line saying so.
`recall` either runs its own searches (`--questions`) or draws what an `EVALUATE
KNOWLEDGE_BASE` already measured (its `cumulative_recall`, or `hit_at_k` for llm_relevancy),
searching nothing.
"""

from __future__ import annotations

import io
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from kbsql.client.params import quote_name
from kbsql.interface.api import KnowledgeBaseVectors
from kbsql.interface.errors import KbsqlError
from kbsql.interface.results import KB_INTERNAL_METADATA, TableResult
from kbsql.notebook import plots
from kbsql.notebook.cell_params import collect_params, expand_template, strip_comment
from kbsql.notebook.options import shows_help, split_options

KINDS = ("relevance", "map", "recall")


class Plot:
    """A figure that displays as PNG; `.figure` is the matplotlib Figure."""

    def __init__(self, figure: Any, description: str):
        self.figure = figure
        self.description = description

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png")
        return buffer.getvalue()

    def __repr__(self) -> str:
        return f"<kbsql plot: {self.description}>"


def _sql_name(name: str) -> str:
    """`project.kb` as SQL identifiers."""
    return ".".join(quote_name(part) for part in name.split("."))


def _ranked_ids(client: Any, kb: str, question: str, k: int, hybrid: bool = False) -> list[str]:
    """The first k distinct document ids a search returns (4k chunks read: a document with
    several matching chunks counts once, at its best)."""
    extra = " AND hybrid_search = true" if hybrid else ""
    result = client.sql(f"SELECT id FROM {_sql_name(kb)} WHERE content = :q{extra} LIMIT {int(k) * 4}",
                        params={"q": question})
    ids = [str(row[0]) for row in result.data]
    return list(dict.fromkeys(ids))[:k]  # a document counts once, at its best chunk


@magics_class
class KbSqlPlot(Magics):
    """Plots through the connections of the `KbSql` magics it is registered with."""

    def __init__(self, kbsql: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self.kbsql = kbsql

    @magic_arguments()
    @argument("-c", "--connection", metavar="ALIAS", help="Run on this connection.")
    @argument("--color", metavar="COLUMN", help="map: metadata column that colours the chunks.")
    @argument("--query", metavar="TEXT", help="map: place this search text on the map.")
    @argument("--limit", type=int, default=2000, metavar="N", help="map: chunks drawn (default 2000).")
    @argument("--questions", metavar="VAR", help="recall: a DataFrame of questions with the id "
              "that answers each.")
    @argument("--question-column", default="question", metavar="C", help="recall: column of the "
              "questions (default: question).")
    @argument("--id-column", default="id", metavar="C", help="recall: column of the expected ids "
              "(default: id).")
    @argument("-k", type=int, default=10, metavar="K", help="recall: deepest k (default 10).")
    @argument("--hybrid", action="store_true", help="recall: search with hybrid_search = true.")
    @no_var_expand
    @line_magic
    def kbsql_plot(self, line: str) -> Plot | None:
        """Plot a search's relevance, a knowledge base's map, or recall@k.

        %kbsql_plot relevance SQL
        %kbsql_plot map KB [--color COLUMN] [--query TEXT] [--limit N]
        %kbsql_plot recall KB --questions VAR [--question-column C] [--id-column C] [-k K]
        %kbsql_plot recall RESULT [-k K]   (an EVALUATE result: a DataFrame variable or df.<name>)
        """
        if shows_help(line, self.kbsql_plot):
            return None
        kind, _, rest = strip_comment(line).strip().partition(" ")
        if kind not in KINDS:
            raise UsageError(f"%kbsql_plot KIND ...: KIND is one of {', '.join(KINDS)}")
        if kind == "relevance":  # options, then the SQL as typed
            args, rest = split_options(rest, self.kbsql_plot)
        else:  # the knowledge base, then options (quoted values allowed: --query 'pump oil')
            rest, _, options = rest.strip().partition(" ")
            args = parse_argstring(self.kbsql_plot, options)
            for name in ("query", "color"):  # IPython's splitter keeps the quotes
                value = getattr(args, name)
                if value and len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
                    setattr(args, name, value[1:-1])
        magics = self.kbsql
        conn = None
        try:
            conn = magics._connection(args.connection)
            if kind == "relevance":
                return self._relevance(conn.client, rest)
            if kind == "map":
                return self._map(conn.client, rest, args)
            return self._recall(conn.client, rest, args)
        except KbsqlError as exc:
            return magics._fail(exc, conn)
        except KeyboardInterrupt as exc:  # a plot only reads: the searches were stopped
            return magics._interrupted(exc, conn, "SELECT")

    def _relevance(self, client: Any, sql: str) -> Plot:
        if not sql:
            raise UsageError("%kbsql_plot relevance SELECT ... WHERE content = '...'")
        namespace = self._namespace()
        sql = expand_template(sql, namespace)
        result = client.sql(sql, params=collect_params(sql, namespace))
        if not isinstance(result, TableResult) or "relevance" not in result.column_names:
            raise UsageError("relevance needs a search: SELECT ... FROM kb WHERE content = '...'")
        col = result.column_names.index("relevance")
        label = result.column_names.index("id") if "id" in result.column_names else None
        rows = [r for r in result.data if r[col] is not None]
        if not rows:
            raise UsageError("no relevance to plot: the query was a plain select, or found nothing")
        labels = [r[label] if label is not None else i + 1 for i, r in enumerate(rows)]
        figure = plots.relevance_figure(labels, [float(r[col]) for r in rows])
        return Plot(figure, f"relevance of {len(rows)} results")

    def _map(self, client: Any, kb: str, args: Any) -> Plot:
        if not kb:
            raise UsageError("%kbsql_plot map KB [--color COLUMN] [--query TEXT]")
        api = client.api
        if not isinstance(api, KnowledgeBaseVectors):
            raise UsageError("%kbsql_plot map needs the embedded engine: the HTTP API does not send "
                             "embeddings (connect to the data directory instead)")
        project, _, name = kb.rpartition(".")
        data = api.knowledge_base_vectors(project or client.project, name, args.limit, args.query)
        if len(data["chunk_ids"]) == 0:
            raise UsageError(f"{kb} has no chunks to map")
        keys = {k for m in data["metadata"] for k in m}
        if args.color and args.color not in keys:  # drew every dot "(none)" under its name
            shown = sorted(keys, key=lambda k: (k in KB_INTERNAL_METADATA, k))  # the user's first
            raise UsageError(f"--color {args.color}: no chunk of {kb} has that metadata key; its "
                             f"keys are {', '.join(shown)}")
        points, placed = plots.project_2d(data["vectors"], data["query_vector"])
        colours = [m.get(args.color) for m in data["metadata"]] if args.color else None
        figure = plots.map_figure(points, colours, colour_by=args.color or "", query=args.query,
                                  query_point=placed, title=f"{name}: {len(points)} chunks (PCA)")
        return Plot(figure, f"map of {kb}: {len(points)} chunks")

    def _namespace(self) -> dict[str, Any]:
        if self.shell is None:
            raise UsageError("%kbsql_plot needs an IPython shell")
        return self.shell.user_ns

    def _recall(self, client: Any, kb: str, args: Any) -> Plot:
        if not kb:
            raise UsageError("%kbsql_plot recall KB --questions VAR, or %kbsql_plot recall RESULT "
                             "(an EVALUATE result: a DataFrame variable or df.<name>)")
        if not args.questions:
            return self._recall_of_evaluation(client, kb, args)
        frame: Any = self._namespace().get(args.questions)
        columns = list(getattr(frame, "columns", []))
        if frame is None:
            raise UsageError(f"--questions {args.questions}: no variable of that name in the notebook")
        if args.question_column not in columns or args.id_column not in columns:  # said which
            raise UsageError(f"--questions {args.questions}: a DataFrame with a {args.question_column!r} "
                             f"and an {args.id_column!r} column; its columns are {columns} (name "
                             "yours with --question-column C and --id-column C)")
        questions = [str(q) for q in frame[args.question_column]]
        expected = list(frame[args.id_column])
        ranked = [_ranked_ids(client, kb, q, args.k, args.hybrid) for q in questions]
        recall = plots.recall_at_k(ranked, expected, args.k)
        figure = plots.recall_figure(range(1, args.k + 1), recall,
                                     title=f"{kb}{' (hybrid)' if args.hybrid else ''}: recall@k "
                                           f"of {len(questions)} questions")
        return Plot(figure, f"recall@k of {kb}")

    def _recall_of_evaluation(self, client: Any, source: str, args: Any) -> Plot:
        """The curve an EVALUATE KNOWLEDGE_BASE measured: from the DataFrame it returned (a
        variable) or the table its `save_to` wrote (`df.<name>`, read over the connection).
        One curve per result row, so several saved evaluations compare on one plot."""
        if args.hybrid:
            raise UsageError("--hybrid is for searches (with --questions); an EVALUATE result "
                             "was measured as its knowledge base searches")
        if source.lower().startswith("df."):
            result = client.sql(f"SELECT * FROM {_sql_name(source)}")
            frame: Any = result.to_pandas() if isinstance(result, TableResult) else None
        else:
            frame = self._namespace().get(source)
        if not hasattr(frame, "to_dict"):
            raise UsageError(f"%kbsql_plot recall {source}: not a DataFrame or df.<name> table; "
                             "give an EVALUATE result, or a knowledge base with --questions VAR")
        rows = frame.to_dict("records")
        if not rows:
            raise UsageError(f"{source} holds no EVALUATE result")
        try:
            curves = [plots.evaluation_curve(row, args.k) for row in rows]
        except ValueError as exc:
            raise UsageError(f"{source}: {exc}") from exc
        ylabel = curves[0][0]
        if any(label != ylabel for label, _ in curves):
            raise UsageError(f"{source} mixes doc_id and llm_relevancy results: plot them apart")
        names = [str(row.get("name") or source) for row in rows]
        labels = [f"{n} {row.get('created_at') or ''}".strip() if names.count(n) > 1 else n
                  for n, row in zip(names, rows, strict=True)]
        total = rows[0].get("total") if len(rows) == 1 else None
        title = f"{', '.join(dict.fromkeys(names))}: {ylabel.split(' ')[0]}" + \
            (f" of {int(total)} questions" if total is not None else "") + " (EVALUATE)"
        others = [(label, values) for label, (_, values) in zip(labels[1:], curves[1:], strict=True)]
        figure = plots.recall_figure(range(1, args.k + 1), curves[0][1], title=title, ylabel=ylabel,
                                     label=labels[0] if others else "", others=others)
        return Plot(figure, f"{ylabel} of {source}")
