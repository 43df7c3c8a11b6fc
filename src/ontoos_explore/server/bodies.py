"""Server, bodies: reading a request body within its size and time limits, as strict JSON.

    body = await read_limited(receive, declared, timeout_s)   # bytes, or an ExploreError
    obj = await read_json_object(request, timeout_s)          # REST: a JSON object

Every refusal is an `ExploreError` whose row carries its status: INVALID_REQUEST
(400) for a REST POST with arguments in its query string (only `format` may
be there: the body holds the arguments), BODY_TOO_LARGE
(413; a declared Content-Length over MAX_BODY is refused before a byte is
read), BODY_TOO_SLOW (408), BODY_NOT_JSON (415), CANCELLED (499: the caller
left half-way), and what `loads_strict` refuses (JSON_UNREADABLE 400,
JSON_TOO_LARGE 413).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from starlette.requests import Request

from ..errors import Codes, InputError, body_too_large, body_too_slow, cancelled, not_json
from ..grammar.forms import loads_strict

MAX_BODY = 256 * 1024
BODY_TIMEOUT_S = 30.0  # a body must arrive within this (ONTOOS_BODY_TIMEOUT); slower is 408


def body_timeout_s(explicit: float | None = None) -> float:
    """The body timeout: `explicit`, else ONTOOS_BODY_TIMEOUT, else BODY_TIMEOUT_S."""
    return explicit or float(os.environ.get("ONTOOS_BODY_TIMEOUT") or BODY_TIMEOUT_S)


def json_media_type(value: str | None) -> bool:
    """application/json or application/*+json, in UTF-8 if a charset is given; absent is accepted."""
    if value is None or not value.strip():
        return True
    media, _, params = value.partition(";")
    media = media.strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        return False
    for param in params.split(";"):
        key, _, v = param.partition("=")
        if key.strip().lower() == "charset" and v.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return False
    return True


def declared_too_large(declared: str | None) -> int | None:
    """The declared Content-Length when it is over MAX_BODY, else None."""
    declared = (declared or "").strip()
    return int(declared) if declared.isdigit() and int(declared) > MAX_BODY else None


async def read_limited(receive, declared: str | None, timeout_s: float) -> bytes:
    """The whole body from an ASGI `receive`, at most MAX_BODY bytes, within `timeout_s`."""
    if (size := declared_too_large(declared)) is not None:
        raise body_too_large(MAX_BODY, size)
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":  # the caller left half-way: nobody to answer
                    raise cancelled("rest")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > MAX_BODY:
                    raise body_too_large(MAX_BODY)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        raise body_too_slow(timeout_s) from None


async def read_json_object(request: Request, timeout_s: float) -> dict[str, Any]:
    """A REST body: sent as JSON (an absent Content-Type is taken as JSON), strict, an object. Its query
    string says how the answer is sent (`format`) and nothing else: an argument there is refused, never
    ignored."""
    if any(name != "format" for name in request.query_params.keys()):
        raise InputError(Codes.INVALID_REQUEST, "a POST takes its arguments in the JSON body, not the query string",
                         hint="send them in the body; the query string takes format=csv or format=json only")
    content_type = request.headers.get("content-type")
    if not json_media_type(content_type):
        raise not_json(content_type)
    body = loads_strict(await read_limited(request.receive, request.headers.get("content-length"), timeout_s))
    if not isinstance(body, dict):
        raise InputError(Codes.INVALID_REQUEST, "the body must be a JSON object",
                         hint='e.g. {"dataset": "workloads", "fields": ["name"]}')
    return body
