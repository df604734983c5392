"""Upstream values of the wrong kind: an AIDRE error, never a Python repr or the value itself.

client -> aigw process -> echo upstream, whose `/reply` answers the JSON each collection sends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from aidre_config import aidre_gateway_config, collection
from processes import Gateway

SECRET = "internal-7f3a"
GOOD = {"id": "good-item", "snippet": "text", "score": 0.5, "url": "https://help.example.com/"}
BAD_ITEMS = {  # collection -> (one item of the upstream's answer, the slot it breaks)
    "idobject": ({**GOOD, "id": {"db": SECRET, "row": 7}}, "id"),
    "idlist": ({**GOOD, "id": [SECRET, 7]}, "id"),
    "idbool": ({**GOOD, "id": True}, "id"),
    "textobject": ({**GOOD, "snippet": {"html": SECRET}}, "text"),
    "urllist": ({**GOOD, "url": [SECRET]}, "fields.url"),
    "scorestring": ({**GOOD, "score": SECRET}, "score"),
}


def replying(items: list[dict[str, Any]]) -> dict[str, Any]:
    """A collection whose text search the echo upstream answers with `items`."""
    config = collection("echo", description="Answers what it is sent.")
    config["text_search"] = {
        "upstream": "echo", "method": "POST", "path": "/reply", "body": {"items": items},
        "mapping": {"items": "items", "id": "id", "text": "snippet", "score": "score",
                    "fields": {"url": "url"}},
    }
    return config


@pytest.fixture(scope="module")
def gateway(backend: str, echo: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("aidre-mapping")
    config = aidre_gateway_config(backend, workdir)
    config["upstreams"]["echo"] = {"url": echo}
    collections = config["aidre"]["collections"]
    for name, (item, _) in BAD_ITEMS.items():
        collections[name] = replying([GOOD, item])  # one bad item spoils the answer
    started = Gateway(config, workdir)
    yield started
    started.stop()


@pytest.mark.parametrize("name", sorted(BAD_ITEMS))
def test_a_value_of_the_wrong_kind_is_an_aidre_error_without_the_value(
    gateway: Gateway, name: str
):
    response = httpx.post(gateway.url + "/search", json={"query": "x", "collection": name},
                          headers={"content-type": "application/aidre+json"}, timeout=10)
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/aidre+json")
    body = response.json()
    assert body["error"] == "internal_error"
    assert body["request_id"] == response.headers["x-request-id"]
    assert body["details"]["reason"] == "mapping"
    assert body["details"]["field"] == BAD_ITEMS[name][1]
    shown = response.text.replace(body["request_id"], "")
    for leaked in (SECRET, "{'", "['", "True", "good-item"):
        assert leaked not in shown
    logs = gateway.process.stdout() + gateway.process.stderr()
    assert "slot" in logs and SECRET not in logs  # operators learn which slot, not the value
    assert gateway.metric("aigw_upstream_errors_total", upstream="echo", kind="mapping") >= 1
