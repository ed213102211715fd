"""The review queue: an agent whose score slips gets a review item, opened by honestyd itself with the evidence.

* :mod:`~daemon.reviews.rule` — when a review is due: the dashboard score below ``alert_below``, or more than
  ``drop_alert`` below the agent's own 7 d score, once per (agent, reason) while one is open (pure);
* :mod:`~daemon.reviews.events` — the events honestyd appends to ``reviews/honestyd.jsonl``, with the evidence
  (the decisions that failed a component) gathered at opening (pure);
* :mod:`~daemon.reviews.queue` — the queue, folded from the events (pure): what a restart or a second reader sees;
* :mod:`~daemon.reviews.alertmanager` — Alertmanager's webhook payload (version 4), parsed (pure);
* :mod:`~daemon.reviews.views` — a review as JSON (the API) and as Markdown (``honestyd reviews show``), and the
  changelog's entries of openings and closes (pure).

The file format and its parser are collectors/reviews.py; the daemon's part (writing, ingesting, the webhook) is
daemon/app/reviewing.py.
"""
