"""``honestyd reviews list`` and ``honestyd reviews show ID``: the review queue from the files or the store.

``--state DIR`` folds the review files under a state directory (``reviews/*.jsonl``), as a second reader of them;
``--db FILE`` the events an ``honestyd run`` (or ``ingest``) stored. Both give the queue the daemon shows
(daemon/reviews/queue.py). ``show`` prints Markdown that pastes into an issue tracker.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from collectors.reviews import ReviewEvent, scan_reviews
from daemon import cliargs, logescape
from daemon.cliargs import UsageError
from daemon.reviews import views
from daemon.reviews.queue import Queue, Review


def _queue(args: argparse.Namespace) -> Queue:
    if args.state:
        events, rejects = scan_reviews(Path(args.state))
        for r in rejects:
            print(f"honestyd reviews: {r.path}:{r.line}: line refused ({r.reason})", file=sys.stderr)
        return Queue.fold(events)
    from daemon.store import Store

    with Store.open(Path(args.db), readonly=True) as store:
        stored: list[ReviewEvent] = [e for _, e in store.review_events_after(0)]
    return Queue.fold(stored)


def _now(args: argparse.Namespace) -> datetime:
    return args.at if args.at is not None else datetime.now(UTC)


def _age(seconds: float) -> str:
    minutes = int(seconds // 60)
    days, rest = divmod(minutes, 1440)
    return f"{days}d {rest // 60}h" if days else f"{rest // 60}h {rest % 60}m"


def cmd_reviews_list(args: argparse.Namespace) -> int:
    """The queue: open reviews first, oldest first, then the closed ones."""
    queue, now = _queue(args), _now(args)
    reviews = queue.listing(args.only)
    if args.json:
        print(json.dumps({"reviews": [views.summary(r, now) for r in reviews]}, ensure_ascii=False, indent=2))
        return 0
    if not reviews:
        print("no reviews" + (f" {args.only}" if args.only else ""))
        return 0
    rows = [("ID", "AGENT", "REASON", "STATE", "AGE", "PROGRESS", "WHY")]
    rows += [(r.id, logescape.escape(r.agent), r.reason, r.state, _age(r.age(now)), views.progress_text(r),
              logescape.escape(str(r.evidence.get("why", "")))) for r in reviews]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1])
    return 0


def _review(queue: Queue, review_id: str) -> Review:
    review = queue.get(review_id)
    if review is None:
        raise UsageError(f"no review {review_id!r} (`honestyd reviews list` lists them)")
    return review


def cmd_reviews_show(args: argparse.Namespace) -> int:
    """One review as Markdown (or JSON): the evidence, its decisions and labels, the history."""
    review, now = _review(_queue(args), args.id), _now(args)
    if args.json:
        print(json.dumps(views.detail(review, now), ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(views.markdown(review, now, args.base_url.rstrip("/")))
    return 0


def add_parser(sub: argparse._SubParsersAction[cliargs.Parser]) -> None:
    """The ``reviews`` command and its ``list`` and ``show`` sub-commands."""
    p = sub.add_parser("reviews", help="the review queue: list the reviews, or show one as Markdown")
    reviews_sub = p.add_subparsers(dest="reviews_command", required=True, metavar="list|show",
                                   help="list the reviews, or show one")

    def common(q: argparse.ArgumentParser) -> None:
        src = q.add_mutually_exclusive_group(required=True)
        src.add_argument("--state", metavar="DIR", type=cliargs.existing_dir,
                         help="fold the review files under a state directory (reviews/*.jsonl)")
        src.add_argument("--db", metavar="FILE", type=cliargs.existing_db, help="read an honestyd database")
        q.add_argument("--at", type=cliargs.timestamp, metavar="TIME",
                       help="the time ages are counted to: RFC 3339, 'now' or a date (default: now)")
        q.add_argument("--json", action="store_true", help="print JSON (as GET /v1/reviews gives it)")

    q = reviews_sub.add_parser("list", help="open reviews first, oldest first, then the closed ones")
    common(q)
    q.add_argument("--only", choices=["open", "closed"], help="only the open, or only the closed, reviews")
    q.set_defaults(func=cmd_reviews_list)
    q = reviews_sub.add_parser("show", help="one review as Markdown that pastes into an issue tracker")
    q.add_argument("id", help="the review's id, as `reviews list` shows it")
    common(q)
    q.add_argument("--base-url", dest="base_url", default="", metavar="URL",
                   help="make the links absolute, e.g. https://honestyd.example.org (default: paths)")
    q.set_defaults(func=cmd_reviews_show)
