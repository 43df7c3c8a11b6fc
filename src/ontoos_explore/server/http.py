"""Server, HTTP: where the app's parts were (kept so that imports of them keep working).

    app.py           build_app: routes, exception handlers, lifespan, middleware
    middleware.py    BearerAuth (who is asking), BodyLimit (how much of a body is read)
    bodies.py        a body within its size and time limits, as strict JSON
    rest.py          the REST endpoints; an Answer as an HTTP response (answer_response)
    query_string.py  the GET form -> the tool's arguments
    mcp_http.py      /mcp: the pre-checks, the session caps, JSON-RPC errors (rpc_payload)
"""

from __future__ import annotations

from .app import build_app
from .bodies import BODY_TIMEOUT_S, MAX_BODY, json_media_type, read_limited
from .mcp_http import loopback_security, rpc_payload
from .middleware import BearerAuth, BodyLimit
from .rest import answer_response, unless_gone

__all__ = ["BODY_TIMEOUT_S", "MAX_BODY", "BearerAuth", "BodyLimit", "answer_response", "build_app", "json_media_type",
           "loopback_security", "read_limited", "rpc_payload", "unless_gone"]
