"""Which files are documents: a kind by file name, or the reason a file is not one.

By default only document formats are indexed (Markdown, reStructuredText, plain text, HTML, PDF);
source code and configuration only when asked (`--code`). Everything else is skipped with a
reason the summary counts: images (SVG included: it is markup for pixels, and it was 72% of the
chunks of a real documentation folder), binaries, lock files, minified assets, source code and
other formats. Build output folders are skipped by name while walking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx", ".mdown", ".mkd"})
RST_SUFFIXES = frozenset({".rst", ".rest"})
TEXT_SUFFIXES = frozenset({".txt", ".text", ""})  # "": README, LICENSE, NOTES
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
PDF_SUFFIXES = frozenset({".pdf"})
CODE_SUFFIXES = frozenset({
    ".py", ".pyi", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".go", ".rs", ".c", ".h",
    ".cc", ".cpp", ".hpp", ".java", ".kt", ".scala", ".rb", ".php", ".cs", ".swift", ".m",
    ".sh", ".bash", ".zsh", ".fish", ".ps1", ".sql", ".r", ".jl", ".lua", ".pl", ".hs",
    ".ex", ".exs", ".erl", ".clj", ".dart", ".vue", ".svelte", ".css", ".scss", ".less",
    ".xml", ".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".proto", ".tf", ".zig",
})  # fmt: skip
IMAGE_SUFFIXES = frozenset({
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp", ".ico", ".icns",
    ".heic", ".avif", ".svg", ".svgz", ".psd", ".xcf", ".eps", ".drawio",
})  # fmt: skip
BINARY_SUFFIXES = frozenset({
    ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tar", ".jar", ".war",
    ".whl", ".egg", ".exe", ".dll", ".so", ".dylib", ".a", ".o", ".obj", ".class", ".pyc",
    ".pyo", ".wasm", ".bin", ".woff", ".woff2", ".ttf", ".otf", ".eot", ".mp3", ".mp4",
    ".wav", ".ogg", ".flac", ".mov", ".avi", ".mkv", ".webm", ".doc", ".docx", ".xls",
    ".xlsx", ".ppt", ".pptx", ".odt", ".ods", ".odp", ".db", ".sqlite", ".sqlite3",
    ".parquet", ".npy", ".npz", ".pkl", ".onnx", ".pt", ".iso", ".dmg",
})  # fmt: skip
LOCK_FILE_NAMES = frozenset({
    "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb",
    "poetry.lock", "pipfile.lock", "pdm.lock", "uv.lock", "cargo.lock", "gemfile.lock",
    "composer.lock", "go.sum", "flake.lock", "mix.lock", "pubspec.lock", "podfile.lock",
})  # fmt: skip
MINIFIED_SUFFIXES = (
    ".min.js",
    ".min.mjs",
    ".min.css",
    "-min.js",
    "-min.css",
    ".js.map",
    ".css.map",
)
# Folders that hold generated files (dependencies, caches, build and site output). The folder
# that is added is never skipped by name: `kbmcp add site/` indexes a built site on purpose.
BUILD_FOLDER_NAMES = frozenset({
    "node_modules", "bower_components", "__pycache__", "site-packages", "_build", "build",
    "dist", "site", "target", "htmlcov", "venv",
})  # fmt: skip
BUILD_FOLDER_SUFFIXES = (".egg-info",)
# A Sphinx HTML build (its root holds searchindex.js or objects.inv) has, beside the pages, a copy
# of every source as `_sources/*.rst.txt` and generated index pages: indexed, they repeat every
# page's text and list every name.
SPHINX_BUILD_MARKERS = frozenset({"searchindex.js", "objects.inv"})
SPHINX_SOURCES_FOLDER = "_sources"
SPHINX_INDEX_PAGES = re.compile(r"(?:genindex(?:-[^/]*)?|py-modindex|modindex|search)\.html?")

# Skip reasons, as the summary and `--dry-run` print them.
IMAGE = "image"
BINARY = "binary"
LOCK_FILE = "lock file"
MINIFIED = "minified asset"
SOURCE_CODE = "code or config (use --code)"
OTHER_FORMAT = "not a document format"
BUILD_OUTPUT = "build output"
SPHINX_BUILD = "Sphinx source copy or index page"


@dataclass(frozen=True)
class Classification:
    kind: str | None  # markdown | rst | text | html | pdf | code; None when skipped
    reason: str | None = None  # why it is skipped


def kind_of(name: str) -> str | None:
    """The document kind a file name implies, or None for an unknown suffix."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in RST_SUFFIXES:
        return "rst"
    if suffix in TEXT_SUFFIXES:
        return "text"
    if suffix in HTML_SUFFIXES:
        return "html"
    if suffix in PDF_SUFFIXES:
        return "pdf"
    if suffix in CODE_SUFFIXES:
        return "code"
    return None


def classify(name: str, *, code: bool = False) -> Classification:
    """Whether a file (by its name) is indexed by default, and as what."""
    lower = PurePosixPath(name).name.lower()
    suffix = PurePosixPath(lower).suffix
    if lower in LOCK_FILE_NAMES or suffix == ".lock":
        return Classification(None, LOCK_FILE)
    if lower.endswith(MINIFIED_SUFFIXES):
        return Classification(None, MINIFIED)
    if suffix in IMAGE_SUFFIXES:
        return Classification(None, IMAGE)
    if suffix in BINARY_SUFFIXES:
        return Classification(None, BINARY)
    kind = kind_of(lower)
    if kind == "code" and not code:
        return Classification(None, SOURCE_CODE)
    if kind is None:
        return Classification(None, OTHER_FORMAT)
    return Classification(kind)


def included_kind(name: str) -> str:
    """The kind of a file an `--include` pattern selected: by suffix, else plain text."""
    return kind_of(name) or "text"


def is_build_folder(name: str) -> bool:
    return name in BUILD_FOLDER_NAMES or name.endswith(BUILD_FOLDER_SUFFIXES)


def is_sphinx_build(filenames: list[str]) -> bool:
    """Whether a folder with these files is the root of a Sphinx HTML build."""
    return not SPHINX_BUILD_MARKERS.isdisjoint(filenames)


def sphinx_build_reason(name: str, *, is_dir: bool) -> str | None:
    """Why an entry of a Sphinx build's root is skipped: the `_sources` copies and the
    generated index pages (genindex, module index, search)."""
    if is_dir:
        return SPHINX_BUILD if name == SPHINX_SOURCES_FOLDER else None
    return SPHINX_BUILD if SPHINX_INDEX_PAGES.fullmatch(name.lower()) else None
