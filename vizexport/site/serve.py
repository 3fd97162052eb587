"""`vizexport open TRACE`: serve one trace file to ui.perfetto.dev from 127.0.0.1:9001.

Port 9001 on 127.0.0.1 is the one plain-http origin the Perfetto UI's content security policy lets it fetch from;
the file is served with CORS for ui.perfetto.dev, and nothing else in its folder is served.
"""
from __future__ import annotations

import http.server
import subprocess
import threading
import urllib.parse
import webbrowser
from pathlib import Path

from ..errors import InputError

UI = "https://ui.perfetto.dev"


def trace_url(path: Path, port: int) -> str:
    return f"{UI}/#!/?url=" + urllib.parse.quote(f"http://127.0.0.1:{port}/{path.name}", safe=":/")


def serve(path: Path, port: int = 9001, browser: bool = True, once: bool = True) -> str:
    """Serve `path` until it has been downloaded once (or forever with once=False); returns the UI link."""
    data, name = path.read_bytes(), path.name
    done = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _head(self, code: int, length: int) -> None:
            self.send_response(code)
            self.send_header("Access-Control-Allow-Origin", UI)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            self.end_headers()

        def do_GET(self) -> None:
            if urllib.parse.unquote(self.path.split("?")[0]) != f"/{name}":
                self._head(404, 0)
                return
            self._head(200, len(data))
            self.wfile.write(data)
            done.set()

        def do_OPTIONS(self) -> None:
            self._head(204, 0)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    url = trace_url(path, port)
    print(f"serving {path} on http://127.0.0.1:{port}/{name}\nopen {url}", flush=True)
    if browser:
        webbrowser.open(url)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        while not (once and done.wait(0.2)):
            if not once:
                thread.join(0.5)
    finally:
        server.shutdown()
        server.server_close()
    return url


def run_trace_processor(binary: Path, trace: Path, browser: bool = True) -> int:
    """Load `trace` in a native trace processor serving the Perfetto UI's RPC on 127.0.0.1:9001 (the UI finds it
    there and offers to use it), open the UI, and wait until the processor exits (Ctrl-C stops it)."""
    cmd = [str(binary), "--httpd", str(trace)]
    try:
        proc = subprocess.Popen(cmd)
    except OSError as e:
        raise InputError(f"{binary}: cannot run: {e.strerror or e}") from None
    print(f"{binary.name} is loading {trace} and serves it on 127.0.0.1:9001\nopen {UI} and accept "
          "'Use loaded trace' (the native trace processor)", flush=True)
    if browser:
        webbrowser.open(UI)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        return proc.wait()
