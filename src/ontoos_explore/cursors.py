"""Cursors: a truncated answer -> an opaque, signed token for its next page, and back.

A truncated answer whose order is total (`policy/paging.py`) carries
`meta.next_cursor`. The token is the page's facts, signed with the
deployment's secret (HMAC-SHA256; `ONTOOS_SECRET`, the same in every process
of a deployment, else a random one per process):

- who asked (the principal) and under which contract (its hash): a cursor
  passed by another principal, or after the contract changed, is refused;
- the question: its fingerprint and its canonical text, literals included
  (so the cursor alone asks it again; an exploration sent with it must be
  the same one);
- where the next page starts: the rows before it, in the total order;
- which page it is: the pages of one question stop at the role's
  `max_pages`, so paging cannot undo the row budget unseen;
- the publish-log batches the first page was read from (a digest): a later
  page read from other batches (the lake was republished in between) would
  not continue the same rows, and is refused;
- when it was issued: past `ONTOOS_CURSOR_TTL` seconds it is refused.

Every refusal is `RESULT_EXPIRED` (EX703, 410): ask the question again.
Nothing in a token is secret (it is the caller's own question), but nothing
in it can be changed without the secret.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import Codes, ExploreError
from .jsontext import dumps_bytes

VERSION = 1
MAX_TOKEN = 8192  # characters: a question is at most a few KB


@dataclass(frozen=True, slots=True)
class Page:
    """What a cursor says: the question, where its next page starts, and whose it is."""

    principal: str
    contract: str
    fingerprint: str
    question: str  # the exploration in canonical text form
    offset: int  # rows before this page
    number: int  # this page's number (the first page is 1)
    batches: str  # digest of the first page's publish-log batches
    issued: float


def batches_digest(evidence: dict[str, Any] | None) -> str:
    """The publish-log batches an answer was read from, as a short digest ("" for none): of their
    canonical JSON (`json.dumps`, sorted keys), so every version of this service computes the same one.
    Answers read from the same batches are many: the digest of each set of source -> batch id (both
    text, as the log's rows are read) is kept (~1 us against ~5 for the canonical text and its hash)."""
    found = (evidence or {}).get("source_batch")
    if not found:
        return ""
    if isinstance(found, dict) and all(type(k) is str and type(v) is str for k, v in found.items()):
        return _text_digest(tuple(sorted(found.items())))
    return _digest(found)


def _digest(found: Any) -> str:
    return hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=1024)  # sets of batches (the lake publishes a few a day)
def _text_digest(items: tuple[tuple[str, str], ...]) -> str:
    return _digest(dict(items))


def expired(message: str, hint: str = "ask the question again (without cursor) for a first page") -> ExploreError:
    return ExploreError(Codes.RESULT_EXPIRED, message, hint=hint)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Cursors:
    """Mints and opens cursors with one secret. `secret` None: a random one (this process only)."""

    def __init__(self, secret: str | bytes | None, ttl_s: int = 900, clock: Callable[[], float] = time.time) -> None:
        self.ephemeral = secret is None
        raw = secrets.token_bytes(32) if secret is None else secret
        self._key = raw.encode() if isinstance(raw, str) else raw
        self.ttl_s = ttl_s
        self._clock = clock

    def _sign(self, body: bytes) -> str:
        return _b64(hmac.new(self._key, body, hashlib.sha256).digest())

    def mint(self, page: Page) -> str:
        body = dumps_bytes({"v": VERSION, "p": page.principal, "c": page.contract, "f": page.fingerprint,
                            "q": page.question, "o": page.offset, "n": page.number, "b": page.batches,
                            "t": round(page.issued, 3)})  # compact JSON, as `open` reads it
        return f"{_b64(body)}.{self._sign(body)}"

    def next_page(self, principal: str, contract: str, fingerprint: str, question: str, offset: int,
                  number: int, batches: str, issued: float | None = None) -> str:
        return self.mint(Page(principal, contract, fingerprint, question, offset, number, batches,
                              self._clock() if issued is None else issued))

    def open(self, token: Any, principal: str, contract: str) -> Page:
        """The page a cursor names, or RESULT_EXPIRED: not a cursor, altered, another principal's or
        contract's, or older than `ttl_s`."""
        if (not isinstance(token, str) or not token or len(token) > MAX_TOKEN or not token.isascii()
                or token.count(".") != 1):
            raise expired("the cursor is not one this service issued", "pass meta.next_cursor exactly as it came")
        body_text, signature = token.split(".")
        try:
            body = _unb64(body_text)
        except (binascii.Error, ValueError):
            raise expired("the cursor is not one this service issued", "pass meta.next_cursor exactly as it came") from None
        if not hmac.compare_digest(self._sign(body), signature):
            hint = ("this server restarted without ONTOOS_SECRET, so its earlier cursors are void; ask again"
                    if self.ephemeral else "pass meta.next_cursor exactly as it came")
            raise expired("the cursor was altered, or signed by another deployment", hint)
        try:
            d = json.loads(body)
            if d["v"] != VERSION:
                raise ValueError(d["v"])
            page = Page(str(d["p"]), str(d["c"]), str(d["f"]), str(d["q"]), int(d["o"]), int(d["n"]), str(d["b"]),
                        float(d["t"]))
        except (ValueError, KeyError, TypeError):  # signed by us, so only an older format could do this
            raise expired("the cursor is of an older format") from None
        if page.principal != principal:
            raise expired("the cursor was issued to another principal")
        if page.contract != contract:
            raise expired("the cursor was issued under another version of the contract")
        age = self._clock() - page.issued
        if age > self.ttl_s:
            raise expired(f"the cursor is {age:.0f} s old; cursors last {self.ttl_s} s")
        return page
