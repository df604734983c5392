"""A Prometheus histogram read from a /metrics text, the difference of two scrapes, and its
quantiles as Prometheus' `histogram_quantile` computes them."""

from __future__ import annotations

import re
from dataclasses import dataclass

INF = float("inf")


@dataclass(frozen=True)
class Histogram:
    """One scrape of a histogram: cumulative counts by upper bound, its count and sum."""

    buckets: tuple[tuple[float, float], ...]
    total: float
    sum: float

    def minus(self, earlier: Histogram) -> Histogram:
        """The observations made between `earlier` and this scrape."""
        old = dict(earlier.buckets)
        return Histogram(tuple((le, n - old.get(le, 0.0)) for le, n in self.buckets),
                         self.total - earlier.total, self.sum - earlier.sum)

    def quantile(self, q: float) -> float:
        """Linear within the bucket that holds the rank, as histogram_quantile."""
        if self.total <= 0:
            return 0.0
        rank, lower, below = q * self.total, 0.0, 0.0
        for le, count in self.buckets:
            if count >= rank:
                if le == INF:
                    return lower
                return lower + (le - lower) * (rank - below) / max(count - below, 1e-12)
            lower, below = le, count
        return lower

    def largest(self) -> tuple[float, float]:
        """The bounds (lower, upper] of the bucket that holds the largest observation."""
        lower = 0.0
        for le, count in self.buckets:
            if count >= self.total:
                return lower, le
            lower = le
        return lower, INF

    def above(self, bound: float) -> float:
        """Observations above `bound`, which must be a bucket bound."""
        at = dict(self.buckets).get(bound)
        if at is None:
            raise ValueError(f"{bound} is not a bucket bound")
        return self.total - at

    def mean(self) -> float:
        return self.sum / self.total if self.total else 0.0


def parse_histogram(text: str, name: str) -> Histogram | None:
    """The unlabelled histogram `name` in a text exposition, None when there is none."""
    buckets = []
    total = total_sum = 0.0
    for line in text.splitlines():
        if line.startswith(f"{name}_bucket{{"):
            le = re.search(r'le="([^"]+)"', line)
            if le is not None:
                buckets.append((float(le.group(1)), float(line.rsplit(" ", 1)[1])))
        elif line.startswith(f"{name}_count "):
            total = float(line.rsplit(" ", 1)[1])
        elif line.startswith(f"{name}_sum "):
            total_sum = float(line.rsplit(" ", 1)[1])
    return Histogram(tuple(sorted(buckets)), total, total_sum) if buckets else None


def sample_value(text: str, series: str) -> float | None:
    """The value of one series written exactly as `series` (name and labels), if present."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None
