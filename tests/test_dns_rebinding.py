"""DNS-rebinding protection on every loopback spelling (issue 16, item 3).

A server without tokens answers as the local owner, so it must refuse a request whose Host or
Origin names another site (a rebound domain), whatever spelling of loopback it was started on.
Requests are sent with a raw HTTP client so the headers are exactly those a browser would send.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from kbmcp.server.host_check import is_loopback_name, loopback_host, loopback_origin
from tests.access_support import make_token
from tests.mcp_support import build_corpus, rpc_line
from tests.patience import ceiling
from tests.server_process import HttpProcess

HOSTS = ["127.0.0.1", "127.0.0.2", "127.1.2.3", "LOCALHOST", "0:0:0:0:0:0:0:1", "::1"]
INITIALIZE = rpc_line(
    1,
    "initialize",
    {"protocolVersion": "2025-06-18", "capabilities": {},
     "clientInfo": {"name": "raw", "version": "0"}},
)  # fmt: skip
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rebinding")
    build_corpus(root, root / "kb.db")
    return root / "kb.db"


@pytest.fixture(scope="module", params=HOSTS)
def server(request: pytest.FixtureRequest, db: Path) -> Iterator[HttpProcess]:
    process = HttpProcess(db, host=request.param)
    try:
        yield process
    finally:
        process.stop()


def post(server: HttpProcess, **headers: str) -> httpx2.Response:
    with httpx2.Client(timeout=ceiling(30)) as http:
        return http.post(server.url, headers={**MCP_HEADERS, **headers}, content=INITIALIZE)


def test_a_foreign_host_is_refused_on_every_loopback_spelling(server: HttpProcess) -> None:
    port = server.authority.rsplit(":", 1)[1]
    response = post(server, Host=f"evil.example:{port}")
    assert response.status_code == 421, response.text
    message = response.json()["error"]["message"]
    assert "'evil.example:" in message and "DNS-rebinding" in message


def test_a_foreign_origin_is_refused_on_every_loopback_spelling(server: HttpProcess) -> None:
    response = post(server, Origin="http://evil.example")
    assert response.status_code == 403, response.text
    assert "'http://evil.example'" in response.json()["error"]["message"]


def test_the_servers_own_address_is_served(server: HttpProcess) -> None:
    response = post(server, Origin=f"http://{server.authority}")
    assert response.status_code == 200, response.text
    assert "serverInfo" in response.text


@pytest.mark.parametrize(
    "host",
    ["localhost", "LOCALHOST:80", "localhost.", "127.0.0.1:8765", "127.9.9.9", "[::1]:8765",
     "[0:0:0:0:0:0:0:1]", "[::ffff:127.0.0.1]:1"],
)  # fmt: skip
def test_loopback_host_headers(host: str) -> None:
    assert loopback_host(host)


@pytest.mark.parametrize(
    "host",
    [None, "", "evil.example", "evil.example:8765", "127.0.0.1.evil.example", "localhost.evil",
     "10.0.0.1:80", "[::2]:80", "[::1", "[::1]x", "127.0.0.1:port", "0.0.0.0:8765",
     "[::ffff:10.0.0.1]", "[::1%evil.example]:8765", "[::1%25evil.example]", "[::1%lo]"],
)  # fmt: skip
def test_foreign_host_headers(host: str | None) -> None:
    assert not loopback_host(host)


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [(None, True), ("http://localhost:3000", True), ("https://127.0.0.1", True),
     ("http://[::1]:8765", True), ("null", False), ("http://evil.example", False),
     ("file://", False), ("http://localhost:99999", False), ("ftp://localhost", False),
     ("http://[::1%evil.example]:8765", False), ("http://[::1%25evil.example]", False)],
)  # fmt: skip
def test_origin_headers(origin: str | None, allowed: bool) -> None:
    assert loopback_origin(origin) is allowed


def test_names_are_normalised() -> None:
    assert all(is_loopback_name(host) for host in HOSTS)


def test_tokens_on_a_public_address_print_one_tls_hint(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    build_corpus(tmp_path, db)
    make_token(db, "local", ["knowledge:read"])
    public = HttpProcess(db, host="0.0.0.0")
    loopback = HttpProcess(db, host="127.0.0.1")
    try:
        port = public.authority.rsplit(":", 1)[1]
        # with tokens any Host is served (a proxy's public name)
        with httpx2.Client(timeout=ceiling(30)) as http:
            response = http.post(
                f"http://127.0.0.1:{port}/mcp",
                headers={**MCP_HEADERS, "Host": "kb.example.org"},
                content=INITIALIZE,
            )
        assert response.status_code == 401  # the token check, not the Host check
    finally:
        public.stop()
        loopback.stop()
    hints = [line for line in public.stderr_lines if "TLS" in line]
    assert len(hints) == 1 and "reverse proxy" in hints[0], public.stderr
    assert not any("TLS" in line for line in loopback.stderr_lines), loopback.stderr


def test_a_zone_id_is_refused_on_a_running_server(server: HttpProcess) -> None:
    """Issue 32, item 5: Python parses `::1%evil.example` as loopback with a zone id."""
    port = server.authority.rsplit(":", 1)[1]
    assert post(server, Host=f"[::1%evil.example]:{port}").status_code == 421
    assert post(server, Origin=f"http://[::1%evil.example]:{port}").status_code == 403
