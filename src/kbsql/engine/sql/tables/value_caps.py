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
list_resize/array_resize, bar, replace/regexp_replace whose replacement multiplies the
text, and `||` chains (each operand may be a capped value: `x || repeat('y', 60000) || ...`
four times over 3,000 rows grew a 256 MB server by 1.2 GB before the watchdog stopped it).
A chain is checked once, on the sum of its operands' sizes, before it is built.
The statement watchdog (`watchdog.py`) stops a statement whose process grows past the limit
some other way, between two vectors. `string_agg` and `list` are counted by DuckDB itself:
what they gather stays within its limit, and the vectors of capped values feeding them add
at most one more share (8,000 values of 120 KB at 256 MB: under 320 MB in all; issue 39's
audit measured 1.6 GB at 512 MB when `||` chains still copied each vector three times).
"""

from __future__ import annotations

from sqlglot import exp

VECTOR_ROWS = 2048  # DuckDB's STANDARD_VECTOR_SIZE: rows an expression sees at once
MIN_VALUE_CAP = 64 * 1024
MAX_VALUE_CAP = 256 * 1024 * 1024

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
""".format(error=_ERROR.format(what="' || what || '", cap="cap"))
"""Run once per database (`DuckSession`); every cursor sees them."""


def value_cap(memory_limit: int, threads: int) -> int:
    """Bytes one generated value may take under `memory_limit` bytes and `threads`."""
    share = memory_limit // (VECTOR_ROWS * max(1, threads))
    return max(MIN_VALUE_CAP, min(MAX_VALUE_CAP, share))


def _call(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def cap_values(tree: exp.Expression, cap: int) -> None:
    """Put the checks into `tree` (in place) for every covered call."""
    limit = exp.Literal.number(cap)
    for chain in list(tree.find_all(exp.DPipe)):
        if not isinstance(chain.parent, exp.DPipe):  # the top of `a || b || c`
            _cap_chain(chain, limit)
    for node in list(tree.find_all(exp.Func)):
        name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
        what = exp.Literal.string(name)
        if isinstance(node, exp.Repeat):
            times = node.args["times"]
            size = _call("__kbsql_size", node.this.copy())
            times.replace(_call("__kbsql_count", times.copy(), size, limit, what))
        elif isinstance(node, exp.Pad):  # the length is in characters: up to 4 bytes each
            what = exp.Literal.string("lpad" if node.args.get("is_left") else "rpad")
            length = node.args["expression"]
            length.replace(_call("__kbsql_count", length.copy(), exp.Literal.number(4), limit, what))
        elif isinstance(node, exp.Format) or name == "printf":
            fmt = node.this if isinstance(node, exp.Format) else \
                (node.expressions[0] if node.expressions else None)
            if isinstance(fmt, exp.Expression):
                fmt.replace(_call("__kbsql_widths", fmt.copy(), limit, what))
        elif isinstance(node, exp.GenerateSeries):
            what = exp.Literal.string("range" if node.args.get("is_end_exclusive") else name)
            _cap_series(node, limit, what)
        elif name in ("list_resize", "array_resize", "bar"):
            _cap_argument(node, name, limit, what)
        elif isinstance(node, (exp.Replace, exp.RegexpReplace)):
            _cap_replace(node, limit, what)


def _cap_series(node: exp.GenerateSeries, limit: exp.Expression, what: exp.Expression) -> None:
    start, end = node.args.get("start"), node.args.get("end")
    if start is None or end is None:
        return
    step = node.args.get("step") or exp.Literal.number(1)
    end.replace(_call("__kbsql_series_end", start.copy(), end.copy(), step.copy(), limit, what))


def _cap_argument(node: exp.Anonymous, name: str, limit: exp.Expression, what: exp.Expression) -> None:
    """list_resize(list, n[, value]) makes n items; bar(x, min, max[, width]) width chars."""
    args = node.expressions
    if name == "bar":
        if len(args) >= 4:
            args[3].replace(_call("__kbsql_count", args[3].copy(), exp.Literal.number(4), limit, what))
        return
    if len(args) >= 2:
        size = (exp.Anonymous(this="greatest", expressions=[exp.Literal.number(16),
                                                            _call("__kbsql_size", args[2].copy())])
                if len(args) >= 3 else exp.Literal.number(16))
        args[1].replace(_call("__kbsql_count", args[1].copy(), size, limit, what))


def _cap_replace(node: exp.Expression, limit: exp.Expression, what: exp.Expression) -> None:
    """The text grows by (matches x replacement length): counted exactly for replace (the
    text without the pattern tells how many there are), bounded for regexp_replace (each
    match's own length too, for \\1 references in the replacement)."""
    text, pattern = node.this, node.args.get("expression")
    replacement = node.args.get("replacement")
    if text is None or pattern is None or replacement is None:
        return
    rlen = _call("strlen", replacement.copy())
    if isinstance(node, exp.Replace):
        plen = exp.Anonymous(this="greatest", expressions=[_call("strlen", pattern.copy()),
                                                           exp.Literal.number(1)])
        removed = _call("replace", text.copy(), pattern.copy(), exp.Literal.string(""))
        occurrences = exp.IntDiv(this=exp.Paren(this=exp.Sub(
            this=_call("strlen", text.copy()), expression=_call("strlen", removed))), expression=plen)
        grow = exp.Mul(this=occurrences, expression=rlen)
    else:
        matches = _call("regexp_extract_all", text.copy(), pattern.copy())
        lengths = exp.Anonymous(this="list_sum", expressions=[exp.Anonymous(
            this="list_transform", expressions=[matches.copy(), exp.Lambda(
                this=_call("strlen", exp.column("__kbsql_m")),
                expressions=[exp.to_identifier("__kbsql_m")])])])
        count = _call("len", matches)
        grow = exp.Mul(this=exp.Paren(this=exp.Add(
            this=count, expression=exp.Anonymous(this="coalesce", expressions=[
                lengths, exp.Literal.number(0)]))), expression=rlen)
    text.replace(_call("__kbsql_replaced", text.copy(), grow, limit, what))


def _operands(chain: exp.Expression) -> list[exp.Expression]:
    if isinstance(chain, exp.DPipe):
        return [*_operands(chain.this), *_operands(chain.expression)]
    return [chain]


def _cap_chain(chain: exp.DPipe, limit: exp.Expression) -> None:
    """`a || b || c` as `__kbsql_replaced(a || b || c, size(a) + size(b) + size(c), cap, '||')`:
    the sizes are read before the chain is built, and the chain's value is made once.

    Each operand is written twice (in the check and in the chain). DuckDB binds an aggregate
    or a window function once however often it is written, so only a scalar operand is
    computed twice: CPU, where the earlier form (the operands packed into a struct in a
    one-item list, joined by a lambda) cost memory, three copies of every vector of the
    chain's values (`repeat('x', 250000) || i` over 8,000 rows: 1.5 GB against 0.55 GB here
    and for a bare `||`; issue 39's string_agg and list bombs rode on it)."""
    operands = _operands(chain)
    grow: exp.Expression = _call("__kbsql_size", operands[0].copy())
    for operand in operands[1:]:
        grow = exp.Add(this=grow, expression=_call("__kbsql_size", operand.copy()))
    chain.replace(_call("__kbsql_replaced", chain.copy(), grow, limit.copy(), exp.Literal.string("||")))
