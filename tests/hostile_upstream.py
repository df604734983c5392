"""A raw-socket upstream that misbehaves on purpose, run as its own process.

    python tests/hostile_upstream.py PORT

Every connection is numbered from 1. A path picks the answer:

/inject            -> `own /inject on N`, then, while the connection sits idle, an unsolicited
                      response whose body is `INJECTED-BODY`
/long-header?B     -> a field B bytes long
/many-headers?N    -> N small fields
/continue-forever  -> `100 Continue` every 10 ms, never a final response
/switch            -> `101 Switching Protocols`, then raw bytes
anything else      -> `own PATH on N` (Content-Length, keep-alive)
"""

from __future__ import annotations

import asyncio
import sys

_connections = [0]


def answer(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def misbehave(path: bytes, number: int, writer: asyncio.StreamWriter) -> None:
    target, _, query = path.partition(b"?")
    own = answer(b"own %s on %d" % (target, number))
    if target == b"/inject":
        writer.write(own)
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.write(answer(b"INJECTED-BODY"))
    elif target == b"/long-header":
        writer.write(answer(b"long", b"x-long: %s\r\n" % (b"a" * int(query))))
    elif target == b"/many-headers":
        writer.write(answer(b"many", b"".join(b"x-f%d: v\r\n" % i for i in range(int(query)))))
    elif target == b"/continue-forever":
        while True:
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)
    elif target == b"/switch":
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: raw\r\nconnection: upgrade"
                     b"\r\n\r\nRAW-PROTOCOL-BYTES")
    else:
        writer.write(own)
    await writer.drain()


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    _connections[0] += 1
    number = _connections[0]
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            await misbehave(head.split(b" ", 2)[1], number, writer)
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(serve, "127.0.0.1", port, limit=1024 * 1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
