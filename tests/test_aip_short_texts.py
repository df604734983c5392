"""AIP with `full_article: false`: a text shorter than one chunk is never returned (the chunk
would be the whole text), and the answer says how many were left out and why."""

from __future__ import annotations

from pathlib import Path

from inprocess import memory_gateway
from test_aip import RESPONSE, ask
from test_upstream_tokens import KeysetApi, aip_config

REASON = ("These texts are shorter than one chunk, so a chunk would be the whole text, and this "
          "publisher does not return full articles.")


async def test_texts_too_short_to_split_are_withheld_and_the_answer_says_so(tmp_path: Path):
    config = aip_config(tmp_path, 10)
    config["aip"]["sources"]["records"]["search_texts"] = "articles"  # whole texts: never whole
    async with memory_gateway(config, tmp_path, {"legacy": KeysetApi()}) as gateway:
        response = await gateway.client.post("/pag/retrieve", json=ask(query="refunds"))
    document = response.json()
    assert response.status_code == 200 and not list(RESPONSE.iter_errors(document))
    assert "content" not in document
    assert document["extensions"] == {"aigw": {"withheld_whole": {"texts": 5, "reason": REASON}}}


async def test_excerpts_are_returned_as_they_are_with_nothing_withheld(tmp_path: Path):
    async with memory_gateway(aip_config(tmp_path, 10), tmp_path,
                              {"legacy": KeysetApi()}) as gateway:
        response = await gateway.client.post("/pag/retrieve", json=ask(query="refunds"))
    document = response.json()
    assert len(document["content"]["chunks"]) == 5 and "extensions" not in document
