"""Checks of A2A agent cards against a2a-sdk's types, as strict as the protocol's definition."""

from __future__ import annotations

from typing import Any


def _missing_required(message: Any, where: str = "") -> list[str]:
    """REQUIRED fields (google.api.field_behavior) left empty, anywhere in the message."""
    from google.api import field_behavior_pb2

    missing = []
    for field in message.DESCRIPTOR.fields:
        behaviours = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
        value = getattr(message, field.name)
        is_repeated = field.is_repeated
        if field_behavior_pb2.REQUIRED in behaviours and (
                (is_repeated and len(value) == 0)
                or (not is_repeated and field.message_type is not None
                    and not message.HasField(field.name))
                or (not is_repeated and field.message_type is None and value in ("", 0))):
            missing.append(where + field.name)
        if field.message_type is not None and not field.message_type.GetOptions().map_entry:
            present = value if is_repeated else [value] if message.HasField(field.name) else []
            for index, item in enumerate(present):
                missing += _missing_required(item, f"{where}{field.name}[{index}].")
    return missing


def assert_valid_a2a_card(card: dict) -> None:
    from a2a.client.card_resolver import parse_agent_card
    from a2a.types import AgentCard
    from google.protobuf.json_format import ParseDict

    strict = ParseDict(card, AgentCard(), ignore_unknown_fields=False)  # no unknown member
    assert _missing_required(strict) == []
    assert parse_agent_card(dict(card)).name == card["name"]  # what an A2A client does
