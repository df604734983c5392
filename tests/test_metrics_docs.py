"""The metrics reference (docs/reference/metrics.md, generated from gateway.observability as the
site builds) and the Grafana dashboard against what `/metrics` really exposes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest
from docs_site import refgen
from processes import ROOT, Gateway
from prometheus_client.metrics import MetricWrapperBase

from gateway import observability

# Named by the dashboard, exposed once the work that owns it merges (the policy decision log).
ELSEWHERE: dict[str, set[str]] = {}  # metrics documented outside the table, with their labels
_ROW = re.compile(r"^\| `(aigw_[a-z_]+)` \| (\w+) \|\s*([a-z_, ]*?)\s*\| (.+) \|$")


@pytest.fixture(scope="module")
def exposed(echo: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Metric name -> type, from the `# TYPE` lines of a running gateway."""
    gateway = Gateway({"upstreams": {"legacy": {"url": echo}}, "default_upstream": "legacy"},
                      tmp_path_factory.mktemp("metrics"))
    text = httpx.get(gateway.admin_url + "/metrics").text
    gateway.stop()
    types = re.findall(r"^# TYPE (aigw_\w+) (\w+)$", text, re.M)
    # prometheus-client's `_created` companion of an unlabelled counter is not a metric of ours
    yield {name: kind for name, kind in types if not name.endswith("_created")}


def documented() -> dict[str, tuple[str, set[str]]]:
    """Metric name -> (type, labels), from the reference page's table."""
    rows = [_ROW.match(line) for line in refgen("metrics_ref").page().splitlines()]
    return {m[1]: (m[2], {label.strip() for label in m[3].split(",") if label.strip()})
            for m in rows if m}


def test_the_metric_table_is_what_metrics_exposes(exposed: dict[str, str]):
    table = documented()
    assert {name: kind for name, (kind, _) in table.items()} == exposed
    # prometheus-client names a counter without `_total`; its labels are fixed at definition
    defined = {m._name + ("_total" if m._type == "counter" else ""): set(m._labelnames)
               for m in vars(observability).values() if isinstance(m, MetricWrapperBase)}
    assert {name: labels for name, (_, labels) in table.items()} == defined


def test_every_dashboard_query_names_a_metric_that_exists(exposed: dict[str, str]):
    dashboard = json.loads((ROOT / "helm" / "dashboards" / "aigw.json").read_text())
    labels = {name: labels for name, (_, labels) in documented().items()} | ELSEWHERE
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(queries) >= 14
    for query in queries:
        named = {re.sub(r"_(bucket|sum|count)$", "", name) if name not in labels else name
                 for name in re.findall(r"\baigw_[a-z_]+", query)}
        assert named, query
        for name in named:
            assert name in exposed or name in ELSEWHERE, f"{query}: {name} is not exposed"
        used = {label.strip() for group in re.findall(r"by \(([^)]*)\)", query)
                for label in group.split(",")} | set(re.findall(r"(\w+)=~?\"", query))
        known = set().union(*(labels[name] for name in named)) | {"le"}
        assert used <= known, f"{query}: labels {used - known} do not exist"


def test_the_dashboard_covers_what_operators_look_for():
    dashboard = json.loads((ROOT / "helm" / "dashboards" / "aigw.json").read_text())
    titles = " | ".join(panel["title"].lower() for panel in dashboard["panels"])
    for topic in ("request rate", "error rate", "latency", "upstream", "rate-limit",
                  "policy denials", "auth failures", "jwks", "redis", "config reloads"):
        assert topic in titles, topic
    assert any(t.get("exemplar") for panel in dashboard["panels"] for t in panel["targets"])
