"""Governance: the audit trail, its reports, promotion, and the named-query registry."""
