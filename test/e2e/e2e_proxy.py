# What the e2e tests' proxies share: a TCP listener on a port of 127.0.0.1
# the kernel picks, in front of the test cluster's socket.  Imported by
# cut-reply-proxy.py and idle-close-proxy.py (run from this directory).
import asyncio, os


def serve(port_file, pg_sock, handle):
    """Listens, writes the port to port_file once it listens (whole, by a
    rename), and runs handle(client_reader, client_writer, server_reader,
    server_writer) for each connection, its server side opened on pg_sock."""
    async def accept(cr, cw):
        sr, sw = await asyncio.open_unix_connection(pg_sock)
        await handle(cr, cw, sr, sw)

    async def main():
        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        with open(port_file + ".tmp", "w") as f:
            f.write(str(server.sockets[0].getsockname()[1]))
        os.rename(port_file + ".tmp", port_file)
        async with server:
            await server.serve_forever()

    asyncio.run(main())
