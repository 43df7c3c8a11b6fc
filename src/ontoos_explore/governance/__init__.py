"""Governance: named queries (the registry); the audit trail and promotion come next."""
