"""Governance, the audit's fixed words: how an event can end and the surfaces that record one.

Imported by the reports, the dashboard's filters and the CLI's choices (without the database layer)."""

OUTCOMES = ("ok", "refused", "failed")
SURFACES = ("cli", "dashboard", "mcp", "mcp-stdio", "rest")
