"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, for running the real pi against.
LLM providers are not reachable here; this is the one thing the sub-agent tests fake."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from .site import QuietHTTPServer


class FakeLLM:
    """`reply` decides each answer from the request body: a string (streamed as the answer), or
    ("error", status, message), or ("forever",) to stream without end until the client goes away."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.reply: Callable[[dict[str, Any]], Any] = lambda body: "Fake answer."
        self.streaming = threading.Event()
        llm = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                llm.requests.append(body)
                answer = llm.reply(body)
                if isinstance(answer, tuple) and answer[0] == "error":
                    data = json.dumps({"error": {"message": answer[2], "type": "server_error"}}).encode()
                    self.send_response(answer[1])
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                model = body.get("model", "fake-1")

                def chunk(delta: dict[str, Any], finish: str | None = None, usage: bool = False) -> None:
                    event: dict[str, Any] = {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                                             "created": int(time.time()), "model": model,
                                             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                    if usage:
                        event["usage"] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()

                try:
                    chunk({"role": "assistant", "content": ""})
                    if isinstance(answer, tuple) and answer[0] == "forever":
                        llm.streaming.set()
                        while True:
                            chunk({"content": "more "})
                            time.sleep(0.05)
                    for i in range(0, len(answer), 40):
                        chunk({"content": answer[i:i + 40]})
                    chunk({}, finish="stop", usage=True)
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def models_json(self) -> dict[str, Any]:
        return {"providers": {"fake": {
            "baseUrl": f"http://127.0.0.1:{self.port}/v1", "api": "openai-completions", "apiKey": "x",
            "compat": {"supportsDeveloperRole": False},
            "models": [{"id": "fake-1", "reasoning": False, "contextWindow": 128000, "maxTokens": 4096}]}}}

    def user_text(self, index: int = -1) -> str:
        """The text of the user messages of one request, joined."""
        out = []
        for msg in self.requests[index].get("messages", []):
            if msg.get("role") != "user":
                continue
            content = msg.get("content")
            if isinstance(content, str):
                out.append(content)
            else:
                out.extend(part.get("text", "") for part in content or [] if part.get("type") == "text")
        return "\n".join(out)

    def system_text(self, index: int = -1) -> str:
        return "\n".join(m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
                         for m in self.requests[index].get("messages", []) if m.get("role") == "system")

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
