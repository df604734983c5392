"""A reload that changes only a secret setting applies it (issue 34, item 2): a shared
resource is kept over a reload under a key of its settings, and that key counts a secret by
its value, where a JSON dump masks it as `**********`."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from inprocess import memory_gateway, quiet, write_config
from test_pdpp_index_scope import KEYS, scoped_config
from test_upstream_tokens import KeysetApi

from gateway.loader import load_config
from gateway.reload import Reloader
from gateway.runtime import Runtime
from gateway.settings import Upstream
from gateway.settings_key import settings_key
from gateway.surfaces.pdpp.config import SearchIndexSettings

POSTGRES = "host=127.0.0.1 port=5432 user=postgres dbname=test"
REDIS = "redis://127.0.0.1:6379"


def test_two_settings_that_differ_only_in_a_secret_have_different_keys() -> None:
    one = SearchIndexSettings(engine="postgres", dsn="postgresql://u:one@db/x")
    two = SearchIndexSettings(engine="postgres", dsn="postgresql://u:two@db/x")
    assert one.model_dump_json() == two.model_dump_json()  # what the keys were made of
    assert settings_key(one) != settings_key(two)
    assert settings_key(one) == settings_key(SearchIndexSettings(
        engine="postgres", dsn="postgresql://u:one@db/x"))
    assert "one" not in settings_key(one)


@pytest.fixture
def role() -> Iterator[str]:
    """A PostgreSQL login of this test's own: its connections are told apart by their user."""
    try:
        admin = psycopg.connect(POSTGRES, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL at 127.0.0.1:5432 is needed: {exc}")
    name = f"aigw_reload_{uuid.uuid4().hex[:8]}"
    admin.execute(f"CREATE ROLE {name} LOGIN SUPERUSER PASSWORD 'rotated'")
    try:
        yield name
    finally:
        schemas = [row[0] for row in admin.execute(
            "SELECT nspname FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner "
            "WHERE r.rolname = %s", (name,))]
        for schema in schemas:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE usename = %s", (name,))
        admin.execute(f"DROP OWNED BY {name}")
        admin.execute(f"DROP ROLE {name}")
        admin.close()


def _users_of_the_index() -> set[str]:
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        return {row[0] for row in conn.execute(
            "SELECT usename FROM pg_stat_activity WHERE application_name = 'aigw-index'")}


async def test_a_reload_that_rotates_the_index_credentials_connects_with_the_new_ones(
        tmp_path: Path, role: str) -> None:
    config = scoped_config("/records")
    origin = f"http://legacy-{os.urandom(4).hex()}.invalid"  # an index of this test's own
    config["upstreams"]["legacy"]["url"] = origin
    config["pdpp"]["index"] = {"engine": "postgres",
                               "dsn": "postgresql://postgres@127.0.0.1/test"}
    secret = next(iter(KEYS))
    async with memory_gateway(config, tmp_path, {origin: KeysetApi()}) as gateway:
        async def read() -> None:
            response = await gateway.client.get("/v1/streams/messages/records?limit=5",
                                                headers={"X-API-Key": secret})
            assert response.status_code == 200, response.text

        await read()
        config["pdpp"]["index"]["dsn"] = f"postgresql://{role}:rotated@127.0.0.1/test"
        write_config(tmp_path / "gateway.yaml", quiet(config))
        assert await Reloader(gateway.runtime).reload("test") is True
        await read()
        assert role in _users_of_the_index()  # the new credentials are the ones in use


def _limited(tmp_path: Path, name: str, storage: str) -> Any:
    file = tmp_path / f"{name}.yaml"
    write_config(file, {"upstreams": {"a": {"url": "http://127.0.0.1:9"}},
                        "rate_limits": {"storage": storage, "rules": [
                            {"name": "all", "paths": ["/"], "limit": "100/minute",
                             "key": "client"}]}})
    return load_config(file, env={})


async def test_a_reload_that_changes_the_rate_limit_stores_url_gets_a_new_store(
        tmp_path: Path) -> None:
    runtime = Runtime(_limited(tmp_path, "one", f"{REDIS}/0"))
    try:
        before = runtime.current.pipeline.limiter._counter  # type: ignore[attr-defined]
        same = runtime.swap(_limited(tmp_path, "two", f"{REDIS}/0"))
        assert same.pipeline.limiter._counter is before  # type: ignore[attr-defined]
        after = runtime.swap(_limited(tmp_path, "three", f"redis://:rotated@{REDIS[8:]}/1"))
        assert after.pipeline.limiter._counter is not before  # type: ignore[attr-defined]
        assert not any("rotated" in repr(key) for key in runtime.shared._held)
    finally:
        await runtime.aclose()


def test_an_upstream_credential_change_gets_a_new_upstream_client() -> None:
    one = Upstream(url="http://127.0.0.1:9", add_headers={"Authorization": "Bearer one"})
    two = Upstream(url="http://127.0.0.1:9", add_headers={"Authorization": "Bearer two"})
    assert settings_key(one) != settings_key(two)


@pytest.mark.parametrize(("change", "named"), [
    ({"listen": {"port": 18081}}, "listen.port"),
    ({"admin": {"port": 19091}}, "admin"),
    ({"logging": {"level": "debug"}}, "logging.level"),
    ({"tracing": {"enabled": False, "service_name": "renamed"}}, "tracing"),
])
async def test_a_reload_that_changes_a_setting_read_only_at_start_is_refused_naming_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, change: dict[str, Any],
        named: str) -> None:
    from gateway import observability

    path = tmp_path / "gateway.yaml"
    config = {"upstreams": {"a": {"url": "http://127.0.0.1:9"},
                            "b": {"url": "http://127.0.0.1:10"}}, "default_upstream": "a"}
    write_config(path, config)
    runtime = Runtime(load_config(path, env={}))
    try:
        write_config(path, {**config, "default_upstream": "b", **change})
        before = observability.CONFIG_RELOADS.labels("failure")._value.get()
        assert await Reloader(runtime).reload("test") is False
        assert observability.CONFIG_RELOADS.labels("failure")._value.get() == before + 1
        assert runtime.current.number == 1 and runtime.current.settings.default_upstream == "a"
        refused = [r for r in caplog.records if r.getMessage().startswith("config reload refused")]
        assert refused and refused[-1].fields["restart_needed"] == [named]  # type: ignore[attr-defined]
    finally:
        await runtime.aclose()


async def test_a_reload_that_changes_a_body_timeout_is_applied(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    config: dict[str, Any] = {"upstreams": {"a": {"url": "http://127.0.0.1:9"}}}
    write_config(path, config)
    runtime = Runtime(load_config(path, env={}))
    try:
        write_config(path, {**config, "listen": {"body_timeout": 7}})
        assert await Reloader(runtime).reload("test") is True
        assert runtime.current.settings.listen.body_timeout == 7
    finally:
        await runtime.aclose()
