"""The 2020-12 metaschema as a `BoundedValidator` from top to bottom.

jsonschema switches to the stock validator class for every subschema that names a `$schema`,
and each metaschema document does: checking a client's schema would then run without a budget,
never letting go of the GIL. Copies of those documents without `$schema`, in a registry that
overrides the originals (anchors included, for `$dynamicRef: "#meta"`), keep the bounded class
all the way down.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema_specifications import REGISTRY as SPECIFICATIONS
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from gateway.untrusted_schema.graph import refuse_retrieval
from gateway.untrusted_schema.keywords import REGEX_FORMAT, BoundedValidator

_DRAFT = "https://json-schema.org/draft/2020-12/"


def without_dialect(schema: Any) -> Any:
    """`schema` without its top-level `$schema` (a shallow copy), so it keeps the class."""
    if isinstance(schema, dict) and "$schema" in schema:
        return {key: value for key, value in schema.items() if key != "$schema"}
    return schema


def _metaschema_validator() -> Any:
    documents = {uri: without_dialect(SPECIFICATIONS.contents(uri))
                 for uri in SPECIFICATIONS if uri.startswith(_DRAFT)}
    # `retrieve` is attrs' alias of the private `_retrieve` field, which mypy does not read
    # from referencing's dataclass_transform stub.
    registry = Registry(retrieve=refuse_retrieval).with_resources(  # type: ignore[call-arg]
        (uri, DRAFT202012.create_resource(contents)) for uri, contents in documents.items()
    ).crawl()
    root = documents[Draft202012Validator.META_SCHEMA["$id"]]
    return BoundedValidator(root, format_checker=REGEX_FORMAT, registry=registry)


METASCHEMA = _metaschema_validator()
