"""The web page in a real browser: headless Chromium (tests/browser_support.py) on a real
`kbmcp serve --http`, every page reached by clicking, as a person does.

With tokens the page runs on htmx and the page's script (the header comes from the tab's
sessionStorage), so these tests are what proves that navigation, reloads, the back button and
forms carry the token; without tokens, full page loads and plain forms. What the page shows is
compared with the MCP answer of the same server to the same caller. Hostile documents must run
nothing: `window.__xss` stays unset and the console reports no CSP violation (which would mean
markup got into the page and only the policy stopped it).

The browser drives the page; the services behind it are tested on both backends by
tests/test_web_pages.py, so this tier runs on SQLite only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.access_support import connect_with_token
from tests.browser_support import (
    DESKTOP,
    PHONE,
    auth_state,
    chromium,
    console_problems,
    require_browser,
    set_width,
    settled,
    sign_in,
    wait_for,
    wait_until,
)
from tests.mcp_support import payload
from tests.web_support import (
    XSS_PATH,
    WebCorpus,
    WebServer,
    build_web_corpus,
    cited_read,
    found_ids,
    unknown_id,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.sqlite_only("the browser drives the page; its services run on both backends "
                            "in tests/test_web_pages.py"),
]  # fmt: skip


require_browser(module=True)  # no browser: one skip for the module, with its reason


@pytest.fixture(scope="module")
def corpus(backend: str, tmp_path_factory: pytest.TempPathFactory) -> WebCorpus:
    return build_web_corpus(tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def server(corpus: WebCorpus) -> Iterator[WebServer]:
    running = WebServer(corpus.tokens_db)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def open_server(corpus: WebCorpus) -> Iterator[WebServer]:
    running = WebServer(corpus.open_db)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


@pytest.fixture
def driver(browser: Any) -> Iterator[Any]:
    """The module's browser at desktop width, its console read before and after the test."""
    set_width(browser, DESKTOP)
    browser.get_log("browser")
    yield browser


async def mcp(server: WebServer, secret: str, tool: str, args: dict[str, Any]) -> Any:
    async with connect_with_token(server.mcp_url, secret) as client:
        return payload(await client.call_tool(tool, args))


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def click(driver: Any, selector: str, then: str) -> Any:
    """Click the first `selector`, then wait for `then` on the next page."""
    previous = driver.execute_script("return document.getElementById('main')")
    css(driver, selector)[0].click()
    wait_until(
        driver,
        lambda d: (
            d.execute_script("return document.getElementById('main')") != previous and settled(d)
        ),
        f"the page after clicking {selector}",
    )
    return wait_for(driver, then)


def storage(driver: Any) -> dict[str, Any]:
    return driver.execute_script(
        "return {session: Object.assign({}, sessionStorage), local: localStorage.length,"
        " cookie: document.cookie}"
    )


# ------------------------------------------------------------------ tokens


def test_the_token_lives_in_the_tab_and_survives_a_reload(
    driver: Any, server: WebServer, corpus: WebCorpus
) -> None:
    sign_in(driver, server.base, "kbmcp_0000000000000000_wrong", "/search?q=zanzibar")
    assert auth_state(driver) == "refused"
    assert "refused that token" in css(driver, "#refused")[0].text
    assert "kbmcp.token" not in storage(driver)["session"]
    secret = corpus.secrets["acme"]
    sign_in(driver, server.base, secret, "/search?q=zanzibar")
    assert auth_state(driver) == "ok"
    assert driver.current_url == server.base + "/search?q=zanzibar"
    assert css(driver, "#results li[data-chunk-id]")
    assert corpus.token_ids["acme"] in css(driver, "#who")[0].text
    kept = storage(driver)
    assert kept["session"]["kbmcp.token"] == secret
    assert (kept["local"], kept["cookie"]) == (0, "")  # no page text in localStorage, no cookie
    assert driver.get_cookies() == []
    driver.refresh()  # a full load carries no header: the script loads the page with it
    wait_until(driver, lambda d: auth_state(d) == "ok" and settled(d), "the reloaded page")
    assert css(driver, "#results li[data-chunk-id]")
    click(driver, "[data-kbmcp-sign-out]", "form#sign-in")
    assert "kbmcp.token" not in storage(driver)["session"]
    assert auth_state(driver) == "required"
    assert console_problems(driver) == []


def test_every_page_by_clicking_at_both_widths(
    driver: Any, server: WebServer, corpus: WebCorpus, tmp_path: Path
) -> None:
    """Home, a knowledge base, a document, search, a memory store, forget's confirmation, the
    server: reached by clicking, with the back button, and readable at 390 px (nothing wider
    than the screen but the tables, which scroll inside their box)."""
    sign_in(driver, server.base, corpus.secrets["acme"])
    steps = [
        ("home", None, "#knowledge-bases"),
        ("kb", f"#knowledge-bases a[href='/kb/{corpus.ids['acme-ops']}']", "#documents"),
        ("document", "#documents a[href*='doc_']", "#text"),
        ("search", "nav a[href='/search']", "form#search-form"),
        ("home-again", "nav a[href='/']", "#memory-stores"),
        ("memories", "#memory-stores a", "#memories"),
        ("forget", "#memories a.forget", "form#forget-form"),
        ("server", "nav a[href='/server']", "#counts"),
    ]
    for name, selector, expected in steps:
        if selector is not None:
            click(driver, selector, expected)
        for size in (DESKTOP, PHONE):
            set_width(driver, size)
            wide = driver.execute_script("return document.documentElement.scrollWidth")
            assert wide <= size[0], (name, size, wide)
            driver.save_screenshot(str(tmp_path / f"{name}-{size[0]}.png"))
        set_width(driver, DESKTOP)
    driver.back()
    wait_for(driver, "form#forget-form")
    driver.back()
    wait_for(driver, "#memories")
    assert driver.current_url.startswith(server.base + "/memories/")
    assert console_problems(driver) == []


# ------------------------------------------------------------------ search and reader


FORM_SEARCHES = [
    {"q": "restore a backup"},
    {"q": "database runbook", "mode": "rrf", "kb": "acme-ops", "path": "ops/", "tag": "tag=runbook",
     "min_similarity": "0", "limit": "5"},
    {"q": "zanzibar quokka", "mode": "lexical", "kb": "acme-notes"},
]  # fmt: skip


@pytest.mark.parametrize("fields", FORM_SEARCHES)
async def test_the_search_form_returns_what_search_knowledge_returns(
    driver: Any, server: WebServer, corpus: WebCorpus, fields: dict[str, str]
) -> None:
    from selenium.webdriver.support.ui import Select

    secret = corpus.secrets["acme"]
    sign_in(driver, server.base, secret, "/search")
    wait_for(driver, "form#search-form")
    css(driver, "input[name=q]")[0].send_keys(fields["q"])
    arguments: dict[str, Any] = {"query": fields["q"], "mode": fields.get("mode", "hybrid")}
    Select(css(driver, "select[name=mode]")[0]).select_by_value(arguments["mode"])
    if "kb" in fields:
        kb_id = corpus.ids[fields["kb"]]
        css(driver, f"input[name=kb][value='{kb_id}']")[0].click()
        arguments["knowledge_base_ids"] = [kb_id]
    if "path" in fields:
        css(driver, "input[name=path]")[0].send_keys(fields["path"])
        arguments["document_paths"] = [fields["path"]]
    if "tag" in fields:
        css(driver, "input[name=tag]")[0].send_keys(fields["tag"])
        key, _, value = fields["tag"].partition("=")
        arguments["tags"] = {key: value}
    if "min_similarity" in fields:
        css(driver, "input[name=min_similarity]")[0].send_keys(fields["min_similarity"])
        arguments["min_similarity"] = float(fields["min_similarity"])
    limit = css(driver, "input[name=limit]")[0]
    limit.clear()
    limit.send_keys(fields.get("limit", "10"))
    arguments["limit"] = int(fields.get("limit", "10"))
    click(driver, "#search-form button[type=submit]", "#search-summary")
    shown = driver.execute_script(
        "return Array.from(document.querySelectorAll('#results li[data-chunk-id]')).map("
        "li => [li.dataset.chunkId, Number(li.dataset.score)])"
    )
    expected = await mcp(server, secret, "search_knowledge", arguments)
    assert expected["results"]
    assert shown == [[r["chunk_id"], r["score"]] for r in expected["results"]]
    assert css(driver, "#search-summary")[0].get_attribute("data-mode") == expected["mode"]
    assert "q=" in driver.current_url  # the search is in the address: it can be shared


async def test_two_clicks_from_a_search_to_the_marked_passage(
    driver: Any, server: WebServer, corpus: WebCorpus
) -> None:
    secret = corpus.secrets["acme"]
    sign_in(driver, server.base, secret, "/search")
    wait_for(driver, "form#search-form")
    css(driver, "input[name=q]")[0].send_keys("albatross valve")
    click(driver, "#search-form button[type=submit]", "#results a.open-passage")  # click 1
    click(driver, "#results a.open-passage", "mark#passage")  # click 2
    found = await mcp(server, secret, "search_knowledge", {"query": "albatross valve"})
    cited = await mcp(server, secret, "search_knowledge", cited_read(found["results"][0]))
    mark = css(driver, "mark#passage")[0]
    assert driver.execute_script("return arguments[0].textContent", mark) == cited["content"]
    assert "albatross valve" in mark.text
    # Scrolled to: the passage lies in the second half of a long document.
    top, bottom, height, scrolled = driver.execute_script(
        "var r = arguments[0].getBoundingClientRect();"
        " return [r.top, r.bottom, window.innerHeight, window.scrollY]",
        mark,
    )
    assert scrolled > 0 and 0 <= top < height, (top, bottom, height, scrolled)
    assert driver.current_url.endswith("#passage")


# ------------------------------------------------------------------ memories


async def test_forget_in_the_browser_removes_the_memory_from_mcp_search(
    driver: Any, server: WebServer, corpus: WebCorpus
) -> None:
    secret, memory_id = corpus.secrets["acme"], corpus.ids["forget-browser"]
    store = corpus.ids["forget-browser:store"]
    before = await mcp(server, secret, "search_knowledge", {"query": "heron staging"})
    assert memory_id in found_ids(before)
    sign_in(driver, server.base, secret, f"/memories/{store}")
    wait_for(driver, "#memories")
    click(driver, f"tr[data-memory-id='{memory_id}'] a.forget", "form#forget-form")
    assert "heron" in css(driver, "main pre")[0].text
    click(driver, "#confirm-forget", "#forgotten")
    assert driver.current_url == f"{server.base}/memories/{store}?forgotten={memory_id}"
    assert not css(driver, f"tr[data-memory-id='{memory_id}']")
    after = await mcp(server, secret, "search_knowledge", {"query": "heron staging"})
    assert memory_id not in found_ids(after)
    assert console_problems(driver) == []


async def test_forget_without_tokens_posts_a_plain_form(
    driver: Any, open_server: WebServer, corpus: WebCorpus
) -> None:
    """The local owner's page: full page loads and a real browser's form post, which the
    same-origin check must accept."""
    memory_id, store = corpus.ids["owner-forget-browser"], corpus.ids["owner-forget-browser:store"]
    driver.get(f"{open_server.base}/memories/{store}")
    wait_for(driver, "#memories")
    click(driver, f"tr[data-memory-id='{memory_id}'] a.forget", "form#forget-form")
    click(driver, "#confirm-forget", "#forgotten")
    assert not css(driver, f"tr[data-memory-id='{memory_id}']")
    async with _owner_client(open_server) as client:
        after = payload(await client.call_tool("search_knowledge", {"query": "plover laptop"}))
    assert memory_id not in found_ids(after)


def _owner_client(server: WebServer) -> Any:
    from mcp import Client

    return Client(server.mcp_url)


async def test_a_read_only_token_has_no_forget_button_and_its_post_is_refused(
    driver: Any, server: WebServer, corpus: WebCorpus
) -> None:
    secret, memory_id = corpus.secrets["acme-read"], corpus.ids["forget-readonly"]
    sign_in(driver, server.base, secret, f"/memories/{corpus.ids['forget-readonly:store']}")
    wait_for(driver, "#memories")
    assert css(driver, "tr[data-memory-id]") and not css(driver, "a.forget")
    status = driver.execute_async_script(
        "var done = arguments[arguments.length - 1];"
        "fetch('/forget/' + arguments[0], {method: 'POST', headers: {Authorization:"
        " 'Bearer ' + sessionStorage.getItem('kbmcp.token')}}).then(r => done(r.status));",
        memory_id,
    )
    assert status == 403
    still = await mcp(server, secret, "search_knowledge", {"query": "bittern"})
    assert memory_id in found_ids(still)


# ------------------------------------------------------------------ isolation and hostile text


def test_a_foreign_documents_address_answers_like_an_unknown_one(
    driver: Any, server: WebServer, corpus: WebCorpus
) -> None:
    sign_in(driver, server.base, corpus.secrets["acme"])
    pages = {}
    for name, doc_id in (("foreign", corpus.ids["beta-docs:onboarding.md"]),
                         ("unknown", unknown_id("doc"))):  # fmt: skip
        driver.get(f"{server.base}/doc/{doc_id}")
        error = wait_for(driver, "#error")
        pages[name] = (driver.title, css(driver, "h1")[0].text, error.text.replace(doc_id, "ID"))
    assert pages["foreign"] == pages["unknown"]
    assert pages["foreign"][1] == "Not found"


XSS_SENTINEL = "return [window.__xss, document.querySelectorAll('main script, main img, main svg, main iframe, [onerror], [onload]').length]"  # noqa: E501


def test_hostile_documents_and_memories_stay_inert(
    driver: Any, server: WebServer, open_server: WebServer, corpus: WebCorpus
) -> None:
    ids = corpus.ids
    sign_in(driver, server.base, corpus.secrets["acme"])
    visits = [
        (f"/kb/{ids['acme-ops']}?tag=tag%3Dxss", "#documents"),
        (f"/doc/{ids['acme-ops:' + XSS_PATH]}", "#text"),
        ("/search?q=zebrafish", "#results"),
        (f"/memories/{ids['xss:store']}", "#memories"),
        (f"/forget/{ids['xss']}", "form#forget-form"),
        (f"/doc/{ids['xss']}", "#text"),
    ]
    for path, ready in visits:
        driver.get(server.base + path)  # a full load, then the script's load with the token
        wait_until(driver, lambda d: auth_state(d) == "ok" and settled(d), path)
        wait_for(driver, ready)
        assert driver.execute_script(XSS_SENTINEL) == [None, 0], path
        assert "window.__xss" in css(driver, "main")[0].text, path
    driver.get(f"{server.base}/doc/{ids['acme-ops:' + XSS_PATH]}")
    wait_for(driver, "#text")
    assert driver.title.startswith('<img src=x onerror="window.__xss=12"> ␛[31mAlarm␇')
    assert "<script>window.__xss=14</script>" in css(driver, "#text")[0].text
    # Without tokens the page arrives whole in the first response, with no script involved.
    driver.get(f"{open_server.base}/search?q=zebrafish+window")
    wait_for(driver, "#results")
    assert driver.execute_script(XSS_SENTINEL) == [None, 0]
    assert console_problems(driver) == []
