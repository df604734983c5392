"""AIDRE search requests (§5, §6, §18, §19, §20) validated into a neutral `Query`.

Everything is checked here, before any upstream is asked: shape, sizes, vector finiteness and
dimensionality (§11.5). Unknown request members are ignored (§20.3).
"""

from __future__ import annotations

import math
from typing import Any

from gateway.errors import GatewayError
from gateway.mapping import numbers
from gateway.model import Query
from gateway.surfaces.aidre.config import Aidre, EmbeddingSpace

RETURN_PARTS = ("ids", "metadata", "text", "semantic_payload", "vectors")
DEFAULT_RETURN = frozenset({"ids", "metadata", "text"})
MAX_VECTOR_LENGTH = 8192


def invalid(message: str, **details: Any) -> GatewayError:
    return GatewayError(400, "invalid_request", message, details)


def parse_search(body: Any, settings: Aidre) -> Query:
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.")
    has_text, has_vector = "query" in body, "query_vector" in body
    if has_text == has_vector:
        raise invalid("Send exactly one of query and query_vector.")
    collection = _collection(body, settings)
    top_k = _top_k(body.get("top_k"), settings)
    fields = _return_fields(body.get("return"))
    cursor = _cursor(body.get("cursor"))
    strict = settings.denied_return_field == "reject"
    if has_text:
        return Query(text=_text(body["query"], settings.max_query_chars), top_k=top_k,
                     collection=collection, fields=fields, cursor=cursor, strict_fields=strict)
    space = _space(body.get("embedding_space"), settings)
    vector = _vector(body["query_vector"], space)
    return Query(vector=vector, embedding_space=space.id, top_k=top_k, collection=collection,
                 fields=fields, cursor=cursor, strict_fields=strict)


def _collection(body: dict[str, Any], settings: Aidre) -> str:
    collection = body.get("collection", settings.default_collection)
    if not isinstance(collection, str) or not collection:
        raise invalid("collection is required (a collection name from /collections).")
    return collection


def _text(query: Any, limit: int) -> str:
    if not isinstance(query, str) or not query.strip():
        raise invalid("query must be a non-empty string.")
    if len(query) > limit:
        raise invalid(f"query is longer than {limit} characters.", max_length=limit)
    return query.strip()


def _top_k(value: Any, settings: Aidre) -> int:
    if value is None:
        return settings.default_top_k
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise invalid("top_k must be a positive integer.", top_k=value)
    if value > settings.max_top_k:
        if settings.top_k_over_max == "reject":
            raise invalid(f"top_k may be at most {settings.max_top_k}.",
                          max_top_k=settings.max_top_k)
        return settings.max_top_k
    return value


def _return_fields(value: Any) -> frozenset[str]:
    if value is None:
        return DEFAULT_RETURN
    if not isinstance(value, dict):
        raise invalid("return must be an object of booleans.")
    chosen = set(DEFAULT_RETURN)
    for part in RETURN_PARTS:
        if part in value:
            if not isinstance(value[part], bool):
                raise invalid(f"return.{part} must be true or false.")
            (chosen.add if value[part] else chosen.discard)(part)
    return frozenset(chosen)


def _cursor(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or len(value) > 1024):
        raise invalid("cursor must be the opaque string a previous response gave.")
    return value


def _space(value: Any, settings: Aidre) -> EmbeddingSpace:
    if not isinstance(value, str) or not value:
        raise invalid("embedding_space is required with query_vector.")
    for space in settings.embedding_spaces:
        if space.id == value:
            return space
    raise GatewayError(400, "unsupported_embedding_space",
                       "The requested embedding space is not supported.",
                       {"embedding_space": value[:200],
                        "supported": [s.id for s in settings.embedding_spaces]})


def _vector(value: Any, space: EmbeddingSpace) -> tuple[float, ...]:
    """§19.2 and §11.5: a well-shaped array of numbers that cannot be searched with is 422."""
    if not numbers(value):
        raise invalid("query_vector must be an array of numbers.")
    if not value or len(value) > MAX_VECTOR_LENGTH:
        raise invalid_vector(f"query_vector must hold between 1 and {MAX_VECTOR_LENGTH} numbers.",
                             space, actual_dimensions=len(value))
    if not all(map(math.isfinite, value)):
        raise invalid_vector("query_vector must hold finite numbers only.", space)
    if len(value) != space.dimensions:
        raise GatewayError(
            422, "invalid_embedding_dimension",
            f"The supplied query vector has length {len(value)}, but the embedding space "
            f"requires {space.dimensions}.",
            {"embedding_space": space.id, "expected_dimensions": space.dimensions,
             "actual_dimensions": len(value)})
    if space.distance == "cosine" and not any(value):
        raise invalid_vector("Cosine similarity is undefined for an all-zero query_vector.",
                             space)
    return tuple(map(float, value))


def invalid_vector(message: str, space: EmbeddingSpace, **details: Any) -> GatewayError:
    return GatewayError(422, "invalid_vector", message, {"embedding_space": space.id, **details})
