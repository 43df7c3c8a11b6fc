"""Template cache: a text seen before, up to its literal values, reuses its guarded SQL.

Agents ask the same question with other values over and over. The compiled
SQL of a text does not depend on its literals (every value is a `$n`
parameter), so once a text has gone the whole way (parse, bind, compile,
guard) its template, the text with each literal replaced by a typed slot,
maps to the guarded `CompiledQuery`. A later text with the same template
binds only its new values:

- the text passes the same input checks (`limits.check_text`), each string
  literal the role's `max_literal_length`, and each literal is converted by
  `types.convert` for the column and enum values of the parameter it fills,
  exactly as the binder does;
- anything that does not pass takes the whole path, so every refusal (with
  its position and `retry_with`) is the one the pipeline gives;
- the executed SQL is the guarded text, byte for byte; only `params` and
  `normalized` change.

An `Exploration` is keyed by its text rendering with the same slots
(rendering is injective), so a hit skips binding, generation and the guard.
The JSON form is keyed twice. First by its own template, without parsing:
each of its strings (dataset, relations, fields, filter, group_by, order_by)
with its literals slotted as in a text, each part length-prefixed, and its
limit (`json_template_of`); a hit passes the checks the parser would make of
those strings (`check_json`, `check_text`) and binds the new values. Else it
is parsed and keyed by its rendering, as above; once that key has a template
whose literals are the JSON template's, in the same order, the JSON key is
made an alias of it. So the JSON form asked again with other values costs
what the text form does: no Lark parse of its fields and filter.

An entry is made only after a successful compile, and only when the literals
of the text line up one to one, in order, with the parameters the caller's
values became (each literal converts to exactly the bound value) and the
normalized text splits at them; otherwise the text is remembered as not
cacheable. The key holds the contract hash and the role, so a new contract
or another role never meets an old entry.

A text asked again exactly as before (same contract, role and characters)
skips even the template: a second, smaller table maps it to the query its
first compile or hit returned (deterministic, immutable), bounded at a
quarter of the entries and bytes. A JSON form asked again exactly (the same
keys in the same order, the same values of the same types: `json_memo_text`)
is found there too, in a key space of its own.

The literal tokens are found with one regular expression mirroring
`explore.lark`'s STRING, DECIMAL, INT, TRUE and FALSE (and `limit N`, which
stays part of the template: it changes the SQL). A name never holds a
literal (NAME is `[A-Za-z_][A-Za-z0-9_]*`, no quoted identifiers), and the
slot marks start with a NUL, which `check_text` refuses in any input.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from decimal import Decimal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .compiler import CompiledQuery
from .compiler import fingerprint as fp
from .grammar.limits import CheckedJSON, check_json, check_lists, check_text
from .grammar.parser import _unquote
from .grammar.render import to_text
from .ir import Exploration, Lit
from .types import MAX_INTEGER_DIGITS, convert

if TYPE_CHECKING:
    from .contract import Contract, Role
    from .policy.bound import BoundExploration

_WS = "[ \t\r\n\f]"
_LITERAL = re.compile(  # one group: split() hands back text and literals alternately, no match objects
    rf"(?=[-0-9'\"lLtTfF])((?i:\blimit\b){_WS}+-?[0-9]+"  # limit N: part of the template (it changes the SQL)
    # a string as the lexer reads it, possessive; an unterminated one runs to the end (the grammar refuses
    # it), so a text of escaped quotes is scanned once, not again from each of them (quadratic: 4 s for 16 KB)
    r"|'(?:[^'\\]|''|\\.)*+(?:'|\\?\Z)|\"(?:[^\"\\]|\"\"|\\.)*+(?:\"|\\?\Z)"
    r"|(?<![A-Za-z0-9_.])-?[0-9]+(?:\.[0-9]+)?(?![A-Za-z0-9_.])"
    r"|(?<![A-Za-z0-9_.])(?i:true|false)(?![A-Za-z0-9_]))",
    re.S,
)
_MARK = {"string": "\x00s", "decimal": "\x00d", "integer": "\x00i", "boolean": "\x00b"}
_CLOSED = re.compile(r"'(?:[^'\\]|''|\\.)*+'|\"(?:[^\"\\]|\"\"|\\.)*+\"", re.S)
_UNREADABLE = "\x00?"  # the key of a text the grammar refuses (an unterminated string, an over-long integer)
_SPLIT = "\x00"  # never in a normalized text: check_text refuses NUL in every input


def template_of(text: str) -> tuple[str, list[tuple[str, Any]]]:
    """(text with each literal replaced by a typed slot, the literals as (kind, value) in text order).
    A token's first character says its kind: a quote, t/f, l (limit N), else a number."""
    pieces = _LITERAL.split(text)
    parts = [pieces[0]]
    lits: list[tuple[str, Any]] = []
    part, lit = parts.append, lits.append
    for i in range(1, len(pieces), 2):
        tok, after = pieces[i], pieces[i + 1]
        first = tok[0]
        if first in "'\"":
            if not after and not _CLOSED.fullmatch(tok):  # unterminated: no template, the whole path refuses it
                return _UNREADABLE + text, []
            lit(("string", _unquote(tok)))
            part(_MARK["string"])
        elif first in "lL":
            part(tok)
        elif first in "tTfF":
            lit(("boolean", first in "tT"))
            part(_MARK["boolean"])
        elif "." in tok:
            lit(("decimal", Decimal(tok)))
            part(_MARK["decimal"])
        elif len(tok) - tok.startswith("-") > MAX_INTEGER_DIGITS:  # int() refuses it; so does the parser
            return _UNREADABLE + text, []
        else:
            lit(("integer", int(tok)))
            part(_MARK["integer"])
        part(after)
    return "".join(parts), lits


JSON_STRINGS = ("dataset", "relations", "fields", "filter", "group_by", "order_by")


def json_memo_text(body: dict) -> str:
    """A JSON form as the exact table keys it: its `repr`, which tells 1, 1.0, True and Decimal('1')
    apart (they are equal as dict values) and keeps its keys' order (another order: another entry)."""
    return repr(dict(body))


def json_template_of(body: dict) -> tuple[str, list[tuple[str, Any]]] | None:
    """The JSON form's own template (each string's literals slotted, each part length-prefixed, so the
    key is injective) and its literals in that order; None for what only the parser should read (an
    unknown key, a filter of objects, a value of another type, a text the grammar refuses)."""
    parts = ["\x00json"]
    lits: list[tuple[str, Any]] = []
    for key in body:
        if key not in JSON_STRINGS and key != "limit":
            return None
    for key in JSON_STRINGS:
        value = body.get(key)
        if value is None:
            parts.append(f"{key}-")
            continue
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            return None
        parts.append(f"{key}{'s' if isinstance(value, str) else 'l'}{len(items)}")
        for item in items:
            template, found = template_of(item)
            if template.startswith(_UNREADABLE):
                return None
            parts.append(f"{len(template)}:{template}")
            lits.extend(found)
    limit = body.get("limit")
    if limit is not None and type(limit) is not int:
        return None
    parts.append(f"limit{limit}")
    return "\x01".join(parts), lits


def ir_template_of(e: Exploration) -> tuple[str, list[tuple[str, Any]]]:
    """A parsed exploration's template: its text form with typed slots (rendering is
    injective: parsing the rendering gives the IR back), behind a prefix no text has."""
    lits: list[tuple[str, Any]] = []

    def slot(lit: Lit) -> str:
        lits.append((lit.kind, lit.value))
        return _MARK[lit.kind]

    return "\x00ir " + to_text(e, literal=slot), lits


@dataclasses.dataclass(frozen=True, slots=True)
class Template:
    query: CompiledQuery
    slots: tuple[tuple[str, tuple[str, ...] | None], ...]  # per caller literal: column type, enum values
    always: tuple  # the always-filter parameters, constant
    normalized: tuple[str, ...]  # the normalized text split at each caller literal
    max_literal: int


class TemplateCache:
    """Bounded in entries and in bytes (about: the key's template, the SQL, the normalized
    text; a 1,000-value IN list makes a large entry): past either, the oldest go first.
    The table of exact texts holds a quarter of both (`exact=False`: none). Thread-safe."""

    def __init__(self, size: int = 4096, max_bytes: int = 32 * 1024 * 1024, exact: bool = True) -> None:
        self.size, self.max_bytes = size, max_bytes
        self.exact_size, self.exact_max_bytes = (size // 4, max_bytes // 4) if exact else (0, 0)
        self._entries: dict[tuple, Template | None] = {}
        self._sizes: dict[tuple, int] = {}
        self.bytes = 0
        self._exact: dict[tuple, tuple[CompiledQuery, int]] = {}  # (hash, role, form, text) -> (query, size)
        self.exact_bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.fallbacks = self.exact_hits = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._sizes.clear()
            self._exact.clear()
            self.bytes = self.exact_bytes = self.hits = self.misses = self.fallbacks = self.exact_hits = 0

    def stats(self) -> dict[str, int]:
        return {"entries": len(self._entries), "hits": self.hits, "misses": self.misses, "fallbacks": self.fallbacks,
                "bytes": self.bytes, "exact_entries": len(self._exact), "exact_hits": self.exact_hits,
                "exact_bytes": self.exact_bytes}

    def exact(self, text: str, contract: Contract, role: Role, form: str = "text") -> CompiledQuery | None:
        """The query this very text compiled to before, for this contract and role, or None. `form`:
        "json" for a JSON form's `json_memo_text` (a key space of its own)."""
        found = self._exact.get((contract.hash, role.name, form, text))
        if found is None:
            return None
        self.exact_hits += 1
        return found[0]

    def remember(self, text: str, contract: Contract, role: Role, q: CompiledQuery, form: str = "text") -> None:
        """Keep what `text` (of `form`, as `exact` takes it) compiled to (a hit or a whole compile; never a
        refusal)."""
        size = 2 * len(text) + len(q.sql) + len(q.normalized) + 64 * len(q.params)
        size_cap, bytes_cap = self.exact_size, self.exact_max_bytes
        if size > bytes_cap or size_cap < 1:
            return
        key = (contract.hash, role.name, form, text)
        with self._lock:
            if key in self._exact:
                return
            while self._exact and (len(self._exact) >= size_cap or self.exact_bytes + size > bytes_cap):
                self.exact_bytes -= self._exact.pop(next(iter(self._exact)))[1]
            self._exact[key] = (q, size)
            self.exact_bytes += size

    def compile(self, source: Any, contract: Contract, role: Role, whole: Callable, parse: Callable) -> CompiledQuery:
        """`source` compiled for `role`: from the table of exact texts, else from a template seen before
        with the new values bound, else by `whole(source, exploration, contract, role)` (the whole path:
        -> (query, plan)), whose result fills the cache. A text (alone or as {"query": text}) is matched
        before it is parsed; the JSON form and an Exploration are `parse`d first, and keyed by their
        rendering."""
        text = source.get("query") if isinstance(source, dict) and len(source) == 1 else source
        exploration = None
        json_key = None
        memo = json_memo_text(source) if not isinstance(text, str) and isinstance(source, dict) else None
        if (again := self.again(source, contract, role, memo)) is not None:
            return again
        if isinstance(text, str):
            key, lits = self.key(text, contract, role)
            hit = self.lookup(key, lits, text)
        else:
            if isinstance(source, dict) and (shape := json_template_of(source)) is not None:
                json_key, json_lits = (contract.hash, role.name, shape[0]), shape[1]
                if (found := self.lookup_json(json_key, json_lits, source)) is not None:
                    return found
            exploration = parse(source)
            key, lits = self.key_of_ir(exploration, contract, role)
            hit = self.lookup(key, lits)
        if hit is None:
            hit, plan = whole(source, exploration, contract, role)
            self.fill(key, lits, plan, hit, contract, role)
        if json_key is not None and json_lits == lits:
            self.alias(json_key, key)
        if isinstance(text, str):
            self.remember(text, contract, role, hit)
        elif memo is not None:
            self.remember(memo, contract, role, hit, "json")
        return hit

    def again(self, source: Any, contract: Contract, role: Role, memo: str | None = None) -> CompiledQuery | None:
        """What `source` compiled to before when it is asked exactly as then (a text, alone or as
        {"query": text}, or a JSON form: `memo` is its `json_memo_text`, made when not given), else None.
        Nothing parsed: one pass over the source at C speed (a JSON form's `repr`, then a hash)."""
        text = source.get("query") if isinstance(source, dict) and len(source) == 1 else source
        if isinstance(text, str):
            return self.exact(text, contract, role)
        if isinstance(source, dict):
            return self.exact(memo if memo is not None else json_memo_text(source), contract, role, "json")
        return None

    def lookup_json(self, key: tuple, lits: list[tuple[str, Any]], body: dict) -> CompiledQuery | None:
        """A JSON form whose own template is an alias of a cached one: checked as the parser would
        check its strings, then its values bound (None: the whole path, and its exact refusal)."""
        if key not in self._entries:
            return None
        from .grammar.forms import _comma_lists

        try:
            if not isinstance(body, CheckedJSON):
                check_json(body, "the exploration")
            _comma_lists(body)
            for where in JSON_STRINGS:  # json_template_of let through strings and lists of strings only
                value = body.get(where)
                for i, piece in enumerate([value] if isinstance(value, str) else value or ()):
                    check_text(piece, f"{where}[{i}]")
                    check_lists(piece, f"{where}[{i}]")
        except Exception:  # noqa: BLE001 - the whole path gives the exact refusal
            self.fallbacks += 1
            return None
        return self.lookup(key, lits)

    def alias(self, json_key: tuple, key: tuple) -> None:
        """The JSON form's own key, made to share the template of the key its parse gave."""
        entry = self._entries.get(key)
        if entry is not None:
            self._insert(json_key, entry, len(json_key[2]))

    def key(self, text: str, contract: Contract, role: Role) -> tuple[tuple, list[tuple[str, Any]]]:
        template, lits = template_of(text)
        return (contract.hash, role.name, template), lits

    def key_of_ir(self, e: Exploration, contract: Contract, role: Role) -> tuple[tuple, list[tuple[str, Any]]]:
        """The key of a parsed exploration (the JSON form): its text rendering with slots."""
        template, lits = ir_template_of(e)
        return (contract.hash, role.name, template), lits

    def lookup(self, key: tuple, lits: list[tuple[str, Any]], text: str | None = None) -> CompiledQuery | None:
        """The compiled query for an exploration whose template is cached, or None (take the
        whole path). `text`: the text form as given (checked as the parser would)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        try:
            if text is not None:
                check_text(text, "the exploration")
            params = []
            for (kind, value), (col_type, values) in zip(lits, entry.slots, strict=True):
                if kind == "string" and len(value) > entry.max_literal:
                    raise ValueError("over the literal budget")
                params.append(convert(kind, value, col_type, values))
        except Exception:  # noqa: BLE001 - the whole path gives the exact refusal
            self.fallbacks += 1
            return None
        self.hits += 1
        pieces = entry.normalized
        normalized = pieces[0] + "".join(map(str.__add__, map(fp.literal_value, params), pieces[1:]))
        return dataclasses.replace(entry.query, params=(*params, *entry.always), normalized=normalized)

    def fill(self, key: tuple, lits: list[tuple[str, Any]], plan: BoundExploration, q: CompiledQuery,
             contract: Contract, role: Role) -> None:
        self.misses += 1
        entry = _template(lits, plan, q, contract, role)
        size = len(key[2]) + (0 if entry is None else len(q.sql) + len(q.normalized) + 64 * len(q.params))
        self._insert(key, entry, size)

    def _insert(self, key: tuple, entry: Template | None, size: int) -> None:
        """An entry (a template, an alias of one, or None: not cacheable), the oldest going first past
        either bound."""
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._entries:
                return
            while self._entries and (len(self._entries) >= self.size or self.bytes + size > self.max_bytes):
                oldest = next(iter(self._entries))
                del self._entries[oldest]
                self.bytes -= self._sizes.pop(oldest)
            self._entries[key] = entry
            self._sizes[key] = size
            self.bytes += size


def _template(lits: list[tuple[str, Any]], plan: BoundExploration, q: CompiledQuery,
              contract: Contract, role: Role) -> Template | None:
    """The template of a compiled text, or None when its literals and parameters do not line up."""
    n = len(lits)
    caller = q.slots[:n]
    if len(q.params) < n or any(not s.caller for s in caller) or any(s.caller for s in q.slots[n:]):
        return None
    slots = []
    for (kind, value), slot, bound in zip(lits, caller, q.params):
        ds = contract.dataset(slot.dataset)
        col = ds.column(slot.name) if ds is not None else None
        if col is None:
            return None
        try:
            again = convert(kind, value, slot.type, col.values)
        except Exception:  # noqa: BLE001
            return None
        if type(again) is not type(bound) or again != bound:
            return None
        slots.append((slot.type, col.values))
    pieces = tuple(fp.render(plan, lit=lambda _: _SPLIT).split(_SPLIT))
    if len(pieces) != n + 1:
        return None
    rebuilt = pieces[0] + "".join(fp.literal_value(v) + rest for v, rest in zip(q.params, pieces[1:]))
    if rebuilt != q.normalized:
        return None
    return Template(q, tuple(slots), q.params[n:], pieces, role.max_literal_length)


TEMPLATES = TemplateCache()  # the process-wide cache compile_exploration uses by default
