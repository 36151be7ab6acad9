#!/usr/bin/env python3
"""The service an http step calls in e2e 123-http-step: python3 alone.

usage: http-step-server.py PORT LOGFILE [CERTFILE KEYFILE]
  (with a certificate and key: https)
  /api/json      200, {"n": 41, "method", "type" (Content-Type), "token"
                 (X-Token), "body" (the request's, parsed)}
  /api/text      200, text "plain words"
  /api/limited   503 with Retry-After: 3 the first time, then 200 {"ok": true}
  /api/bad       400 "no such thing"
  /api/slow      answers after 60 s (a step's timeout, a stop, end it first)
  /api/moved     302 to http://elsewhere.invalid/
  /api/loc       302 to http://elsewhere.invalid/ + 166 "p" + "?" + the query
                 (a secret in the URL echoed where the 200-character cut falls)
  /api/early     103 Early Hints, then 200 {"early": true}
  /api/huge      200, a chunked body of 17 MiB (past a step output's 16 MiB)
  /api/inflight  after 1 s, 200 {"inflight": N}: the /api/inflight requests
                 in flight at once (this one's among them) during that second
  /api/endless   a chunked body whose first chunk-size line never ends (2 MiB
                 of it, then the connection held open for 60 s)
Each request is logged to LOGFILE as "METHOD PATH" once its headers are read.
"""
import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, LOG = int(sys.argv[1]), sys.argv[2]
seen = {}
inflight = [0]
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, ctype="application/json", extra=()):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        path = self.path.split("?")[0]
        with open(LOG, "a") as f:
            f.write(f"{self.command} {self.path}\n")
        seen[path] = seen.get(path, 0) + 1
        if path == "/api/json":
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode()
            self.reply(200, {"n": 41, "method": self.command, "type": self.headers.get("Content-Type"),
                             "token": self.headers.get("X-Token"), "body": body})
        elif path == "/api/text":
            self.reply(200, "plain words\n", "text/plain")
        elif path == "/api/limited":
            if seen[path] == 1:
                self.reply(503, "busy, come back", "text/plain", [("Retry-After", "3")])
            else:
                self.reply(200, {"ok": True})
        elif path == "/api/bad":
            self.reply(400, "no such thing", "text/plain")
        elif path == "/api/slow":
            time.sleep(60)
            self.reply(200, {"late": True})
        elif path == "/api/moved":
            self.reply(302, "", "text/plain", [("Location", "http://elsewhere.invalid/")])
        elif path == "/api/loc":
            query = self.path.partition("?")[2]
            self.reply(302, "", "text/plain", [("Location", "http://elsewhere.invalid/" + "p" * 166 + "?" + query)])
        elif path == "/api/huge":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"x" * 1048576
            try:
                for _ in range(17):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
        elif path == "/api/inflight":
            with lock:
                inflight[0] += 1
                most = inflight[0]
            for _ in range(10):
                time.sleep(0.1)
                with lock:
                    most = max(most, inflight[0])
            with lock:
                inflight[0] -= 1
            self.reply(200, {"inflight": most})
        elif path == "/api/early":
            self.wfile.write(b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n")
            self.wfile.flush()
            self.reply(200, {"early": True})
        elif path == "/api/endless":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"5;e=")
            try:
                for _ in range(32):
                    self.wfile.write(b"a" * 65536)
                self.wfile.flush()
                time.sleep(60)
            except OSError:
                pass
        else:
            self.reply(404, "not here", "text/plain")

    do_GET = do_POST = do_PUT = do_DELETE = handle_any


ThreadingHTTPServer.daemon_threads = True
server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
if len(sys.argv) > 4:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
