# A TCP proxy in front of a PostgreSQL socket that closes a session idle for
# a second, without a word, as a load balancer's or firewall's idle timeout
# does: a session whose last message from the server was ReadyForQuery and
# that has sent nothing since (one waiting in a query, await_claim's, is not
# idle).  Each close appends a line to CLOSED_FILE.
#   idle-close-proxy.py PORT_FILE PG_SOCKET CLOSED_FILE
# Used by test/e2e/85-idle-close.sh (through start_proxy in lib.sh).
import asyncio, sys, time

import e2e_proxy

port_file, pg_sock, closed_file = sys.argv[1:4]
READY = b"Z\x00\x00\x00\x05"  # ReadyForQuery, then its status byte


async def handle(cr, cw, sr, sw):
    st = {"idle_since": None}

    async def client_to_server():
        while data := await cr.read(65536):
            st["idle_since"] = None  # a call: not idle until its ReadyForQuery
            sw.write(data)
            await sw.drain()

    async def server_to_client():
        while data := await sr.read(65536):
            # ReadyForQuery at the end of what came: the session is idle.
            if len(data) >= 6 and data[-6:-1] == READY:
                st["idle_since"] = time.monotonic()
            cw.write(data)
            await cw.drain()

    async def reaper():
        while True:
            await asyncio.sleep(0.1)
            t = st["idle_since"]
            if t is not None and time.monotonic() - t > 1.0:
                with open(closed_file, "a") as f:
                    f.write("closed\n")
                return

    tasks = [asyncio.ensure_future(x) for x in (client_to_server(), server_to_client(), reaper())]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for t in tasks:
        t.cancel()
    cw.close()  # a FIN to the worker, nothing before it
    sw.close()


e2e_proxy.serve(port_file, pg_sock, handle)
