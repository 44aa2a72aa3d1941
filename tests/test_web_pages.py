"""The web page of `kbmcp serve --http`, fetched over HTTP from a real server (no browser: the
pages are complete HTML on the server, and htmx only changes how they are fetched).

Every page answers with what the same caller gets over MCP from the same server: the knowledge
bases and memory stores, the documents, the very same search results, the cited passage of a
revision. The access rules are the MCP endpoint's: no token, no data; a token sees its tenant
within its scopes and allow-list; an id it cannot read answers exactly as an unknown one; a
read-only token cannot forget. Hostile text is escaped, every page carries the
Content-Security-Policy and runs only the server's own two scripts. Both backends.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.access_support import connect_with_token
from tests.mcp_support import payload
from tests.store_backends import database_on
from tests.web_support import (
    XSS_PATH,
    WebCorpus,
    WebServer,
    auth_state,
    build_web_corpus,
    cited_read,
    found_ids,
    links,
    main_text,
    mcp_rows,
    page,
    same_but_ids,
    search_rows,
    unknown_id,
)

pytestmark = pytest.mark.anyio

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
OWN_SCRIPTS = ["/static/htmx.min.js", "/static/kbmcp.js"]


@pytest.fixture(scope="module")
def corpus(backend: str, tmp_path_factory: pytest.TempPathFactory) -> WebCorpus:
    # Built per backend: forget tests change the served database, and on SQLite that is the file.
    return build_web_corpus(tmp_path_factory.mktemp(f"web-{backend}"))


@pytest.fixture(scope="module")
def server(backend: str, corpus: WebCorpus, request: pytest.FixtureRequest) -> Iterator[WebServer]:
    """The file with tokens: every request needs one."""
    running = WebServer(database_on(backend, corpus.tokens_db, request))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def open_server(
    backend: str, corpus: WebCorpus, request: pytest.FixtureRequest
) -> Iterator[WebServer]:
    """The file without tokens: the local owner, loopback only."""
    running = WebServer(database_on(backend, corpus.open_db, request))
    yield running
    running.stop()


async def mcp(server: WebServer, secret: str | None, tool: str, args: dict[str, Any]) -> Any:
    """A tool call over MCP to the same server, as the same caller."""
    async with _client(server, secret) as client:
        return payload(await client.call_tool(tool, args))


def _client(server: WebServer, secret: str | None) -> Any:
    if secret is None:
        return Client(server.mcp_url)
    return connect_with_token(server.mcp_url, secret)


# ------------------------------------------------------------------ access


async def test_without_a_token_every_page_is_the_sign_in_page(
    server: WebServer, corpus: WebCorpus
) -> None:
    ids = corpus.ids
    paths = [
        "/",
        "/search?q=zanzibar",
        f"/kb/{ids['acme-ops']}",
        f"/doc/{ids['acme-ops:failover.md']}",
        f"/memories/{ids['deploy:store']}",
        f"/forget/{ids['deploy']}",
        "/server",
    ]
    for path in paths:
        response = server.get(path)
        assert response.status_code == 401, path
        assert response.headers["www-authenticate"] == "Bearer"
        assert auth_state(response) == "required"
        assert page(response).css_first("form#sign-in") is not None
        text = response.text
        for secret_word in ("zanzibar", "acme-ops", "Acme", ids["acme-ops"], "deploy key"):
            assert secret_word not in text, (path, secret_word)
    posted = server.post(f"/forget/{ids['deploy']}")
    assert posted.status_code == 401
    still = await mcp(server, corpus.secrets["acme"], "search_knowledge", {"query": "deploy key"})
    assert ids["deploy"] in found_ids(still)


@pytest.mark.parametrize(
    "header",
    ["Bearer kbmcp_0000000000000000_nonsense", "Bearer revoked", "bearer x", "Bearer  spaced"],
)
def test_a_refused_token_is_said_to_be_refused(
    server: WebServer, corpus: WebCorpus, header: str
) -> None:
    if header == "Bearer revoked":
        header = f"Bearer {corpus.secrets['revoked']}"
    response = server.http.get("/", headers={"Authorization": header})
    assert response.status_code == 401
    assert auth_state(response) == "refused"
    assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    assert "refused that token" in main_text(response)


def test_another_scheme_is_no_token(server: WebServer, corpus: WebCorpus) -> None:
    response = server.http.get("/", headers={"Authorization": f"Basic {corpus.secrets['acme']}"})
    assert response.status_code == 401 and auth_state(response) == "required"


def test_the_sign_in_form_never_takes_the_token_as_a_field(server: WebServer) -> None:
    """Posted without the page's script, the form is refused (the token would travel where
    headers do not go): the page says the script is needed."""
    response = server.http.post("/sign-in", data={"token": "kbmcp_secret"})
    assert response.status_code == 400
    assert "script" in main_text(response)
    assert "kbmcp_secret" not in response.text


@pytest.mark.parametrize("label", ["acme", "acme-ops-only", "acme-memory-only", "beta"])
async def test_the_home_page_lists_what_the_token_reads(
    server: WebServer, corpus: WebCorpus, label: str
) -> None:
    secret = corpus.secrets[label]
    response = server.get("/", secret)
    assert response.status_code == 200
    html = page(response)
    shown_kbs = {
        node.attributes["data-kb-id"]: [cell.text().strip() for cell in node.css("td")]
        for node in html.css("#knowledge-bases tr[data-kb-id]")
    }
    listed = await mcp(server, secret, "list_knowledge_bases", {})
    if "error" in listed:  # no knowledge:read
        assert listed["error"]["code"] == "forbidden"
        assert not shown_kbs
        assert "may not read knowledge bases" in main_text(response)
    else:
        expected = {kb["knowledge_base_id"]: kb for kb in listed["knowledge_bases"]}
        assert set(shown_kbs) == set(expected)
        for kb_id, cells in shown_kbs.items():
            assert cells[0].startswith(expected[kb_id]["name"])
            assert cells[1:3] == [
                str(expected[kb_id]["document_count"]),
                str(expected[kb_id]["chunk_count"]),
            ]
            # Last update: its most recently updated document's (the knowledge base's own
            # updated_at is when it was made).
            documents = await mcp(
                server, secret, "list_documents", {"knowledge_base_ids": [kb_id], "limit": 1}
            )
            newest = documents["documents"][0]["updated_at"]
            assert cells[3] == f"{newest[:10]} {newest[11:16]} UTC"
    shown_stores = {node.attributes["data-store-id"] for node in html.css("tr[data-store-id]")}
    stores = await mcp(server, secret, "list_memory_stores", {})
    if "error" in stores:
        assert not shown_stores
        assert "may not read memories" in main_text(response)
    else:
        assert shown_stores == {s["memory_store_id"] for s in stores["memory_stores"]}


def test_the_page_says_what_the_token_may_do(server: WebServer, corpus: WebCorpus) -> None:
    text = main_text(server.get("/", corpus.secrets["acme-ops-only"]))
    assert corpus.token_ids["acme-ops-only"] in text
    assert "may list and search knowledge bases" in text
    assert "may not forget memories" in text
    assert "may not list and search memory stores" in text
    assert f"limited to 1 knowledge base: {corpus.ids['acme-ops']}" in text
    full = main_text(server.get("/", corpus.secrets["acme"]))
    assert "may forget memories" in full
    assert "its tenant's own and those shared with it" in full


async def test_an_id_the_caller_cannot_read_answers_as_an_unknown_one(
    server: WebServer, corpus: WebCorpus
) -> None:
    ids = corpus.ids
    cases = [
        ("acme", "/doc/{}", ids["beta-docs:onboarding.md"], unknown_id("doc")),
        ("acme", "/kb/{}", ids["beta-docs"], unknown_id("kb")),
        ("acme", "/memories/{}", ids["beta:store"], unknown_id("mst")),
        ("acme", "/doc/{}", ids["beta-memory"], unknown_id("mem")),
        ("acme-ops-only", "/doc/{}", ids["acme-notes:notes.txt"], unknown_id("doc")),
        ("acme-ops-only", "/kb/{}", ids["acme-notes"], unknown_id("kb")),
    ]
    for label, shape, foreign, unknown in cases:
        secret = corpus.secrets[label]
        seen, never = (
            server.get(shape.format(foreign), secret),
            server.get(shape.format(unknown), secret),
        )
        assert seen.status_code == never.status_code == 404, (label, shape)
        assert same_but_ids(main_text(seen), main_text(never), [foreign, unknown])
        assert "does not exist or is not readable" in main_text(seen)
    # Forgetting another tenant's memory: refused like an unknown one, and nothing changes.
    secret = corpus.secrets["acme"]
    seen = server.post(f"/forget/{ids['beta-memory']}", secret)
    never = server.post(f"/forget/{unknown_id('mem')}", secret)
    assert seen.status_code == never.status_code == 404
    assert same_but_ids(main_text(seen), main_text(never), [ids["beta-memory"], unknown_id("mem")])
    beta = await mcp(server, corpus.secrets["beta"], "search_knowledge", {"query": "lynx"})
    assert ids["beta-memory"] in found_ids(beta)


BAD_ADDRESSES = [
    ("/doc/doc_nothex", "document_id"),
    ("/doc/{doc}?start=50", "end"),
    ("/doc/{doc}?start=50&end=10", "end"),
    ("/doc/{doc}?offset=-1", "offset"),
    ("/doc/{doc}?rev=rev_zz", "revision_id"),
    ("/kb/{kb}?limit=0", "limit"),
    ("/kb/{kb}?cursor=garbage", "cursor"),
    ("/memories/{store}?limit=0", "limit"),
    ("/memories/{store}?half_life=-1", "half_life"),
    ("/forget/mem_zz", "memory_id"),
]


@pytest.mark.parametrize(("address", "field"), BAD_ADDRESSES)
def test_a_bad_address_is_a_bad_request_naming_the_field(
    server: WebServer, corpus: WebCorpus, address: str, field: str
) -> None:
    path = address.format(
        doc=corpus.ids["acme-ops:ops/oncall.md"],
        kb=corpus.ids["acme-ops"],
        store=corpus.ids["deploy:store"],
    )
    response = server.get(path, corpus.secrets["acme"])
    assert response.status_code == 400, path
    error = page(response).css_first("#error")
    assert error is not None and error.text().startswith(field), (path, error and error.text())


# ------------------------------------------------------------------ documents


async def test_the_documents_page_pages_through_what_list_documents_returns(
    server: WebServer, corpus: WebCorpus
) -> None:
    secret, kb_id = corpus.secrets["acme"], corpus.ids["acme-ops"]
    seen: list[str] = []
    path: str | None = f"/kb/{kb_id}?limit=3"
    pages = 0
    while path is not None:
        response = server.get(path, secret)
        assert response.status_code == 200
        rows = page(response).css("#documents tr[data-document-id]")
        assert len(rows) <= 3
        seen.extend(row.attributes["data-document-id"] or "" for row in rows)
        following = links(response, "a#next-page")
        path = following[0] if following else None
        pages += 1
    listed = await mcp(
        server, secret, "list_documents", {"knowledge_base_ids": [kb_id], "limit": 200}
    )
    assert seen == [doc["document_id"] for doc in listed["documents"]]
    assert pages == -(-len(seen) // 3)


async def test_the_documents_page_filters_by_path_prefix_and_tag(
    server: WebServer, corpus: WebCorpus
) -> None:
    secret, kb_id = corpus.secrets["acme"], corpus.ids["acme-ops"]
    for params, args in [
        ({"prefix": "guides/"}, {"path_prefix": "guides/"}),
        ({"tag": "tag=xss"}, {"tags": {"tag": "xss"}}),
        (
            {"prefix": "ops/", "tag": "tag=runbook"},
            {"path_prefix": "ops/", "tags": {"tag": "runbook"}},
        ),
    ]:
        response = server.http.get(
            f"/kb/{kb_id}", params=params, headers={"Authorization": f"Bearer {secret}"}
        )
        shown = [
            row.attributes["data-document-id"] for row in page(response).css("tr[data-document-id]")
        ]
        listed = await mcp(
            server, secret, "list_documents", {"knowledge_base_ids": [kb_id], **args}
        )
        assert shown == [doc["document_id"] for doc in listed["documents"]], params
        assert shown, params
    row = page(server.get(f"/kb/{kb_id}?prefix=ops/oncall", secret)).css_first(
        "tr[data-document-id]"
    )
    assert row is not None
    cells = [cell.text().strip() for cell in row.css("td")]
    assert cells[0] == "ops/oncall.md" and cells[1] == "On-call"
    assert cells[3] == "2" and cells[4] == "published"  # two revisions


# ------------------------------------------------------------------ search

# The search page's fields; `tool_arguments` says what each is over MCP.
SEARCHES = [
    {"q": "kestrel procedure"},
    {"q": "failover standby", "mode": "lexical"},
    {"q": "failover standby", "mode": "semantic"},
    {"q": "restore a backup", "mode": "rrf", "limit": "4"},
    {"q": "kestrel", "path": "guides/"},
    {"q": "database", "tag": "tag=runbook"},
    {"q": "zanzibar quokka", "kb": "acme-notes"},
    {"q": "engineer pages", "min_similarity": "0.05"},
    {"q": "zebrafish"},
]


def tool_arguments(params: dict[str, str]) -> dict[str, Any]:
    """The search_knowledge arguments a person means by the page's fields."""
    arguments: dict[str, Any] = {"query": params["q"]}
    if "mode" in params:
        arguments["mode"] = params["mode"]
    if "limit" in params:
        arguments["limit"] = int(params["limit"])
    if "path" in params:
        arguments["document_paths"] = [params["path"]]
    if "tag" in params:
        key, _, value = params["tag"].partition("=")
        arguments["tags"] = {key: value}
    if "kb" in params:
        arguments["knowledge_base_ids"] = [params["kb"]]
    if "min_similarity" in params:
        arguments["min_similarity"] = float(params["min_similarity"])
    return arguments


@pytest.mark.parametrize("fields", SEARCHES)
async def test_the_search_page_returns_what_search_knowledge_returns(
    server: WebServer, corpus: WebCorpus, fields: dict[str, str]
) -> None:
    secret = corpus.secrets["acme"]
    params = {**fields, **({"kb": corpus.ids[fields["kb"]]} if "kb" in fields else {})}
    response = server.http.get(
        "/search", params=params, headers={"Authorization": f"Bearer {secret}"}
    )
    assert response.status_code == 200
    expected = await mcp(server, secret, "search_knowledge", tool_arguments(params))
    assert "error" not in expected
    assert expected["results"], "the search should find something"
    assert search_rows(response) == mcp_rows(expected["results"])
    summary = page(response).css_first("#search-summary")
    assert summary is not None and summary.attributes["data-mode"] == expected["mode"]
    text = main_text(response)
    assert f"of the {expected['mode']} search" in text
    assert f"keyword channel: {expected['stats']['lexical_candidates']} candidates" in text
    assert f"semantic channel: {expected['stats']['semantic_candidates']} candidates" in text


BAD_FIELDS = [
    ({"min_similarity": "high"}, "min_similarity"),
    ({"limit": "ten"}, "limit"),
    ({"tag": "runbook"}, "tag"),
    ({"min_similarity": "7"}, "min_similarity"),
    ({"mode": "fuzzy"}, "mode"),
]


@pytest.mark.parametrize(("fields", "argument"), BAD_FIELDS)
def test_a_bad_search_field_is_named_in_one_line(
    server: WebServer, corpus: WebCorpus, fields: dict[str, str], argument: str
) -> None:
    response = server.http.get(
        "/search",
        params={"q": "x", **fields},
        headers={"Authorization": f"Bearer {corpus.secrets['acme']}"},
    )
    assert response.status_code == 400
    error = page(response).css_first("#error")
    assert error is not None and argument in error.text()
    assert page(response).css_first("form#search-form") is not None


# ------------------------------------------------------------------ reader


async def test_the_reader_marks_the_cited_passage(server: WebServer, corpus: WebCorpus) -> None:
    secret = corpus.secrets["acme"]
    for query in ("escalation secondary", "albatross valve", "restore pg_restore"):
        response = server.http.get(
            "/search", params={"q": query}, headers={"Authorization": f"Bearer {secret}"}
        )
        found = await mcp(server, secret, "search_knowledge", {"query": query})
        hrefs = links(response, "a.open-passage")
        assert len(hrefs) == len(found["results"]) > 0
        for href, result in list(zip(hrefs, found["results"], strict=True))[:3]:
            citation = result["citation"]
            assert href.endswith("#passage")
            reader = server.get(href, secret)
            assert reader.status_code == 200, href
            marked = page(reader).css_first("mark#passage")
            assert marked is not None, href
            window = await mcp(server, secret, "search_knowledge", cited_read(result))
            assert marked.text() == window["content"]
            place = f"lines {citation['line_start']}–{citation['line_end']}"
            assert place in main_text(reader)


async def test_the_reader_shows_the_outline_and_every_revision(
    server: WebServer, corpus: WebCorpus
) -> None:
    secret, doc_id = corpus.secrets["acme"], corpus.ids["acme-ops:ops/oncall.md"]
    old, new = corpus.revisions["oncall"]
    current = server.get(f"/doc/{doc_id}", secret)
    assert [a.split("rev=")[1] for a in links(current, "#revisions a")] == [new, old]
    assert "revision 2 of 2 (current)" in main_text(current)
    outline = await mcp(
        server, secret, "search_knowledge", {"document_id": doc_id, "outline": True}
    )
    titles = [node.text() for node in page(current).css("#outline a")]
    assert titles == [section["title"] for section in outline["sections"]]
    older = server.get(f"/doc/{doc_id}?rev={old}", secret)
    text = main_text(older)
    assert "revision 1 of 2 (an older one)" in text and "This is an older revision" in text
    assert "fifteen minutes" in text and "ten minutes" not in text


async def test_a_long_document_is_read_in_parts(server: WebServer, corpus: WebCorpus) -> None:
    secret, doc_id = corpus.secrets["acme"], corpus.ids["acme-ops:ops/long.md"]
    first = server.get(f"/doc/{doc_id}", secret)
    following = links(first, ".pager a")
    assert following and "offset=10000" in following[0]
    second = server.get(following[0], secret)
    read = await mcp(server, secret, "search_knowledge", {"document_id": doc_id, "offset": 10000})
    text = page(second).css_first("#text")
    assert text is not None and text.text() == read["content"]
    sections = links(first, "#outline a")
    last = server.get(sections[-1], secret)
    assert "Section 40" in (page(last).css_first("#text") or page(last).root).text()


# ------------------------------------------------------------------ memories and forget


async def test_the_memories_page_lists_a_store_newest_first(
    server: WebServer, corpus: WebCorpus
) -> None:
    secret, store = corpus.secrets["acme"], corpus.ids["deploy:store"]
    response = server.get(f"/memories/{store}?half_life=7", secret)
    assert response.status_code == 200
    rows = page(response).css("tr[data-memory-id]")
    shown = [row.attributes["data-memory-id"] for row in rows]
    scan = await mcp(
        server, secret, "search_knowledge", {"memory_store_ids": [store], "limit": 100}
    )
    assert set(shown) == found_ids(scan)
    deploy = next(row for row in rows if row.attributes["data-memory-id"] == corpus.ids["deploy"])
    cells = [cell.text().strip() for cell in deploy.css("td")]
    assert cells[1] == "topic=deploy"
    # Remembered at T1, the server's clock at T2: a day old at a 7-day half-life.
    assert cells[3] == f"{2 ** (-1 / 7):.3f}"
    assert all(row.css_first("a.forget") is not None for row in rows)


async def test_forget_takes_a_memory_out_of_mcp_search(
    server: WebServer, corpus: WebCorpus
) -> None:
    secret, memory_id = corpus.secrets["acme"], corpus.ids["forget-http"]
    store = corpus.ids["forget-http:store"]
    before = await mcp(server, secret, "search_knowledge", {"query": "ptarmigan"})
    assert memory_id in found_ids(before)
    confirm = server.get(f"/forget/{memory_id}", secret)
    assert confirm.status_code == 200
    assert "ptarmigan" in main_text(confirm)
    assert page(confirm).css_first("form#forget-form").attributes["method"] == "post"
    done = server.post(f"/forget/{memory_id}", secret)
    assert done.status_code == 303
    assert done.headers["location"] == f"/memories/{store}?forgotten={memory_id}"
    after = server.get(done.headers["location"], secret)
    assert f"Forgotten: {memory_id}" in main_text(after)
    assert memory_id not in {
        row.attributes["data-memory-id"] for row in page(after).css("tr[data-memory-id]")
    }
    gone = await mcp(server, secret, "search_knowledge", {"query": "ptarmigan"})
    assert memory_id not in found_ids(gone)


async def test_a_read_only_token_sees_no_forget_button_and_cannot_forget(
    server: WebServer, corpus: WebCorpus
) -> None:
    secret, memory_id = corpus.secrets["acme-read"], corpus.ids["forget-readonly"]
    listing = server.get(f"/memories/{corpus.ids['forget-readonly:store']}", secret)
    assert listing.status_code == 200
    assert page(listing).css("tr[data-memory-id]")
    assert not page(listing).css("a.forget") and "Forget" not in listing.text
    for response in (
        server.get(f"/forget/{memory_id}", secret),
        server.post(f"/forget/{memory_id}", secret),
    ):
        assert response.status_code == 403
        assert "memory:write" in main_text(response)
    still = await mcp(server, secret, "search_knowledge", {"query": "bittern"})
    assert memory_id in found_ids(still)


# ------------------------------------------------------------------ what a page may contain


def _pages(corpus: WebCorpus) -> list[str]:
    ids = corpus.ids
    return [
        "/",
        f"/kb/{ids['acme-ops']}",
        "/search?q=zebrafish",
        f"/doc/{ids['acme-ops:' + XSS_PATH]}",
        f"/doc/{ids['xss']}",
        f"/memories/{ids['xss:store']}",
        f"/forget/{ids['xss']}",
        "/server",
        f"/doc/{unknown_id('doc')}",
    ]


def test_hostile_text_shows_as_text(server: WebServer, corpus: WebCorpus) -> None:
    secret = corpus.secrets["acme"]
    for path in _pages(corpus)[1:7]:  # the pages that show the hostile document or memory
        response = server.get(path, secret)
        assert response.status_code == 200, path
        html = page(response)
        markup = [node.tag for node in html.css("main script, main img, main svg, main iframe")]
        assert not markup, (path, markup)
        assert not [
            (node.tag, name)
            for node in html.css("*")
            for name in node.attributes
            if name.startswith("on")
        ], path
        assert "window.__xss" in main_text(response), path  # shown, as text
        for control in ("\x1b", "\x07", "\u202e"):
            assert control not in response.text, (path, repr(control))
    reader = main_text(server.get(f"/doc/{corpus.ids['acme-ops:' + XSS_PATH]}", secret))
    assert '<img src=x onerror="window.__xss=12"> ␛[31mAlarm␇ \\u202egnp.exe' in reader
    assert "<script>window.__xss=14</script>" in reader


def test_every_page_has_the_policy_and_runs_only_its_own_scripts(
    server: WebServer, corpus: WebCorpus
) -> None:
    secret = corpus.secrets["acme"]
    for path in [*_pages(corpus), "/no-token"]:
        response = server.get(path, None if path == "/no-token" else secret)
        if path == "/no-token":
            response = server.get("/")
        assert response.headers["content-security-policy"] == CSP, path
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["cache-control"] == "no-store"
        assert response.headers["referrer-policy"] == "no-referrer"
        html = page(response)
        scripts = html.css("script")
        assert [node.attributes.get("src") for node in scripts] == OWN_SCRIPTS, path
        assert all(not node.text().strip() for node in scripts), path
        assert not html.css("[style]") and not html.css("style"), path
    for name, kind in [("htmx.min.js", "text/javascript"), ("kbmcp.js", "text/javascript"),
                       ("kbmcp.css", "text/css")]:  # fmt: skip
        response = server.get(f"/static/{name}")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(kind)
        assert response.headers["content-security-policy"] == CSP
        again = server.get(f"/static/{name}", if_none_match=response.headers["etag"])
        assert again.status_code == 304
    assert server.get("/static/../pages.py").status_code == 404
    assert server.get("/static/nothing.js").status_code == 404


async def test_the_server_page_is_doctor_for_the_owner_and_counts_for_a_token(
    server: WebServer, open_server: WebServer, corpus: WebCorpus
) -> None:
    owner = main_text(open_server.get("/server"))
    assert "kbmcp doctor" in owner and "contents" in owner and "schema" in owner
    assert "database" in owner
    secret = corpus.secrets["acme"]
    token_view = server.get("/server", secret)
    text = main_text(token_view)
    assert str(corpus.tokens_db) not in token_view.text and "postgresql://" not in token_view.text
    kbs = (await mcp(server, secret, "list_knowledge_bases", {}))["knowledge_bases"]
    stores = (await mcp(server, secret, "list_memory_stores", {}))["memory_stores"]
    counts = {
        cells[0].text(): cells[1].text()
        for cells in (row.css("td") for row in page(token_view).css("#counts tbody tr"))
    }
    assert counts == {
        "knowledge bases": str(len(kbs)),
        "documents": str(sum(kb["document_count"] for kb in kbs)),
        "chunks": str(sum(kb["chunk_count"] for kb in kbs)),
        "memory stores": str(len(stores)),
        "memories": str(sum(store["memory_count"] for store in stores)),
    }
    assert "model" in text


# ------------------------------------------------------------------ without tokens


async def test_without_tokens_the_page_is_the_local_owners(
    open_server: WebServer, corpus: WebCorpus
) -> None:
    response = open_server.get("/")
    assert response.status_code == 200
    assert "You are the local owner" in main_text(response)
    shown = {node.attributes["data-kb-id"] for node in page(response).css("tr[data-kb-id]")}
    listed = await mcp(open_server, None, "list_knowledge_bases", {})
    assert shown == {kb["knowledge_base_id"] for kb in listed["knowledge_bases"]}
    assert shown == {corpus.ids["handbook"]}


def test_without_tokens_host_and_origin_are_checked_as_for_mcp(open_server: WebServer) -> None:
    for path in ("/", "/mcp"):
        assert open_server.get(path, host="evil.example").status_code == 421
        assert open_server.get(path, origin="http://evil.example").status_code == 403
    assert open_server.get("/", host="localhost").status_code == 200


async def test_without_tokens_a_forget_must_come_from_the_page_itself(
    open_server: WebServer, corpus: WebCorpus
) -> None:
    """Another page on this machine (another port passes the loopback check) cannot post a
    form that forgets; the page itself can, with or without its script."""
    memory_id = corpus.ids["owner-forget"]
    for headers in ({"origin": "http://localhost:1"}, {"origin": "null"},
                    {"sec_fetch_site": "cross-site"}, {"sec_fetch_site": "same-site"}):  # fmt: skip
        refused = open_server.post(f"/forget/{memory_id}", **headers)
        assert refused.status_code == 403, headers
        if headers.get("origin") != "null":  # that one the loopback check refuses already
            assert "refused to forget" in main_text(refused)
    found = await mcp(open_server, None, "search_knowledge", {"query": "grebe router"})
    assert memory_id in found_ids(found)
    done = open_server.post(
        f"/forget/{memory_id}", origin=open_server.base, sec_fetch_site="same-origin"
    )
    assert done.status_code == 303
    gone = await mcp(open_server, None, "search_knowledge", {"query": "grebe router"})
    assert memory_id not in found_ids(gone)


async def test_no_ui_serves_mcp_only(
    open_server: WebServer,
    corpus: WebCorpus,
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    assert f"the web page is at {open_server.base}/" in open_server.process.stderr
    source = tmp_path / "no-ui.db"  # a database of its own: open_server's stays served
    shutil.copyfile(corpus.open_db, source)
    running = WebServer(database_on(backend, source, request), "--no-ui")
    try:
        for path in ("/", "/search", "/static/kbmcp.js", f"/kb/{corpus.ids['handbook']}"):
            assert running.get(path).status_code == 404, path
        listed = await mcp(running, None, "list_knowledge_bases", {})
        assert listed["knowledge_bases"]
        assert "web page" not in running.process.stderr
    finally:
        running.stop()
