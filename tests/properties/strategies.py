"""Hypothesis strategies: explorations as IR (any names) and over a real contract."""

from __future__ import annotations

from hypothesis import strategies as st

from ontoos_explore.ir import (
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
    or_all,
)

KEYWORDS = {"explore", "via", "fields", "where", "group", "order", "by", "limit", "as", "and", "or", "not",
            "in", "is", "null", "between", "like", "ilike", "distinct", "asc", "desc", "true", "false"}

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True).filter(lambda n: n.lower() not in KEYWORDS)


def refs(relations=names, columns=names):
    return st.builds(lambda r, c: Ref(relation=r, column=c), st.none() | relations, columns)


literals = st.one_of(
    st.builds(lambda v: Lit(kind="string", value=v), st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20)),
    st.builds(lambda v: Lit(kind="integer", value=v), st.integers(-(2**63), 2**63 - 1)),
    # places=3 keeps a fractional part in the text ("5.000"), as the grammar's decimals have
    st.builds(lambda v: Lit(kind="decimal", value=v),
              st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-10**6, max_value=10**6)),
    st.builds(lambda v: Lit(kind="boolean", value=v), st.booleans()),
)


def leaves(ref_strategy, lit_strategy=literals):
    return st.one_of(
        st.builds(Compare, ref=ref_strategy, op=st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), value=lit_strategy),
        st.builds(InList, ref=ref_strategy, values=st.lists(lit_strategy, min_size=1, max_size=4).map(tuple), negated=st.booleans()),
        st.builds(Between, ref=ref_strategy, low=lit_strategy, high=lit_strategy),
        st.builds(IsNull, ref=ref_strategy, negated=st.booleans()),
        st.builds(Like, ref=ref_strategy, pattern=lit_strategy, negated=st.booleans(), case_insensitive=st.booleans()),
    )


def predicates(ref_strategy, lit_strategy=literals):
    return st.recursive(
        leaves(ref_strategy, lit_strategy),
        lambda inner: st.one_of(
            st.lists(inner, min_size=2, max_size=3).map(and_all),
            st.lists(inner, min_size=2, max_size=3).map(or_all),
            st.builds(Not, item=inner),
        ),
        max_leaves=8,
    )


def fields(ref_strategy):
    return st.one_of(
        st.builds(ColumnField, ref=ref_strategy, alias=st.none() | names),
        st.builds(
            lambda f, r, d, a: AggregateField(func=f, ref=r, distinct=d and f == "count" and r is not None, alias=a),
            st.sampled_from(["count", "min", "max", "sum", "avg"]), ref_strategy, st.booleans(), st.none() | names,
        ),
        st.builds(AggregateField, func=st.just("count"), alias=st.none() | names),
    )


def explorations(ref_strategy=None):
    ref_strategy = ref_strategy or refs()
    return st.builds(
        Exploration,
        dataset=st.builds(Name, value=names),
        relations=st.lists(st.builds(Name, value=names), max_size=3).map(tuple),
        fields=st.lists(fields(ref_strategy), min_size=1, max_size=4).map(tuple),
        where=st.none() | predicates(ref_strategy),
        group_by=st.lists(ref_strategy, max_size=3).map(tuple),
        order_by=st.lists(st.builds(OrderItem, key=ref_strategy, descending=st.booleans()), max_size=3).map(tuple),
        limit=st.none() | st.integers(1, 10**6),
    )


# ---------------------------------------------------------------- over a real contract

_TYPED_LITERALS = {
    "text": st.text(st.characters(codec="utf-8", blacklist_characters="\x00"), max_size=12).map(lambda v: Lit(kind="string", value=v)),
    "integer": st.integers(-1000, 10**9).map(lambda v: Lit(kind="integer", value=v)),
    "numeric": st.decimals(places=2, min_value=-1000, max_value=10**6).map(lambda v: Lit(kind="decimal", value=v)),
    "boolean": st.booleans().map(lambda v: Lit(kind="boolean", value=v)),
    "date": st.dates().map(lambda v: Lit(kind="string", value=v.isoformat())),
    "timestamp": st.datetimes().map(lambda v: Lit(kind="string", value=v.isoformat())),
}


def _one_in(draw, n: int) -> bool:
    """True about once in n draws (sampled_from is closer to uniform than integers)."""
    return draw(st.sampled_from(range(n))) == 0


def _cased(draw, word: str) -> str:
    return draw(st.sampled_from([word, word.upper(), word.capitalize()]))


@st.composite
def contract_explorations(draw, contract, roots=None):
    """Explorations that mostly make sense for `contract`: a real root (one of `roots`, if given),
    relations that chain, columns of the datasets reached (secret and hidden ones too, now
    and then), literals of the right type (mostly), and aggregates grouped
    properly (mostly). Mistakes are drawn on purpose, at a low rate."""
    root = draw(st.sampled_from(sorted(roots if roots is not None else contract.datasets)))
    reached = [(None, contract.datasets[root])]
    relations = []
    for _ in range(draw(st.integers(0, 3))):
        starts = [r for r in contract.relations.values()
                  if any(ds.name == r.from_ for _, ds in reached) and r.name not in relations]
        if not starts:
            break
        rel = draw(st.sampled_from(sorted(starts, key=lambda r: r.name)))
        relations.append(rel.name)
        reached.append((rel.name, contract.dataset(rel.to)))

    def column_ref():
        relation, ds = draw(st.sampled_from(reached))
        cols = sorted(ds.columns.values(), key=lambda c: c.name)
        readable = [c for c in cols if c.readable] or cols
        unreadable = [c for c in cols if not c.readable]
        col = draw(st.sampled_from(unreadable) if unreadable and _one_in(draw, 6) else st.sampled_from(readable))
        ref = Ref(relation=_cased(draw, relation) if relation else None, column=_cased(draw, col.name))
        return ref, col

    def literal_for(col):
        if _one_in(draw, 15):
            return draw(literals)  # a stranger: often a TYPE_MISMATCH
        if col.type == "enum":
            return Lit(kind="string", value=draw(st.sampled_from(list(col.values))))
        return draw(_TYPED_LITERALS[col.type])

    def leaf():
        ref, col = column_ref()
        kind = draw(st.sampled_from(["compare", "in", "between", "null", "like"]))
        if kind == "compare":
            ops = ["=", "!="] + (["<", "<=", ">", ">="] if col.type != "boolean" else [])
            return Compare(ref=ref, op=draw(st.sampled_from(ops)), value=literal_for(col))
        if kind == "in":
            return InList(ref=ref, values=tuple(literal_for(col) for _ in range(draw(st.integers(1, 4)))),
                          negated=draw(st.booleans()))
        if kind == "between" and col.type != "boolean":
            return Between(ref=ref, low=literal_for(col), high=literal_for(col))
        if kind == "like" and col.type == "text":
            return Like(ref=ref, pattern=literal_for(col), negated=draw(st.booleans()),
                        case_insensitive=draw(st.booleans()))
        return IsNull(ref=ref, negated=draw(st.booleans()))

    def predicate(depth=0):
        if depth >= 2 or draw(st.integers(0, 2)) == 0:
            return leaf()
        op = draw(st.sampled_from(["and", "or", "not"]))
        if op == "not":
            return Not(item=predicate(depth + 1))
        items = [predicate(depth + 1) for _ in range(draw(st.integers(2, 3)))]
        return and_all(items) if op == "and" else or_all(items)

    aggregated = draw(st.booleans())
    plain = [column_ref() for _ in range(draw(st.integers(1 if not aggregated else 0, 3)))]
    fields = [ColumnField(ref=r) for r, _ in plain]
    if aggregated:
        for _ in range(draw(st.integers(1, 2))):
            func = draw(st.sampled_from(["count", "min", "max", "sum", "avg"]))
            if func == "count" and draw(st.booleans()):
                fields.append(AggregateField(func="count"))
                continue
            ref, col = column_ref()
            if func in ("sum", "avg") and col.type not in ("integer", "numeric") and draw(st.integers(0, 4)):
                func = "count"
            if func in ("min", "max") and col.type == "boolean" and draw(st.integers(0, 4)):
                func = "count"
            fields.append(AggregateField(func=func, ref=ref, distinct=func == "count" and draw(st.booleans())))
    # unique output names: alias duplicates
    seen, aliased = set(), []
    for i, f in enumerate(fields):
        key = (f.ref.relation or "", f.ref.column.lower()) if isinstance(f, ColumnField) else (f.func, i)
        aliased.append(f.model_copy(update={"alias": f"f{i}"}) if key in seen else f)
        seen.add(key)
    group_by = tuple(r for r, _ in plain) if aggregated and not _one_in(draw, 10) else ()
    order_by = ()
    if draw(st.booleans()):
        # a field's column, or any column reached (ordering by a column not selected is fine)
        key = draw(st.sampled_from([r for r, _ in plain])) if plain and draw(st.booleans()) else column_ref()[0]
        order_by = (OrderItem(key=key, descending=draw(st.booleans())),)
    return Exploration(
        dataset=Name(value=_cased(draw, root)),
        relations=tuple(Name(value=_cased(draw, r)) for r in relations),
        fields=tuple(aliased),
        where=predicate() if draw(st.integers(0, 3)) else None,
        group_by=group_by,
        order_by=order_by,
        limit=draw(st.none() | st.integers(1, 10**5)),
    )


# ---------------------------------------------------------------- random contracts

_COLUMN_TYPES = ["text", "integer", "numeric", "boolean", "date", "timestamp", "enum"]
_ident = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda n: n not in KEYWORDS)


@st.composite
def contract_documents(draw):
    """A valid contract document (a dict) with random names, types, secrets,
    hidden columns, always-filters, relations of every cardinality, datasets existing
    only with their parents (exists_with, along to-one relations to an earlier dataset
    that hides rows, so chains never cycle), read sets and roles."""
    n = draw(st.integers(2, 5))
    names = draw(st.lists(_ident, min_size=n, max_size=n, unique=True))
    datasets = {}
    for i, name in enumerate(names):
        cols = draw(st.lists(_ident, min_size=2, max_size=6, unique=True))
        columns = {"id": {"type": "integer"}}
        for c in cols:
            if c == "id":
                continue
            t = draw(st.sampled_from(_COLUMN_TYPES))
            col = {"type": t}
            if t == "enum":
                col["values"] = draw(st.lists(_ident, min_size=1, max_size=3, unique=True))
            flag = draw(st.sampled_from(["", "", "", "secret", "hidden"]))
            if flag:
                col[flag] = True
            columns[c] = col
        ds = {"relation": f"s{i % 2}.{name}_t", "columns": columns}
        booleans = [c for c, spec in columns.items() if spec["type"] == "boolean"]
        if booleans and draw(st.booleans()):
            ds["always_filter"] = [{"column": booleans[0], "op": "=", "value": draw(st.booleans())}]
        if draw(st.integers(0, 4)) == 0:
            ds["heavy"] = True
        if draw(st.booleans()):
            ds["max_rows"] = draw(st.integers(1, 2000))
        datasets[name] = ds
    relations = {}
    for j in range(draw(st.integers(0, 5))):
        a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        relations[f"r{j}"] = {"from": a, "to": b, "join": {"id": "id"},
                              "cardinality": draw(st.sampled_from(["one_to_one", "many_to_one", "one_to_many", "many_to_many"]))}
    for i, name in enumerate(names):
        parents = [r for r, rel in relations.items() if rel["from"] == name and rel["to"] in names[:i]
                   and rel["cardinality"] in ("one_to_one", "many_to_one")
                   and ("always_filter" in datasets[rel["to"]] or "exists_with" in datasets[rel["to"]])]
        chosen = [r for r in parents if draw(st.booleans())]
        hiding = [b for b in names[:i] if "always_filter" in datasets[b] or "exists_with" in datasets[b]]
        if hiding and draw(st.booleans()):  # often a parent of its own, so chains are common
            relations[f"up{i}"] = {"from": name, "to": draw(st.sampled_from(hiding)), "join": {"id": "id"},
                                   "cardinality": draw(st.sampled_from(["one_to_one", "many_to_one"]))}
            chosen.append(f"up{i}")
        if chosen:
            datasets[name]["exists_with"] = chosen
    split = draw(st.integers(1, n))
    read_sets = {"first": names[:split], "second": names[split:] or names[:1]}
    roles = {
        "narrow": {"read_sets": ["first"], "max_rows": draw(st.integers(1, 500)), "max_relations": draw(st.integers(0, 2))},
        "wide": {"read_sets": ["first", "second"], "max_rows": draw(st.integers(1, 5000)), "max_relations": 3},
    }
    return {"version": 1, "datasets": datasets, "relations": relations, "read_sets": read_sets, "roles": roles}


# ---------------------------------------------------------------- hostile text

HOSTILE_TOKENS = [
    "explore", "fields", "where", "via", "group by", "order by", "limit", "as", "and", "or", "not", "in", "is",
    "null", "between", "like", "ilike", "distinct", "count(", "sum(", ")", "(", ",", ".", "=", "!=", "<>", "<=",
    "'", '"', "''", "\\'", "\\\\", "\\", ";", "--", "/*", "*/", "$1", "%s", "%(x)s", "*", "pg_catalog.pg_authid",
    "information_schema.tables", "pg_sleep(10)", "DROP TABLE x", "' OR 1=1 --", "\u212a", "\u0130", "\uff45xplore",
    "\u200b", "\u202e", "e\u0301", "9" * 40, "-" + "9" * 30, "1e309", "NaN", "Infinity", "true", "FALSE",
    "\n", "\t", " ",
]


def hostile_text(vocabulary):
    token = st.sampled_from(HOSTILE_TOKENS + list(vocabulary)) | st.text(max_size=4)
    soup = st.lists(token, max_size=30).map(" ".join)
    prefixed = st.builds(lambda ds, rest: f"explore {ds} fields {rest}", st.sampled_from(list(vocabulary) or ["x"]), soup)
    deep = st.integers(1, 400).map(lambda d: "explore x fields a where " + "not (" * d + "a = 1" + ")" * d)
    return st.one_of(soup, prefixed, deep)


def near_misses(contract):
    """A valid exploration's text with a hostile token spliced in somewhere."""
    from ontoos_explore.grammar.render import to_text

    @st.composite
    def build(draw):
        text = to_text(draw(contract_explorations(contract)))
        at = draw(st.integers(0, len(text)))
        token = draw(st.sampled_from(HOSTILE_TOKENS) | st.sampled_from(sorted(contract.datasets)))
        return text[:at] + token + text[at:]

    return build()
