"""Server connections send at once: TCP_NODELAY on every accepted socket (server/connections.no_delay).

The listening socket comes from `socket.create_server` (lifecycle.listen), whose `proto` is 0, and asyncio
turns Nagle off only for sockets whose `proto` says TCP. With Nagle on, an answer written as its headers
and then its body waited for the client's delayed ACK: about 40 ms on every keep-alive request. Here a
real asyncio server on that listening socket: the accepted socket has Nagle on unless `no_delay` runs,
and off once it has.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from ontoos_explore.server.connections import no_delay
from ontoos_explore.server.lifecycle import listen


async def _accepted_nodelay(fix: bool) -> int:
    seen: asyncio.Future = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport) -> None:
            if fix:
                no_delay(transport)
            sock = transport.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    sock = listen("127.0.0.1", 0)
    server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
    try:
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        value = await asyncio.wait_for(seen, 5)
        writer.close()
        return value
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("fix, expected", [(False, 0), (True, 1)])
def test_an_accepted_connection_sends_without_waiting_for_acks(fix, expected):
    assert bool(asyncio.run(_accepted_nodelay(fix))) == bool(expected)
