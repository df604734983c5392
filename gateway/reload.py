"""Config reload: on SIGHUP or when a watched file changes, load, validate, swap.

A config that fails to load is logged and counted, and the last good one keeps serving; so is
one that changes a setting read only at start (gateway.start_only), which names the setting.
Files are polled rather than watched with inotify, because Kubernetes updates mounted
ConfigMaps by swapping a symlink, which inotify watches on the files themselves miss.
"""

from __future__ import annotations

import asyncio
import logging

from gateway import observability
from gateway.loader import ConfigError, LoadedConfig, fingerprint, load_config, policies_folder
from gateway.runtime import Runtime
from gateway.start_only import start_only_changes

log = logging.getLogger("aigw.reload")
_SETTLE_SECONDS = 0.1


class Reloader:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._lock = asyncio.Lock()
        self._seen = self._fingerprint()

    def _fingerprint(self, loaded: LoadedConfig | None = None) -> bytes:
        loaded = loaded or self.runtime.current.loaded
        return fingerprint(loaded.sources, policies_folder(loaded))

    async def reload(self, reason: str) -> bool:
        """Try to swap in the config on disk; True when a new generation serves."""
        async with self._lock:
            path = self.runtime.current.loaded.path
            try:
                loaded = await asyncio.to_thread(load_config, path)
            except ConfigError as exc:
                observability.CONFIG_RELOADS.labels("failure").inc()
                problems = [str(issue) for issue in exc.issues]
                log.error("config reload rejected; the last good config keeps serving",
                          extra={"fields": {"reason": reason, "errors": problems}})
                return False
            restart = start_only_changes(self.runtime.current.settings, loaded.settings)
            if restart:
                observability.CONFIG_RELOADS.labels("failure").inc()
                log.error("config reload refused: these settings apply only at start; restart "
                          "the gateway to change them, the last good config keeps serving",
                          extra={"fields": {"reason": reason, "restart_needed": restart}})
                return False
            try:
                generation = self.runtime.swap(loaded)
            except Exception as exc:  # a config that validates but cannot be built
                observability.CONFIG_RELOADS.labels("failure").inc()
                log.error("config reload failed while building; the last good config keeps "
                          "serving", extra={"fields": {"reason": reason,
                                                       "error": type(exc).__name__}})
                self._seen = self._fingerprint(loaded)
                return False
            self._seen = self._fingerprint()
            observability.CONFIG_RELOADS.labels("success").inc()
            log.info("config reloaded",
                     extra={"fields": {"reason": reason, "generation": generation.number}})
            return True

    async def watch(self) -> None:
        """Poll the config and policy files; reload when their content changes."""
        while True:
            await asyncio.sleep(self.runtime.current.settings.reload.interval)
            if not self.runtime.current.settings.reload.watch:
                continue
            loaded = self.runtime.current.loaded
            current = await asyncio.to_thread(fingerprint, loaded.sources, policies_folder(loaded))
            if current != self._seen:
                # A file caught mid-write would be rejected for nothing: wait until it settles.
                await asyncio.sleep(_SETTLE_SECONDS)
                settled = await asyncio.to_thread(fingerprint, loaded.sources,
                                                  policies_folder(loaded))
                if settled != current:
                    continue
                self._seen = current  # a broken file is reported once, not on every poll
                await self.reload("file change")
