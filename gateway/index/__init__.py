"""The gateway's own search index, for upstreams that cannot search the way a spec requires:
one engine behind one interface (`SearchIndex`), embedded by default (SQLite FTS5 and
sqlite-vec, on disk), a server when replicas share (PostgreSQL)."""
