"""HTML text as a reader sees it (issue 19, item 4), on pages shaped like real generators' output:
Sphinx (Python's library docs), Node's API docs and DocBook. Permalink marks leave titles,
headings and citations; asides inside the main text stay; several <code> blocks in one <pre>
keep their line breaks; DocBook navigation lines go; a Sphinx build's `_sources` copies and
index pages are skipped by reason."""

from __future__ import annotations

from pathlib import Path

from kbmcp.ingest.html import html_to_text
from kbmcp.search.models import SearchRequest
from kbmcp.service.ingest import add_paths
from kbmcp.service.read import document_outline, read_document
from kbmcp.service.search import search
from kbmcp.workspace import Workspace
from tests.file_tree import write_tree

# Python's library docs as Sphinx 7 builds them (json.html, shortened): permalinks on every
# heading and definition, a footnote in an <aside>, a sidebar and related bars around the body.
SPHINX_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8" />
<title>json — JSON encoder and decoder &#8212; Python 3.12 documentation</title></head>
<body>
<div class="related" role="navigation" aria-label="Related">
<h3>Navigation</h3><ul><li><a href="../genindex.html" accesskey="I">index</a></li>
<li><a href="../py-modindex.html">modules</a> |</li></ul></div>
<div class="document"><div class="documentwrapper"><div class="bodywrapper">
<div class="body" role="main">
<section id="module-json">
<span id="json-json-encoder-and-decoder"></span><h1><a class="reference internal"
href="#module-json" title="json: Encode and decode the JSON format."><code class="xref py
py-mod docutils literal notranslate"><span class="pre">json</span></code></a> — JSON encoder and
decoder<a class="headerlink" href="#module-json" title="Link to this heading">¶</a></h1>
<p><strong>Source code:</strong> <a class="reference external"
href="https://github.com/python/cpython/tree/3.12/Lib/json/__init__.py">Lib/json/__init__.py</a></p>
<p>JSON is a lightweight data interchange format inspired by JavaScript object literal
syntax<a class="footnote-reference brackets" href="#rfc-errata" id="id1"
role="doc-noteref"><span class="fn-bracket">[</span>1<span class="fn-bracket">]</span></a>.</p>
<section id="basic-usage">
<h2>Basic Usage<a class="headerlink" href="#basic-usage" title="Link to this heading">¶</a></h2>
<dl class="py function">
<dt class="sig sig-object py" id="json.dump"><span class="sig-prename descclassname"><span
class="pre">json.</span></span><span class="sig-name descname"><span
class="pre">dump</span></span><span class="sig-paren">(</span><em class="sig-param"><span
class="n"><span class="pre">obj</span></span></em><span class="sig-paren">)</span><a
class="headerlink" href="#json.dump" title="Link to this definition">¶</a></dt>
<dd><p>Serialize <em>obj</em> as a JSON formatted stream to <em>fp</em>.</p></dd>
</dl>
</section>
<section id="footnotes">
<h2>Footnotes<a class="headerlink" href="#footnotes" title="Link to this heading">¶</a></h2>
<aside class="footnote-list brackets">
<aside class="footnote brackets" id="rfc-errata" role="doc-footnote">
<span class="label"><span class="fn-bracket">[</span><a role="doc-backlink"
href="#id1">1</a><span class="fn-bracket">]</span></span>
<p>As noted in <a class="reference external"
href="https://www.rfc-editor.org/errata_search.php?rfc=7159">the errata for RFC 7159</a>, JSON
permits literal U+2028 (LINE SEPARATOR) and U+2029 (PARAGRAPH SEPARATOR) characters in strings,
whereas JavaScript does not.</p>
</aside>
</aside>
</section>
</section>
<div class="clearer"></div></div></div></div>
<div class="sphinxsidebar" role="navigation" aria-label="Main">
<h3>Table of Contents</h3><ul><li>Sidebar table of contents entry</li></ul></div>
</div>
<div class="footer">&#169; Copyright 2001-2024, Python Software Foundation.</div>
</body></html>
"""

# Node's API docs (dns.html, shortened): "#" marks in the headings, and one <pre> holding the
# ES-module and the CommonJS version of an example, with a flavour switch and a copy button.
NODE_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>DNS | Node.js v20.11.0 Documentation</title>
</head><body class="alt apidoc" id="api-section-dns">
<a href="#apicontent" class="skip-to-content">Skip to content</a>
<div id="content" class="clearfix">
<div role="navigation" id="column2" class="interactive"><ul><li><a href="index.html">Index</a>
</li></ul></div>
<div id="column1" data-id="dns" class="interior">
<header class="header"><div class="header-container"><h1>Node.js v20.11.0 documentation</h1>
</div></header>
<div role="main" id="apicontent">
<h2>DNS<span><a class="mark" href="#dns" id="dns">#</a></span><a aria-hidden="true"
class="legacy" id="dns_dns"></a></h2>
<p>The <code>node:dns</code> module enables name resolution.</p>
<pre class="with-42-chars"><input class="js-flavor-selector" type="checkbox" checked
aria-label="Show modern ES modules syntax"><code class="language-js mjs">import dns from 'node:dns';
dns.lookup('example.org', (err, address, family) =&gt; {
  console.log('address: %j family: IPv%s', address, family);
});
// address: "93.184.216.34" family: IPv4</code><code class="language-js cjs">const dns = \
require('node:dns');
dns.lookup('example.org', (err, address, family) =&gt; {
  console.log('address: %j family: IPv%s', address, family);
});
// address: "93.184.216.34" family: IPv6</code><button class="copy-button">copy</button></pre>
<section><h3><code>dns.lookup(hostname[, options], callback)</code><span><a class="mark"
href="#dnslookuphostname-options-callback" id="dnslookuphostname-options-callback">#</a></span>
</h3><p>Resolves a host name into the first found A (IPv4) or AAAA (IPv6) record.</p></section>
</div></div></div></body></html>
"""

# A DocBook chunked page (as the DocBook XSL stylesheets write them): navigation tables above and
# below, no <main>.
DOCBOOK_PAGE = """<html><head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8">
<title>1.1. Installation</title></head><body>
<div class="navheader"><table width="100%" summary="Navigation header">
<tr><th colspan="3" align="center">1.1. Installation</th></tr>
<tr><td width="20%" align="left"><a accesskey="p" href="intro.html">&lt;&lt; 1. Introduction</a>
</td><th width="60%" align="center">Chapter 1. Introduction</th>
<td width="20%" align="right"><a accesskey="n" href="usage.html">1.2. Usage &gt;&gt;</a></td>
</tr></table><hr></div>
<div class="sect1"><div class="titlepage"><div><div><h2 class="title"><a name="install"></a>
1.1. Installation</h2></div></div></div>
<p>Unpack the archive and run the installer as the pelican user.</p></div>
<div class="navfooter"><hr><table width="100%" summary="Navigation footer">
<tr><td width="40%" align="left"><a accesskey="p" href="intro.html">&lt;&lt; 1. Introduction</a>
</td><td width="20%" align="center"><a accesskey="u" href="intro.html">Up</a></td>
<td width="40%" align="right"><a accesskey="n" href="usage.html">1.2. Usage &gt;&gt;</a></td></tr>
<tr><td width="40%" align="left" valign="top">Chapter 1. Introduction </td>
<td width="20%" align="center"><a accesskey="h" href="index.html">Home</a></td>
<td width="40%" align="right" valign="top"> 1.2. Usage</td></tr></table></div>
</body></html>
"""


def test_sphinx_permalinks_leave_titles_and_footnotes_stay() -> None:
    page = html_to_text(SPHINX_PAGE)
    assert page.title == "json — JSON encoder and decoder"
    assert "¶" not in page.content
    lines = page.content.splitlines()
    assert "# json — JSON encoder and decoder" in lines
    assert "## Basic Usage" in lines and "## Footnotes" in lines
    assert "json.dump(obj)" in lines  # the definition, without its mark
    # the footnote (an <aside> inside the main text) is text of the page
    assert "JSON permits literal U+2028 (LINE SEPARATOR)" in " ".join(lines)
    for chrome in ("Table of Contents", "Copyright", "modules", "Navigation"):
        assert chrome not in page.content


def test_node_marks_leave_headings_and_code_blocks_keep_their_lines() -> None:
    page = html_to_text(NODE_PAGE)
    assert "#dns" not in page.content and "\n#\n" not in page.content
    assert "## DNS" in page.content.splitlines()
    assert "### dns.lookup(hostname[, options], callback)" in page.content.splitlines()
    code = page.content.split("```")[1]
    assert "family: IPv4\nconst dns = require('node:dns');" in code  # not "IPv4const dns"
    assert page.content.startswith("## DNS\n\nThe node:dns module enables name resolution.")
    assert "copy" not in page.content and "Index" not in page.content


def test_docbook_navigation_lines_are_dropped() -> None:
    page = html_to_text(DOCBOOK_PAGE)
    assert page.content == (
        "## 1.1. Installation\n\nUnpack the archive and run the installer as the pelican user."
    )


def sphinx_build(root: Path) -> Path:
    """A Sphinx HTML build folder: pages, their `_sources` copies and generated index pages."""
    return write_tree(
        root / "html",
        {
            "objects.inv": b"# Sphinx inventory version 2\n",
            "searchindex.js": 'Search.setIndex({"docnames": ["library/json"]})',
            "library/json.html": SPHINX_PAGE,
            "_sources/library/json.rst.txt": ":mod:`json` --- JSON encoder and decoder\n",
            "genindex.html": SPHINX_PAGE.replace("JSON is a", "Index of everything. JSON is a"),
            "genindex-J.html": "<div role='main'><h1>Index – J</h1><p>json (module)</p></div>",
            "py-modindex.html": "<div role='main'><h1>Python Module Index</h1></div>",
            "search.html": "<div role='main'><h1>Search</h1></div>",
            "_static/basic.css": "body { margin: 0 }",
        },
    )


def test_a_sphinx_build_is_indexed_without_its_copies_and_index_pages(
    tmp_path: Path, workspace: Workspace
) -> None:
    principal = workspace.local_principal()
    report = add_paths(workspace, principal, [sphinx_build(tmp_path)])
    assert report.added == 1
    assert report.skipped["Sphinx source copy or index page"] == 5  # _sources/ counts once
    # "errata U+2028" is findable, in the page, and no citation carries a permalink mark
    hits = search(workspace, principal, SearchRequest("errata U+2028", mode="lexical")).results
    assert hits and hits[0].path == "library/json.html"
    assert hits[0].heading_path == ["json — JSON encoder and decoder", "Footnotes"]
    assert hits[0].title == "json — JSON encoder and decoder"
    outline = document_outline(workspace, principal, hits[0].document_id)
    assert all("¶" not in s.title for s in outline.sections)
    text = read_document(workspace, principal, hits[0].document_id).content
    start, end = hits[0].citation.char_start, hits[0].citation.char_end
    assert "U+2028" in text[start:end] and "¶" not in text
    # the same pages outside a Sphinx build are ordinary pages
    plain = write_tree(tmp_path / "site", {"search.html": "<main><p>search tips</p></main>"})
    assert add_paths(workspace, principal, [plain]).added == 1
