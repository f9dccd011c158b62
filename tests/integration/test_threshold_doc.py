"""docs/threshold-keys.md's "Try it on one machine", run as a person would paste it.

Its blocks run in order in one `bash -e -x` in an empty folder (doc_shell: the ports moved to
free ones): three holder certificates, the key ceremony (`keys deal`, each holder's
`keyholder add-share`), three `keyholder serve` and an aggregator with `--keyholders` in the
background, three sites configured by `owner init --keyholders --threshold 2` and checked by
`owner check`, a DP PCA with all three holders, again with one stopped, and a third with one
holder left, which must fail naming who answered. Then: the dealt share files are gone and only
the public key is left, each holder's share is filed owner-only, both results name the three
sites, the second was decrypted by the two holders left, every server stopped cleanly.
"""

from __future__ import annotations

import json
import re
import stat

import pytest
from doc_shell import REPO, run_blocks, section_blocks

pytestmark = pytest.mark.slow

SECTION = "## Try it on one machine"
SITES = ("site-1", "site-2", "site-3")


def test_the_threshold_walkthrough_runs_as_pasted(tmp_path):
    blocks = section_blocks(REPO / "docs" / "threshold-keys.md", SECTION, 4)
    # three holders, the aggregator and their four health ports at least
    run = run_blocks(blocks, tmp_path, ports=8, timeout=420)  # within pytest's timeout
    work = run.work
    assert run.rc == 0, f"exit {run.rc}\n{run.tails()}"
    assert not run.left_running, run.left_running

    # the ceremony: the dealt shares were filed and deleted, the public key is left
    dealt = sorted(p.name for p in (work / "dealt").iterdir())
    assert len(dealt) == 1 and dealt[0].endswith(".pub.json"), dealt
    for i in (1, 2, 3):
        folder = work / f"keyholder-{i}-keys"
        [share] = list((folder / "keys").glob("*.key"))
        assert stat.S_IMODE(share.stat().st_mode) == 0o600
        assert json.loads(share.read_text())["index"] == i

    # all three holders, then two of them: both rounds released, to the three sites
    for out, holders in (("pca", 3), ("pca-2of3", 2)):
        doc = json.loads((work / "out" / out / "pca.json").read_text())
        assert doc["owners"] == list(SITES), out
        verdict = doc["timings"]["csp"]
        assert verdict["holders_valid"] == holders or (
            holders == 3 and verdict["holders_valid"] >= 2
        )
        assert verdict["holders_wrong"] == 0, verdict
        assert doc["dp"]["epsilon"] == 1.0, out
    # one holder left: no result, and the failure named who answered
    assert not (work / "out" / "pca-1of3" / "pca.json").exists()
    assert re.search(r"returned identically by 2 of the 3 key holders|key needs 2", run.trace), (
        run.tails()
    )

    for name in ("keyholder-1", "aggregator", *SITES):
        log = (work / f"{name}.log").read_text()
        assert "Traceback" not in log, (name, log[-3000:])
        assert re.search(r"received signal 15, shutting down", log), (name, log[-3000:])
