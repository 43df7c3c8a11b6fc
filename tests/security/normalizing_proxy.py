"""A loopback reverse proxy for the sqlmap scan that blanks two volatile fields of each answer.

    proxy = NormalizingProxy(upstream_port)   # listens on 127.0.0.1:proxy.port, in a thread
    ...
    proxy.stop()

Every answer of the server carries a fresh `exploration_id` and its `elapsed_ms`. sqlmap sees
"unstable" content and falls back to a fuzzy page comparison. On the short error envelopes the
random id alone moves that comparison by a few percent, which now and then looks like a boolean
difference. sqlmap's false-positive check throws such a candidate away afterwards, but by then
it has skipped the remaining tests of that technique for the parameter, so noise costs coverage.

The proxy forwards each request unchanged (method, path, headers including Host, body). It
returns the answer unchanged except that it sets `"exploration_id"` to sixteen zeros and
`"elapsed_ms"` to 0. Neither depends on what was asked. Time-based tests are not affected: the
proxy only adds well under a millisecond. The real server and the control are scanned through
a proxy each, so both see the same conditions. `--direct` in the scan skips the proxies.
"""

from __future__ import annotations

import http.client
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VOLATILE = (
    (re.compile(rb'"exploration_id":"[0-9a-f]*"'), b'"exploration_id":"0000000000000000"'),
    (re.compile(rb'"elapsed_ms":-?[0-9.]+(?:[eE][-+]?[0-9]+)?'), b'"elapsed_ms":0'),
)
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
              "content-length"}


def normalize(body: bytes) -> bytes:
    for pattern, replacement in VOLATILE:
        body = pattern.sub(replacement, body)
    return body


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else each answer waits ~40 ms for a delayed ACK
    upstream_port = 0  # set per server class
    counter: dict[str, int]

    def log_message(self, format, *args):  # quiet
        pass

    def _upstream(self) -> http.client.HTTPConnection:
        conn = getattr(self, "_conn", None)
        if conn is None:
            conn = self._conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=120)
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _send_upstream(self, body: bytes | None) -> http.client.HTTPResponse:
        for attempt in (1, 2):  # the upstream may have closed an idle keep-alive connection: reconnect once
            conn = self._upstream()
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in HOP_BY_HOP:
                        conn.putheader(name, value)
                conn.putheader("Content-Length", str(len(body or b"")))
                conn.endheaders(body)
                return conn.getresponse()
            except (ConnectionError, http.client.HTTPException, OSError):
                conn.close()
                self._conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        with self.counter_lock:
            self.counter["requests"] += 1
        try:
            r = self._send_upstream(body)
            data = normalize(r.read())
        except (ConnectionError, http.client.HTTPException, OSError):
            self.send_error(502, "upstream unavailable")
            return
        self.send_response_only(r.status, r.reason)
        for name, value in r.getheaders():
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _forward


class NormalizingProxy:
    def __init__(self, upstream_port: int) -> None:
        self.counter = {"requests": 0}
        handler = type("Handler", (_Handler,), {"upstream_port": upstream_port, "counter": self.counter,
                                                "counter_lock": threading.Lock()})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name=f"proxy-{upstream_port}", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
