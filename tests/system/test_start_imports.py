"""What `honestyd run` imports before it serves: none of the modules only a rare path needs (docs/performance.md, "The
empty daemon's memory"). Each is imported where it is used instead; a module-level import of one would put its
resident memory back into every daemon, which is all this guards.

Checked in a fresh interpreter that does what the daemon's start does before it serves, short of running: the CLI's
parser, ``daemon.app``, and the HTTP app made (its session storage included).
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

#: Imported only by the path named beside it.
RARE = {
    "cryptography": "sign-in sessions, from the first request that opens one (daemon/http/sessions.py)",
    "aiohttp_session.cookie_storage": "sign-in sessions (it imports cryptography)",
    "daemon.simulate": "`honestyd simulate` and the demo (their options are daemon/cli.py's)",
    "daemon.demo": "`honestyd demo`",
    "daemon.tune_apply": "`honestyd tune` (the pages need only its floor: scorers.progress.FLOOR)",
    "scorers.tune": "`honestyd tune`'s fit",
}

_PROBE = """
import json, sys, types
import daemon.cli, daemon.app
from daemon.config import load_config
from daemon.http.app import make_app
daemon.cli.build_parser()
make_app(types.SimpleNamespace(config=load_config(None)))
print(json.dumps(sorted(sys.modules)))
"""


def _started() -> set[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_the_start_imports_no_module_of_a_rare_path() -> None:
    loaded = _started()
    found = sorted(m for m in RARE if m in loaded or any(name.startswith(m + ".") for name in loaded))
    assert not found, f"imported at the start: {', '.join(f'{m} (for {RARE[m]})' for m in found)}"
