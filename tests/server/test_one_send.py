"""An answer goes to the socket in one send: its head held until its body (server/connections.OneSend).

uvicorn writes a response's head when `http.response.start` comes and its body when the body comes: two
sends, so the client is woken twice for one answer. Here the server's own protocol (`GuardedHttp`, as
`connections.serve` configures it) runs on a real socket, its accepted transport watched (every call
passed on to it), and real clients read the answers: a whole answer is one `writelines` of head and body;
a head whose body is late (a stream) still reaches the client before the body is written; a HEAD answer,
which has no body, and a connection closed after its answer, are sent whole.
"""

from __future__ import annotations

import asyncio

from uvicorn.server import ServerState

from ontoos_explore.server.connections import ConnectionLimits, uvicorn_config
from ontoos_explore.server.lifecycle import listen


class Watched:
    """The accepted transport, every write and writelines recorded and passed on."""

    def __init__(self, transport) -> None:
        self._transport = transport
        self.sends: list[list[bytes]] = []

    def write(self, data) -> None:
        self.sends.append([bytes(data)])
        self._transport.write(data)

    def writelines(self, data) -> None:
        self.sends.append([bytes(d) for d in data])
        self._transport.writelines(data)

    def __getattr__(self, name):
        return getattr(self._transport, name)


async def _serve(app):
    """A server of `app` with the guarded protocol; (port, the watched transports, the server)."""
    config = uvicorn_config(app, "127.0.0.1", 0, ConnectionLimits())
    config.load()
    state = ServerState()
    watched: list[Watched] = []

    def protocol():
        proto = config.http_protocol_class(config=config, server_state=state, app_state={})
        made = proto.connection_made

        def connection_made(transport) -> None:
            w = Watched(transport)
            watched.append(w)
            made(w)

        proto.connection_made = connection_made
        return proto

    sock = listen("127.0.0.1", 0)
    server = await asyncio.get_running_loop().create_server(protocol, sock=sock)
    return sock.getsockname()[1], watched, server


async def _read_answer(reader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    return head, await reader.readexactly(length)


BODY = b'{"ok":true}'


async def _whole(scope, receive, send):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(BODY))]})
    await send({"type": "http.response.body", "body": BODY})


def test_a_whole_answer_is_one_send_of_its_head_and_body_and_keep_alive_still_works():
    async def main():
        port, watched, server = await _serve(_whole)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(2):  # the second request on the same connection: a new cycle, held the same way
                writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
                head, body = await _read_answer(reader)
                assert head.startswith(b"HTTP/1.1 200") and body == BODY
            writer.close()
            [w] = watched
            assert len(w.sends) == 2  # one per answer
            for parts in w.sends:
                assert len(parts) == 2 and parts[0].startswith(b"HTTP/1.1 200") and parts[1] == BODY
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_a_head_whose_body_is_late_reaches_the_client_first():
    async def main():
        release = asyncio.Event()

        async def stream(scope, receive, send):
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await release.wait()  # the body comes only once the client has read the head
            await send({"type": "http.response.body", "body": b"late"})

        port, watched, server = await _serve(stream)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert head.startswith(b"HTTP/1.1 200") and b"transfer-encoding: chunked" in head
            release.set()
            assert await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 5) == b"4\r\nlate\r\n0\r\n\r\n"
            writer.close()
            assert [len(parts) for parts in watched[0].sends] == [1, 1]  # the head alone, then the body
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_a_head_answer_and_an_answer_before_close_are_sent_whole():
    async def main():
        port, watched, server = await _serve(_whole)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"HEAD / HTTP/1.1\r\nhost: x\r\n\r\n")  # no body is written: the head goes at the next turn
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert head.startswith(b"HTTP/1.1 200")
            writer.write(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")  # closed after its answer
            head, body = await asyncio.wait_for(_read_answer(reader), 5)
            assert b"connection: close" in head.lower() and body == BODY
            assert await asyncio.wait_for(reader.read(), 5) == b""  # then the server closed it
            writer.close()
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())
