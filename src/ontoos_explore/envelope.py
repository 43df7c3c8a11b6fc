"""Envelopes: an outcome -> `Answer` (the JSON every surface sends, plus what the audit needs).

An `Answer` is made in one of two ways, and nowhere else: `Answer.success`
for data, `Answer.refusal` for an `ExploreError`. A refusal is made
presentable once, here (every string encodable, the message at most
MAX_MESSAGE characters), so a surface only translates it into its wire
format: `answer.status` over HTTP, `answer.error.error_code.rpc` for a
transport's own refusal, `answer.exit` on the CLI.

    answer = Answer.refusal(e, exploration_id="…", contract_hash="…")
    answer.status, answer.envelope["error"]["code"]   # (400, "EX201")
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import ExploreError

if TYPE_CHECKING:
    from .compiler import CompiledQuery
    from .ir import Exploration

MAX_MESSAGE = 500  # characters of an error message shown; a longer one echoes far too much input

# What the process tells every client in every envelope (`_notice`: min_cli_version, schema_drift,
# contract_hash). An answer whose maker knows its caller carries that caller's notice (`notice=`: the
# service's, for the caller's role); any other (a surface's refusal before anyone is known) the notice of
# the server the process runs (`install_notice`), if one is installed.
_installed: list[Callable[[], dict[str, Any]]] = []  # the latest installed is the one used


def install_notice(provider: Callable[[], dict[str, Any]]) -> Callable[[], None]:
    """Make `provider()` the `_notice` of envelopes made without one; returns the call that removes it
    again, and only it (lifetimes that overlap, closing in any order, leave none of theirs behind)."""
    _installed.append(provider)

    def remove() -> None:
        if provider in _installed:
            _installed.remove(provider)

    return remove


def _stamped(envelope: dict[str, Any], notice: dict[str, Any] | None) -> dict[str, Any]:
    if notice is None and _installed:
        notice = _installed[-1]()
    if notice is not None:
        envelope["_notice"] = dict(notice)  # a copy: no envelope shares the service's state
    return envelope


def new_id() -> str:
    """An exploration's id: 16 hex digits of the operating system's randomness, as uuid4's first 16 were
    (64 random bits; uuid4's hold 60). Drawn from a block read once every IDS_PER_READ ids rather than a
    read (a system call) each: an id was the one system call of a whole answer that was not I/O. A forked
    child starts a block of its own."""
    global _block, _used
    with _ids_lock:
        if _used >= len(_block):
            _block, _used = os.urandom(ID_BYTES * IDS_PER_READ), 0
        raw = _block[_used:_used + ID_BYTES]
        _used += ID_BYTES
    return raw.hex()


ID_BYTES, IDS_PER_READ = 8, 256
_ids_lock = threading.Lock()  # ids are drawn on worker threads too
_block, _used = b"", 0


def _new_block() -> None:
    global _block, _used, _ids_lock
    _block, _used, _ids_lock = b"", 0, threading.Lock()


os.register_at_fork(after_in_child=_new_block)


def clean_text(text: str, limit: int | None = None) -> str:
    """A string any JSON encoder, UTF-8 and PostgreSQL text accept: NUL written `\\u0000`, an unpaired
    surrogate `\\udXXX`; at most `limit` characters (cut before escaping)."""
    if limit is not None and len(text) > limit:
        text = text[:limit]
    if "\x00" in text:
        text = text.replace("\x00", "\\u0000")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def scrub(value: Any) -> Any:
    """`value` (an envelope, an event's field) with every string `clean_text`ed; iterative for dicts and lists."""
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, (dict, list)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack = [(value, root)]
    while stack:
        src, dst = stack.pop()
        items = src.items() if isinstance(src, dict) else enumerate(src)
        for k, v in items:
            if isinstance(v, (dict, list)):
                child: Any = {} if isinstance(v, dict) else []
                stack.append((v, child))
                v = child
            elif isinstance(v, str):
                v = clean_text(v)
            if isinstance(dst, dict):
                dst[clean_text(k) if isinstance(k, str) else k] = v
            else:
                dst.append(v)
    return root


def presentable(envelope: dict[str, Any]) -> dict[str, Any]:
    """A refusal as a surface shows it: every string encodable (`scrub`), the message at most MAX_MESSAGE
    characters (a syntax error quoting a 60,000-character token should not send it back whole)."""
    env = scrub(envelope)
    err = env.get("error")
    if isinstance(err, dict) and isinstance(err.get("message"), str) and len(err["message"]) > MAX_MESSAGE:
        err["message"] = err["message"][: MAX_MESSAGE - 1] + "\u2026"
    return env


@dataclass
class Answer:
    """One call's envelope, plus what the audit needs (never rendered): the compiled query, the
    exploration as parsed (so the audit never parses again), the error."""

    envelope: dict[str, Any]
    compiled: CompiledQuery | None = None
    error: ExploreError | None = None
    exploration: Exploration | None = None
    cost: float | None = None  # the planner's estimate, for the audit only (never rendered: an oracle on hidden rows)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def status(self) -> int:
        """The HTTP status: 200, or the error's row."""
        return 200 if self.error is None else self.error.error_code.status

    @property
    def exit(self) -> int:
        """The CLI's exit code: 0, or the error's row."""
        return 0 if self.error is None else self.error.error_code.exit

    @classmethod
    def success(cls, envelope: dict[str, Any], compiled: CompiledQuery | None = None,
                exploration: Exploration | None = None, cost: float | None = None,
                notice: dict[str, Any] | None = None) -> Answer:
        return cls(_stamped(envelope, notice), compiled, None, exploration, cost)

    @classmethod
    def refusal(cls, error: ExploreError, compiled: CompiledQuery | None = None,
                exploration: Exploration | None = None, notice: dict[str, Any] | None = None,
                **meta: Any) -> Answer:
        """The error envelope, made presentable; `meta` adds exploration_id, contract_hash, ...;
        `notice` the caller's `_notice` (else the installed one's)."""
        return cls(_stamped(presentable(error.to_envelope(**meta)), notice), compiled, error,
                   exploration if exploration is not None else getattr(error, "exploration", None),
                   (error.detail or {}).get("cost"))
