"""A misbehaving OpenAI-compatible backend for the router tests (tests/router_e2e_test.sh).

Usage: fake_backend.py MODE PORT
  garbage: /ready and /health answer 200; generation answers 200 text/event-stream with
           events that are not JSON, then closes.
  hang:    /ready answers 200; generation requests are read and never answered.
  error:   /ready answers 200; generation answers 500.
  words:   a vLLM-like backend (no token ids): streams the words "w<N>" where N counts the
           words of the text so far (prompt, or for chat the final assistant message when
           continue_final_message is set), so a stream resumed from text continues exactly.
  dying:   as words, but closes the connection after 3 chunks of a stream.
"""
import json
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
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if MODE in ("words", "dying"):
            return self.words(json.loads(raw))
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


    def words(self, req):
        chat = self.path.endswith("/chat/completions")
        if chat:
            last = req["messages"][-1]
            cont = req.get("continue_final_message") and last["role"] == "assistant"
            base = len(last["content"].split()) if cont else 0
        else:
            base = len(req["prompt"].split())
        n = req.get("max_tokens", 8)
        pieces = [f" w{base + i}" for i in range(n)]
        if not req.get("stream"):
            text = "".join(pieces)
            choice = {"index": 0, "finish_reason": "length"}
            choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
            return self.reply(200, json.dumps({"id": "x", "object": "y", "created": 1, "model": "fake",
                                               "choices": [choice],
                                               "usage": {"prompt_tokens": base, "completion_tokens": n,
                                                         "total_tokens": base + n}}))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for i, p in enumerate(pieces):
            if MODE == "dying" and i == 3:
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            fin = "length" if i == n - 1 else None
            c = {"index": 0, "finish_reason": fin}
            c.update({"delta": {"content": p}} if chat else {"text": p})
            ev = {"id": "fake-1", "object": "chunk", "created": 1, "model": "fake", "choices": [c]}
            self.wfile.write(f"data: {json.dumps(ev)}\n\n".encode())
            self.wfile.flush()
        if req.get("stream_options", {}).get("include_usage"):
            u = {"id": "fake-1", "object": "chunk", "created": 1, "model": "fake", "choices": [],
                 "usage": {"prompt_tokens": base, "completion_tokens": n, "total_tokens": base + n}}
            self.wfile.write(f"data: {json.dumps(u)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
