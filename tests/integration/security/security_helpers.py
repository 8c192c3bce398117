"""Test-owned secured services: a self-signed PKI (openssl), a tiny HTTPS server asking for basic auth
that answers like Connect and the registry, and a redis-server with `requirepass` (and TLS).

Nothing here touches the shared stack: every server runs in this test process or as its child, on a
free port, with its files in the test's tmp dir.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SCHEMA = '{"type": "record", "name": "Row", "fields": [{"name": "id", "type": "int"}]}'


@dataclass(frozen=True, slots=True)
class Pki:
    ca: Path  # signed the server's and the client's certificates
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here: trusting it alone must fail


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    for ca in ("ca", "other-ca"):
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN=toolkit-test-{ca}",
            "-keyout", f"{ca}.key", "-out", f"{ca}.pem")  # fmt: skip
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
            "-out", f"{name}.csr")  # fmt: skip
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "1", "-extfile", "san.ext", "-out", f"{name}.pem")  # fmt: skip
    d = directory
    return Pki(
        d / "ca.pem",
        d / "server.pem",
        d / "server.key",
        d / "client.pem",
        d / "client.key",
        d / "other-ca.pem",
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def https_server(pki: Pki, user: str, password: str, *, client_cert: bool = False) -> Iterator[str]:
    """`https://127.0.0.1:PORT`, answering `GET /connectors` like Connect and `.../schemas/ids/N` and
    `.../subjects...` like the registry's ccompat API, after checking basic auth (401 otherwise) and,
    with `client_cert`, a client certificate signed by `pki.ca`."""
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("Authorization") != expected:
                self._send(401, {"error_code": 401, "message": "Unauthorized"})
            elif self.path == "/connectors":
                self._send(200, [])
            elif "/schemas/ids/" in self.path:
                self._send(200, {"schema": SCHEMA})
            elif self.path.split("?")[0].endswith("/subjects"):
                self._send(200, [])
            else:
                self._send(404, {"error_code": 404, "message": "not found"})

        def _send(self, status: int, doc: object) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: the tests read their own output

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    if client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(pki.ca)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True, slots=True)
class RedisServer:
    url: str  # redis://127.0.0.1:PORT/0
    tls_url: str  # rediss://127.0.0.1:TLS_PORT/0


@contextmanager
def redis_server(directory: Path, password: str, pki: Pki) -> Iterator[RedisServer]:
    """A redis-server of this test only: `requirepass`, a plain port and a TLS port (no client certs)."""
    directory.mkdir(parents=True, exist_ok=True)
    port, tls_port = free_port(), free_port()
    config = directory / "redis.conf"
    config.write_text(
        "\n".join(
            [
                "bind 127.0.0.1",
                f"port {port}",
                f"tls-port {tls_port}",
                f"tls-cert-file {pki.server_cert}",
                f"tls-key-file {pki.server_key}",
                f"tls-ca-cert-file {pki.ca}",
                "tls-auth-clients no",
                f"requirepass {password}",
                f"dir {directory}",
                "save ''",
                "appendonly no",
                f"logfile {directory / 'redis.log'}",
            ]
        )
        + "\n"
    )
    process = subprocess.Popen(["redis-server", str(config)], cwd=directory)
    try:
        deadline = time.monotonic() + 20
        while True:  # ready = the port accepts a connection (a real probe, no sleep-and-hope)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log = (directory / "redis.log").read_text()
                    raise RuntimeError(f"redis-server did not start: {log}") from None
                time.sleep(0.05)
        yield RedisServer(f"redis://127.0.0.1:{port}/0", f"rediss://127.0.0.1:{tls_port}/0")
    finally:
        process.terminate()
        process.wait(timeout=10)
