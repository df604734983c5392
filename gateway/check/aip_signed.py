"""AIP signed requests, with the key `--aip-key` names: a good signature is accepted, a
tampered one and a replayed nonce are refused, and a signed response verifies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.check.aip_rules import REPLAY, RESPONSE_SIGNATURE, SIGNED, TAMPERED
from gateway.check.aip_signing import SIGNATURE, response_problem, sign
from gateway.check.common import json_object
from gateway.check.http import Answer
from gateway.check.rules import Sheet

if TYPE_CHECKING:
    from gateway.check.aip import Retriever, Sent


def refused(answer: Answer) -> bool:
    """An authentication refusal: a 401, or a 403 that is no denial."""
    document = json_object(answer)[0] or {}
    return answer.status == 401 or (answer.status == 403 and document.get("status") != "denied")


async def run(retriever: Retriever, ok: Sent, sheet: Sheet) -> None:
    key = retriever.context.aip_key
    if key is None:
        sheet.skip_rest("no --aip-key given")
        return
    sheet.add(SIGNED.check(not refused(ok.answer), ok.answer.describe()))
    if refused(ok.answer):
        sheet.skip_rest("the signed request was refused")
        return
    if SIGNATURE in ok.answer.headers:
        problem = response_problem(key.secret, ok.answer.status, retriever.path,
                                   ok.answer.headers, ok.answer.body)
        sheet.add(RESPONSE_SIGNATURE.check(problem is None, problem or "verifies"))
    else:
        sheet.add(RESPONSE_SIGNATURE.skipped("the response is not signed"))
    headers = {**ok.headers, **sign(key.secret, key.key_id, "POST", retriever.path, ok.body)}
    tampered = await retriever.send(ok.body + b" ", headers)  # still JSON; not what was signed
    sheet.add(TAMPERED.check(tampered.answer.status in (401, 403), tampered.answer.describe()))
    replayed = await retriever.send(ok.body, ok.headers)
    sheet.add(REPLAY.check(replayed.answer.status in (401, 403), replayed.answer.describe()))
