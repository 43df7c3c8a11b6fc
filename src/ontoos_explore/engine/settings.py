"""Engine, deployment settings: `Settings` (one frozen record for the whole deployment), re-exported for
the engine's callers; declared, read and checked in `ontoos_explore/settings.py`."""

from __future__ import annotations

from ..settings import Settings, SettingError, read

__all__ = ["Settings", "SettingError", "read"]
