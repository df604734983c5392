"""The shared index engine: PostgreSQL, which several gateway replicas read and one at a time
refreshes (holding a lease). Full text per field in tsvector columns ranked by BM25 computed
in SQL (statistics over the records a caller may see), vectors scored exactly by cosine with
pgvector when the database has it and over float4 arrays otherwise. psycopg 3, synchronous,
with a small connection pool."""

from gateway.index.postgres.engine import LeaseLost, PostgresIndex
from gateway.index.postgres.pool import open_pool

__all__ = ["LeaseLost", "PostgresIndex", "open_pool"]
