"""Every regular expression a request reaches runs in linear time, on the inputs that make a
backtracking one quadratic.

The regexes on a request's path (`grep -rn "re\\.compile\\|re\\.\\(match\\|fullmatch\\|search\\|split\\)" src/`):
the flag form's `k=v` head (forms), the order_by direction check (forms), the text form's lexer
(explore.lark's terminals, through Lark), the 'in'-list pre-scan (limits), the template cache's
literal splitter (templates), the integer and decimal texts of `types.convert`, the name pattern
(names), the GET form's limit (server/query_string), the dashboard's form fields (server/
governance_forms) and the promote form's fingerprint and blanks (governance/promote). The others
read the deployment's own settings and files at start (settings, server/config) or PostgreSQL's own
output (engine/rows); a test holds the list to the patterns the package compiles.

Each is fed 100,000 (or, through a reader that stops at the 65,536-character input limit, 65,000)
adversarial characters and must finish in well under a second of this thread's CPU time (so a
loaded machine does not make it flake): a quadratic one takes minutes on these (the `k=v` reader
took 1.6 s on 15,500 characters, the template splitter 4 s on 16,000), a linear one milliseconds.
"""

from __future__ import annotations

import time

import pytest

import importlib
import pkgutil
import re

import ontoos_explore
from ontoos_explore.cli.tokens import NAME as TOKEN_NAME
from ontoos_explore.errors import ExploreError
from ontoos_explore.explain import TEXT_FORM
from ontoos_explore.governance.authoring import PATH
from ontoos_explore.governance.promote import _BLANKS, FINGERPRINT
from ontoos_explore.grammar.forms import _FLAG_HEAD, from_flags, from_json
from ontoos_explore.grammar.limits import _LIST_EVENTS, MAX_TEXT, check_lists
from ontoos_explore.grammar.parser import parse_text
from ontoos_explore.names import IDENT_RE
from ontoos_explore.server.governance_actions import REQUEST_ID
from ontoos_explore.server.connections import METHOD_LIKE
from ontoos_explore.server.mcp_http import SURROGATE_ESCAPE
from ontoos_explore.server import dashboard_pages, dashboard_views
from ontoos_explore.server.query_string import INTEGER
from ontoos_explore.templates import _CLOSED, _LITERAL, template_of
from ontoos_explore.types import _DEC_RE, _INT_RE

N = 100_000
WELL_UNDER_A_SECOND = 0.5  # of CPU: linear is ~1,000 times less here, quadratic ~100 times more


def cpu_seconds(fn, *args) -> float:
    """The least of three runs, in this thread's CPU time; refusals count as answers."""
    best = float("inf")
    for _ in range(3):
        start = time.thread_time()
        try:
            fn(*args)
        except ExploreError:
            pass
        best = min(best, time.thread_time() - start)
    return best


ADVERSARIAL = {
    # the k=v reader: a lazy `(.*?)\s*` under fullmatch backtracked through every run of spaces
    "k=v head, spaces before the last letter": (_FLAG_HEAD.match, "replicas=x<" + " " * N + ">y"),
    "k=v head, spaces and no operator": (_FLAG_HEAD.match, " " * N + "a" * N + " " * N + "!"),
    "k=v head, a long dotted name": (_FLAG_HEAD.match, "a" * N + "." + "b" * N + " " * N),
    # the template cache's splitter: an unterminated string was tried again from each escaped quote
    "templates, escaped single quotes": (template_of, "explore w fields a where a = " + "'\\" * (N // 2)),
    "templates, escaped double quotes": (template_of, "explore w fields a where a = " + '"\\' * (N // 2)),
    "templates, doubled quotes with no end": (template_of, "x = '" + "''" * (N // 2)),
    "templates, limit and spaces": (template_of, "limit " * (N // 6) + " " * N + "x"),
    "templates, digits then a letter": (template_of, "1" * N + "a"),
    "templates, dotted digits": (template_of, "1." * (N // 2)),
    "templates, lone quotes": (template_of, "'" * N),
    # the 'in'-list pre-scan (the lexer's STRING, possessive), on texts as long as a text may be
    "list scan, escaped quotes": (lambda t: check_lists(t, "x"), "a in (" + ",'\\" * (MAX_TEXT // 3)),
    "list scan, commas and parentheses": (lambda t: check_lists(t, "x"), "(," * (MAX_TEXT // 2)),
    # the /mcp pre-check's look for a surrogate escape, over a body of near misses
    "surrogate escape, near misses": (SURROGATE_ESCAPE.search, b"\\ud7" * (N // 4) + b"\\u" * (N // 2)),
    # the HTTP protocol's look at what stood where a method goes (bytes llhttp refused)
    "a method of many CRLFs then no word": (METHOD_LIKE.match, b"\r\n" * (N // 2) + b"!"),
    "a method word that never ends": (METHOD_LIKE.match, b"A" * N),
    # types.convert's number texts, fullmatched
    "integer text with a letter at the end": (_INT_RE.fullmatch, "1" * N + "x"),
    "decimal text of many points": (_DEC_RE.fullmatch, "1." * (N // 2)),
    "decimal text, digits then a letter": (_DEC_RE.fullmatch, "1" * N + ".1x"),
    # names, and the GET form's limit
    "a long name with a bad end": (IDENT_RE.fullmatch, "a" * N + "!"),
    "a long limit": (INTEGER.fullmatch, "9" * N),
    "templates, the closed-string pattern on escapes": (_CLOSED.fullmatch, "'\\" * (N // 2) + "'"),
    # the dashboard's forms and the promote form
    "a long subtype": (dashboard_views.SUBTYPE.fullmatch, "A" * N + "!"),
    "a long window": (dashboard_views.WINDOW.fullmatch, "9" * N + "d"),
    "a long surface": (dashboard_views.SURFACE_NAME.fullmatch, "a" * N + "!"),
    "a long page number": (dashboard_views.NUMBER.fullmatch, "9" * N),
    "a long control-character search": (dashboard_views._CONTROL.search, "a" * N),
    "a long event id": (dashboard_pages.EVENT_ID.fullmatch, "a" * N + "!"),
    "a long audit fingerprint": (dashboard_pages.FINGERPRINT.fullmatch, "a" * N + "!"),
    "a long fingerprint": (FINGERPRINT.fullmatch, "a" * N + "g"),
    "blanks between words": (lambda t: _BLANKS.sub(" ", t), " \t" * (N // 2) + "x"),
    # explain's test for the text form, and the dashboard's request ids
    "explain, spaces and no word after explore": (TEXT_FORM.match, " " * N + "explore" + "x" * N),
    "a long request id": (REQUEST_ID.fullmatch, "a" * N + "g"),
    # a registry entry's (nested) parameter names
    "a long dotted parameter name with a bad end": (PATH.fullmatch, "a." * (N // 2) + "a!"),
    # `ontoos token new --principal NAME`
    "a long principal name with a bad end": (TOKEN_NAME.fullmatch, "a." * (N // 2) + "!"),
}

# compiled at module level, read only at start or from PostgreSQL's own output: no request reaches them
NOT_ON_A_REQUEST_PATH = {"ontoos_explore.server.config.HEX64", "ontoos_explore.settings._INTEGER",
                         "ontoos_explore.settings._NUMBER", "ontoos_explore.settings._CONNINFO",
                         "ontoos_explore.engine.rows._DATETIME", "ontoos_explore.engine.rows._TIME"}


def test_every_pattern_the_package_compiles_is_tested_or_off_the_request_path():
    tested = {id(fn.__self__) for fn, _ in ADVERSARIAL.values() if isinstance(getattr(fn, "__self__", None), re.Pattern)}
    tested |= {id(_LITERAL), id(_LIST_EVENTS), id(_BLANKS)}  # through template_of, check_lists, a lambda
    found = {}
    for info in pkgutil.walk_packages(ontoos_explore.__path__, "ontoos_explore."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                found.setdefault(id(value), f"{info.name}.{name}")
    untested = sorted(where for key, where in found.items() if key not in tested and where not in NOT_ON_A_REQUEST_PATH)
    assert not untested, f"patterns with no adversarial case here: {untested}"
    # the walk finds every pattern tested here, and every one named as off the request path
    assert tested <= set(found) and NOT_ON_A_REQUEST_PATH <= set(found.values())


@pytest.mark.parametrize("case", ADVERSARIAL)
def test_a_regex_on_a_request_path_is_linear(case):
    fn, text = ADVERSARIAL[case]
    assert cpu_seconds(fn, text) < WELL_UNDER_A_SECOND


TEXT = MAX_TEXT - 1000  # through readers that hold input to MAX_TEXT characters first
THROUGH_READERS = {
    # the GET/flag form: `filter=replicas=x<spaces>y` (1.6 s a request at 15,500 spaces)
    "a k=v filter flag": lambda: from_flags("workloads", ["name"], ["replicas=x" + " " * TEXT + "y"]),
    "an order_by key before many spaces": lambda: from_json({"dataset": "w", "fields": ["a"],
                                                             "order_by": ["-a" + " " * TEXT + "desc"]}),
    # the lexer (Lark, explore.lark's terminals) and the 'in'-list scan, on the text form
    "an unterminated string of escaped quotes": lambda: parse_text("explore w fields a where a = " + "'\\" * (TEXT // 2)),
    "quotes doubled with no end": lambda: parse_text("explore w fields a where a = '" + "''" * (TEXT // 2)),
    "a digit run before a letter": lambda: parse_text("explore w fields a where a = " + "1" * TEXT + "x"),
    "an 'in' list of strings, escaped": lambda: parse_text("explore w fields a where a in ("
                                                           + ", ".join(["'\\','"] * (TEXT // 8)) + ")"),
}


@pytest.mark.parametrize("case", THROUGH_READERS)
def test_a_reader_on_the_longest_text_is_linear(case):
    assert cpu_seconds(THROUGH_READERS[case]) < WELL_UNDER_A_SECOND


# ---------------------------------------------------------------- what the template splitter cannot read


@pytest.mark.parametrize(("text", "code"), [
    ("explore workloads fields name where replicas = " + "1" * 4301, "EX301"),  # int() of it was a 500
    ("explore workloads fields name where name = 'x' or name = '\\", "EX101"),  # runs to the end
    ("explore workloads fields name where name = 'x''", "EX101"),  # a doubled quote is no closing one
])
def test_the_template_cache_answers_what_the_parser_answers(demo, text, code):
    """A text the grammar refuses has no template (its key can match no entry), so the whole path
    gives the parser's refusal, cached or not, and the splitter never converts what it cannot."""
    from ontoos_explore.pipeline import compile_exploration
    from ontoos_explore.templates import TemplateCache

    cache = TemplateCache()
    compile_exploration("explore workloads fields name where name = 'x' or name = 'y'", demo, "analyst", cache)
    compile_exploration("explore workloads fields name where replicas = 1", demo, "analyst", cache)
    for use in (cache, None):
        with pytest.raises(ExploreError) as caught:
            compile_exploration(text, demo, "analyst", use)
        assert caught.value.code == code
    assert template_of(text)[0].startswith("\x00?") and template_of(text)[1] == []


def test_a_string_the_lexer_reads_is_a_literal_of_the_template():
    template, lits = template_of("explore w fields a where a = 'it''s \\' ok' or b = \"x\"\"y\" or c = 'z'")
    assert [v for _, v in lits] == ["it's ' ok", 'x"y', "z"] and not template.startswith("\x00?")
