"""The model client's TLS: one context a process (loading the CA bundle is the slow part of making a
client), and it still refuses a server whose certificate it cannot verify."""

from __future__ import annotations

import http.server
import shutil
import ssl
import subprocess
import threading

import httpx2
import pytest

from xun.agent.bounded_http import bounded_client


@pytest.fixture
def self_signed_server(tmp_path):
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the test's certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/", cert
    finally:
        server.shutdown()
        server.server_close()


async def test_every_client_refuses_a_certificate_it_cannot_verify(self_signed_server):
    url, cert = self_signed_server
    for _ in range(2):  # the second client shares the first one's context
        async with bounded_client() as client:
            with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get(url)
    trusting = ssl.create_default_context(cafile=str(cert))  # the same server, its certificate trusted: it answers
    async with httpx2.AsyncClient(verify=trusting) as client:
        assert (await client.get(url)).text == "hello"
