"""RSS of one gateway serving one subject, then 100 subjects, of one shared PDPP stream
(issue 22: within 10%). In-process, upstream in memory: N records of ~1 KB.

Usage: .venv/bin/python bench/index_subjects.py [--records N]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import resource
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from inprocess import memory_gateway
from pdpp_config import config as pdpp_config
from pdpp_config import demo_pdpp

from gateway.upstream.memory import Reply, UpstreamRequest

TEXT = ("Refunds, invoices and card payments of the account are described here at length. " * 12)


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def gateway_config(records: int, workdir: Path) -> dict:
    pdpp = demo_pdpp()
    stream = pdpp["streams"]["messages"]
    stream.pop("record", None)
    stream["records"] = {"upstream": "legacy", "path": "/records",
                         "query": {"_start": "{offset}", "_limit": "{limit}"},
                         "mapping": {"items": "data", "id": "id"}}
    stream.update(page_size=1000, max_records=records)
    stream["fields"] = {"id": {"path": "id"}, "subject": {"path": "title"},
                        "body": {"path": "text"}, "sent_at": {"path": "at", "format": "date-time"}}
    pdpp["streams"] = {"messages": stream}
    pdpp["index"] = {"path": str(workdir / "index")}
    config = pdpp_config("http://legacy.invalid", pdpp, legacy="http://legacy.invalid")
    config["auth"]["api_keys"]["keys"] = [
        {"sha256": hashlib.sha256(f"key-{i}".encode()).hexdigest(), "subject": f"subject-{i}",
         "client_id": f"app-{i}", "kind": "owner"} for i in range(100)]
    return config


async def main(records: int) -> None:
    rows = [{"id": f"r{i:06d}", "title": f"Message {i}", "text": f"{TEXT} {i}",
             "at": "2026-01-01T00:00:00Z"} for i in range(records)]

    def legacy(request: UpstreamRequest) -> Reply:
        query = dict(request.query)
        start, limit = int(query["_start"]), int(query["_limit"])
        return Reply.json({"data": rows[start:start + limit]})

    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        async with memory_gateway(gateway_config(records, workdir), workdir,
                                  {"legacy": legacy}) as gateway:
            async def serve(subject: int) -> None:
                headers = {"X-API-Key": f"key-{subject}"}
                for path in ("/v1/streams/messages/records?limit=10", "/v1/search?q=refunds"):
                    response = await gateway.client.get(path, headers=headers, timeout=120)
                    assert response.status_code == 200, response.text

            before = rss_mb()
            await serve(0)
            one = rss_mb()
            for subject in range(1, 100):
                await serve(subject)
            hundred = rss_mb()
    print(f"records {records}: RSS before {before:.0f} MB, 1 subject {one:.0f} MB, "
          f"100 subjects {hundred:.0f} MB ({(hundred - one) / one:+.1%})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    asyncio.run(main(parser.parse_args().records))
