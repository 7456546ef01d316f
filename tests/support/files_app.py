"""A small app with a file-upload form and files to download, served on 127.0.0.1 for the browse upload and
download tests (tests/test_browse_files.py). What the browser uploaded is checked on the server:
`FilesApp.uploads` holds each posted form's files, by field, as (filename, bytes)."""

from __future__ import annotations

import email.parser
import email.policy
import http.server
import threading
from typing import Any

from .site import QuietHTTPServer

UPLOAD = """<!doctype html><html><head><title>Upload</title></head><body>
<h1>Send files</h1>
<form method="post" action="/upload" enctype="multipart/form-data">
  <label for="title">Title</label> <input id="title" name="title">
  <label for="doc">Document</label> <input id="doc" type="file" name="doc">
  <label for="more">Attachments</label> <input id="more" type="file" name="more" multiple>
  <label for="styled" id="styled-label">Choose a picture</label>
  <input id="styled" type="file" name="picture" style="display:none">
  <button type="submit">Send</button>
</form>
<p id="chosen"></p>
<script>
document.getElementById("doc").addEventListener("change", (e) => {
  document.getElementById("chosen").textContent = "chosen: " + [...e.target.files].map((f) => f.name).join(", ");
});
</script>
</body></html>"""

DOWNLOADS = """<!doctype html><html><head><title>Downloads</title></head><body>
<h1>Downloads</h1>
<ul>
  <li><a href="/files/report.csv">Report</a></li>
  <li><a href="/files/data.bin">Data</a></li>
  <li><a href="/files/notes.txt" download>Notes</a></li>
  <li><a href="/files/big.bin">Big file</a></li>
  <li><a href="/files/big-chunked.bin">Big stream</a></li>
  <li><a href="/files/escape">Escape</a></li>
  <li><a href="/files/dotfile">Dotfile</a></li>
</ul>
</body></html>"""

REPORT = b"region,total\nnorth,12\nsouth,7\n"
DATA = bytes(range(256)) * 64                 # every byte value: nothing may be changed on the way
NOTES = b"plain text notes\n"
BIG = 1_000_000                               # bytes: over the tests' cap (fetch.max_bytes)


class FilesApp:
    def __init__(self) -> None:
        self.uploads: list[dict[str, list[tuple[str, bytes]]]] = []
        app = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def reply(self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                attachment = {"Content-Disposition": 'attachment; filename="report.csv"'}
                if path == "/upload":
                    self.reply(200, UPLOAD.encode(), "text/html; charset=utf-8")
                elif path == "/downloads":
                    self.reply(200, DOWNLOADS.encode(), "text/html; charset=utf-8")
                elif path == "/files/report.csv":
                    self.reply(200, REPORT, "text/csv", attachment)
                elif path == "/files/data.bin":  # no Content-Disposition: a type that is not a page
                    self.reply(200, DATA, "application/octet-stream")
                elif path == "/files/notes.txt":  # text a page would show, but the link says download
                    self.reply(200, NOTES, "text/plain")
                elif path == "/files/big.bin":
                    self.reply(200, b"x" * BIG, "application/zip", {"Content-Disposition": "attachment"})
                elif path == "/files/big-chunked.bin":
                    self.chunked(b"y" * BIG)
                elif path == "/files/escape":
                    self.reply(200, b"escaped?", "application/octet-stream",
                               {"Content-Disposition": 'attachment; filename="../../x"'})
                elif path == "/files/dotfile":
                    self.reply(200, b"alias ls=rm", "application/octet-stream",
                               {"Content-Disposition": 'attachment; filename=".bashrc"'})
                else:
                    self.reply(404, b"not found", "text/plain")

            def chunked(self, body: bytes) -> None:
                """No Content-Length: the size is known only as the bytes arrive."""
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Disposition", 'attachment; filename="stream.bin"')
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for i in range(0, len(body), 16_384):
                        chunk = body[i:i + 16_384]
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the browser stopped it: what the cap is for

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                head = f"Content-Type: {self.headers.get('Content-Type')}\r\n\r\n".encode()
                message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
                form: dict[str, list[tuple[str, bytes]]] = {}
                for part in message.iter_parts():
                    name = part.get_param("name", header="content-disposition")
                    payload: Any = part.get_payload(decode=True)
                    form.setdefault(str(name), []).append((part.get_filename() or "", payload or b""))
                app.uploads.append(form)
                self.reply(200, f"<html><head><title>Sent</title></head><body><h1>Received {len(form)} fields"
                                f"</h1></body></html>".encode(), "text/html; charset=utf-8")

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
