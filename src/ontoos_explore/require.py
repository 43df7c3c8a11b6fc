"""Requirements: what a caller demands of an answer's evidence -> met, or a CONSISTENCY_UNVERIFIED refusal.

    source, require = split(body)          # {"dataset": ..., "require": {"max_age_s": 3600}}
    check(require, envelope["meta"]["evidence"])   # raises when the evidence cannot meet it

A requirement is checked against the evidence the answer carries
(`evidence.render`), after the rows are read and before any is returned:

- `max_age_s`: the data was collected at most this many seconds ago. Only an
  `exact` age can meet it: an `estimated` one counts from a publish time, and
  data is collected before it is published, so it proves nothing; an
  `unknown` one proves nothing either.
- `consistency: "fixed_read"`: the rows and their evidence were read in one
  snapshot; `"any"` (the default) takes what there is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import Codes, ExploreError, InputError
from .names import close_matches

KEYS = ("max_age_s", "consistency")
CONSISTENCY = ("any", "fixed_read")
EXAMPLE = 'e.g. "require": {"max_age_s": 3600, "consistency": "fixed_read"}'


@dataclass(frozen=True, slots=True)
class Require:
    max_age_s: int | None = None
    consistency: str = "any"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"consistency": self.consistency}
        if self.max_age_s is not None:
            out["max_age_s"] = self.max_age_s
        return out


def read(value: Any) -> Require | None:
    """The JSON form's `require` object -> Require (None when absent or null); EX102 when malformed."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _bad("'require' must be an object", EXAMPLE)
    unknown = [k for k in value if k not in KEYS]
    if unknown:
        close = close_matches(str(unknown[0]), KEYS, n=1)
        raise _bad(f"'require' has an unknown key '{str(unknown[0])[:40]}'",
                   (f"did you mean '{close[0]}'? " if close else "") + f"its keys: {', '.join(KEYS)}; {EXAMPLE}")
    age = value.get("max_age_s")
    if age is not None and (isinstance(age, bool) or not isinstance(age, int) or not 0 <= age <= 10**9):
        raise _bad("'require.max_age_s' must be a whole number of seconds, 0 or more", 'e.g. "max_age_s": 3600')
    consistency = value.get("consistency") or "any"  # absent or null: any, as a null max_age_s is none
    if consistency not in CONSISTENCY:
        raise _bad("'require.consistency' must be \"any\" or \"fixed_read\"",
                   '"fixed_read": the rows and their evidence read in one snapshot')
    return Require(age, consistency)


def split(source: Any) -> tuple[Any, Require | None]:
    """A JSON form with its `require` taken out (the same type: a checked form stays checked), and the
    requirement; any other source as it is."""
    if not isinstance(source, dict) or "require" not in source:
        return source, None
    rest = type(source)((k, v) for k, v in source.items() if k != "require")
    return rest, read(source["require"])


def check(require: Require | None, evidence: dict[str, Any] | None) -> None:
    """Raise CONSISTENCY_UNVERIFIED when `evidence` (`meta.evidence`) cannot meet `require`."""
    if require is None:
        return
    evidence = evidence or {"freshness": {"class": "unknown", "age_seconds": None}, "consistency": "unverified"}
    freshness = evidence["freshness"]
    if require.max_age_s is not None:
        kind, age = freshness["class"], freshness.get("age_seconds")
        if kind == "unknown":
            why = freshness.get("unknown_because") or "the evidence is missing"
            raise _unmet(f"how old the data is is unknown ({why}), so it cannot be shown to be at most "
                         f"{require.max_age_s} s old", "ask again without require.max_age_s to get the rows with "
                         "their freshness unknown (meta.evidence)")
        if kind == "estimated":
            raise _unmet(f"the data is at least {_age(age)} old, but {', '.join(freshness['estimated_from'])} "
                         "says only when it published, not when it collected, so the data cannot be shown to be "
                         f"at most {require.max_age_s} s old", "ask again without require.max_age_s to get the rows "
                         "with their estimated freshness (meta.evidence)")
        if age > require.max_age_s:
            raise _unmet(f"the data was collected {_age(age)} ago (at {evidence['collected_at']}), older than the "
                         f"{require.max_age_s} s required", f"ask again with max_age_s of at least {age}, or once "
                         "the lake has published a newer batch (meta.evidence.source_batch names the current ones)")
    if require.consistency == "fixed_read" and evidence["consistency"] != "fixed_read":
        raise _unmet("the rows and their evidence could not be shown to come from one snapshot",
                     "ask again with \"consistency\": \"any\"; meta.evidence says what is known")


def _age(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds} s ({seconds // 60} min)"
    return f"{seconds} s ({seconds / 3600:.1f} h)"


def _bad(message: str, hint: str) -> ExploreError:
    return InputError(Codes.INVALID_REQUEST, message, hint=hint)


def _unmet(message: str, hint: str) -> ExploreError:
    return ExploreError(Codes.CONSISTENCY_UNVERIFIED, message, hint=hint, reason="REQUIREMENT_UNMET")
