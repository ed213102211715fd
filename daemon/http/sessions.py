"""Reviewers' sign-in sessions: an encrypted cookie (aiohttp-session's EncryptedCookieStorage), its key, and who a
request is from.

The key is 32 random bytes (Fernet's), read from the systemd credential ``session-key`` when
``$CREDENTIALS_DIRECTORY`` has one, else from ``session.key`` beside the store (the daemon's state directory, never
the watched state root), created there on first start with mode 0600. That file is opened without following a
symlink and written under a temporary name first, so no other file receives the key and no half-written key is ever
read. The cookie is ``HttpOnly``, ``SameSite=Strict``, ``Secure`` when ``[api] public_url`` is https, and lasts
:data:`SESSION_SECONDS`.

A session holds the reviewer's name, a fingerprint of the token it signed in with, and the form token
(``csrf_token``) every POST must carry. A session whose reviewer is no longer configured, or whose token changed, is
no session: removing or rotating a token signs its sessions out.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp_session
from aiohttp import web

from collectors.safeopen import RefusedFile, checked_fd
from daemon.http.guards import local_path, new_token

if TYPE_CHECKING:
    from aiohttp_session.cookie_storage import EncryptedCookieStorage

log = logging.getLogger("honestyd")

COOKIE = "honestyd_session"
#: How long a sign-in lasts (the cookie's Max-Age, and the age past which its content is refused).
SESSION_SECONDS = 12 * 3600
KEY_FILE = "session.key"
#: The systemd credential name (LoadCredential=session-key:…) taken instead of the file when present.
CREDENTIAL = "session-key"
KEY_BYTES = 32


class BadKey(ValueError):
    """A session key that is not 32 bytes (raw, or URL-safe base64 of them)."""


def parse_key(data: bytes, where: str) -> bytes:
    """The 32 key bytes of a key file's content: raw, or URL-safe base64 text (what honestyd writes)."""
    if len(data) == KEY_BYTES:
        return data
    try:
        key = base64.urlsafe_b64decode(data.strip())
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise BadKey(f"{where}: not a session key (32 bytes, or their URL-safe base64)")
    return key


def _read(path: Path) -> bytes:
    fd = checked_fd(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC), str(path))
    with os.fdopen(fd, "rb") as f:
        if stat.S_IMODE(os.fstat(f.fileno()).st_mode) & 0o077:
            log.warning("session key %s can be read by others than honestyd (mode %o): chmod 600 it", path,
                        stat.S_IMODE(os.fstat(f.fileno()).st_mode))
        return f.read(4096)


def _create(path: Path) -> bytes:
    """A new key written to ``path`` (0600) unless one is there already; returns the key in force."""
    key = secrets.token_bytes(KEY_BYTES)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(base64.urlsafe_b64encode(key) + b"\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # never replaces whatever is there, and never follows a symlink at path
        except FileExistsError:  # another start made one meanwhile: that one is the key
            return parse_key(_read(path), str(path))
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return key


def load_key(state_dir: Path, environ: Mapping[str, str]) -> tuple[bytes, str]:
    """(key, where it came from): the credential when present, else the key file, created when missing.

    Raises OSError (unreadable, not a regular file: :class:`RefusedFile`) or :class:`BadKey` (not a key).
    """
    credentials = environ.get("CREDENTIALS_DIRECTORY")
    if credentials:
        path = Path(credentials) / CREDENTIAL
        with contextlib.suppress(FileNotFoundError):
            return parse_key(_read(path), str(path)), f"credential {path}"
    path = state_dir / KEY_FILE
    try:
        return parse_key(_read(path), str(path)), str(path)
    except FileNotFoundError:
        key = _create(path)
        return key, f"{path} (created)"


def session_key(state_dir: Path, environ: Mapping[str, str]) -> bytes:
    """The key sessions are encrypted with; one that cannot be read or written is logged, and a key of this process
    is used instead (sign-ins then last until the daemon stops): the pages and the API keep working."""
    try:
        key, where = load_key(state_dir, environ)
    except (OSError, BadKey) as exc:
        why = str(exc) if isinstance(exc, (BadKey, RefusedFile)) else f"{exc.filename}: {exc.strerror}"
        log.error("session key not available (%s): sign-ins last until honestyd stops", why)
        return secrets.token_bytes(KEY_BYTES)
    log.info("session key from %s", where)
    return key


class Storage(aiohttp_session.AbstractStorage):
    """aiohttp-session's EncryptedCookieStorage, made at the first request that reads or writes a session (a page,
    a sign-in): it imports cryptography, the daemon's largest import, which a daemon only scraped and asked its API
    never needs (docs/performance.md, "The empty daemon's memory")."""

    def __init__(self, key: bytes, *, secure: bool) -> None:
        if len(key) != KEY_BYTES:
            raise BadKey(f"a session key is {KEY_BYTES} bytes, not {len(key)}")
        super().__init__(cookie_name=COOKIE, max_age=SESSION_SECONDS, httponly=True, samesite="Strict",
                         secure=secure or None, path="/")
        self._key = key
        self._secure = secure
        self._encrypted: EncryptedCookieStorage | None = None

    def encrypted(self) -> EncryptedCookieStorage:
        """The storage itself, made on the first call."""
        if self._encrypted is None:
            from aiohttp_session.cookie_storage import EncryptedCookieStorage

            self._encrypted = EncryptedCookieStorage(
                self._key, cookie_name=COOKIE, max_age=SESSION_SECONDS, httponly=True, samesite="Strict",
                secure=self._secure or None, path="/")
        return self._encrypted

    async def load_session(self, request: web.Request) -> aiohttp_session.Session:
        return await self.encrypted().load_session(request)

    async def save_session(self, request: web.Request, response: web.StreamResponse,
                           session: aiohttp_session.Session) -> None:
        await self.encrypted().save_session(request, response, session)


def storage(key: bytes, *, secure: bool) -> Storage:
    """The cookie storage of the sessions (see the module)."""
    return Storage(key, secure=secure)


def fingerprint(token: str) -> str:
    """What a session keeps of the token it signed in with: enough to notice a new token, not to sign in."""
    return hashlib.sha256(b"honestyd session\0" + token.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def check_token(reviewers: Mapping[str, str], reviewer: str, token: str) -> bool:
    """Whether ``token`` is ``reviewer``'s ({token: reviewer}), compared in constant time against every token."""
    found = False
    given = token.encode("utf-8", "surrogatepass")
    for known, name in reviewers.items():
        if hmac.compare_digest(known.encode("utf-8", "surrogatepass"), given) and name == reviewer:
            found = True
    return found


def still_valid(reviewers: Mapping[str, str], reviewer: object, mark: object) -> bool:
    """Whether a session's reviewer still has the token it signed in with."""
    if not isinstance(reviewer, str) or not isinstance(mark, str):
        return False
    return any(name == reviewer and hmac.compare_digest(fingerprint(token), mark) for token, name in reviewers.items())


async def signed_in(request: web.Request, reviewers: Mapping[str, str]) -> tuple[str | None, aiohttp_session.Session]:
    """(the signed-in reviewer or None, the session)."""
    session = await aiohttp_session.get_session(request)
    reviewer = session.get("reviewer")
    if reviewer is not None and not still_valid(reviewers, reviewer, session.get("token")):
        session.invalidate()
        return None, session
    return reviewer if isinstance(reviewer, str) else None, session


def form_token(session: aiohttp_session.Session) -> str:
    """The session's form token, made when it has none (a session with only this in it is a signed-out one)."""
    token = session.get("csrf")
    if not isinstance(token, str) or not token:
        token = session["csrf"] = new_token()
    return token


async def sign_in(request: web.Request, reviewer: str, token: str) -> None:
    """A fresh session for ``reviewer`` (a new form token; nothing carried over from before the sign-in)."""
    session = await aiohttp_session.new_session(request)
    session["reviewer"] = reviewer
    session["token"] = fingerprint(token)
    session["csrf"] = new_token()


def here(request: web.Request) -> str:
    """The request's own local URL (path and query, as sent: still percent-encoded), a ``next`` for its forms."""
    return local_path(request.raw_path)
