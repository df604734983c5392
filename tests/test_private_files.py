"""What the gateway writes that holds data or secrets is its owner's alone whatever the umask
(issue 33, item 4), and what an older version left readable by others is tightened when the
gateway opens it again. tests/test_demo.py checks every file a running demo writes."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.generated_secrets import generated
from gateway.index.base import IndexedRecord
from gateway.index.sqlite import SqliteIndex
from gateway.policy.decisionlog import _append as append_decisions
from gateway.surfaces.aip.rotation import RotatingFile
from gateway.surfaces.pdpp.config import Pdpp, SearchIndexSettings
from gateway.surfaces.pdpp.indexing import open_index
from gateway.surfaces.pdpp.streams import CompiledStream, compile_streams


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """No bit masked: whatever is private is so because the gateway made it so."""
    old = os.umask(0)
    yield
    os.umask(old)


def test_a_new_index_and_its_folders_are_private(tmp_path: Path, loose_umask: None) -> None:
    folder = tmp_path / "state" / "index"
    index = open_index(SearchIndexSettings(path=str(folder)), notes_stream(), "u-001", "", None)
    index.replace([IndexedRecord("a", "1", {}, {"text": "refund"})], truncated=False)
    try:
        written = [folder.parent, folder, *folder.iterdir()]
        assert {p.name.rsplit(".", 1)[-1] for p in written} >= {"db", "db-wal", "db-shm"}
        assert {p.name: mode(p) for p in written} == {
            p.name: 0o700 if p.is_dir() else 0o600 for p in written}
    finally:
        index.close()


def notes_stream() -> CompiledStream:
    return compile_streams(Pdpp.model_validate({"streams": {"notes": {
        "connector_id": "c", "primary_key": "id", "cursor_field": "id",
        "fields": {"id": {"path": "id", "required": True}, "text": {"path": "text"}},
        "records": {"upstream": "u", "path": "/notes", "mapping": {"id": "id"}},
        "search": {"lexical_fields": ["text"]}}}}), {"u"})["notes"]


def test_an_index_an_older_version_left_readable_is_tightened(tmp_path: Path) -> None:
    folder = tmp_path / "index"
    folder.mkdir()
    path = folder / "s.db"
    index = SqliteIndex(path, fields=["text"], max_bytes=1 << 24)
    index.replace([IndexedRecord("a", "1", {}, {"text": "refund"})], truncated=False)
    old = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
    for p in old:
        p.chmod(0o755 if p.is_dir() else 0o644)
    reopened = SqliteIndex(path, fields=["text"], max_bytes=1 << 24)
    try:
        assert reopened.lexical(["refund"], ["text"], None, 5)
        assert [mode(p) for p in old] == [0o600, 0o600, 0o600]
    finally:
        reopened.close()
        index.close()


def test_a_generated_secret_is_private_in_a_private_folder(tmp_path: Path,
                                                           loose_umask: None) -> None:
    config_folder = tmp_path / "config"
    config_folder.mkdir(mode=0o755)
    secret = config_folder / "made" / "cursor.secret"
    assert len(generated("generated_secret", secret)) == 64
    assert (mode(secret), mode(secret.parent), mode(config_folder)) == (0o600, 0o700, 0o755)
    secret.chmod(0o644)  # as an older version, or a copy, left it
    generated("generated_secret", secret)
    assert mode(secret) == 0o600


def test_a_log_folder_an_operator_chose_keeps_its_mode(tmp_path: Path,
                                                       loose_umask: None) -> None:
    """Decision and event logs: a shared log folder and an existing log file are the
    operator's (a log shipper may read them), a folder or file the gateway makes is private."""
    shared = tmp_path / "logs"
    shared.mkdir(mode=0o755)
    shipped = shared / "decisions.jsonl"
    shipped.write_text("")
    shipped.chmod(0o640)
    append_decisions(shipped, [b"{}"])
    append_decisions(shared / "made" / "decisions.jsonl", [b"{}"])
    events = RotatingFile(str(shared / "events" / "aip-events.jsonl"), 1 << 20, 2)
    events.write([b"{}\n"])
    events.close()
    assert (mode(shared), mode(shipped)) == (0o755, 0o640)
    made = [shared / "made", shared / "made" / "decisions.jsonl", shared / "events",
            *(shared / "events").iterdir()]
    assert {p.name: mode(p) for p in made} == {
        p.name: 0o700 if p.is_dir() else 0o600 for p in made}


def test_an_index_folder_an_older_version_left_readable_is_tightened(tmp_path: Path) -> None:
    folder = tmp_path / "index"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    open_index(SearchIndexSettings(path=str(folder)), notes_stream(), "", "", None).close()
    assert mode(folder) == 0o700


def test_a_folder_another_user_owns_is_left_as_it_is_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch):
    """An operator's folder (another user's) is not the gateway's to chmod (a chmod would
    fail unless it runs as root): it is used as it is, and its looseness is said."""
    from gateway.private_files import private_folder

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    monkeypatch.setattr(os, "geteuid", lambda: shared.stat().st_uid + 1)  # another user
    assert private_folder(shared) == shared
    assert mode(shared) == 0o755
    assert "not this user's to change" in caplog.text
