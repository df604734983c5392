"""Run each spec's check against one origin, in order, and gather the report."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from gateway.check import SPEC_KEYS, a2a, aidip, aidre, aiendpoint, aip, mcp, pdpp
from gateway.check.context import AipKey, Context
from gateway.check.http import Credentials, Probe, new_client
from gateway.check.report import Report, SpecReport
from gateway.check.rules import Sheet, Spec

Run = Callable[[Context, Sheet], Awaitable[None]]
CHECKS: tuple[tuple[Spec, Run], ...] = tuple(
    (module.SPEC, module.run) for module in (aiendpoint, aidre, aip, pdpp, aidip, mcp, a2a))
assert tuple(spec.key for spec, _ in CHECKS) == SPEC_KEYS


@dataclass(frozen=True, slots=True)
class Options:
    credentials: Credentials
    timeout: float = 10.0
    aip_key: AipKey | None = None
    only: Collection[str] = ()


async def check(url: str, options: Options) -> Report:
    async with new_client(options.timeout) as client:
        context = Context(Probe(url, options.credentials, options.timeout, client),
                          options.aip_key)
        reports = []
        for spec, run in CHECKS:
            if options.only and spec.key not in options.only:
                continue
            sheet = Sheet(spec)
            try:
                await run(context, sheet)
            except Exception as exc:  # a checker bug must not hide the other specs' results
                print(f"aigw check: {spec.key}: the check stopped on "
                      f"{type(exc).__name__}: {exc}", file=sys.stderr)
                sheet.skip_rest(f"the checker stopped ({type(exc).__name__})")
            reports.append(SpecReport.of(sheet))
        return Report(context.probe.origin, tuple(reports))
