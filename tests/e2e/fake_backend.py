"""A misbehaving OpenAI-compatible backend for the router tests (tests/router_e2e_test.sh).

Usage: fake_backend.py MODE PORT
  garbage: /ready and /health answer 200; generation answers 200 text/event-stream with
           events that are not JSON, then closes.
  hang:    /ready answers 200; generation requests are read and never answered.
  error:   /ready answers 200; generation answers 500.
"""
import http.server
import sys
import time

MODE, PORT = sys.argv[1], int(sys.argv[2])


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, ctype="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path in ("/ready", "/health"):
            return self.reply(200, "{}")
        if self.path == "/metrics":
            return self.reply(200, "vllm:num_requests_waiting 0\n", "text/plain")
        return self.reply(404, '{"error": {"message": "no route"}}')

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if MODE == "hang":
            time.sleep(3600)
        if MODE == "error":
            return self.reply(500, '{"error": {"message": "broken on purpose"}}')
        body = "data: this is not json\n\ndata: {garbage\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
