#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 that delays every byte by a fixed time in each direction, order kept,
with unbounded buffering (a long, fat link): tests/bench/distant_upload.sh puts it between
parity-agent and parityd to measure an upload over a link with a round trip of twice the delay.
  delay_proxy.py LISTEN_PORT TARGET_PORT ONE_WAY_DELAY_SECONDS
"""
import asyncio
import sys

LISTEN, TARGET, DELAY = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])


async def pipe(reader, writer):
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def send():
        while True:
            arrived, data = await queue.get()
            if data is None:
                writer.close()
                return
            wait = arrived + DELAY - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(send())
    while True:
        data = await reader.read(1 << 20)
        queue.put_nowait((loop.time(), data or None))
        if not data:
            break
    await sender


async def handle(client_reader, client_writer):
    server_reader, server_writer = await asyncio.open_connection("127.0.0.1", TARGET)
    await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer),
                         return_exceptions=True)


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", LISTEN)
    async with server:
        await server.serve_forever()


asyncio.run(main())
