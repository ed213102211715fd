"""The HTTP sink: the JSON API, the HTML pages and /metrics, served by aiohttp from the latest snapshot.

* :mod:`daemon.http.app` — :func:`~daemon.http.app.make_app`, the one table of routes;
* :mod:`daemon.http.backend` — :class:`~daemon.http.backend.Backend`, all the handlers ask of the daemon (the seam);
* :mod:`daemon.http.handling` — what every handler shares: JSON answers, lookups, the executor, the slots cap;
* :mod:`daemon.http.api` — the JSON handlers (``/v1/…``, ``/openapi.json``) and ``/metrics``, ``/healthz``,
  ``/readyz``; :mod:`daemon.http.reviews` — the review queue's JSON routes and Alertmanager's webhook;
  :mod:`daemon.http.openapi` — the OpenAPI document of them all;
* :mod:`daemon.http.views` — the page handlers; :mod:`daemon.http.pages` — what each page shows, rendered from
  ``templates/`` (pure) by :mod:`daemon.http.templating` (Jinja2, autoescape); :mod:`daemon.http.rows` — the agent
  page's query, filters, paging and rows; :mod:`daemon.http.charts` — the charts' geometry (pure);
* :mod:`daemon.http.signin` (``/login``, ``/logout``), :mod:`daemon.http.labelling` (``POST /labels``),
  :mod:`daemon.http.sessions` (the encrypted cookie and its key), :mod:`daemon.http.forms` (reading a posted form),
  :mod:`daemon.http.guards` (redirect guard, failed-attempt limiter, form tokens: pure),
  :mod:`daemon.http.reviewviews` (``/reviews``, ``/reviews/{review}``, its close) and
  :mod:`daemon.http.reviewpages` (the queue's pages, pure),
  :mod:`daemon.http.security` (the headers on every answer, the stylesheet);
* :mod:`daemon.http.urls` — the path patterns and the links other sinks (the changelog) carry;
* :mod:`daemon.http.server` — the server around the app: request limits, the log filter, the connection cap.

A new route is a handler (in ``api.py``, ``views.py`` or beside them) plus a line in the table of ``app.py`` and its
entry in ``openapi.py`` (tests/system/test_api_hardening.py checks the two agree). Nothing here is imported by this
file, so ``daemon.http.urls`` can be used without loading aiohttp.
"""
