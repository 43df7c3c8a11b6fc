"""Parse stage, text form: exploration text -> `Exploration` (IR).

The LALR parser is built once per process with the transformer inlined, so a
parse builds the IR directly. Lark's exceptions are translated here, where
they enter, into `InputError` with line/column and what was expected.

    >>> parse_text("explore workloads fields name limit 5").limit
    5
"""

from __future__ import annotations

import functools
from decimal import Decimal, InvalidOperation
from importlib import resources

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from ..errors import Codes, ExploreError, InputError, Position
from ..ir import (
    AggregateField,
    Between,
    ColumnField,
    Compare,
    Exploration,
    InList,
    IsNull,
    Like,
    Lit,
    Name,
    Not,
    OrderItem,
    Ref,
    and_all,
    make,
    or_all,
)
from ..names import MAX_NAME
from ..types import decimal_unfit, integer_unfit
from .limits import check_lists, check_text, unholdable

AGGREGATES = ("count", "min", "max", "sum", "avg")
STARTS = ("exploration", "field", "predicate", "order_item", "ref")

# How the parser's terminal names read in an error message.
_TERMINAL_WORDS = {
    "_EXPLORE": "'explore'", "_VIA": "'via'", "_FIELDS": "'fields'", "_WHERE": "'where'",
    "_GROUP": "'group by'", "_ORDER": "'order by'", "_BY": "'by'", "_LIMIT": "'limit'",
    "_AS": "'as'", "_AND": "'and'", "_OR": "'or'", "NOT": "'not'", "_IN": "'in'",
    "_IS": "'is'", "_NULL": "'null'", "_BETWEEN": "'between'", "LIKE": "'like' or 'ilike'",
    "DISTINCT": "'distinct'", "DIRECTION": "'asc' or 'desc'", "TRUE": "'true'", "FALSE": "'false'",
    "COMPARE": "a comparison (= != < <= > >=)", "NAME": "a name", "INT": "an integer",
    "DECIMAL": "a decimal", "STRING": "a quoted string", "COMMA": "','", "LPAR": "'('",
    "RPAR": "')'", "DOT": "'.'", "$END": "the end of the input",
}


def _pos(tok: Token) -> Position:
    return Position(tok.line or 1, tok.column or 1)


def _unquote(text: str) -> str:
    """A quoted literal's value: '' or \\' is the quote, \\\\ a backslash; any
    other backslash is kept as written (so LIKE escapes such as \\% survive)."""
    quote, body = text[0], text[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body) and body[i + 1] in (quote, "\\"):
            out.append(body[i + 1])
            i += 2
        elif ch == quote:  # the grammar only lets a quote through doubled
            out.append(quote)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _int(tok: Token, what: str = "a literal") -> int:
    """An INT token's value; one longer than int() reads is refused (no column holds it) before int() sees it."""
    detail = integer_unfit(len(tok) - tok.startswith("-"))
    if detail is not None:
        raise unholdable(what, detail, _pos(tok))
    return int(tok)


def _name(tok: Token) -> str:
    if len(tok) > MAX_NAME:
        raise InputError(
            Codes.INVALID_NAME,
            f"name '{tok[:20]}...' is longer than {MAX_NAME} characters",
            hint="names are contract names of at most 63 characters",
            position=_pos(tok),
        )
    return str(tok)


class ToIR(Transformer):
    """Lark tree -> IR nodes. Inlined into the LALR parser (no tree is built).

    Nodes are built with `ir.make`, without validation: the grammar has already
    typed every value (a token is a NAME, an INT, one of the COMPARE strings...),
    so pydantic's validation would only re-check it, at ~40% of the parse's time.
    tests/grammar/test_parser.py checks that each parse equals the validated IR."""

    # names and references
    def name(self, c):
        return make(Name, value=_name(c[0]), pos=_pos(c[0]))

    def ref(self, c):
        if len(c) == 1:
            return make(Ref, column=_name(c[0]), pos=_pos(c[0]))
        return make(Ref, relation=_name(c[0]), column=_name(c[1]), pos=_pos(c[0]))

    # fields
    def aggregate(self, c):
        func_tok = c[0]
        func = str(func_tok).lower()
        if func not in AGGREGATES:
            raise InputError(
                Codes.SYNTAX_ERROR,
                f"'{func_tok}' is not an aggregate",
                hint="aggregates: count(), count(x), count(distinct x), min(x), max(x), sum(x), avg(x)",
                position=_pos(func_tok),
            )
        distinct = any(isinstance(x, Token) and x.type == "DISTINCT" for x in c[1:])
        refs = [x for x in c[1:] if isinstance(x, Ref)]
        ref = refs[0] if refs else None
        if ref is None and (func != "count" or distinct):
            raise InputError(
                Codes.SYNTAX_ERROR,
                f"{func}({'distinct' if distinct else ''}) needs a column",
                hint=f"write {func}({'distinct ' if distinct else ''}<column>); only count() stands alone",
                position=_pos(func_tok),
            )
        if distinct and func != "count":
            raise InputError(
                Codes.SYNTAX_ERROR,
                "distinct is only supported inside count()",
                hint="write count(distinct <column>)",
                position=_pos(func_tok),
            )
        return make(AggregateField, func=func, ref=ref, distinct=distinct, pos=_pos(func_tok))

    def field(self, c):
        expr, alias = c[0], (c[1].value if len(c) > 1 else None)
        if isinstance(expr, Ref):
            return make(ColumnField, ref=expr, alias=alias)
        return expr.model_copy(update={"alias": alias})

    def order_item(self, c):
        key = c[0]
        if isinstance(key, AggregateField) and key.alias is not None:  # pragma: no cover - grammar forbids
            key = key.model_copy(update={"alias": None})
        desc = len(c) > 1 and str(c[1]).lower() == "desc"
        return make(OrderItem, key=key, descending=desc)

    # literals
    def string(self, c):
        return make(Lit, kind="string", value=_unquote(str(c[0])), pos=_pos(c[0]))

    def integer(self, c):
        return make(Lit, kind="integer", value=_int(c[0]), pos=_pos(c[0]))

    def decimal(self, c):
        try:
            value = Decimal(str(c[0]))
        except InvalidOperation:  # pragma: no cover - the token regex admits only digits
            raise InputError(Codes.SYNTAX_ERROR, f"'{c[0]}' is not a number", hint="write a number as 12 or 1.5",
                             position=_pos(c[0]))
        detail = decimal_unfit(value)  # no exponent in the grammar: only too many digits after the point
        if detail is not None:
            raise unholdable("a literal", detail, _pos(c[0]))
        return make(Lit, kind="decimal", value=value, pos=_pos(c[0]))

    def true(self, c):
        return make(Lit, kind="boolean", value=True, pos=_pos(c[0]))

    def false(self, c):
        return make(Lit, kind="boolean", value=False, pos=_pos(c[0]))

    # predicates
    def compare(self, c):
        op = str(c[1])
        return make(Compare, ref=c[0], op="!=" if op == "<>" else op, value=c[2])

    def in_list(self, c):
        negated = isinstance(c[1], Token)
        return make(InList, ref=c[0], values=tuple(x for x in c[1:] if isinstance(x, Lit)), negated=negated)

    def between(self, c):
        return make(Between, ref=c[0], low=c[1], high=c[2])

    def is_null(self, c):
        return make(IsNull, ref=c[0], negated=len(c) > 1)

    def like(self, c):
        negated = len(c) == 4
        op, pattern = c[-2], c[-1]
        return make(Like, ref=c[0], pattern=pattern, negated=negated, case_insensitive=str(op).lower() == "ilike")

    def negation(self, c):
        return make(Not, item=c[1])

    def and_expr(self, c):
        return and_all(list(c))

    def or_expr(self, c):
        return or_all(list(c))

    # clauses
    def via(self, c):
        return ("via", tuple(c))

    def where(self, c):
        return ("where", c[0])

    def group_by(self, c):
        return ("group_by", tuple(c))

    def order_by(self, c):
        return ("order_by", tuple(c))

    def limit(self, c):
        return ("limit", (_int(c[0], "the limit"), _pos(c[0])))

    def exploration(self, c):
        dataset = c[0]
        fields = tuple(x for x in c[1:] if not isinstance(x, tuple))
        clauses = dict(x for x in c[1:] if isinstance(x, tuple))
        limit, limit_pos = clauses.get("limit", (None, None))
        return make(Exploration, 
            dataset=dataset,
            relations=clauses.get("via", ()),
            fields=fields,
            where=clauses.get("where"),
            group_by=clauses.get("group_by", ()),
            order_by=clauses.get("order_by", ()),
            limit=limit,
            limit_pos=limit_pos,
        )


@functools.cache
def _parser() -> Lark:
    grammar = resources.files(__package__).joinpath("explore.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", start=list(STARTS), transformer=ToIR(), maybe_placeholders=False)


def _shown(text: str, most: int = 40) -> str:
    """A token as an error message quotes it: never more than `most` characters of the caller's text."""
    return text if len(text) <= most else text[:most] + f"... ({len(text)} characters)"


def _expected(names: set[str]) -> str:
    words = sorted({_TERMINAL_WORDS.get(n, n.lower()) for n in names})
    return ", ".join(words)


def _expect(expected: str, what: str) -> str:
    """The hint of a syntax error: what could come next, or (when the parser cannot say) how it is written."""
    if expected:
        return f"expected {expected}"
    return (f"{what} is written as the language says, e.g. a field 'name', 'count()' or 'sum(replicas) as n', "
            "a filter \"namespace = 'prod' and replicas > 2\"; JSON lists take one entry each")


def _translate(err: UnexpectedInput, text: str, what: str) -> InputError:
    line, column = getattr(err, "line", None), getattr(err, "column", None)
    pos = Position(line, column) if isinstance(line, int) and line > 0 else None
    if isinstance(err, UnexpectedToken) and err.token.type == "$END" or isinstance(err, UnexpectedEOF):
        expected = _expected(set(getattr(err, "accepts", ()) or getattr(err, "expected", ())))
        body = text.rstrip()
        pos = Position(body.count("\n") + 1, len(body) - (body.rfind("\n") + 1) + 1)
        return InputError(
            Codes.SYNTAX_ERROR,
            f"{what} ends too early",
            hint=_expect(expected, what),
            position=pos,
        )
    if isinstance(err, UnexpectedToken):
        expected = _expected(set(err.accepts or err.expected))
        return InputError(
            Codes.SYNTAX_ERROR,
            f"unexpected '{_shown(str(err.token))}' in {what}",
            hint=_expect(expected, what),
            position=pos,
        )
    if isinstance(err, UnexpectedCharacters):
        ch = text[err.pos_in_stream] if err.pos_in_stream < len(text) else ""
        expected = _expected(set(err.allowed or ()))
        if ch in "'\"":
            return InputError(
                Codes.SYNTAX_ERROR,
                f"unterminated string in {what}",
                hint=f"close the string with {ch}; inside it, write {ch}{ch} or \\{ch} for a quote",
                position=pos,
            )
        return InputError(
            Codes.SYNTAX_ERROR,
            f"unexpected character {ch!r} in {what}",
            hint=_expect(expected, what),
            position=pos,
        )
    return InputError(Codes.SYNTAX_ERROR, f"{what} does not parse", hint=_expect("", what),
                      position=pos)  # pragma: no cover


def parse(text: str, start: str = "exploration", what: str = "the exploration"):
    """Parse `text` from the start symbol `start` into IR; raise InputError."""
    check_text(text, what)
    check_lists(text, what)
    try:
        result = _parser().parse(text, start=start)
    except VisitError as e:  # an InputError raised inside the transformer
        if isinstance(e.orig_exc, ExploreError):
            raise e.orig_exc from None
        raise
    except UnexpectedInput as e:
        raise _translate(e, text, what) from None
    return result


def parse_text(text: str) -> Exploration:
    """The text form -> Exploration, with the shape limits checked."""
    from .limits import check_shape

    exploration = parse(text)
    check_shape(exploration)
    return exploration
