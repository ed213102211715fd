"""daemon/http/sessions.py: the session key — created once beside the store (0600, never through a symlink, never
half-written), taken from a systemd credential when there is one, and a key of the process when neither works."""

from __future__ import annotations

import base64
import logging
import os
import stat
from pathlib import Path

import pytest

from daemon.http.sessions import (
    COOKIE,
    CREDENTIAL,
    KEY_FILE,
    SESSION_SECONDS,
    BadKey,
    Storage,
    load_key,
    parse_key,
    session_key,
)


def test_the_key_is_created_once_0600_and_read_back(tmp_path: Path) -> None:
    key, where = load_key(tmp_path, {})
    path = tmp_path / KEY_FILE
    assert len(key) == 32 and where == f"{path} (created)"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert base64.urlsafe_b64decode(path.read_bytes().strip()) == key
    assert load_key(tmp_path, {}) == (key, str(path))  # the next start: the same key
    assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE]  # no temporary file left behind


def test_a_symlink_where_the_key_goes_is_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "elsewhere"
    victim.write_text("untouched")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / KEY_FILE).symlink_to(victim)
    with pytest.raises(OSError):
        load_key(tmp_path / "state", {})
    assert victim.read_text() == "untouched"
    dangling = tmp_path / "d"
    dangling.mkdir()
    (dangling / KEY_FILE).symlink_to(tmp_path / "nowhere")
    with pytest.raises(OSError):
        load_key(dangling, {})
    assert not (tmp_path / "nowhere").exists()  # a dangling link is not created through either


def test_a_fifo_where_the_key_is_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / KEY_FILE)
    with pytest.raises(OSError, match="FIFO"):
        load_key(tmp_path, {})


def test_a_systemd_credential_wins_over_the_file(tmp_path: Path) -> None:
    creds = tmp_path / "creds"
    creds.mkdir()
    raw = bytes(range(32))
    (creds / CREDENTIAL).write_bytes(base64.urlsafe_b64encode(raw))
    assert load_key(tmp_path, {"CREDENTIALS_DIRECTORY": str(creds)}) == (raw, f"credential {creds / CREDENTIAL}")
    assert not (tmp_path / KEY_FILE).exists()
    (creds / CREDENTIAL).write_bytes(raw)  # raw bytes are a key too
    assert load_key(tmp_path, {"CREDENTIALS_DIRECTORY": str(creds)})[0] == raw
    (creds / CREDENTIAL).unlink()  # a credentials directory without this one: the file, as without systemd
    assert load_key(tmp_path, {"CREDENTIALS_DIRECTORY": str(creds)})[1].endswith("(created)")


def test_what_is_not_a_key_is_refused_and_the_daemon_keeps_a_key_of_its_own(tmp_path: Path,
                                                                             caplog: pytest.LogCaptureFixture) -> None:
    for bad in (b"", b"short", b"x" * 31, base64.urlsafe_b64encode(b"y" * 16)):
        with pytest.raises(BadKey):
            parse_key(bad, "k")
    (tmp_path / KEY_FILE).write_bytes(b"not a key\n")
    with caplog.at_level(logging.ERROR, "honestyd"):
        first, second = session_key(tmp_path, {}), session_key(tmp_path, {})
    assert len(first) == 32 and first != second  # each start its own: sign-ins last until it stops
    assert "session key not available" in caplog.text and KEY_FILE in caplog.text
    assert (tmp_path / KEY_FILE).read_bytes() == b"not a key\n"  # left for the operator to look at


def test_the_storage_refuses_a_wrong_key_at_once_and_encrypts_from_its_first_session() -> None:
    with pytest.raises(BadKey):
        Storage(b"x" * 31, secure=False)  # as the app is made, not at the first sign-in
    storage = Storage(b"k" * 32, secure=True)
    assert storage._encrypted is None  # cryptography not needed yet (tests/system/test_start_imports.py)
    encrypted = storage.encrypted()
    assert storage.encrypted() is encrypted and encrypted.cookie_name == COOKIE == storage.cookie_name
    assert encrypted.cookie_params == storage.cookie_params and encrypted.max_age == SESSION_SECONDS
