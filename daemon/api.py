"""The names daemon/app.py imports from the HTTP sink, now in :mod:`daemon.http` (kept for the issue-22 merge).

Import from :mod:`daemon.http.app` and :mod:`daemon.http.server` instead; this module goes once nothing imports it.
"""

from daemon.http.app import make_app
from daemon.http.server import HTTP_LIMITS, HTTP_LOG, ConnectionLimit, connection_budget, descriptor_limit

__all__ = ["HTTP_LIMITS", "HTTP_LOG", "ConnectionLimit", "connection_budget", "descriptor_limit", "make_app"]
