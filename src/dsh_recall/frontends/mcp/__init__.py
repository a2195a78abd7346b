"""The MCP front end: tool specs (tools.py), handlers, budget, renderings and the server."""
