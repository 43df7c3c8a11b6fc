"""Server, connections: what uvicorn's HTTP/1.1 protocol leaves unbounded, bounded before a request is read.

The protocol is uvicorn's httptools one (llhttp, the parser of Node.js): it costs half of what its h11
one does (0.2 against 0.4 ms of CPU a request on this machine, a trivial app under 16 clients; h11's
0.4 ms was about a fifth of a filtered scan's whole call). uvicorn arms no timer while a request's line and headers
arrive (its keep-alive timeout runs only between requests, and any byte cancels it), bounds neither the
request line nor the headers (llhttp does not), and counts no connections per
client: sockets that never finish their headers, or send headers without end, are held for ever, until
the process runs out of memory or file descriptors and answers nobody. Its own knobs do not close that:
`limit_concurrency` answers 503 only once a request's headers are in, `timeout_keep_alive` only after an
answer. `GuardedHttp` (uvicorn's `HttpToolsProtocol`, subclassed; `serve` runs it) adds:

- the header timeout (`header_timeout_s`, ONTOOS_HEADER_TIMEOUT, default 10 s):
  from a connection's start, and again from each answer, the next request's
  line and headers must be in within it. A connection that began a request
  and did not finish its headers is answered 408 (HEADERS_TOO_SLOW, the
  envelope) and closed; one that sent nothing (or only the rest of a body the
  app did not read) is closed. A request whose headers are in is the app's
  (its body has the body timeout; an MCP stream may stay open).
- the head's size (MAX_HEAD, 64 KB: the request line and the headers; llhttp's
  URL reader takes no more): past it, 431 (HEAD_TOO_LARGE, the envelope, whose
  hint says to POST a long exploration) and the connection closed, before the
  app sees any of it. A method llhttp does not know is 405 (WRONG_METHOD) the
  same way; other bytes that are not HTTP, uvicorn's plain-text 400.
- connections per client address (`per_client`, ONTOOS_CONNECTIONS_PER_CLIENT,
  default 64): one more is answered 429 (TOO_MANY_CONNECTIONS, the envelope,
  `Retry-After: 1`) as it opens, without reading a request, and closed once
  the client has read that (at most 1 s later); the first refusal of an
  address while it is at its cap is logged.
- connections in all (`max_connections`, by default the process's descriptor
  limit less a reserve for the database pool, the audit and files; `serve`
  raises the soft limit to the hard one first): one more is closed at once.

And one thing for speed: each request's answer leaves in one send, its head held until its body
(`OneSend`), where uvicorn sends the two apart and its client is woken twice.

None of these refusals is in the audit: they come before any request (and a
flood must not fill the trail); the log says when an address reaches its cap.
Behind a proxy every client has the proxy's address: raise `per_client`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import resource
import socket
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..envelope import Answer
from ..jsontext import dumps_bytes
from ..errors import ExploreError, head_too_large, headers_too_slow, too_many_connections, unknown_method
from .gone import GONE_KEY, left

log = logging.getLogger("ontoos_explore.http")

HEADER_TIMEOUT_S = 10.0
PER_CLIENT = 64
FD_RESERVE = 256  # descriptors kept for the process's own use: the pool, the audit, the registry, logs
LINGER_S = 1.0  # a refused connection stays open this long at most, for its client to read the 429
MAX_FDS = 1 << 20  # what the soft limit is raised to at most, when the hard limit is unlimited
METHOD_LIKE = re.compile(rb"(?:\r\n)*[A-Za-z][A-Za-z0-9_-]{0,31} ")  # a request's first word, as a method is
MAX_HEAD = 64 * 1024  # a request's line and headers, in bytes (llhttp's URL reader takes 64 KB at most)


class HeadTooLarge(Exception):
    """Raised in the parser's callbacks: llhttp stops, and `data_received` answers 431 and closes."""


def raise_fd_limit() -> int:
    """Raise this process's soft limit of open files to its hard limit; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = MAX_FDS if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):  # not allowed here: keep the limit there is
            pass
    return MAX_FDS if soft == resource.RLIM_INFINITY else soft


def fd_budget(limit: int | None = None) -> int:
    """Connections the server may hold at once: the descriptor limit less what the process needs itself."""
    if limit is None:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        limit = MAX_FDS if soft == resource.RLIM_INFINITY else soft
    return max(16, limit - min(FD_RESERVE, limit // 4))


class ConnectionLimits:
    """The bounds of one server, and its count of open connections per client address (one event loop:
    no locks). The table holds only addresses with a connection open."""

    def __init__(self, header_timeout_s: float = HEADER_TIMEOUT_S, per_client: int = PER_CLIENT,
                 max_connections: int | None = None) -> None:
        if not header_timeout_s > 0 or per_client < 1:
            raise ValueError("header_timeout_s must be > 0 and per_client >= 1")
        self.header_timeout_s = header_timeout_s
        self.per_client = per_client
        self.max_connections = fd_budget() if max_connections is None else max_connections
        self.open: dict[str, int] = {}  # client address -> connections admitted and not yet closed
        self._crowded: set[str] = set()  # addresses refused since they reached their cap (logged once)
        self._full = False  # the server at max_connections (logged once)

    @property
    def too_many(self) -> bytes:
        """The 429 for a connection past the address's cap (made when sent: its `_notice` is the current one)."""
        return _response(too_many_connections(self.per_client), b"retry-after: 1\r\n")

    @property
    def too_slow(self) -> bytes:
        return _response(headers_too_slow(self.header_timeout_s))

    @property
    def too_large(self) -> bytes:
        return _response(head_too_large(MAX_HEAD))

    @property
    def no_method(self) -> bytes:
        return _response(unknown_method())

    def admit(self, address: str) -> bool:
        held = self.open.get(address, 0)
        if held >= self.per_client:
            if address not in self._crowded:
                self._crowded.add(address)
                log.warning("%s holds %d connections, its most: more are answered 429 (TOO_MANY_CONNECTIONS) "
                            "until some close", address, held)
            return False
        self.open[address] = held + 1
        return True

    def release(self, address: str) -> None:
        held = self.open.get(address, 0) - 1
        if held > 0:
            self.open[address] = held
        else:
            self.open.pop(address, None)
        if held < self.per_client:
            self._crowded.discard(address)

    def server_full(self, connections: int) -> bool:
        full = connections >= self.max_connections
        if full and not self._full:
            log.warning("%d connections are open, the server's most: new ones are closed until some end", connections)
        self._full = full
        return full


def _response(e: ExploreError, extra: bytes = b"") -> bytes:
    """A whole HTTP/1.1 answer with the refusal's envelope, for a connection that is then closed."""
    body = dumps_bytes(Answer.refusal(e).envelope)  # made presentable, its _notice with it
    status = e.error_code.status
    reason = {405: b"Method Not Allowed", 408: b"Request Timeout", 429: b"Too Many Requests",
              431: b"Request Header Fields Too Large"}.get(status, b"Error")
    return (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n%s\r\n"
            % (status, reason, len(body), extra)) + body


class GuardedHttp(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools) with the header timeout, the head's bound and the
    connection caps of `limits` (`guarded(limits)` makes the class uvicorn instantiates per connection)."""

    limits: ConnectionLimits = ConnectionLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._address: str | None = None  # set once admitted (and counted)
        self._refused = False  # answered (or closed) as it opened: nothing of it reaches the parser or the app
        self._timer = None  # the header timeout, or a refused connection's linger
        self._waiting_for: Any = None  # the request cycle the timeout was armed after (None: the first)
        self._head = 0  # bytes of the current request's line and headers
        self._begun = False  # a request's first byte is in, its headers are not

    # ------------------------------------------------------------ opening

    def connection_made(self, transport) -> None:  # type: ignore[override]
        no_delay(transport)
        limits = self.limits
        if limits.server_full(len(self.server_state.connections)):
            self._refused = True
            self.transport = transport
            transport.close()
            return
        peer = transport.get_extra_info("peername")  # read once by asyncio when it accepted the socket
        address = str(peer[0]) if isinstance(peer, (tuple, list)) and peer else "local"
        if not limits.admit(address):
            self._refuse(transport)
            return
        self._address = address
        super().connection_made(transport)
        self._arm()

    def _refuse(self, transport) -> None:
        """The 429 as the connection opens; then the client's bytes are read and dropped until it closes
        (closing with them unread would reset the connection, and the answer might be lost), 1 s at most."""
        self._refused = True
        self.transport = transport
        self.server_state.connections.add(self)  # counted in all, and closed by a shutdown
        transport.write(self.limits.too_many)
        if transport.can_write_eof():
            transport.write_eof()
        self._timer = self.loop.call_later(LINGER_S, transport.close)

    # ------------------------------------------------------------ the header timeout

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._waiting_for = self.cycle
        self._timer = self.loop.call_later(self.limits.header_timeout_s, self._headers_late)

    def _headers_late(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not self._waiting_for or (self.cycle is not None and not self.cycle.response_complete):
            return  # a request's headers came in time (it may still be being answered)
        if self._begun:
            self.transport.write(self.limits.too_slow)
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request's headers are due within the timeout of this answer

    # ------------------------------------------------------------ the parser's callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head, self._begun = 0, True
        self.scope[GONE_KEY] = []  # gone.unless_gone: what to cancel if its client leaves first

    def on_url(self, url: bytes) -> None:
        self._grown(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._grown(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._begun = False
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not before:  # its writes go through `OneSend` (its task has not run yet)
            self.cycle.transport = OneSend(self.transport, self.loop)

    def _grown(self, n: int) -> None:
        self._head += n
        if self._head > MAX_HEAD:
            raise HeadTooLarge  # llhttp stops (HttpParserCallbackError): answered 431, closed

    # ------------------------------------------------------------ the rest of the protocol

    def data_received(self, data: bytes) -> None:
        """uvicorn's, but a head past MAX_HEAD and a method llhttp does not know are answered with their
        envelopes (431, 405) rather than its plain-text 400; the connection is closed after either."""
        if self._refused:
            return  # dropped: nothing is read from a refused connection
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserInvalidMethodError:
            if METHOD_LIKE.match(data):  # a word where the method goes (a TLS hello or binary is no method)
                self._answered(self.limits.no_method)
            else:
                self._unreadable()
        except httptools.HttpParserCallbackError as e:
            if isinstance(e.__context__, HeadTooLarge):
                self._answered(self.limits.too_large)
            else:
                self._unreadable()
        except httptools.HttpParserError:
            self._unreadable()
        except httptools.HttpParserUpgrade:  # no upgrade is taken (ws="none"): the request is answered as it is
            pass

    def _unreadable(self) -> None:
        self.logger.warning("Invalid HTTP request received.")
        self.send_400_response("Invalid HTTP request received.")

    def _answered(self, response: bytes) -> None:
        self.transport.write(response)
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            left(cycle.scope)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._refused:
            self.server_state.connections.discard(self)
            return
        if self._address is not None:
            self.limits.release(self._address)
            self._address = None
        super().connection_lost(exc)

    def shutdown(self) -> None:
        if self._refused:
            self.transport.close()
            return
        super().shutdown()


class OneSend:
    """The transport as one request's response cycle sees it: the response's head (its first write) is held
    until the body's first write, and the two go to the socket in one send (`writelines`: uvloop writes them
    with one writev, no copy). uvicorn writes the head as `http.response.start` comes and the body as its
    message comes: two sends, so a client reads an answer in two wake-ups. A head whose body does not follow
    in the same turn of the loop (a stream, a 100 Continue) is sent at the loop's next turn; `close` sends
    what is held first. Everything else is the transport's own."""

    __slots__ = ("_transport", "_loop", "_held", "_wrote")

    def __init__(self, transport, loop) -> None:
        self._transport, self._loop = transport, loop
        self._held: bytes | None = None
        self._wrote = False  # the first write came (it is held, or sent)

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.writelines((held, data))
        elif self._wrote:
            self._transport.write(data)
        else:
            self._wrote = True
            self._held = data
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def guarded(limits: ConnectionLimits) -> type[GuardedHttp]:
    """The protocol class for uvicorn's `http=`: `GuardedHttp` bound to `limits`."""
    return type("GuardedHttp", (GuardedHttp,), {"limits": limits})


def uvicorn_config(app, host: str, port: int, limits: ConnectionLimits, **options: Any):
    """uvicorn's Config for `app` with the guarded protocol; no WebSocket upgrades (the app takes none)."""
    import uvicorn

    options = {"log_level": "warning", "lifespan": "on", **options}
    return uvicorn.Config(app, host=host, port=port, http=guarded(limits), ws="none", **options)


def no_delay(transport) -> None:
    """TCP_NODELAY on the connection's socket. asyncio sets it only on sockets whose `proto` says TCP, and a
    socket from `socket.create_server` (how `lifecycle.listen` makes the listening one) says 0: without
    it an answer written as headers then body waits for the client's delayed ACK, some 40 ms each."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def serve(app, host: str, port: int, *, header_timeout_s: float = HEADER_TIMEOUT_S, per_client: int = PER_CLIENT,
          max_connections: int | None = None, drain=None, sock=None, lines: list[str] | None = None,
          **options: Any) -> int:
    """Run `app` under uvicorn on `sock` (else a socket bound to host:port here: `lifecycle.listen`) with
    these bounds, until a signal stops it (`lifecycle.GracefulServer`: the drain, then uvicorn's own
    shutdown); `lines`: said on stderr once it listens. The exit status: 0, or 3 if it never started."""
    from .lifecycle import Drain, GracefulServer, listen

    fds = raise_fd_limit()
    limits = ConnectionLimits(header_timeout_s, per_client, fd_budget(fds) if max_connections is None
                              else max_connections)
    sock = sock if sock is not None else listen(host, port)
    server = GracefulServer(uvicorn_config(app, host, port, limits, **options), drain or Drain(), lines)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # a third signal while the lifespan exits
        pass
    return 0 if server.started else 3  # uvicorn's STARTUP_FAILURE, as uvicorn.run exits
