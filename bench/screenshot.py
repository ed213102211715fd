"""Regenerate the audit-page screenshot in the docs (not a test): a real daemon, headless Chromium.

    python bench/screenshot.py [--out docs/img/audit-page.png] [--width 1600] [--height 1000]

It reuses the browser test's state and Chromium helpers (tests/system/test_browser.py), so the picture in
docs/operations.md is the page that test checks: one agent with six decisions, three of them failing
a component. Needs Debian's chromium (`make system-deps`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Imported after the path set-up, so the script also runs from a checkout without an install.
from tests.conftest import ROOT
from tests.daemon_harness import daemon, stop
from tests.system.test_browser import SCORED, chromium_version, screenshot, wait_until_scored, write_state
from tests.tools import find, hint


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "audit-page.png")
    # Wide enough for all eleven columns of the decision table without a horizontal scroll.
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=1000)
    args = parser.parse_args()
    binary = find("chromium")
    if binary is None:
        print(hint("chromium"), file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="honestyd-shot-") as tmp:
        work = Path(tmp)
        root = write_state(work / "state", datetime.now(UTC))
        with daemon(work, root) as d:
            wait_until_scored(d)
            url = f"{d.base}/agents/{SCORED}?window=24h"
            screenshot(binary, url, args.out, work / "profile", (args.width, args.height))
            stop(d)
    print(f"{args.out}: {args.out.stat().st_size} bytes, {chromium_version(binary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
