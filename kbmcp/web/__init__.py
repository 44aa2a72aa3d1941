"""The web page of `kbmcp serve --http`: for the people behind the agents.

Pages under `/` of the HTTP server (same process, same port as `/mcp`): the knowledge bases and
memory stores the caller can read, a knowledge base's documents, search as `search_knowledge`
runs it, a reader that marks a cited passage, memories with `forget`, and the server's state.

- `app.web_app` builds the ASGI app; `app.with_web_ui` puts it next to the MCP endpoint.
- `auth`: who is asking: the local owner (no tokens, loopback only) or a bearer token, checked
  by the MCP endpoint's own verifier (kbmcp/server/auth.py).
- `pages`: one handler per page; each calls the service functions the MCP tools call
  (kbmcp/service/), never SQL.
- `render`: Jinja2 templates with autoescaping; every text from the database is escaped.
- `headers`: the Content-Security-Policy and the same-origin check on posts.

Nothing here is imported outside `serve --http` (Jinja2 and Starlette cost start-up time).
"""
