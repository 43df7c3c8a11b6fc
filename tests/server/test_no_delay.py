"""Server connections send at once: TCP_NODELAY on every accepted socket (server/connections.no_delay).

The listening socket comes from `socket.create_server` (lifecycle.listen), whose `proto` is 0, and asyncio
turns Nagle off only for sockets whose `proto` says TCP. With Nagle on, an answer written as its headers
and then its body waited for the client's delayed ACK: about 40 ms on every keep-alive request. Here the
server's own protocol (`GuardedHttp`, as `connections.serve` configures uvicorn) accepts a connection on
such a socket, and the accepted socket is read from the server's side; a plain asyncio protocol on the
same kind of socket shows the premise: Nagle stays on.
"""

from __future__ import annotations

import asyncio
import socket

from uvicorn.server import ServerState

from ontoos_explore.server.connections import ConnectionLimits, uvicorn_config
from ontoos_explore.server.lifecycle import listen


async def _app(scope, receive, send):  # never reached: nothing is sent on the connection
    raise AssertionError("no request was sent")


async def _accepted_nodelay(guarded: bool) -> int:
    loop = asyncio.get_running_loop()
    accepted: asyncio.Future = loop.create_future()
    config = uvicorn_config(_app, "127.0.0.1", 0, ConnectionLimits())
    config.load()
    state = ServerState()

    class Plain(asyncio.Protocol):
        def connection_made(self, transport) -> None:
            accepted.set_result(transport)

    def guarded_protocol():
        proto = config.http_protocol_class(config=config, server_state=state, app_state={})
        made = proto.connection_made

        def connection_made(transport) -> None:
            made(transport)
            accepted.set_result(transport)

        proto.connection_made = connection_made
        return proto

    sock = listen("127.0.0.1", 0)
    server = await loop.create_server(guarded_protocol if guarded else Plain, sock=sock)
    try:
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        transport = await asyncio.wait_for(accepted, 5)
        value = transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        writer.close()
        transport.close()
        return value
    finally:
        server.close()
        await server.wait_closed()


def test_the_servers_protocol_sends_without_waiting_for_acks():
    assert asyncio.run(_accepted_nodelay(guarded=True)) != 0


def test_asyncio_alone_leaves_nagle_on_for_such_a_socket():
    assert asyncio.run(_accepted_nodelay(guarded=False)) == 0
