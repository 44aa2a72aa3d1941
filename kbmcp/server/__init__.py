"""The MCP server: tools over the service layer, served over stdio or streamable HTTP.

`build_server(workspace)` (kbmcp/server/app.py) is the single construction both transports use.
"""
