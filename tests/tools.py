"""The programs the suite runs for real, and the one way a test asks for one: ``require(name)``.

A missing program fails the test that needs it, naming the Debian package ``make test`` installs it from
(``make system-deps``, the Makefile's ``SYSTEM_TOOLS``): a skipped check reads as a passed one.
"""

from __future__ import annotations

import os
import shutil

import pytest

#: program → the Debian package that provides it (the Makefile's SYSTEM_TOOLS lists the same pairs).
PACKAGES = {
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "prometheus-alertmanager": "prometheus-alertmanager",
    "amtool": "prometheus-alertmanager",
    "systemd-analyze": "systemd",
    "chromium": "chromium",
    "setpriv": "util-linux",
}
#: Other names a program goes by (Ubuntu's Chromium).
ALIASES = {"chromium": ("chromium-browser",)}
#: Looked in when PATH lacks them (a minimal PATH, e.g. under sudo or a service manager).
SYSTEM_DIRS = ("/usr/bin", "/usr/sbin", "/bin", "/sbin")


def hint(name: str) -> str:
    """The failure message for a missing ``name``."""
    package = PACKAGES[name]
    return (f"{name} is missing: it comes from the Debian package '{package}', which `make test` installs "
            f"(`make system-deps`, or apt-get update && apt-get install -y --no-install-recommends {package})")


def find(name: str) -> str | None:
    """The path of ``name`` (or an alias) on PATH or in the system directories, if any."""
    for candidate in (name, *ALIASES.get(name, ())):
        found = shutil.which(candidate)
        if found is not None:
            return found
        for directory in SYSTEM_DIRS:
            path = os.path.join(directory, candidate)
            if os.access(path, os.X_OK) and os.path.isfile(path):
                return path
    return None


def require(name: str) -> str:
    """The path of the program ``name``; the calling test fails, naming its package, when it is missing."""
    if name not in PACKAGES:
        raise KeyError(f"{name}: add it to tests/tools.py PACKAGES and the Makefile's SYSTEM_TOOLS")
    path = find(name)
    if path is None:
        pytest.fail(hint(name), pytrace=False)
    return path
