"""One statement's text to its AST, in bounded time.

mindsdb_sql_parser (sly) is pure Python: about 40 µs per token on linear shapes and worse on
lists (see `in_fastpath`), and nothing in it can be interrupted. Under the server's 1 MB SQL
limit one statement could otherwise hold a worker thread and a core for minutes. So:

1. a long `INSERT ... VALUES` and long `IN (literal, ...)` lists skip sly for their
   literals (`values_fastpath`, `in_fastpath`: the same AST, measured to be ~30x faster);
2. whatever is left for the full parser is refused before parsing when it has more than
   `MAX_TOKENS` tokens, with one line naming the limit and the alternative;
3. a SELECT of a shape met before (the same text but for its string literals: a search
   asked again with another question) is the kept statement with its literals put back
   (`shape_cache`, the same AST, ~0.4 ms less per statement).
"""

from __future__ import annotations

import re

from mindsdb_sql_parser import ast, parse_sql
from mindsdb_sql_parser.exceptions import MindsdbSQLException

from kbsql.engine.sql.parse.in_fastpath import parse_in_lists
from kbsql.engine.sql.parse.shape_cache import ShapeCache
from kbsql.engine.sql.parse.union_parts import install as mark_union_parts
from kbsql.engine.sql.parse.values_fastpath import parse_insert_values
from kbsql.engine.sql.parse.write_shapes import parse_write_shape
from kbsql.engine.sql.refusals import PREFIX
from kbsql.interface.errors import LimitExceeded, ParseError, SqlError, clipped
from kbsql.interface.sqltext import QUOTES, closed, segments

SHAPES = ShapeCache()
MAX_TOKENS = 60_000
"""The most tokens a statement may hand to the full parser.

Why: sly cannot be interrupted, and its time grows with the token count (linearly for
column lists, OR chains, UNIONs: 20k tokens ~1 s; faster than linearly for lists of
expressions, whose items it copies once per item: 40k items, 80k tokens, 7.6 s; 80k
items 18.5 s). Measured on a shared 2-core machine under load (01:2x UTC, 2026-11-23).
At 60k tokens a statement costs the parser a few seconds at most; the common big shapes
(VALUES rows, IN lists of literals) do not count, they go around the parser. Below the
limit no statement is ever cut short or truncated: above it, it is refused whole."""

# What counts as one token for the limit (close to the parser's lexer: a string, quoted
# identifier or comment is one token; a word or number is one; other characters one each).
_TOKENS = re.compile(r"""'(?:\\.|[^'])*(?:''(?:\\.|[^'])*)*'|"(?:\\.|[^"])*(?:""(?:\\.|[^"])*)*"|`[^`]+`"""
                     r"""|/\*[\s\S]*?(?:\*/|\Z)|--[^\n]*|[\w$.]+|\S""")


def parse(query: str) -> ast.ASTNode:
    """The statement's AST; an `SqlError` when it is too long for the parser, the parser's
    own exception when it is not SQL."""
    if not query.strip().strip(";").strip():  # MindsDB's parser's words, said in full
        raise ParseError("Empty input: the query has no SQL statement")
    check_comments(query)
    mark_union_parts()  # a UNION part's own LIMIT noted before the parser first runs
    statement = parse_insert_values(query) or parse_in_lists(query)
    if statement is not None:
        return statement
    check_size(query)
    check_dropped_operators(query)
    match = _OR_REPLACE_VIEW.match(query)
    if match is not None:  # MindsDB's documented `CREATE OR REPLACE VIEW`, which the parser
        statement = parse_sql("CREATE VIEW" + query[match.end():])  # lacks: a CreateView
        statement.is_replace = True  # marked to replace (sql/databases/view_statements.py)
        return statement
    try:
        return SHAPES.parse(query)  # parse_sql's statement, a repeated SELECT shape without sly
    except Exception as exc:
        statement = parse_write_shape(query)  # MindsDB's documented writes its parser refuses
        if statement is None:  # the # first: a comment's apostrophe (# it's) is no text's quote
            check_hash_comment(query)
            check_quotes(query)
            check_missing_semicolon(query)
        if statement is None and not isinstance(exc, (MindsdbSQLException, SqlError, RecursionError)):
            # the parser failing in its own code while it words a syntax error (`x -> y`
            # answered "invalid literal for int() with base 10: '[number]'")
            raise ParseError("Syntax error: the parser could not read this statement: "
                             f"{clipped(query.strip(), 80)}") from None
        if statement is None:
            raise
        return statement


_OR_REPLACE_VIEW = re.compile(r"^\s*create\s+or\s+replace\s+view\b", re.IGNORECASE)


def check_comments(query: str) -> None:
    r"""Refuse a `/*` that is never closed before any scanner sees it. Each lexer here (and
    sly's) tries `/\*[\s\S]*?\*/` at every `/*`, and with no `*/` each try reads to the end
    of the text: 20,000 unclosed `/*` (60 KB) took 34 s to end in the same syntax error."""
    if "/*" not in query:
        return
    for start, end, is_code in segments(query):
        if not is_code and query.startswith("/*", start) and not (
                end - start >= 4 and query.endswith("*/", start, end)):
            raise ParseError(f"Syntax error: the comment opened by /* at character {start + 1} is "
                           "never closed with */")


def check_quotes(query: str) -> None:
    """Name a quote that is never closed, once the parser has refused the statement: it said
    "the parser could not read this statement" for `WHERE content = 'refund policy LIMIT 5`
    (a newcomer's missing quote) and for `content = 'it's'` (a quote inside a text), leaving
    the reader to find which quote. Only read on a failed parse: nothing is refused here."""
    for start, end, is_code in segments(query):
        if not is_code and query[start] in QUOTES and not closed(query, start, end):
            hint = (" (a quote inside a text is written twice, 'it''s', or the value bound as :name)"
                    if query[start] == "'" else "")
            raise ParseError(f"Syntax error: the quote {query[start]} at character {start + 1} is "
                             f"never closed: {clipped(query[start:].strip(), 60)}{hint}") from None


_HASH_COMMENT = re.compile(r"(?:^|\s)#(?:\s|$)")
_ONE_WORD = re.compile(r"\w+\s*")


def check_hash_comment(query: str) -> None:
    """Name a `# ...` written as a comment inside the SQL (a Python habit, and MySQL's; the
    parser, MindsDB's, reads none: `#` ends only the magic's own line), once the parser has
    refused the statement: `SELECT 3 AS z  # why`
    answered "the parser could not read this statement". Only a `#` standing alone between
    spaces is taken for one, and only in code (not in a literal or a `--` comment). Read
    before the quotes: `SELECT 1 AS a  # it's one` (or a `# the user's orders` line) was
    told its quote ' is never closed. Not a # one word after a literal (`'it's # x'`: the
    literal closed early, the quote is what is wrong)."""
    for start, end, is_code in segments(query):
        match = _HASH_COMMENT.search(query, start, end) if is_code else None
        if match is not None and start > 0 and query[start - 1] in QUOTES and \
                _ONE_WORD.fullmatch(query, start, match.start()):
            continue
        if match is not None:
            at = match.start() + match.group().index("#")
            raise ParseError(f"Syntax error: # at character {at + 1} is not read as a comment "
                             f"here: {clipped(query[at:].strip(), 60)} (a comment is -- to the end "
                             "of the line, or /* ... */)") from None


_STATEMENT_LINE = re.compile(r"\n[ \t]*(?=(?:select|insert|create|drop|update|delete|set|alter|evaluate|"
                             r"describe|show|use|explain)\b)", re.IGNORECASE)


def check_missing_semicolon(query: str) -> None:
    """Name a `;` left out between two statements, once the parser has refused the text: a
    cell of `CREATE KNOWLEDGE_BASE kb ...` and, on the next line, `INSERT INTO kb ...` got the
    parser's "Syntax error, unknown input" with a caret under INSERT. Said only when a line
    opens with a statement's first word (in code) and the lines above it parse alone."""
    code = [(start, end) for start, end, is_code in segments(query) if is_code]
    for match in list(_STATEMENT_LINE.finditer(query))[:5]:  # each try parses the lines above
        if not any(start <= match.end() < end for start, end in code):
            continue
        head = query[:match.start()].strip()
        if not head or head.endswith(";"):
            continue
        try:
            parse_sql(head)
        except Exception:  # the lines above are no statement either: the parser's own error
            continue
        line = query.count("\n", 0, match.end()) + 1
        raise ParseError(f"Syntax error: a ; is missing before line {line} "
                         f"({clipped(query[match.end():].strip(), 60)}): the lines above it are a "
                         "whole statement") from None


_CLAUSE_WORDS = ("from", "where", "group", "order", "limit", "having", "union", "join", "left", "right",
                 "inner", "outer", "cross", "full", "on", "as", "and", "or", "offset", "window", "into",
                 "using", "except", "intersect", "natural", "qualify")
_DROPPED = re.compile(r"\b(ilike|glob|similar(?:\s+to)?|rlike|regexp|sounds(?:\s+like)?|escape)\s+"
                      rf"(?!(?:{'|'.join(_CLAUSE_WORDS)})\b)(?=[\w`'\"])", re.IGNORECASE)


def check_dropped_operators(query: str) -> None:
    """Refuse `x ILIKE 'a%'` (GLOB, SIMILAR TO, RLIKE, REGEXP, SOUNDS LIKE, LIKE ... ESCAPE) before the parser
    sees it. The parser has none of these operators; in a WHERE it says so (a syntax error),
    but in a select list it reads `x ILIKE 'Z%' AS m` (or `x ILIKE y AS m`) as `x AS m`: the
    word taken for an alias, the operand for another, the comparison gone without a word.
    The word as an alias (`SELECT x glob FROM t`, `AS ilike`) is still a name."""
    matches = list(_DROPPED.finditer(query))
    if not matches:
        return
    code = [(start, end) for start, end, is_code in segments(query) if is_code]
    for match in matches:
        if any(start <= match.start() < end for start, end in code):
            word = " ".join(match.group(1).split()).upper()
            if word == "ESCAPE":
                raise ParseError("Syntax error: LIKE ... ESCAPE is not read by this SQL dialect's parser (it "
                                 "would drop the escape without a word); write like_escape(text, pattern, "
                                 "escape_character)")
            raise ParseError(f"Syntax error: {word} is not an operator of this SQL dialect (the parser "
                             f"would read '{word} <pattern>' as aliases and drop the comparison); use "
                             "LIKE, with lower() on both sides for ILIKE")


def token_count(query: str) -> int:
    return len(_TOKENS.findall(query))


def check_size(query: str) -> None:
    """Refuse (as an `SqlError`) a text with more than `MAX_TOKENS` tokens."""
    if len(query) <= MAX_TOKENS:  # a token takes at least one character
        return
    count = token_count(query)
    if count > MAX_TOKENS:
        raise LimitExceeded(
            PREFIX + f"a statement of {count} SQL tokens (the limit is {MAX_TOKENS}, so that one "
            "statement cannot hold the parser for minutes; long IN lists and INSERT ... VALUES "
            "rows of plain literals do not count); register long lists of values as a "
            "table (client.register / df.<name>) and JOIN it or use IN (SELECT ...)")
