#!/usr/bin/env python3
"""A webhook receiver on 127.0.0.1 for the alert tests: appends each POST body as one JSON
line to OUT and answers 200 (or STATUS). Writes its port to PORT_FILE once listening.
Usage: webhook_receiver.py OUT PORT_FILE [STATUS]"""
import http.server
import json
import sys

out, port_file = sys.argv[1], sys.argv[2]
status = int(sys.argv[3]) if len(sys.argv) > 3 else 200


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with open(out, "a") as f:
            f.write(json.dumps({"path": self.path, "body": json.loads(body or b"null")}) + "\n")
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402

os.rename(port_file + ".tmp", port_file)
server.serve_forever()
