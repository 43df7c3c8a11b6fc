"""Server surfaces: the MCP server (stdio, streamable HTTP) and the HTTP API."""
