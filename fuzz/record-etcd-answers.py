#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Makes seeds for fuzz-etcd: sits between snowidd and a real etcd, and
writes etcd's answers, in the order snowidd asked, in fuzz-etcd's format
(answers separated by a line "----").

    record-etcd-answers.py ETCD_URL LISTEN_PORT OUT_FILE SECONDS
"""
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

etcd, port, out, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
answers = []
lock = threading.Lock()


class Proxy(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        req = urllib.request.Request(etcd + self.path, data=body, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                code, data = r.status, r.read()
        except urllib.error.HTTPError as e:
            code, data = e.code, e.read()
        with lock:
            answers.append((code, data))
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


srv = ThreadingHTTPServer(("127.0.0.1", port), Proxy)
threading.Thread(target=srv.serve_forever, daemon=True).start()
time.sleep(seconds)
srv.shutdown()
with open(out, "wb") as f:
    f.write(b"\n----\n".join((b"" if c == 200 else b"#%03d\n" % c) + d for c, d in answers))
print(f"{len(answers)} answers written to {out}")
