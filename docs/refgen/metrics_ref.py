"""The metrics reference: every metric `gateway.observability` defines, with its type, labels
and help text (what `/metrics` says of it, as `# HELP`)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.metrics import MetricWrapperBase

from gateway import observability
from refgen.markdown import GENERATED, code, table, text

INTRO = """\
The admin listener serves `/metrics`: Prometheus text by default, OpenMetrics when the
scraper's `Accept` asks for `application/openmetrics-text` (Prometheus does when exemplars are
enabled); then request and upstream duration buckets carry an exemplar
`{span_id="…",trace_id="…"}` of a sampled trace while tracing is on
([Tracing and dashboards](../how-to/observability.md)). With `aigw run --workers N` the
supervisor sums every worker's series. These are the gateway's own metrics, read from
`gateway/observability.py`; a test holds this list to what `/metrics` exposes.
"""


@dataclass(frozen=True, slots=True)
class Metric:
    name: str  # as exposed: counters end in _total
    type: str
    labels: tuple[str, ...]
    help: str


def metrics() -> list[Metric]:
    found = []
    for value in vars(observability).values():
        if isinstance(value, MetricWrapperBase):
            suffix = "_total" if value._type == "counter" else ""
            found.append(Metric(value._name + suffix, value._type, tuple(value._labelnames),
                                value._documentation))
    return found


def page() -> str:
    rows = [(code(m.name), m.type, ", ".join(m.labels), text(m.help)) for m in metrics()]
    return "\n".join(["# Metrics\n", GENERATED, INTRO,
                      table(("metric", "type", "labels", "meaning"), rows)])
