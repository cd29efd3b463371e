"""A cap on the values a statement can make out of almost nothing.

Why: DuckDB's `memory_limit` counts what its operators hold (hash tables, sorts, results
being gathered) but not the string and list values an expression builds. `SELECT
length(repeat('x', 600000000))` (50 bytes of SQL) grew a server by 1.2 GB under a 256 MB
limit, and `range(80000000)` as a value by 8 GB. So the functions whose output size is
set by an argument rather than by their input get that argument checked, per row, before
they run: past the cap DuckDB's `error()` fails the statement in one line.

The cap is per value: `memory_limit / (2048 rows x threads)`, so even a whole vector of
capped values on every DuckDB thread stays within the memory limit (1.5 MB at 6 GB and 2
threads; never below `MIN_VALUE_CAP`). The checks are DuckDB macros (typed overloads where
the size depends on the argument types) created once on the database, and the rewrite
runs on the query tree before DuckDB sees it, so a cached plan carries its checks.

What is covered: repeat, lpad/rpad, printf/format widths, range/generate_series as values,
list_resize/array_resize, bar, bitstring, replace/regexp_replace whose replacement multiplies the
text, `||` chains (each operand may be a capped value: `x || repeat('y', 60000) || ...`
four times over 3,000 rows grew a 256 MB server by 1.2 GB before the watchdog stopped it)
and the other calls that hold all their arguments (concat, concat_ws, printf's and format's
arguments, list_value, list_concat, list_append, json_object, struct_pack, map, map_concat,
struct_concat, json_merge_patch...: `concat(s, s, s, s)` of capped values
over 1,000 rows grew a 1 GB server by 2.4 GB); such a family is checked once, on the sum of
its operands' sizes, before it is built. Calls whose value is a multiple of their input
(bin 8x, hex 2x, to_json and array_to_json 6x, translate 4x, strftime 16x its format,
string_split 17x: a 16-byte item per character) are checked on that multiple, array_to_string
on its separator times the items, json_pretty on its indentation (6 KB of nested brackets
made 36 MB). The statement's covered
calls share the cap (those inside another's operand and `unnest(range(n))` excepted): a
projection makes every one of them for the same vector of rows.
The statement watchdog (`watchdog.py`) stops a statement whose process grows past the limit
some other way, between two vectors. `string_agg` and `list` are counted by DuckDB itself:
what they gather stays within its limit, and the vectors of capped values feeding them add
at most one more share (8,000 values of 120 KB at 256 MB: under 320 MB in all; issue 39's
audit measured 1.6 GB at 512 MB when `||` chains still copied each vector three times).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from kbsql.interface.errors import SqlError

VECTOR_ROWS = 2048  # DuckDB's STANDARD_VECTOR_SIZE: rows an expression sees at once
MIN_VALUE_CAP = 64 * 1024
MAX_VALUE_CAP = 256 * 1024 * 1024
MAX_CHECK_NODES = 50_000  # expression nodes the checks may copy into one statement (value_check_nodes)
MAX_EDIT_CELLS = 250_000  # character pairs one edit-distance call may compare (edit_distance_cells)
_EDIT_DISTANCES = {"levenshtein": 1, "editdist3": 1, "damerau_levenshtein": 1,
                   "jaro_similarity": 500, "jaro_winkler_similarity": 500}
"""O(n x m) in their texts' lengths, and not stopped within a vector: two 60,000-character
texts took 11 s a row, so a statement of two rows ran 22 s past a 3 s deadline. Each name's
number is how many more pairs it may compare than `edit_distance_cells`: jaro compares 64 a
machine word within a window of half the text (3.5 ps a pair against levenshtein's 2.8 ns,
measured), yet two texts of 2.8 MB (a string_agg stored in files) took 23 CPU-s, answering a
3 s deadline after 46 s."""


@dataclass(frozen=True)
class CheckBounds:
    """What `cap_values` bounds besides the cap, each with where a user changes it."""

    max_nodes: int = MAX_CHECK_NODES
    nodes_note: str = "value_check_nodes in config.json"
    edit_cells: int = MAX_EDIT_CELLS
    cells_note: str = "edit_distance_cells in config.json"


_ERROR = ("error('{what}: the value would be over ' || {cap} || ' bytes, the most one generated "
          "value may take here (a share of the SQL memory limit)')")

MACROS = """
CREATE OR REPLACE MACRO __kbsql_count(n, size, cap, what) AS
    CASE WHEN n > cap // greatest(size, 1) THEN {error} ELSE n END;
CREATE OR REPLACE MACRO __kbsql_size(v) AS coalesce(strlen(CAST(v AS VARCHAR)), 0);
CREATE OR REPLACE MACRO __kbsql_widths(fmt, cap, what) AS
    CASE WHEN contains(fmt, '*') THEN error(what || ': a * width or precision is not allowed here')
         WHEN coalesce(list_sum(list_transform(regexp_extract_all(fmt, '[0-9]+'),
              x -> coalesce(TRY_CAST(x AS HUGEINT), cap + 1))), 0) > cap THEN {error}
         ELSE fmt END;
CREATE OR REPLACE MACRO __kbsql_series_end(a BIGINT, b BIGINT, step BIGINT, cap BIGINT, what VARCHAR) AS
    CASE WHEN abs(b::HUGEINT - a) // greatest(abs(step), 1) > cap // 8 THEN {error} ELSE b END,
    (a TIMESTAMP, b TIMESTAMP, step INTERVAL, cap BIGINT, what VARCHAR) AS
    CASE WHEN abs(epoch(b) - epoch(a)) / greatest(abs(epoch(step)), 0.000001) > cap // 8
         THEN {error} ELSE b END,
    (a DOUBLE, b DOUBLE, step DOUBLE, cap BIGINT, what VARCHAR) AS
    CASE WHEN abs(b - a) / greatest(abs(step), 0.000001) > cap // 8 THEN {error} ELSE b END;
CREATE OR REPLACE MACRO __kbsql_replaced(s, grow, cap, what) AS
    CASE WHEN grow > cap THEN {error} ELSE s END;
CREATE OR REPLACE MACRO __kbsql_pairs(a, b, most, what, note) AS
    CASE WHEN coalesce(strlen(a), 0) * coalesce(strlen(b), 0) > most
         THEN error(what || ': texts of ' || strlen(a) || ' and ' || strlen(b) || ' bytes would take '
                    || 'over ' || most || ' character pairs, the most one call may compare here (it '
                    || 'cannot be stopped once started: ' || note || ')')
         ELSE a END;
""".format(error=_ERROR.format(what="' || what || '", cap="cap"))
"""Run once per database (`DuckSession`); every cursor sees them."""


def value_cap(memory_limit: int, threads: int) -> int:
    """Bytes one generated value may take under `memory_limit` bytes and `threads`."""
    share = memory_limit // (VECTOR_ROWS * max(1, threads))
    return max(MIN_VALUE_CAP, min(MAX_VALUE_CAP, share))


def _call(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def cap_values(tree: exp.Expression, cap: int, bounds: CheckBounds = CheckBounds()) -> None:
    """Put the checks into `tree` (in place) for every covered call.

    Innermost calls first, so the copy of an operand a check measures carries its own
    checks (measured outer-first, `repeat(repeat('x', 300000000), 1)` built the inner 300 MB
    unchecked, inside the outer's check). The cap is shared between the statement's covered
    calls: DuckDB computes every expression of a projection for the same 2,048 rows at once,
    so N of them made N vectors of capped values (four `concat(s, s, s, s)`-sized columns
    over 1,000 rows: 2.7 GB under a 1 GB limit)."""
    sites = _sites(tree)
    budget = _Budget(bounds.max_nodes, bounds.nodes_note)
    if sites:
        limit = exp.Literal.number(max(1, cap // _outermost(sites)))
        for node in sites:
            _cap_site(node, limit, budget)
    # after the value checks, so the texts they copy carry theirs (and copies are found too)
    for node in [n for n in tree.find_all(exp.Levenshtein, exp.JarowinklerSimilarity, exp.Anonymous)
                 if _name(n) in _EDIT_DISTANCES]:
        _cap_pairs(node, bounds, budget)
    searches = tree.find_all(exp.Like, exp.Contains, exp.StrPosition, exp.Replace, exp.Anonymous, bfs=False)
    for node in [n for n in searches if not isinstance(n, exp.Anonymous) or _name(n) in _SEARCHES][::-1]:
        _cap_search(node, bounds, budget)  # innermost first: the copies an outer one takes carry theirs


def _sites(tree: exp.Expression) -> list[exp.Expression]:
    """The covered calls of `tree`, innermost first (the top of a joining family only)."""
    found = []
    for node in tree.find_all(exp.Func, exp.DPipe, bfs=False):
        if _joins(node):
            if not _joins(node.parent) and not all(_constant(o) for o in _operands(node)):
                found.append(node)
        elif _covered(node):
            found.append(node)
    return found[::-1]


def _outermost(sites: list[exp.Expression]) -> int:
    """How many of the sites are values of their own in a projection: not inside another
    (its operand, measured with it) and not a `range()` that `unnest()` turns into rows."""
    ids = {id(site) for site in sites}
    count = 0
    for site in sites:
        parent = site.parent
        if isinstance(site, exp.GenerateSeries) and isinstance(parent, (exp.Unnest, exp.Explode)):
            continue
        while parent is not None and id(parent) not in ids:
            parent = parent.parent
        count += parent is None
    return max(1, count)


_NAMES = {exp.DPipe: "||", exp.JSONArray: "json_array", exp.JSONObject: "json_object",
          exp.Struct: "struct_pack", exp.Map: "map", exp.TimeToStr: "strftime",
          exp.JarowinklerSimilarity: "jaro_winkler_similarity", exp.StrPosition: "strpos", exp.Like: "LIKE"}
"""The names users write, where sqlglot's own differ (`J_S_O_N_ARRAY`, `TIME_TO_STR`)."""


def _name(node: exp.Expression) -> str:
    if type(node) in _NAMES:
        return _NAMES[type(node)]
    return (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()


_JOINING = (exp.DPipe, exp.Concat, exp.ConcatWs, exp.Array, exp.ArrayConcat, exp.ArrayAppend,
            exp.ArrayPrepend, exp.JSONArray, exp.JSONObject, exp.Struct, exp.Map)
_JOINING_NAMES = {"list_cat", "array_extend", "list_pack", "array_value", "array_push_back",
                  "array_push_front", "list_zip", "array_zip", "row", "map_concat", "struct_concat",
                  "struct_insert", "struct_update", "json_merge_patch", "unpivot_list"}
"""Calls whose value holds each argument's (a `||` chain's parts, concat's, a list's items):
as big as their operands together."""
_GROWING = {"bin": 8, "to_binary": 8, "hex": 2, "base64": 2, "to_base64": 2, "url_encode": 3,
            "to_json": 6, "json_quote": 6, "split": 17, "regexp_split": 17,
            "regexp_split_to_array": 17, "regexp_extract_all": 17, "array_to_json": 6,
            "row_to_json": 6, "translate": 4, "strftime": 16}
"""Calls whose value is up to N times their first argument's size (strftime's: its format): a
bit per bit as '0'/'1', an escape per character, a 16-byte list item per character, a 4-byte
character for a 1-byte one, a time zone's name for `%Z`."""


def _joins(node: exp.Expression | None) -> bool:
    return isinstance(node, _JOINING) or (isinstance(node, exp.Anonymous) and _name(node) in _JOINING_NAMES)


def _covered(node: exp.Expression) -> bool:
    return isinstance(node, (exp.Repeat, exp.Pad, exp.GenerateSeries, exp.Replace, exp.RegexpReplace,
                             exp.ArrayToString, exp.Format)) or \
        _name(node) in ("list_resize", "array_resize", "bar", "bitstring", "list_aggregate", "list_aggr",
                        "printf", "json_pretty") or \
        _name(node) in _GROWING


def _constant(node: exp.Expression) -> bool:
    return isinstance(node, (exp.Literal, exp.Null, exp.Boolean)) or \
        (isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal))


class _Budget:
    """Copies the checks make, bounded: each check writes its operands twice, so nested
    covered calls (twelve `replace()`s in one another) would double the statement per level."""

    def __init__(self, most: int, note: str) -> None:
        self.most, self.note, self.left = most, note, most

    def copy(self, node: exp.Expression) -> exp.Expression:
        self.left -= sum(1 for _ in node.walk())
        if self.left < 0:
            raise SqlError(f"The statement nests too many value-making functions (repeat, replace, "
                           f"concat, ...): checking their sizes would take more than {self.most} "
                           f"expression nodes ({self.note}); compute the inner values in a subquery first")
        return node.copy()


def _cap_site(node: exp.Expression, limit: exp.Expression, budget: _Budget) -> None:
    name = _name(node)
    what = exp.Literal.string(name)
    if isinstance(node, exp.Format) or name == "printf":
        fmt = node.this if isinstance(node, exp.Format) else \
            (node.expressions[0] if node.expressions else None)
        if isinstance(fmt, exp.Expression):
            fmt.replace(_call("__kbsql_widths", budget.copy(fmt), limit, what))
        _cap_chain(node, list(node.iter_expressions()), limit, budget)  # '%s%s' holds each
    elif _joins(node):
        _cap_chain(node, _operands(node), limit, budget)
    elif isinstance(node, exp.Repeat):
        times = node.args["times"]
        size = _call("__kbsql_size", budget.copy(node.this))
        times.replace(_call("__kbsql_count", budget.copy(times), size, limit, what))
    elif isinstance(node, exp.Pad):  # the length is in characters: up to 4 bytes each
        what = exp.Literal.string("lpad" if node.args.get("is_left") else "rpad")
        length = node.args["expression"]
        length.replace(_call("__kbsql_count", budget.copy(length), exp.Literal.number(4), limit, what))
    elif isinstance(node, exp.GenerateSeries):
        what = exp.Literal.string("range" if node.args.get("is_end_exclusive") else name)
        _cap_series(node, limit, what, budget)
    elif name in ("list_resize", "array_resize", "bar", "bitstring"):
        assert isinstance(node, exp.Anonymous)
        _cap_argument(node, name, limit, what, budget)
    elif isinstance(node, (exp.Replace, exp.RegexpReplace)):
        _cap_replace(node, limit, what, budget)
    elif isinstance(node, exp.ArrayToString) or name in ("list_aggregate", "list_aggr"):
        _cap_separator(node, limit, what, budget)
    elif name == "json_pretty" and node.expressions:
        _cap_pretty(node, limit, what, budget)
    elif name in _GROWING and isinstance(_grown(node), exp.Expression):
        grow = exp.Mul(this=_call("__kbsql_size", budget.copy(_grown(node))),
                       expression=exp.Literal.number(_GROWING[name]))
        node.replace(_call("__kbsql_replaced", budget.copy(node), grow, limit.copy(), what))


def _grown(node: exp.Expression) -> exp.Expression | None:
    """The argument a growing call multiplies: the first, strftime's format."""
    if isinstance(node, exp.TimeToStr):
        return node.args.get("format")
    return (node.expressions or [None])[0] if isinstance(node, exp.Anonymous) else node.this


def _cap_pretty(node: exp.Expression, limit: exp.Expression, what: exp.Expression,
                budget: _Budget) -> None:
    """json_pretty indents each line 4 spaces per level it is in: 6 KB of nested brackets
    made 36 MB, 60 KB would make 3.6 GB. A line is in at most as many levels as the text has
    `[` and `{`, so the value is bounded by size x (4 + 4 x those): exact for the nested
    bomb, generous for a document of many small objects (which the cap may then refuse)."""
    text = node.expressions[0]
    opens = exp.Paren(this=exp.Sub(this=_call("__kbsql_size", budget.copy(text)), expression=_call(
        "strlen", _call("regexp_replace", exp.Cast(this=budget.copy(text), to=exp.DataType.build("text")),
                        exp.Literal.string("[\\[{]"), exp.Literal.string(""), exp.Literal.string("g")))))
    grow = exp.Mul(this=_call("__kbsql_size", budget.copy(text)), expression=exp.Paren(this=exp.Add(
        this=exp.Literal.number(4), expression=exp.Mul(this=exp.Literal.number(4), expression=opens))))
    node.replace(_call("__kbsql_replaced", budget.copy(node), grow, limit.copy(), what))


def _cap_pairs(node: exp.Expression, bounds: CheckBounds, budget: _Budget) -> None:
    """levenshtein(a, b) as levenshtein(__kbsql_pairs(a, b, most, ...), b): refused per row
    when the texts' lengths multiply past `bounds.edit_cells` (times the call's weight)."""
    a, b = [*node.expressions, None, None][:2] if isinstance(node, exp.Anonymous) else \
        (node.this, node.expression)
    if not isinstance(a, exp.Expression) or not isinstance(b, exp.Expression):
        return
    most = bounds.edit_cells * _EDIT_DISTANCES[_name(node)]
    a.replace(_call("__kbsql_pairs", budget.copy(a), budget.copy(b), exp.Literal.number(most),
                    exp.Literal.string(_name(node)), exp.Literal.string(bounds.cells_note)))


SEARCH_PAIRS = 40_000
"""How many more pairs a substring search (contains, strpos/instr/position, LIKE, replace's
search) may compare than `edit_distance_cells`: DuckDB compares a needle at each place of the
text, 18 ps a pair on repetitive text (measured), and one call cannot be stopped: a 1.4 MB
needle in a stored 2.8 MB text held a core for over 100 s after its 3 s deadline. 1e10 pairs
(~0.2 s) at the default still takes a 1 KB pattern over a 10 MB text."""
_SEARCHES = ("replace", "contains", "strpos", "instr")
"""The same searches when written as a plain call (replace's growth check counts matches
with one: it searched as long as the replace it checks)."""
SHORT_NEEDLE = 4096
"""A literal needle or pattern up to this long is not checked: the common `LIKE '%word%'`
keeps DuckDB's own rewrites (prefix, contains, pushdown), and costs at most this many pairs
per character of the text."""


def _cap_search(node: exp.Expression, bounds: CheckBounds, budget: _Budget) -> None:
    """contains(text, needle) as contains(text, __kbsql_pairs(needle, text, most, ...)): the
    needle (a LIKE's pattern) refused per row when the lengths multiply past the bound."""
    text, needle = [*node.expressions, None, None][:2] if isinstance(node, exp.Anonymous) else \
        (node.this, node.args.get("substr") if isinstance(node, exp.StrPosition) else node.expression)
    if not isinstance(text, exp.Expression) or not isinstance(needle, exp.Expression):
        return
    if isinstance(needle, exp.Literal) and needle.is_string and len(needle.this) <= SHORT_NEEDLE:
        return
    needle.replace(_call("__kbsql_pairs", budget.copy(needle), budget.copy(text),
                         exp.Literal.number(bounds.edit_cells * SEARCH_PAIRS),
                         exp.Literal.string(_name(node)), exp.Literal.string(bounds.cells_note)))


def _cap_separator(node: exp.Expression, limit: exp.Expression, what: exp.Expression,
                   budget: _Budget) -> None:
    """array_to_string(list, sep) (and list_aggregate(list, 'string_agg', sep)) repeats sep
    between the items: a 60,000-item list and a 500 KB separator made 30 GB."""
    args = [node.this, node.expression] if isinstance(node, exp.ArrayToString) else node.expressions
    items, sep = args[0], args[-1]
    if items is None or sep is None or len(args) < 2:
        return
    grow = exp.Add(this=_call("__kbsql_size", budget.copy(items)), expression=exp.Mul(
        this=_call("len", budget.copy(items)), expression=_call("__kbsql_size", budget.copy(sep))))
    node.replace(_call("__kbsql_replaced", budget.copy(node), grow, limit.copy(), what))


def _cap_series(node: exp.GenerateSeries, limit: exp.Expression, what: exp.Expression,
                budget: _Budget) -> None:
    start, end = node.args.get("start"), node.args.get("end")
    if start is None or end is None:
        return
    step = node.args.get("step") or exp.Literal.number(1)
    end.replace(_call("__kbsql_series_end", budget.copy(start), budget.copy(end), budget.copy(step),
                      limit, what))


def _cap_argument(node: exp.Anonymous, name: str, limit: exp.Expression, what: exp.Expression,
                  budget: _Budget) -> None:
    """list_resize(list, n[, value]) makes n items; bar(x, min, max[, width]) width chars;
    bitstring(text, n) n bits (bitstring('1', 600000000): 75 MB)."""
    args = node.expressions
    if name == "bitstring":
        if len(args) >= 2:
            bits = exp.Mul(this=limit.copy(), expression=exp.Literal.number(8))
            args[1].replace(_call("__kbsql_count", budget.copy(args[1]), exp.Literal.number(1), bits, what))
        return
    if name == "bar":
        if len(args) >= 4:
            args[3].replace(_call("__kbsql_count", budget.copy(args[3]), exp.Literal.number(4), limit, what))
        return
    if len(args) >= 2:
        size = (exp.Anonymous(this="greatest", expressions=[exp.Literal.number(16),
                                                            _call("__kbsql_size", budget.copy(args[2]))])
                if len(args) >= 3 else exp.Literal.number(16))
        args[1].replace(_call("__kbsql_count", budget.copy(args[1]), size, limit, what))


def _cap_replace(node: exp.Expression, limit: exp.Expression, what: exp.Expression,
                 budget: _Budget) -> None:
    """The text grows by (matches x replacement length): counted exactly for replace (the
    text without the pattern tells how many there are), bounded for regexp_replace (each
    match's own length too, for \\1 references in the replacement)."""
    text, pattern = node.this, node.args.get("expression")
    replacement = node.args.get("replacement")
    if text is None or pattern is None or replacement is None:
        return
    rlen = _call("strlen", budget.copy(replacement))
    if isinstance(node, exp.Replace):
        plen = exp.Anonymous(this="greatest", expressions=[_call("strlen", budget.copy(pattern)),
                                                           exp.Literal.number(1)])
        removed = _call("replace", budget.copy(text), budget.copy(pattern), exp.Literal.string(""))
        occurrences = exp.IntDiv(this=exp.Paren(this=exp.Sub(
            this=_call("strlen", budget.copy(text)), expression=_call("strlen", removed))), expression=plen)
        grow = exp.Mul(this=occurrences, expression=rlen)
    else:
        matches = _call("regexp_extract_all", budget.copy(text), budget.copy(pattern))
        lengths = exp.Anonymous(this="list_sum", expressions=[exp.Anonymous(
            this="list_transform", expressions=[budget.copy(matches), exp.Lambda(
                this=_call("strlen", exp.column("__kbsql_m")),
                expressions=[exp.to_identifier("__kbsql_m")])])])
        count = _call("len", matches)
        grow = exp.Mul(this=exp.Paren(this=exp.Add(
            this=count, expression=exp.Anonymous(this="coalesce", expressions=[
                lengths, exp.Literal.number(0)]))), expression=rlen)
    text.replace(_call("__kbsql_replaced", budget.copy(text), grow, limit, what))


def _operands(node: exp.Expression) -> list[exp.Expression]:
    """The parts a joining call (and the joining calls in it) holds: `concat(a || b, [c])` is
    a, b and c."""
    if _joins(node) or isinstance(node, exp.JSONKeyValue):  # json_object's 'key', value
        return [part for child in node.iter_expressions() for part in _operands(child)]
    if isinstance(node, exp.PropertyEQ):  # a struct's `name := value`: the name is no value
        return _operands(node.expression)
    return [node]


def _cap_chain(chain: exp.Expression, operands: list[exp.Expression], limit: exp.Expression,
               budget: _Budget) -> None:
    """`a || b || c` as `__kbsql_replaced(a || b || c, size(a) + size(b) + size(c), cap, '||')`
    (and so concat(), a list's items...): the sizes are read before the value is built, and
    the value is made once.

    Each operand is written twice (in the check and in the chain). DuckDB binds an aggregate
    or a window function once however often it is written, so only a scalar operand is
    computed twice: CPU, where the earlier form (the operands packed into a struct in a
    one-item list, joined by a lambda) cost memory, three copies of every vector of the
    chain's values (`repeat('x', 250000) || i` over 8,000 rows: 1.5 GB against 0.55 GB here
    and for a bare `||`; issue 39's string_agg and list bombs rode on it)."""
    grow: exp.Expression = _call("__kbsql_size", budget.copy(operands[0]))
    for operand in operands[1:]:
        grow = exp.Add(this=grow, expression=_call("__kbsql_size", budget.copy(operand)))
    chain.replace(_call("__kbsql_replaced", budget.copy(chain), grow, limit.copy(),
                        exp.Literal.string(_name(chain))))
