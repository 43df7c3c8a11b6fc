"""What-ifs: the suggested fixes, prototyped here as runtime patches and caches (src/ is not edited).

Each prototype is checked before it is timed: the compiled queries of the
corpus, of tests/cases/golden.yaml and of the sources of
tests/cases/rejections.yaml (refusals compared envelope for envelope), and the
guard verdicts of tests/cases/guard.yaml must be identical with and without
it. Then the whole compile (pipeline.compile_exploration) of every corpus case
is timed with each configuration, interleaved case by case and round by round,
next to sqlglot parsing the hand-written SQL (the issue's yardstick).

Patches (undone after each sample block):
  lookups      Dataset.column / Contract.dataset, relation, role, scope, derived,
               hash read `__pydantic_private__` directly instead of going through
               pydantic's BaseModel.__getattr__ for private attributes
  shape_once   compile_plan renders the shape once (fingerprint() renders it again today)
  guard_walk   guard._Checker.walk pushes only dicts and lists (not every scalar
               slot) and looks the visitor up in a dict built once
  generator    one sqlglot Generator reused instead of Dialect.generate building one per call
Caches (a wrapper around the pipeline):
  shape_cache  after parse and bind, a compiled shape (contract hash, role,
               shape, limit, notes) reuses its guarded SQL; only the parameters
               are rebound from the plan. Skips sqlglot and the guard.
  template_cache  before parsing: the text with its literals replaced by typed
               slots is the key; a hit converts the new literals with the slot's
               column type (types.convert) and rebinds them. Skips everything else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import re
import statistics
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import yaml

import ontoos_explore.compiler as compiler_pkg
import ontoos_explore.compiler.fingerprint as fp
import ontoos_explore.compiler.sqlgen as sqlgen
import ontoos_explore.contract as contract_mod
import ontoos_explore.guard as guard_mod
import ontoos_explore.pipeline as pipeline
from ontoos_explore.allowed import allowed_for_read_sets
from ontoos_explore.contract import Contract
from ontoos_explore.errors import ExploreError
from ontoos_explore.grammar.limits import check_text
from ontoos_explore.grammar.parser import _unquote
from ontoos_explore.names import fold
from ontoos_explore.pipeline import compile_exploration, parse_source, resolve_role
from ontoos_explore.policy import bind
from ontoos_explore.policy.bound import BAnd, BBetween, BCompare, BIn, BIsNull, BLike, BNot, BOr
from ontoos_explore.types import convert

from .common import ROOT, log, sample
from .compile_bench import sqlglot_walk
from .corpus import CASES

# ---------------------------------------------------------------- patches


@contextlib.contextmanager
def patch_lookups() -> Iterator[None]:
    def column(self, name):
        return self.__pydantic_private__["_by_fold"].get(fold(name))

    def dataset(self, name):
        return self.__pydantic_private__["_datasets"].get(fold(name))

    def relation(self, name):
        return self.__pydantic_private__["_relations"].get(fold(name))

    def role(self, name):
        return self.__pydantic_private__["_roles"].get(fold(name))

    def scope(self, role):
        return self.__pydantic_private__["_scope"][fold(role.name)]

    new = ((contract_mod.Dataset, "column", column), (contract_mod.Contract, "dataset", dataset),
           (contract_mod.Contract, "relation", relation), (contract_mod.Contract, "role", role),
           (contract_mod.Contract, "scope", scope),
           (contract_mod.Contract, "derived", property(lambda self: self.__pydantic_private__["_derived"])),
           (contract_mod.Contract, "hash", property(lambda self: self.__pydantic_private__["_hash"])))
    saved = [(cls, name, cls.__dict__[name]) for cls, name, _ in new]
    for cls, name, fn in new:
        setattr(cls, name, fn)
    try:
        yield
    finally:
        for cls, name, old in saved:
            setattr(cls, name, old)


def _compile_plan_shape_once(plan):
    sql, em = sqlgen.generate(plan)
    shape = fp.shape(plan)
    return compiler_pkg.CompiledQuery(
        sql=sql, params=tuple(p.value for p in em.params), slots=tuple(compiler_pkg.ParamSlot(*s) for s in em.slots),
        fingerprint=hashlib.sha256(shape.encode()).hexdigest()[:16], shape=shape, normalized=fp.normalized(plan),
        columns=plan.columns, sources=tuple(compiler_pkg._source(f.expr) for f in plan.fields),
        datasets=tuple(s.dataset for s in plan.sources), relations=tuple(j.relation for j in plan.joins),
        limit=plan.limit, notes=plan.notes, budget=plan.budget, reads=plan.reads, touches=frozenset(em.touched))


@contextlib.contextmanager
def patch_shape_once() -> Iterator[None]:
    old = pipeline.compile_plan
    pipeline.compile_plan = _compile_plan_shape_once
    try:
        yield
    finally:
        pipeline.compile_plan = old


_VISIT = {kind: "visit_" + kind for kind in guard_mod.ALLOWED_KINDS}


def _fast_walk(self, root: Any) -> None:
    """guard._Checker.walk (the version with clauses), visiting the same nodes in the same order,
    without pushing scalar slots and with the visitor found in a dict built once."""
    stack: list[tuple[Any, str, str]] = [(root, "stmt", "")]
    pop, extend = stack.pop, stack.extend
    while stack:
        value, slot, clause = pop()
        if type(value) is list:
            extend([(v, slot, clause) for v in reversed(value) if type(v) is dict or type(v) is list])
            continue
        if not value:
            continue
        if len(value) == 1:
            kind, body = next(iter(value.items()))
            if type(body) is dict and kind[:1].isupper():
                name = _VISIT.get(kind)
                if name is None:
                    self.fail(kind, guard_mod.WHY.get(kind) or f"{kind} is not allowed", body)
                    continue
                self.clause = clause
                if getattr(self, name)(body, slot) is not False:
                    select = kind == "SelectStmt"
                    extend([(v, k, k if select else clause) for k, v in reversed(body.items())
                            if type(v) is dict or type(v) is list])
                continue
        extend([(v, k, clause) for k, v in reversed(value.items()) if type(v) is dict or type(v) is list])


@contextlib.contextmanager
def patch_guard_walk() -> Iterator[None]:
    old = guard_mod._Checker.walk
    guard_mod._Checker.walk = _fast_walk
    try:
        yield
    finally:
        guard_mod._Checker.walk = old


@contextlib.contextmanager
def patch_generator() -> Iterator[None]:
    old_sg, old_pkg = sqlgen.generate, compiler_pkg.generate
    generator = sqlgen._dialect().generator()

    def generate(plan):
        em = sqlgen.Emitter()
        return generator.generate(em.select(plan), copy=False), em

    sqlgen.generate = compiler_pkg.generate = generate
    try:
        yield
    finally:
        sqlgen.generate, compiler_pkg.generate = old_sg, old_pkg


PATCHES: dict[str, Callable[[], contextlib.AbstractContextManager]] = {
    "lookups": patch_lookups, "shape_once": patch_shape_once, "guard_walk": patch_guard_walk,
    "generator": patch_generator,
}


@contextlib.contextmanager
def applied(names: tuple[str, ...]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for name in names:
            stack.enter_context(PATCHES[name]())
        yield


# ---------------------------------------------------------------- caches


def _param_cols(p, out: list) -> None:
    """Columns the parameters meet, in the order the compiler emits them (Emitter.predicate)."""
    if isinstance(p, (BAnd, BOr)):
        for x in p.items:
            _param_cols(x, out)
    elif isinstance(p, BNot):
        _param_cols(p.item, out)
    elif isinstance(p, BCompare):
        out.append((p.col, p.value))
    elif isinstance(p, BIn):
        out.extend((p.col, v) for v in p.values)
    elif isinstance(p, BBetween):
        out.extend(((p.col, p.low), (p.col, p.high)))
    elif isinstance(p, BLike):
        out.append((p.col, p.pattern))
    elif not isinstance(p, BIsNull):  # pragma: no cover
        raise TypeError(type(p).__name__)


def plan_params(plan) -> list:
    out: list = []
    if plan.where is not None:
        _param_cols(plan.where, out)
    for a in plan.always:
        _param_cols(a, out)
    return out


class ShapeCache:
    """Parse and bind as always; a shape compiled before reuses its guarded SQL with the new parameters."""

    def __init__(self) -> None:
        self.entries: dict[tuple, compiler_pkg.CompiledQuery] = {}
        self.hits = self.misses = 0

    def compile(self, source, contract: Contract, role: str):
        role_ = resolve_role(contract, role)
        try:
            plan = bind(parse_source(source), contract, role_)
        except ExploreError:
            return compile_exploration(source, contract, role)  # the exact refusal, retry_with included
        shape = fp.shape(plan)
        key = (contract.hash, role_.name, shape, plan.limit, plan.notes)
        hit = self.entries.get(key)
        if hit is None:
            self.misses += 1
            q = compile_exploration(source, contract, role)
            self.entries[key] = q
            return q
        self.hits += 1
        params = tuple(p.value for _, p in plan_params(plan))
        return dataclasses.replace(hit, params=params, normalized=fp.render(plan))


# The literal tokens of grammar/explore.lark (STRING, DECIMAL, INT, TRUE, FALSE), in the lexer's
# priority order; `limit N` is matched first and kept in the template. A literal never starts
# inside a name (names may hold digits: d0, r12).
_LITERAL = re.compile(
    r"(?P<limit>(?i:\blimit\b)\s+-?[0-9]+)"
    r"|(?P<string>'(?:[^'\\]|''|\\.)*'|\"(?:[^\"\\]|\"\"|\\.)*\")"
    r"|(?<![A-Za-z0-9_.])(?P<decimal>-?[0-9]+\.[0-9]+)(?![A-Za-z0-9_.])"
    r"|(?<![A-Za-z0-9_.])(?P<integer>-?[0-9]+)(?![A-Za-z0-9_.])"
    r"|(?<![A-Za-z0-9_.])(?P<boolean>(?i:true|false))(?![A-Za-z0-9_])",
    re.S,
)
_MARK = {"string": "\x00s", "decimal": "\x00d", "integer": "\x00i", "boolean": "\x00b"}


def template_of(text: str) -> tuple[str, list[tuple[str, Any]]]:
    """(text with each literal replaced by a typed slot, the literals as (kind, value) in text order)."""
    parts: list[str] = []
    lits: list[tuple[str, Any]] = []
    last = 0
    for m in _LITERAL.finditer(text):
        kind = m.lastgroup
        if kind == "limit":
            continue
        parts.append(text[last:m.start()])
        parts.append(_MARK[kind])
        tok = m.group()
        if kind == "string":
            value: Any = _unquote(tok)
        elif kind == "integer":
            value = int(tok)
        elif kind == "decimal":
            value = Decimal(tok)
        else:
            value = tok.lower() == "true"
        lits.append((kind, value))
        last = m.end()
    parts.append(text[last:])
    return "".join(parts), lits


@dataclasses.dataclass
class _Template:
    query: compiler_pkg.CompiledQuery
    slots: list[tuple[str, tuple[str, ...] | None]]  # per caller literal: column type, enum values
    always: tuple  # the always-filter parameters (constant)
    normalized: list[str]  # the normalized text split at each caller literal
    max_literal: int


class TemplateCache:
    """Before parsing: the same text up to its literal values reuses the guarded SQL; the new
    literals are converted with their slot's column type. Anything unusual takes the full path."""

    MARK = "\x01"

    def __init__(self) -> None:
        self.entries: dict[tuple, _Template | None] = {}
        self.hits = self.misses = self.fallbacks = 0

    def compile(self, source, contract: Contract, role: str):
        if not isinstance(source, str):
            return compile_exploration(source, contract, role)
        check_text(source, "the exploration")
        template, lits = template_of(source)
        key = (contract.hash, fold(role) if isinstance(role, str) else role.name, template)
        entry = self.entries.get(key)
        if entry is not None:
            params = []
            try:
                for (kind, value), (col_type, values) in zip(lits, entry.slots, strict=True):
                    if kind == "string" and len(value) > entry.max_literal:
                        raise ValueError("literal over budget")
                    params.append(convert(kind, value, col_type, values))
            except Exception:  # noqa: BLE001 - the full path gives the exact refusal
                self.fallbacks += 1
                return compile_exploration(source, contract, role)
            self.hits += 1
            normalized = entry.normalized[0] + "".join(
                fp.literal(compiler_pkg_param(v, t)) + rest
                for v, (t, _), rest in zip(params, entry.slots, entry.normalized[1:]))
            return dataclasses.replace(entry.query, params=(*params, *entry.always), normalized=normalized)
        self.misses += 1
        q = compile_exploration(source, contract, role)  # raises on refusal: nothing cached
        if key not in self.entries:
            self.entries[key] = self._template(source, contract, role, q, len(lits))
        return q

    def _template(self, source: str, contract: Contract, role: str, q, n_lits: int) -> _Template | None:
        role_ = resolve_role(contract, role)
        plan = bind(parse_source(source), contract, role_)
        cols = plan_params(plan)
        caller = [c for c in cols[: len(cols) - _always_count(plan)]]
        if len(caller) != n_lits or sum(1 for s in q.slots if s.caller) != n_lits:
            return None  # literals and parameters do not line up one to one: never cached
        slots = []
        for col, _ in caller:
            ds = contract.dataset(col.source.dataset)
            slots.append((col.type, ds.column(col.name).values))
        marked = fp.render(plan, lit=lambda p: self.MARK)
        pieces = marked.split(self.MARK)
        if len(pieces) != n_lits + 1:
            return None
        always = tuple(p.value for _, p in cols[len(caller):])
        return _Template(q, slots, always, pieces, role_.max_literal_length)


def _always_count(plan) -> int:
    out: list = []
    for a in plan.always:
        _param_cols(a, out)
    return len(out)


def compiler_pkg_param(value, col_type):
    from ontoos_explore.policy.bound import Param

    return Param(value, col_type)


# ---------------------------------------------------------------- verification


def _load_cases() -> tuple[list[tuple[str, Any]], list[tuple[str, Any]], dict]:
    cases = ROOT / "tests" / "cases"
    golden = yaml.safe_load((cases / "golden.yaml").read_text(encoding="utf-8"))
    rejections = yaml.safe_load((cases / "rejections.yaml").read_text(encoding="utf-8"))
    guard_cases = yaml.safe_load((cases / "guard.yaml").read_text(encoding="utf-8"))
    ok = [(c.role, c.text) for c in CASES] + [(g["role"], g["source"]) for g in golden]
    refused = [(r["role"], r["source"]) for r in rejections if "expand" not in r]
    return ok, refused, guard_cases


def _outcome(fn, source, contract, role):
    try:
        return ("ok", fn(source, contract, role))
    except ExploreError as e:
        return ("refused", e.to_envelope(), e.reason)
    except Exception as e:  # noqa: BLE001
        return ("error", type(e).__name__, str(e))


def _mutate(text: str) -> str:
    """The same exploration with other literal values (ints +1, strings suffixed, decimals nudged)."""
    def sub(m):
        kind = m.lastgroup
        tok = m.group()
        if kind == "limit":
            return tok
        if kind == "integer":
            return str(int(tok) + 1)
        if kind == "decimal":
            return str(Decimal(tok) + Decimal("0.01"))
        if kind == "string":
            return tok[:-1] + "z" + tok[-1]
        return tok
    return _LITERAL.sub(sub, text)


def verify(contract: Contract) -> dict:
    """Every prototype gives exactly the baseline's answers; returns counts and any difference."""
    ok, refused, guard_cases = _load_cases()
    sources = ok + refused + [(role, _mutate(s)) for role, s in ok if isinstance(s, str)]
    baseline = [_outcome(compile_exploration, s, contract, r) for r, s in sources]
    problems: list[str] = []
    for name in PATCHES:
        with applied((name,)):
            got = [_outcome(compile_exploration, s, contract, r) for r, s in sources]
        diff = [i for i, (a, b) in enumerate(zip(baseline, got)) if a != b]
        if diff:
            problems.append(f"{name}: {len(diff)} sources differ, first {sources[diff[0]]}")
    allowed = allowed_for_read_sets(contract, ["published", "engineering"], max_rows=100)
    sqls = [c["sql"] for c in guard_cases["accept"] + guard_cases["refuse"]]
    sqls += [b[1].sql for b in baseline if b[0] == "ok"]
    base_verdicts = [guard_mod.check(s, allowed) for s in sqls]
    with applied(("guard_walk",)):
        new_verdicts = [guard_mod.check(s, allowed) for s in sqls]
    if base_verdicts != new_verdicts:
        problems.append("guard_walk: guard verdicts differ")
    # caches: prime with each source, then ask the mutated source (a hit with other values) and the source again
    for cache_cls in (ShapeCache, TemplateCache):
        cache = cache_cls()
        mismatches = 0
        for role, s in ok:
            _outcome(cache.compile, s, contract, role)
        for (role, s), base in zip(sources, baseline):
            if _outcome(cache.compile, s, contract, role) != base:
                mismatches += 1
                if mismatches == 1:
                    problems.append(f"{cache_cls.__name__}: differs on {role}: {str(s)[:120]}")
        if mismatches:
            problems.append(f"{cache_cls.__name__}: {mismatches} sources differ")
    return {"sources": len(sources), "compiled": sum(1 for b in baseline if b[0] == "ok"),
            "refused": sum(1 for b in baseline if b[0] == "refused"), "guard_sql": len(sqls), "problems": problems}


# ---------------------------------------------------------------- measurement

CONFIGS: dict[str, tuple[str, ...]] = {
    "baseline": (),
    "lookups": ("lookups",),
    "shape_once": ("shape_once",),
    "guard_walk": ("guard_walk",),
    "generator": ("generator",),
    "all_patches": ("lookups", "shape_once", "guard_walk", "generator"),
}


def measure(contract: Contract, rounds: int, per_block: int = 5, failed: frozenset[str] = frozenset()) -> dict:
    """Time every configuration whose verification passed (`failed`: names that did not)."""
    shape_cache, template_cache = ShapeCache(), TemplateCache()
    patched_shape, patched_template = ShapeCache(), TemplateCache()
    for c in CASES:  # prime the caches (and check they answer what the pipeline answers)
        base = compile_exploration(c.text, contract, c.role)
        for cache in (shape_cache, template_cache, patched_shape, patched_template):
            cache.compile(c.text, contract, c.role)
            assert cache.compile(c.text, contract, c.role) == base
    configs = {name: patches for name, patches in CONFIGS.items() if not set(patches) & failed}
    contenders: dict[str, tuple[tuple[str, ...], Callable]] = {
        name: (patches, compile_exploration) for name, patches in configs.items()}
    if "ShapeCache" not in failed:
        contenders["shape_cache_hit"] = ((), shape_cache.compile)
        if "all_patches" in configs:
            contenders["shape_cache_hit+patches"] = (CONFIGS["all_patches"], patched_shape.compile)
    if "TemplateCache" not in failed:
        contenders["template_cache_hit"] = ((), template_cache.compile)
    contenders["sqlglot"] = ((), None)
    samples: dict[str, dict[str, list[int]]] = {k: {c.id: [] for c in CASES} for k in contenders}
    order = list(contenders.items())
    gc.collect()
    gc.disable()
    try:
        for rnd in range(rounds):
            for case in CASES:
                for name, (patches, fn) in (order if rnd % 2 == 0 else order[::-1]):
                    if fn is None:
                        call = (lambda s=case.sql: sqlglot_walk(s))
                    else:
                        call = (lambda f=fn, t=case.text, r=case.role: f(t, contract, r))
                    with applied(patches):
                        samples[name][case.id].extend(sample(call, per_block, warmup=1, no_gc=False))
    finally:
        gc.enable()
    med = {k: {cid: statistics.median(v) for cid, v in per.items()} for k, per in samples.items()}
    out = {}
    for name in contenders:
        per_case_ratio_base = [med[name][c.id] / med["baseline"][c.id] for c in CASES]
        per_case_ratio_sqlglot = [med[name][c.id] / med["sqlglot"][c.id] for c in CASES]
        out[name] = {
            "median_of_case_p50_us": round(statistics.median(med[name].values()) / 1000, 1),
            "sum_of_case_p50_us": round(sum(med[name].values()) / 1000, 1),
            "vs_baseline": round(statistics.median(per_case_ratio_base), 3),
            "vs_sqlglot": round(statistics.median(per_case_ratio_sqlglot), 3),
            "cases_at_most_0_5x_sqlglot": sum(1 for r in per_case_ratio_sqlglot if r <= 0.5),
            "cases_at_most_1x_sqlglot": sum(1 for r in per_case_ratio_sqlglot if r <= 1.0),
        }
        log(f"    {name:26s} median {out[name]['median_of_case_p50_us']:7.1f} us  x{out[name]['vs_baseline']:.3f} "
            f"of baseline  x{out[name]['vs_sqlglot']:.3f} of sqlglot parse")
    return {"rounds": rounds, "per_block": per_block, "configs": out,
            "cache_counts": {"shape_cache": [shape_cache.hits, shape_cache.misses],
                             "template_cache": [template_cache.hits, template_cache.misses, template_cache.fallbacks]}}


def run(contract: Contract, rounds: int) -> dict:
    checked = verify(contract)
    log(f"    verified on {checked['sources']} sources ({checked['compiled']} compiled, {checked['refused']} refused) "
        f"and {checked['guard_sql']} guard SQL texts: {'identical' if not checked['problems'] else checked['problems']}")
    failed = frozenset(p.split(":")[0] for p in checked["problems"])
    return {"verification": checked, "timing": measure(contract, rounds, failed=failed)}
