"""The screenshots of the web page in docs/screenshots/, made again with:

    .venv/bin/python -m tests.web_screenshots docs/screenshots

Each page at 1280 and 390 px wide (a desktop and a phone), from the tests' corpus served with
tokens and signed in with a token of tenant acme, in the headless Chromium of the browser tier
(tests/browser_support.py). The clock is pinned (KBMCP_NOW), so the pages show the same dates
and decay weights each time. With `pngquant` installed (Debian: `apt-get install pngquant`)
the images are reduced to a palette, about a third of their size.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kbmcp.ids import TEST_KEY_ENV
from tests.browser_support import DESKTOP, PHONE, chromium, set_width, sign_in, wait_for
from tests.id_support import TEST_ID_KEY
from tests.mcp_support import ONCALL_V2
from tests.web_support import WebCorpus, WebServer, build_web_corpus


def pages(corpus: WebCorpus) -> list[tuple[str, str, str]]:
    """(file name, path, what shows it is ready)."""
    ids = corpus.ids
    start = ONCALL_V2.index("## Escalation")
    end = len(ONCALL_V2.rstrip())
    return [
        ("knowledge", "/", "#knowledge-bases"),
        ("documents", f"/kb/{ids['acme-ops']}", "#documents"),
        ("search", "/search?q=restore+a+backup&mode=hybrid&limit=5", "#results"),
        ("reader", f"/doc/{ids['acme-ops:ops/oncall.md']}?start={start}&end={end}", "#passage"),
        ("memories", f"/memories/{ids['deploy:store']}?half_life=7", "#memories"),
        ("forget", f"/forget/{ids['deploy']}", "form#forget-form"),
        ("server", "/server", "#counts"),
    ]


def take(driver: Any, server: WebServer, corpus: WebCorpus, folder: Path) -> list[Path]:
    """Every page at both widths, into `folder`; the sign-in page first."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    driver.get(server.base + "/")
    wait_for(driver, "form#sign-in")
    made += _both_widths(driver, folder, "sign-in")
    sign_in(driver, server.base, corpus.secrets["acme"])
    for name, path, ready in pages(corpus):
        driver.get(server.base + path)
        wait_for(driver, ready)
        made += _both_widths(driver, folder, name)
    return made


def _both_widths(driver: Any, folder: Path, name: str) -> list[Path]:
    made = []
    for size in (DESKTOP, PHONE):
        set_width(driver, size)
        driver.execute_script(
            "var m = document.getElementById('passage');"
            " if (m) { m.scrollIntoView({block: 'center'}); } else { window.scrollTo(0, 0); }"
        )
        path = folder / f"{name}-{size[0]}.png"
        driver.save_screenshot(str(path))
        made.append(path)
    set_width(driver, DESKTOP)
    return made


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.web_screenshots FOLDER", file=sys.stderr)
        return 2
    os.environ[TEST_KEY_ENV] = TEST_ID_KEY.hex()
    with tempfile.TemporaryDirectory() as scratch:
        corpus = build_web_corpus(Path(scratch))
        server = WebServer(corpus.tokens_db)
        try:
            with chromium() as driver:
                made = take(driver, server, corpus, Path(argv[0]))
        finally:
            server.stop()
    quantizer = shutil.which("pngquant")
    if quantizer is not None:
        subprocess.run(
            [quantizer, "--force", "--skip-if-larger", "--strip", "--quality", "60-90",
             "--ext", ".png", *map(str, made)],
            check=False,  # a picture it cannot shrink within that quality stays as it was
        )  # fmt: skip
    total = sum(path.stat().st_size for path in made)
    print(f"{len(made)} screenshots, {total / 1024:.0f} KiB, in {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
