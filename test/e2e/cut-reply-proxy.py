# A TCP proxy in front of a PostgreSQL socket that loses one reply after its
# statement committed: once a marker is seen, it withholds what the server
# sends until ReadyForQuery (idle: the statement's transaction is over), then
# cuts both connections instead of passing the reply on.
#   cut-reply-proxy.py PORT_FILE PG_SOCKET MARKER request|reply|commit|commit-sent FLAG_FILE
# It listens on 127.0.0.1 at a port the kernel picks and writes that port to
# PORT_FILE once it listens (e2e_proxy.serve).  request: the marker is in a
# statement the client sends (a worker's call); reply: in a reply the server
# sends (the rows of a claim); commit: the marker is in a statement of a
# transaction the client sends, whose replies pass until the one that ends
# the transaction (its COMMIT's), which is lost; commit-sent: as commit,
# but the client's side is cut as soon as its COMMIT has been passed on, so
# the client learns of the cut while the server is still committing; the
# server's side stays open, its replies read and dropped, until the COMMIT
# is through (a server that saw its client go would end the transaction).
# FLAG_FILE is written when the client's side is cut.
# Used by test/e2e/12-lost-reply.sh, 18-lost-claim.sh, 33-unclaim-held.sh,
# 34-unclaim-unfinished.sh, 83-lost-finish-reply.sh, 90-sql-step-commit-and-record.sh and
# 98-sql-step-commit-in-progress.sh (through start_cut_proxy in lib.sh).
import asyncio, sys

import e2e_proxy

port_file, pg_sock, marker = sys.argv[1], sys.argv[2], sys.argv[3].encode()
side, flag = sys.argv[4], sys.argv[5]
READY_IDLE = b"Z\x00\x00\x00\x05I"
done = False


async def pipe_client(cr, cw, sw, state):
    global done
    while data := await cr.read(65536):
        if side in ("request", "commit", "commit-sent") and not done and marker in data:
            state["armed"] = True
        sw.write(data)
        await sw.drain()
        # the COMMIT (a simple or a Parse message) passed on: the client cut
        if side == "commit-sent" and state["armed"] and not done and b"COMMIT\x00" in data:
            done = True
            state["draining"] = True
            open(flag, "w").write("cut\n")
            cw.transport.abort()
            return
    sw.close()


async def pipe_server(sr, cw, sw, state):
    global done
    held = b""
    while data := await sr.read(65536):
        if state.get("draining"):
            held += data  # the COMMIT's replies, which no one reads
            if READY_IDLE in held:
                sw.transport.abort()
                return
            continue
        if side == "reply" and not done and marker in data:
            state["armed"] = True
        if state["armed"] and not done and side in ("commit", "commit-sent") and READY_IDLE not in data:
            cw.write(data)  # the transaction's statements' replies pass
            await cw.drain()
            continue
        if state["armed"] and not done:
            held += data
            if READY_IDLE in held:
                done = True
                open(flag, "w").write("cut\n")
                cw.transport.abort()
                sw.transport.abort()
                return
            continue
        cw.write(data)
        await cw.drain()
    cw.close()


async def handle(cr, cw, sr, sw):
    state = {"armed": False}
    await asyncio.gather(pipe_client(cr, cw, sw, state), pipe_server(sr, cw, sw, state),
                         return_exceptions=True)


e2e_proxy.serve(port_file, pg_sock, handle)
