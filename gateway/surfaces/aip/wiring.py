"""One generation's share of the AIP stores: the nonce store behind its signature gate, the
event sink, and the ledger of issued request ids and event ids, leased from the runtime's shared
resources (gateway.lifetimes) when the surface mounts. A reload with the same settings keeps
them: a nonce seen before it is still refused after it, and events queued by the old
generation are written by the same writer; the last generation using one closes it, which is
what flushes a file sink on SIGTERM."""

from __future__ import annotations

import os
from collections.abc import Hashable
from dataclasses import dataclass

from gateway.lifetimes import Lease
from gateway.settings_key import secret_key
from gateway.surfaces.aip.config import Aip, EventEndpoint
from gateway.surfaces.aip.events import EventSink, create_sink
from gateway.surfaces.aip.gate import Gate
from gateway.surfaces.aip.ledger import EventLedger
from gateway.surfaces.aip.nonces import create_nonce_store, create_store
from gateway.surfaces.aip.signing_config import Events, Signing


def nonce_key(signing: Signing) -> Hashable:
    return ("aip-nonces", secret_key(signing.nonce_store), signing.nonce_key_prefix)


def sink_key(events: Events) -> Hashable:
    if events.redis_url is not None:
        return ("aip-events", secret_key(events.redis_url), events.stream)
    return ("aip-events", "file", os.path.abspath(events.file))


def ledger_key(url: str, event: EventEndpoint) -> Hashable:
    # The retention is per generation (the ledger object), the entries live in the store.
    return ("aip-ledger", secret_key(url), event.key_prefix)


@dataclass(slots=True)
class Wiring:
    gate: Gate
    sink: EventSink | None
    ledger: EventLedger | None

    @classmethod
    def acquire(cls, aip: Aip, shared: Lease) -> Wiring:
        signing, nonces = aip.signing, None
        if signing is not None and signing.enabled:
            nonces = shared.acquire(nonce_key(signing), lambda: create_nonce_store(signing))
        sink = None
        if aip.events is not None:
            events = aip.events
            sink = shared.acquire(sink_key(events), lambda: create_sink(events))
        ledger = None
        if aip.event is not None and sink is not None:
            event, url = aip.event, aip.ledger_store()
            store = shared.acquire(ledger_key(url, event), lambda: create_store(
                url, event.key_prefix, event.store_timeout, event.max_memory_entries,
                evict=True))
            ledger = EventLedger(store, event.retention)
        return cls(Gate(signing, nonces), sink, ledger)
