"""What the reviewer's pages read from the store: the agent's own words (the live model keeps only the phrases the
rules match) and the labels with their notes, for the rows of one page."""

from __future__ import annotations

import json
from collections.abc import Collection

from collectors.records import Label, Order
from collectors.rfc3339 import from_us
from daemon.store.queries import Queries


class PageReads(Queries):
    """Reads by primary key or by decision id for the rows a page shows (see the module)."""

    def texts_of(self, orders: Collection[Order]) -> dict[Order, str]:
        """The stored text of each record at these (path, generation, line) positions (line 0: a Markdown file):
        primary-key lookups, one statement."""
        keys = json.dumps([list(o) for o in sorted(orders)])
        return {(r[0], r[1], r[2]): r[3] for r in self.conn.execute(
            "SELECT e.path, e.generation, e.line, e.text FROM events e JOIN ("
            "SELECT json_extract(value, '$[0]') AS path, json_extract(value, '$[1]') AS generation,"
            " json_extract(value, '$[2]') AS line FROM json_each(?)) k"
            " ON e.path = k.path AND e.generation = k.generation AND e.line = k.line", (keys,))}

    def labels_with_notes(self, decisions: Collection[str]) -> list[Label]:
        """Every label on these decisions with its note, in rowid order (one scan of the labels, which are few)."""
        return [
            Label(from_us(r[3]), r[4], r[5], r[6], r[0], r[2], r[1], r[7])
            for r in self.conn.execute(
                "SELECT path, generation, line, ts_us, decision, value, reviewer, note FROM labels"
                " WHERE decision IN (SELECT value FROM json_each(?)) ORDER BY rowid", (json.dumps(sorted(decisions)),)
            )
        ]
