"""Config models of the rules for calls to URLs a client registered (`client`):
a surface that makes such calls holds one `Egress` in its config section and hands it to the
runtime through its mount (`Mount.egress`)."""

from __future__ import annotations

from ipaddress import ip_network
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from gateway.strict import Strict


def _network(value: str) -> str:
    try:
        return str(ip_network(value, strict=False))
    except ValueError:
        raise ValueError("expected an IP address or CIDR range") from None


class Origin(Strict):
    """An origin registered URLs may be called at."""

    scheme: Literal["https", "http"] = Field(
        "https",
        description="`https`, or `http` where an origin must be reached without TLS.",
    )
    host: Annotated[str, Field(min_length=1, max_length=253)] = Field(
        description="Exact host name or IP literal; `*.example.com` matches its subdomains."
    )
    ports: list[Annotated[int, Field(ge=1, le=65535)]] = Field(
        [], description="Allowed ports; none means the scheme's default port only."
    )


class Egress(Strict):
    """Where registered URLs may be called: nowhere unless an origin allows it."""

    origins: list[Origin] = Field(
        [],
        description="Where registered endpoints may be: scheme, host (exact or *.domain) and "
        "ports; checked at registration and at every call.",
    )
    allow_networks: list[Annotated[str, AfterValidator(_network)]] = Field(
        [], description="Loopback, private, link-local or other special ranges allowed anyway."
    )
    hosts: dict[str, list[str]] = Field(
        {}, description="Static name -> addresses answers used instead of DNS (like /etc/hosts)."
    )
    timeout: Annotated[float, Field(gt=0, le=600)] = Field(
        30,
        description="Longest call to a registered agent, in seconds (504 AgentTimeout).",
    )
    max_response_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = Field(
        4 * 1024 * 1024,
        description="Largest answer read from a registered agent.",
    )
