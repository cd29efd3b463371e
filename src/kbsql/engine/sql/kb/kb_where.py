"""A knowledge-base WHERE clause, as MindsDB's docs define it, run as one or more searches.

docs/mindsdb_sql/knowledge_bases/query.mdx ("Supported Filtering Operators"):
- `content = 'x'` and `content LIKE 'x'` (`%` stripped) are a vector search;
- `chunk_content` is the chunk's text, filtered like a column (`chunk_content LIKE '%color%'`
  keeps the chunks whose text holds "color": query.mdx; MindsDB maps it to the vector
  store's content column);
- `content IN ('x', 'y')` and `content = 'x' OR content = 'y'` are the union of both searches,
  `content = 'x' AND content = 'y'` their intersection;
- `content != 'z'`, `content NOT LIKE 'z'`, `content NOT IN (...)` exclude what a search for 'z'
  finds (among its best 100 rows, those nearer 'z' than the searched text);
- metadata (and `id`) conditions with =, !=, <>, <, <=, >, >=, BETWEEN, LIKE, NOT LIKE, IN,
  NOT IN (also of a subquery), AND, OR, NOT and parentheses: one SQL condition on the chunk
  rows, so a filtered search is the true top-k among the rows that match;
- `relevance >= x` / `> x`, `hybrid_search`, `hybrid_search_alpha`, `reranking` are options of
  every search of the statement (top-level AND only).

Branches with a search are combined as MindsDB does (OR: union, AND: intersection, best
relevance first); a branch without one is a plain read. The search itself is a callback, so
this module knows nothing of where knowledge bases live.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from kbsql.engine.knowledge.search import Filter, FilterGroup, SearchRequest
from kbsql.engine.sql.kb.kb_columns import CONTENT, Columns
from kbsql.engine.sql.kb.kb_conditions import _number, _truthy, constant
from kbsql.engine.sql.refusals import unsupported
from kbsql.interface.errors import SqlError

Row = list[Any]
if TYPE_CHECKING:
    pass

Search = Callable[[SearchRequest], list[Row]]
Subquery = Callable[[ast.ASTNode], list[Any]]

OPTIONS = ("relevance", "relevance_threshold", "hybrid_search", "hybrid_search_alpha", "reranking",
           "distance")
NEGATIVE_SET_SIZE = 100  # as MindsDB's KnowledgeBaseQueryExecutor: the excluded search's best 100
# MindsDB drops those with relevance >= 0.5, which with cosine distances is nearly every row;
# here a row goes when it is nearer the excluded text than the searched one, or, with no
# search beside the exclusion, when its cosine similarity to the excluded text is over 0.5
EXCLUSION_DISTANCE = 0.5
_POSITIVE = ("=", "like", "in")
_NEGATIVE = {"!=": "=", "<>": "=", "not like": "like", "not in": "in"}
_INVERT = {"=": "!=", "!=": "=", "<>": "=", "like": "not like", "not like": "like", "in": "not in",
           "not in": "in"}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!=", "<>": "<>"}


@dataclass
class Options:
    min_relevance: float | None = None
    strict: bool = False
    hybrid: bool = False
    alpha: float = 0.5
    rerank: bool = True

    def request(self, query: str | None, filters: list[Any], limit: int | None) -> SearchRequest:
        return SearchRequest(query=query, filters=list(filters), limit=limit,
                             min_relevance=self.min_relevance if query is not None else None,
                             strict=self.strict, hybrid=self.hybrid and query is not None,
                             alpha=self.alpha, rerank=self.rerank)


def _metadata_key(node: ast.ASTNode) -> str | None:
    """`metadata->>'key'` (or `->`): the key; None for anything else (a nested path too)."""
    if isinstance(node, ast.BinaryOperation) and node.op in ("->", "->>") and len(node.args) == 2:
        column, key = node.args
        if isinstance(column, ast.Identifier) and str(column.parts[-1]).lower() == "metadata" and \
                isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None


_RANK = {"or": 1, "and": 2, "->": 5, "->>": 5}
"""Binding strength; a comparison (any other operator) is 3."""


def _regroup(node: ast.ASTNode) -> ast.ASTNode:
    """The parser binds `->>` looser than AND: `content = 'x' AND metadata->>'k' = 'v'` comes
    as `((content = 'x' AND metadata) ->> 'k') = 'v'`. An operand that binds looser than its
    operator, and was not written in parentheses, is regrouped: `(a AND b) op c` -> `a AND (b op c)`,
    `(NOT a) op c` -> `NOT (a op c)`."""
    if isinstance(node, ast.UnaryOperation):
        node.args = [_regroup(a) for a in node.args]
        return node
    if not isinstance(node, ast.BinaryOperation) or len(node.args) != 2:
        return node
    left, right = (_regroup(a) for a in node.args)
    rank = _RANK.get(node.op.lower(), 3)
    if isinstance(left, ast.UnaryOperation) and left.op.lower() == "not" and not left.parentheses \
            and rank >= 3:
        inner = ast.BinaryOperation(node.op, args=[left.args[0], right], parentheses=node.parentheses)
        return ast.UnaryOperation("not", args=[_regroup(inner)])  # NOT binds looser than both
    if isinstance(left, ast.BinaryOperation) and len(left.args) == 2 and not left.parentheses and \
            _RANK.get(left.op.lower(), 3) < rank:
        inner = ast.BinaryOperation(node.op, args=[left.args[1], right], parentheses=node.parentheses)
        return ast.BinaryOperation(left.op, args=[left.args[0], _regroup(inner)],
                                   parentheses=left.parentheses)
    node.args = [left, right]
    return node


def split_options(where: ast.ASTNode | None) -> tuple[Options, ast.ASTNode | None]:
    """Take the search options out of the top-level AND; what is left is the condition."""
    options = Options()
    where = _regroup(where) if where is not None else None
    rest: list[ast.ASTNode] = []
    for item in _flatten(where, "and") if where is not None else []:
        name = _option_name(item)
        if name is None:
            rest.append(item)
            continue
        op = item.op.lower()
        value = constant(item.args[1])
        if name == "relevance":
            if op not in (">=", ">"):
                raise SqlError("relevance only admits >= or > (e.g. relevance >= 0.5)")
            options.min_relevance, options.strict = _number(value, "relevance"), op == ">"
        elif name == "relevance_threshold":
            options.min_relevance = _number(value, "relevance_threshold")
        elif name == "hybrid_search":
            options.hybrid = _truthy(value)
        elif name == "hybrid_search_alpha":
            options.hybrid, options.alpha = True, _number(value, "hybrid_search_alpha")
            if not 0.0 <= options.alpha <= 1.0:
                raise SqlError(f"hybrid_search_alpha must be between 0 and 1, not {value!r}")
        elif name == "reranking":
            options.rerank = _truthy(value)
        else:
            raise SqlError("filter on relevance (>=, >), not on distance")
    return options, _join(rest, "and")


def _option_name(node: ast.ASTNode) -> str | None:
    if isinstance(node, ast.BinaryOperation) and len(node.args) == 2 and \
            isinstance(node.args[0], ast.Identifier) and str(node.args[0].parts[-1]).lower() in OPTIONS:
        return str(node.args[0].parts[-1]).lower()
    return None


def _flatten(node: ast.ASTNode, op: str) -> list[ast.ASTNode]:
    if isinstance(node, ast.BinaryOperation) and node.op.lower() == op:
        return [i for arg in node.args for i in _flatten(arg, op)]
    return [node]


def _join(items: list[ast.ASTNode], op: str) -> ast.ASTNode | None:
    if not items:
        return None
    node = items[0]
    for item in items[1:]:
        node = ast.BinaryOperation(op, args=[node, item])
    return node


def _content_leaf(node: ast.ASTNode) -> bool:
    """A search term on `content`. `content IS [NOT] NULL` is none: it is the filter
    `chunk_content IS [NOT] NULL` (no row or every row: a chunk's text is never null), as
    MindsDB's KnowledgeBaseQueryExecutor answers it (an empty result / every row)."""
    return isinstance(node, ast.BinaryOperation) and node.op.lower() not in ("and", "or", "is", "is not") \
        and len(node.args) == 2 and isinstance(node.args[0], ast.Identifier) and \
        str(node.args[0].parts[-1]).lower() in CONTENT


def _has_content(node: ast.ASTNode) -> bool:
    if _content_leaf(node):
        return True
    if isinstance(node, ast.BinaryOperation) and node.op.lower() in ("and", "or"):
        return any(_has_content(a) for a in node.args)
    if isinstance(node, ast.UnaryOperation) and node.op.lower() == "not":
        return _has_content(node.args[0])
    return False


def _terms(node: ast.BinaryOperation) -> list[str]:
    """The search texts of a content condition (LIKE's `%` and surrounding spaces dropped)."""
    value = node.args[1]
    values = constant(value) if isinstance(value, ast.Tuple) else [constant(value)]
    if not isinstance(values, list):
        values = [values]
    out = []
    for v in values:
        if v is None:
            raise unsupported("a NULL search text")
        text = str(v)
        out.append(text.strip(" %") if "like" in node.op.lower() else text)
    return out


@dataclass
class KbWhere:
    """Runs one WHERE clause against one knowledge base."""

    search: Search
    columns: Columns
    options: Options
    search_limit: int
    read_limit: int | None
    subquery: Subquery | None = None
    searches: int = 0  # content searches run (`_find`)

    # conditions -> filters ---------------------------------------------------------------
    def to_filter(self, node: ast.ASTNode) -> Filter | FilterGroup:
        if isinstance(node, ast.BinaryOperation) and node.op.lower() in ("and", "or"):
            op = node.op.lower()
            return FilterGroup(op, [self.to_filter(i) for i in _flatten(node, op)])
        if isinstance(node, ast.UnaryOperation) and node.op.lower() == "not":
            return FilterGroup("not", [self.to_filter(node.args[0])])
        if isinstance(node, ast.BetweenOperation):
            column = self._column(node.args[0])
            return FilterGroup("and", [Filter(column, ">=", constant(node.args[1])),
                                       Filter(column, "<=", constant(node.args[2]))])
        if isinstance(node, ast.BinaryOperation) and len(node.args) == 2:
            left, right = node.args
            op = node.op.lower()
            if not isinstance(left, ast.Identifier) and isinstance(right, ast.Identifier) and op in _FLIP:
                left, right, op = right, left, _FLIP[op]
            if _option_name(ast.BinaryOperation(op, args=[left, right])) is not None:
                raise unsupported(f"{node.to_string()} inside OR, NOT or parentheses "
                                  "(relevance and search options go in the top-level AND)")
            column = self._column(left)
            if isinstance(right, ast.Select):
                if op not in ("in", "not in") or self.subquery is None:
                    raise unsupported(f"a subquery with {op.upper()} in a knowledge-base condition")
                return Filter(column, op, self.subquery(right))
            return Filter(column, op, constant(right))
        raise unsupported(f"the condition {node.to_string()} on a knowledge base")

    def _column(self, node: ast.ASTNode) -> str:
        key = _metadata_key(node)
        if key is not None:  # metadata->>'product' is column product, as MindsDB's KB executor
            return self.columns.resolve(key)
        if not isinstance(node, ast.Identifier):
            raise unsupported(f"a condition on {node.to_string()} (compare a column with values)")
        parts = [str(p) for p in node.parts]
        return (self.columns.dotted(parts) if len(parts) > 1 else None) or self.columns.resolve(parts[-1])

    @staticmethod
    def has_search(node: ast.ASTNode) -> bool:
        """Whether a condition holds a content search (not just filters)."""
        return _has_content(node)

    # execution ---------------------------------------------------------------------------
    def run(self, node: ast.ASTNode | None) -> list[Row]:
        if node is None:
            return self._read([])
        return self._rows(node, [])

    def _read(self, filters: list[Any]) -> list[Row]:
        return self.search(self.options.request(None, filters, self.read_limit))

    def _find(self, text: str, filters: list[Any], extra: int = 0) -> list[Row]:
        self.searches += 1
        return self.search(self.options.request(text, filters, self.search_limit + extra))

    def _rows(self, node: ast.ASTNode, filters: list[Any]) -> list[Row]:
        node = self._push_not(node)
        if not _has_content(node):
            return self._read([*filters, self.to_filter(node)])
        if isinstance(node, ast.BinaryOperation) and node.op.lower() == "or":
            return union([self._rows(item, filters) for item in _flatten(node, "or")])
        items = _flatten(node, "and")
        plain = [self.to_filter(i) for i in items if not _has_content(i)]
        scoped = [*filters, *plain]
        leaves = [i for i in items if _content_leaf(i)]
        excluded: dict[str, float] = {}  # chunk_id -> its distance to an excluded text
        for leaf in leaves:
            op = leaf.op.lower()
            if op in _NEGATIVE:
                for chunk_id, distance in self._excluded(_terms(leaf), scoped).items():
                    excluded[chunk_id] = min(distance, excluded.get(chunk_id, distance))
            elif op not in _POSITIVE:
                raise unsupported(f"{leaf.to_string()} (content admits =, LIKE, IN and their negations)")
        extra = len(excluded)  # searched deeper so exclusions do not shorten the result
        results = []
        for leaf in leaves:
            if leaf.op.lower() in _POSITIVE:
                results.append(union([self._find(t, scoped, extra) for t in _terms(leaf)]))
        for item in items:
            if _has_content(item) and not _content_leaf(item):
                results.append(self._rows(item, scoped))
        if not results:  # only exclusions: the rows that are not a close match of them
            close = [c for c, d in excluded.items() if d < EXCLUSION_DISTANCE]
            return self._read([*scoped, Filter("chunk_id", "not in", close)] if close else scoped)
        rows = intersect(results)
        # a row is excluded when it is nearer the excluded text than the searched one
        return [r for r in rows if r[1] not in excluded or
                (r[5] is not None and excluded[r[1]] >= r[5])]

    def _excluded(self, texts: list[str], filters: list[Any]) -> dict[str, float]:
        out: dict[str, float] = {}
        for text in texts:
            request = SearchRequest(query=text, filters=list(filters), limit=NEGATIVE_SET_SIZE,
                                    rerank=False)
            for row in self.search(request):
                out[str(row[1])] = min(float(row[5]), out.get(str(row[1]), float(row[5])))
        return out

    def _push_not(self, node: ast.ASTNode) -> ast.ASTNode:
        """NOT over a content condition inverts its operator; NOT over a group holding a
        search has no documented meaning, so it is refused."""
        if not (isinstance(node, ast.UnaryOperation) and node.op.lower() == "not"):
            return node
        inner = node.args[0]
        if _content_leaf(inner) and inner.op.lower() in _INVERT:
            return ast.BinaryOperation(_INVERT[inner.op.lower()], args=list(inner.args))
        if _has_content(inner):
            raise unsupported(f"NOT around a group with a content search: {node.to_string()}")
        return node


def union(results: list[list[Row]]) -> list[Row]:
    """Rows of any result, each chunk once with its best relevance, best first."""
    if len(results) == 1:
        return results[0]
    best: dict[str, Row] = {}
    for rows in results:
        for row in rows:
            seen = best.get(row[1])
            if seen is None or (row[4] or 0) > (seen[4] or 0):
                best[row[1]] = row
    return sort_by_relevance(list(best.values()))


def intersect(results: list[list[Row]]) -> list[Row]:
    """Rows found by every result (the first one's relevance and order)."""
    rows = results[0]
    for other in results[1:]:
        keep = {r[1] for r in other}
        rows = [r for r in rows if r[1] in keep]
    return rows


def sort_by_relevance(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: -(r[4] if r[4] is not None else float("-inf")))


def run_where(where: ast.ASTNode | None, search: Search, columns: Columns, *,
              limit: int | None, cap: int, subquery: Subquery | None = None) -> list[Row]:
    """The rows a WHERE clause selects. `limit` is the statement's LIMIT (None: none given);
    `cap` is how many rows a search without LIMIT returns (the documented 10 for a plain
    search; every row when the search feeds a join or an aggregate)."""
    options, node = split_options(where)
    runner = KbWhere(search, columns, options,
                     search_limit=cap if limit is None else limit, read_limit=limit, subquery=subquery)
    rows = runner.run(node)
    if runner.searches > 1:  # a union or intersection: best relevance first
        rows = sort_by_relevance(rows)
    if runner.searches:  # one search keeps its own order (hybrid: the fused ranking, not relevance)
        return rows[:cap if limit is None else limit]
    return rows if limit is None else rows[:limit]


def read_filters(where: ast.ASTNode | None, columns: Columns, *,
                 subquery: Subquery | None = None) -> list[Any] | None:
    """The filters of a WHERE clause that searches nothing (the rows it keeps are a plain
    read, as `run_where` would read them), or None when it holds a content search."""
    _, node = split_options(where)
    if node is None:
        return []

    def no_search(request: SearchRequest) -> list[Row]:
        raise AssertionError("read_filters runs no search")

    runner = KbWhere(no_search, columns, Options(), 0, None, subquery)
    node = runner._push_not(node)
    return None if _has_content(node) else [runner.to_filter(node)]


def one_search(where: ast.ASTNode | None) -> bool:
    """Whether a WHERE clause is one plain vector search (`content = 'x'` or LIKE, one text)
    ANDed with filters: its rows come best relevance first, and the first n of a search for n
    are the first n of a search for every row. Not so for a union, an intersection or an
    exclusion of searches, nor for hybrid search (its order is the fused one)."""
    options, node = split_options(where)
    if node is None or options.hybrid:
        return False
    leaves = [item for item in _flatten(node, "and") if _has_content(item)]
    return len(leaves) == 1 and _content_leaf(leaves[0]) and leaves[0].op.lower() in ("=", "like") and \
        not isinstance(leaves[0].args[1], ast.Tuple)

