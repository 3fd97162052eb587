"""`vizexport open TRACE`: serve one trace file to ui.perfetto.dev from 127.0.0.1:9001.

Port 9001 on 127.0.0.1 is the one plain-http origin the Perfetto UI's content security policy lets it fetch from.
A trace may come from someone else's pull request, and any web page in the browser can send requests to 127.0.0.1,
so what is served, and to whom, is as narrow as that use:
- one file, which must lie in the trace's folder once links are resolved (a window named by index.json, or a link
  inside the folder, cannot lead out of it);
- only to requests addressed to 127.0.0.1:PORT or localhost:PORT: a page whose own domain re-binds to 127.0.0.1
  sends its domain as the Host (DNS rebinding) and is refused;
- only to the UI: a GET must carry the UI's Origin (which browsers send on its fetch and no other page can), so no
  other page can use up the one download; CORS allows the UI alone to read it;
- for a while: with nothing fetched in FETCH_TIMEOUT seconds the command ends with an error, never serving forever.
"""
from __future__ import annotations

import errno
import http.server
import subprocess
import threading
import urllib.parse
import webbrowser
from pathlib import Path

from ..errors import InputError

UI = "https://ui.perfetto.dev"
PORT = 9001  # the port the UI's content security policy allows
FETCH_TIMEOUT = 300.0  # seconds `open` waits for the UI to fetch the trace before it gives up (5 minutes)
HOSTS = ("127.0.0.1", "localhost")  # the names a request may address this server by (with its port)


def trace_url(path: Path, port: int) -> str:
    return f"{UI}/#!/?url=" + urllib.parse.quote(f"http://127.0.0.1:{port}/{path.name}", safe=":/")


def contained(path: Path, folder: Path) -> Path:
    """`path` with links resolved, if it lies in `folder` (links resolved too); InputError otherwise."""
    real, root = path.resolve(), folder.resolve()
    if not real.is_relative_to(root):
        raise InputError(f"{path}: leads to {real}, outside the trace's folder {folder} (not served)")
    return real


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, data: bytes, name: str) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.data, self.route = data, "/" + name
        self.hosts = {f"{h}:{port}" for h in HOSTS}
        self.fetched = threading.Event()

    def handle_error(self, request: object, client_address: object) -> None:
        """A client gone mid-download (it may ask again): no traceback on the user's terminal."""


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def _reply(self, code: int, body: bytes = b"", cors: bool = False) -> None:
        self.send_response(code)
        if cors:
            self.send_header("Access-Control-Allow-Origin", UI)
            self.send_header("Vary", "Origin")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)
            self.wfile.flush()

    def _refusal(self) -> int | None:
        """403 for a request not addressed to this server by its own name or not from the UI, 404 for any path but
        the trace's; None for the UI's request."""
        if (self.headers.get("Host") or "").lower() not in self.server.hosts or self.headers.get("Origin") != UI:
            return 403
        return 404 if urllib.parse.unquote(self.path.split("?")[0]) != self.server.route else None

    def do_GET(self) -> None:
        if (code := self._refusal()) is not None:
            self._reply(code)
            return
        self._reply(200, self.server.data, cors=True)  # a client gone part-way raises: not fetched
        self.server.fetched.set()

    def do_OPTIONS(self) -> None:  # a CORS preflight (Chrome's Private Network Access asks one of public pages)
        if self._refusal() is not None:
            self._reply(403)
            return
        self.send_response(204)
        self.send_header("Access-Control-Allow-Origin", UI)
        self.send_header("Access-Control-Allow-Methods", "GET")
        if self.headers.get("Access-Control-Request-Private-Network") == "true":
            self.send_header("Access-Control-Allow-Private-Network", "true")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def check_port(port: int) -> None:
    """InputError if the port is busy (as serve would say), before work whose result it is to serve."""
    _listen(port, b"", "").server_close()


def _listen(port: int, data: bytes, name: str) -> _Server:
    try:
        return _Server(port, data, name)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise InputError(f"port {port} on 127.0.0.1 is busy (another `vizexport open` or a trace processor? "
                             f"stop it: the Perfetto UI fetches from port {PORT} only)") from None
        raise InputError(f"cannot serve on 127.0.0.1:{port}: {e.strerror or e}") from None


def serve(path: Path, port: int = PORT, browser: bool = True, timeout: float = FETCH_TIMEOUT,
          within: Path | None = None) -> str:
    """Serve `path` to the Perfetto UI until it has fetched it once; returns the UI link. InputError if `path`
    leads out of `within` (default: its folder), if the port is busy, or if nothing fetched it in `timeout` s."""
    data = contained(path, path.parent if within is None else within).read_bytes()
    server = _listen(port, data, path.name)
    url = trace_url(path, port)
    print(f"serving {path} on http://127.0.0.1:{port}/{path.name} (to the Perfetto UI, once)\nopen {url}", flush=True)
    if browser:
        webbrowser.open(url)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        if not server.fetched.wait(timeout):
            raise InputError(f"{path}: the Perfetto UI did not fetch it within {timeout:g} s (nothing served; "
                             "--timeout SEC waits longer)")
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
