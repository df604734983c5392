"""A2A: the agent card at `/.well-known/agent-card.json`, parsed by a2a-sdk.

The card is read with the checker's bounded client and handed to the SDK's own card parser
(what its `A2ACardResolver` runs on the body it fetched); then the SDK's client factory says
whether any interface on it is one an A2A client can call.
"""

from __future__ import annotations

from typing import Any

import httpx

from gateway.check.common import CORS_SECTION, cors, json_object
from gateway.check.context import Context
from gateway.check.rules import Outcome, Sheet, Spec

__all__ = ["SPEC", "run"]

PATH = "/.well-known/agent-card.json"
CALLABLE = ("JSONRPC", "HTTP+JSON")  # the bindings a2a-sdk's HTTP clients speak

SPEC = Spec("a2a", "A2A", "Agent2Agent protocol, agent card")
CARD = SPEC.must("card.parses", "A2A: agent discovery, AgentCard",
                 "the agent card parses as an AgentCard with a2a-sdk")
CARD_TYPE = SPEC.should("card.media_type", "A2A: agent discovery",
                        "the card is served as application/json")
CARD_CORS = SPEC.should("card.cors", CORS_SECTION, "browser agents may read the card")
INTERFACE = SPEC.should("card.interface", "A2A: AgentInterface, transports",
                        "an interface is JSONRPC or HTTP+JSON, which a2a-sdk clients call")


async def run(context: Context, sheet: Sheet) -> None:
    answer = await context.document(PATH)
    if answer.status == 404:
        sheet.not_served(answer.describe())
        return
    try:
        from a2a.client.card_resolver import parse_agent_card
    except ImportError:
        sheet.skip_rest("the a2a-sdk package is not installed (pip install a2a-sdk)")
        return
    sheet.note = answer.url
    sheet.add(cors(CARD_CORS, answer),
              CARD_TYPE.check(answer.media_type == "application/json",
                              f"Content-Type: {answer.headers.get('content-type')}"))
    data, problem = json_object(answer) if answer.status == 200 else (None, answer.describe())
    if data is None:
        sheet.add(CARD.failed(problem))
        return
    try:
        card = parse_agent_card(data)
    except Exception as exc:  # the SDK's protobuf parser raises its own kinds
        sheet.add(CARD.failed(f"{type(exc).__name__}: {exc}"))
        return
    sheet.add(CARD.passed(f"{card.name!r}, {len(card.supported_interfaces)} interface(s)"),
              await _interface(card))


async def _interface(card: Any) -> Outcome:
    from a2a.client import ClientConfig, ClientFactory

    bindings = sorted({i.protocol_binding for i in card.supported_interfaces})
    # a2a-sdk wants an httpx client, but nothing is sent: the card was read by the bounded
    # probe; one that refuses every request keeps it so
    async with httpx.AsyncClient(trust_env=False, transport=httpx.MockTransport(_refuse)) as http:
        config = ClientConfig(httpx_client=http, supported_protocol_bindings=list(CALLABLE))
        try:
            ClientFactory(config).create(card)
        except ValueError as exc:
            return INTERFACE.failed(f"{exc} (bindings: {', '.join(bindings) or 'none'})")
    return INTERFACE.passed(f"bindings: {', '.join(bindings)}")


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("the checker sends A2A nothing", request=request)
