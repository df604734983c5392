"""The embedded engine: one SQLite file per index, shared by the processes of one host
(`SqliteIndex`)."""

from gateway.index.sqlite.engine import SqliteIndex

__all__ = ["SqliteIndex"]
