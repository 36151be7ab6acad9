#!/usr/bin/env bash
# Something between the worker and the server (a load balancer's or a
# firewall's idle timeout) closes sessions that sit idle, without a word:
# no FATAL first, as idle_session_timeout sends (e2e 76), only the close.
# The worker's control, finish and heartbeat sessions, idle between their
# calls, are opened again before the next call ("session ended by the
# server while idle, connecting again", reason "the server closed the
# connection"), and nothing is logged above info.  A proxy plays the
# timeout: a session whose last message from the server was ReadyForQuery
# and that has sent nothing since is closed after 1 s (a session waiting in
# a query, await_claim's, is not idle).
source "$(dirname "$0")/lib.sh"
e2e_cluster 58004
python3 - "$E2E_DIR/proxy.port" "$E2E_DIR/pg/.s.PGSQL.$PGPORT" "$E2E_DIR/closed" >"$E2E_DIR/proxy.log" 2>&1 <<'PY' &
import asyncio, os, sys, time
port_file, pg_sock, closed_file = sys.argv[1:4]
READY = b"Z\x00\x00\x00\x05"  # ReadyForQuery, then its status byte

async def handle(cr, cw):
    sr, sw = await asyncio.open_unix_connection(pg_sock)
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

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    async with server:
        await server.serve_forever()

asyncio.run(main())
PY
E2E_PIDS+=("$!")
wait_for 10 test -s "$E2E_DIR/proxy.port" || fail "proxy did not start"
PROXIED="host=127.0.0.1 port=$(cat "$E2E_DIR/proxy.port") dbname=postgres user=postgres"
start_worker w1 --db "$PROXIED" --lease 10
wait_for 20 grep -q 'msg=listening' "$E2E_DIR/w1.log" || fail "w1 did not listen"
for _ in 1 2 3; do
  sleep 2.5   # past the proxy's 1 s: the idle sessions are closed
  id=$("$BGEXEC" submit noop) || fail submit
  wait_status "$id" completed 10
done
[[ -s $E2E_DIR/closed ]] || fail "the proxy closed no idle session: the case was not set up"
if grep -q 'level=warn\|level=error' "$E2E_DIR/w1.log"; then
  fail "warnings: $(grep 'level=warn\|level=error' "$E2E_DIR/w1.log" | head -5)"
fi
reopened=$(grep -c 'msg="session ended by the server while idle, connecting again".*reason="the server closed the connection"' \
  "$E2E_DIR/w1.log" || true)
((reopened >= 3)) || fail "sessions closed while idle were opened again $reopened times: $(grep -m3 'session ended' "$E2E_DIR/w1.log")"
kill -0 "$PID_w1" || fail "worker exited"
ok "sessions closed while idle, without a word, were opened again $reopened times, without a warning"
