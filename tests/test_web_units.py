"""The web page's pieces on their own: the reader's window and mark, control characters made
visible, a memory's decay weight (the very number search multiplies by, on both backends), the
search form's fields, the templates (none prints a value unescaped), and what `serve` imports."""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from importlib import resources

import pytest
from starlette.datastructures import QueryParams

from kbmcp.clock import parse_timestamp
from kbmcp.errors import InvalidRequest
from kbmcp.search.models import SearchFilters, SearchRequest
from kbmcp.service import memories
from kbmcp.service.search import search
from kbmcp.web.forms import SearchForm, tags
from kbmcp.web.passage import LEAD, WINDOW, Passage, mark, window_offset
from kbmcp.web.render import environment, visible, visible_text
from kbmcp.web.views import decay_weight
from kbmcp.workspace import Workspace
from tests import processes
from tests.browser_support import BROWSER_ENV, REQUIRE_ENV, SKIP_REASON
from tests.mcp_support import REPO_ROOT, pinned_clock

TEXT = "first line\nsecond line\r\nthird line\rfourth line\nfifth line\n"


def test_the_mark_splits_the_window_around_the_passage() -> None:
    start = TEXT.index("third")
    end = TEXT.index("fourth") + len("fourth line\n")
    marked = mark(TEXT, 0, 1, Passage(start, end), to_line_start=True)
    assert marked.before + marked.passage + marked.after == TEXT
    assert marked.passage == "third line\rfourth line\n"
    assert (marked.line_start, marked.line_end) == (3, 4)  # \r\n and \r count as one break each


def test_a_window_from_the_middle_starts_at_a_line() -> None:
    offset = TEXT.index("cond")  # the window starts inside "second line"
    window = TEXT[offset:]
    start = TEXT.index("fifth")
    marked = mark(window, offset, 2, Passage(start, start + 5), to_line_start=True)
    assert marked.before == "third line\rfourth line\n"
    assert marked.offset == TEXT.index("third")
    assert (marked.passage, marked.line_start, marked.line_end) == ("fifth", 5, 5)
    kept = mark(window, offset, 2, Passage(start, start + 5), to_line_start=False)
    assert kept.before.startswith("cond line") and kept.line_start == 5


def test_a_passage_outside_the_window_is_not_marked() -> None:
    marked = mark("abc", 100, 7, Passage(10, 20), to_line_start=True)
    assert (marked.before, marked.passage, marked.line_start) == ("abc", "", None)
    partly = mark("abcdef", 100, 1, Passage(95, 102), to_line_start=False)
    assert partly.passage == "ab"


def test_the_window_holds_the_passage_with_text_before_it() -> None:
    assert window_offset(None, None) == 0
    assert window_offset(Passage(10, 50), None) == 0
    assert window_offset(Passage(50_000, 50_400), None) == 50_000 - LEAD
    assert window_offset(Passage(50_000, 50_000 + WINDOW), None) == 50_000  # long: from its start
    assert window_offset(Passage(50_000, 50_400), 1234) == 1234  # an explicit offset wins


def test_control_characters_are_made_visible() -> None:
    assert visible("a\x1b[31mb\x07\x00\x7f\u202egnp\u2066x\u0085") == (
        "a␛[31mb␇␀␡\\u202egnp\\u2066x\\u0085"
    )
    assert visible("line\nbreak\ttab") == "line␊break␉tab"
    assert visible_text("line\nbreak\ttab\r\n\x1b") == "line\nbreak\ttab\r\n␛"
    assert visible("zero\u200dwidth joiner stays") == "zero\u200dwidth joiner stays"


def test_a_template_escapes_what_it_prints() -> None:
    html = environment().from_string("<p>{{ value|visible }}</p>").render(value="<b>\x1b")
    assert html == "<p>&lt;b&gt;␛</p>"


def test_no_template_prints_a_value_unescaped() -> None:
    folder = resources.files("kbmcp.web").joinpath("templates")
    names = [entry.name for entry in folder.iterdir() if entry.name.endswith(".html")]
    assert len(names) >= 10
    for name in names:
        text = folder.joinpath(name).read_text()
        for forbidden in ("|safe", "| safe", "Markup", "autoescape false", "<script>", "style="):
            assert forbidden not in text, (name, forbidden)


@pytest.mark.parametrize("half_life", [0.5, 7.0, 365.0])
def test_the_decay_weight_is_the_factor_search_applies(
    backend_workspace: Workspace, half_life: float
) -> None:
    ws = backend_workspace
    principal = ws.local_principal()
    with pinned_clock("2026-01-01T00:00:00Z"):
        made = memories.remember(ws, principal, "The heron cluster restarts on Sundays.")
    later = "2026-01-09T06:00:00Z"
    with pinned_clock(later):
        response = search(
            ws,
            principal,
            SearchRequest(
                query="heron cluster",
                filters=SearchFilters(memory_store_ids=[made.memory_store_id]),
                recency_half_life_days=half_life,
            ),
        )
    (hit,) = [result for result in response.results if result.document_id == made.memory_id]
    (memory,) = memories.list_memories(ws, principal)
    weight = decay_weight(memory.updated_at, half_life, parse_timestamp(later))
    assert weight == pytest.approx(hit.recency_weight, rel=1e-9)
    assert weight == pytest.approx(2 ** (-8.25 / half_life), rel=1e-6)


def test_no_decay_and_no_future_age() -> None:
    moment = parse_timestamp("2026-01-01T00:00:00Z")
    assert decay_weight("2026-01-01T00:00:00Z", 0.0, moment) is None
    later = (moment + timedelta(days=3)).isoformat()
    assert decay_weight(later, 7.0, moment) == 1.0  # updated "after now": age 0


def test_the_search_form_is_the_tools_request() -> None:
    params = QueryParams(
        "q=rotate+keys&mode=rrf&kb=kb_1&kb=kb_2&path=ops/&tag=team%3Dsearch&tag=&tag=a%3Db%3Dc"
        "&min_similarity=0.25&limit=7"
    )
    form = SearchForm.from_params(params)
    request = form.request(candidates=42)
    assert request == SearchRequest(
        query="rotate keys",
        mode="rrf",
        min_similarity=0.25,
        limit=7,
        filters=SearchFilters(
            knowledge_base_ids=["kb_1", "kb_2"],
            document_paths=["ops/"],
            tags={"team": "search", "a": "b=c"},
        ),
        candidates=42,
    )
    assert form.tool_arguments() == {
        "query": "rotate keys",
        "mode": "rrf",
        "knowledge_base_ids": ["kb_1", "kb_2"],
        "document_paths": ["ops/"],
        "tags": {"team": "search", "a": "b=c"},
        "min_similarity": 0.25,
        "limit": 7,
    }
    empty = SearchForm.from_params(QueryParams("q=&mode=&min_similarity=&limit="))
    assert empty == SearchForm()


@pytest.mark.parametrize(
    ("query", "argument"),
    [("min_similarity=nan", "min_similarity"), ("min_similarity=x", "min_similarity"),
     ("limit=1.5", "limit"), ("tag=novalue", "tag"), ("tag=%3Dv", "tag")],
)  # fmt: skip
def test_a_field_that_is_not_what_it_should_be_is_named(query: str, argument: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        SearchForm.from_params(QueryParams(query))
    assert raised.value.details["argument"] == argument
    assert argument in raised.value.message


def test_tags_take_the_first_equals_sign() -> None:
    assert tags(QueryParams("tag=k%3Dv%3Dw&tag=+x+%3D+y+")) == {"k": "v=w", "x": "y"}


PROBE = """
import json, sys
import kbmcp.cli.serve, kbmcp.server.app, kbmcp.server.transports
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("jinja2", "markupsafe")
                        or m.startswith("kbmcp.web"))))
"""


def test_stdio_serving_imports_nothing_of_the_web_page() -> None:
    """The MCP server's modules, stdio's path, load no template engine: only `serve --http`
    imports kbmcp.web (in `web_page`)."""
    run = processes.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO_ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(run.stdout) == []


@pytest.mark.parametrize("required", [False, True])
def test_without_a_browser_the_browser_tier_skips_with_one_reason(required: bool) -> None:
    env = {**os.environ, BROWSER_ENV: "/nonexistent/chromium"}
    env.pop(REQUIRE_ENV, None)
    if required:
        env[REQUIRE_ENV] = "1"
    run = processes.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-n", "0", "-p", "no:randomly",
         "tests/test_web_browser.py"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if required:
        assert run.returncode != 0, run.stdout
        assert f"{REQUIRE_ENV} is set and there is no browser" in run.stdout
    else:
        # 5: pytest's "no tests ran" (a module skipped whole collects nothing); never a failure.
        assert run.returncode in (0, 5), run.stdout
        reasons = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
        assert len(reasons) == 1 and SKIP_REASON in reasons[0], run.stdout
        assert " passed" not in run.stdout
