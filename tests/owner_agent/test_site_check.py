"""`owner init`, `owner check` and the agent's start-up checks, on real files and certificates.

Every finding is produced from a real config, a real CSV and certificates made by
`create_pki`; the command is run through `main` (exit codes and printed lines), the start-up
refusals through real processes.
"""

from __future__ import annotations

import datetime as dt
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from leteo_fed.cli.main import main
from leteo_fed.config import OwnerPolicy, load_owner_config
from leteo_fed.defaults import DEFAULT_QUORUM
from leteo_fed.errors import ConfigError
from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.ledger import PrivacyLedger
from leteo_fed.transport.cert_check import check_certificate
from leteo_fed.transport.certs import create_pki
from leteo_fed.transport.grpc_io import TlsConfig
from owner_agent.site_check import check_site, fatal, problems, startup_findings

COLUMNS = 'columns = ["age", "score", "grade"]'


@pytest.fixture
def site(tmp_path) -> Path:
    """An `owner init` config with real certificates and 40 rows, columns not yet listed."""
    create_pki(tmp_path / "certs", ["site-1", "site-2"])
    (tmp_path / "data").mkdir()
    rng = np.random.default_rng(5)
    lines = ["age,score,grade"] + [
        f"{rng.integers(10, 18)},{rng.random() * 5:.3f},{'abc'[i % 3]}" for i in range(40)
    ]
    (tmp_path / "data" / "site-1.csv").write_text("\n".join(lines) + "\n")
    config = tmp_path / "site-1.toml"
    assert main(["owner", "init", "--out", str(config)]) == 0
    return config


def _edit(config: Path, old: str, new: str) -> None:
    text = config.read_text()
    assert old in text
    config.write_text(text.replace(old, new, 1))


def _lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("problem")]


def test_init_writes_a_config_whose_defaults_work_with_the_analysts(site, capsys):
    config = load_owner_config(site)
    assert config.policy == OwnerPolicy()  # the documented defaults, nothing looser
    assert config.policy.min_other_owners + 1 <= DEFAULT_QUORUM  # the analyst's quorum fits
    assert config.policy.non_dp == () and config.policy.columns == ()
    assert config.mode == "outbound" and config.privacy is not None
    assert site.stat().st_mode & 0o077 == 0
    assert main(["owner", "init", "--out", str(site)]) == 2  # never overwrites by surprise
    assert "--force" in capsys.readouterr().err
    assert main(["owner", "init", "--site-id", "school-7"]) == 0
    assert 'site_id = "school-7"' in capsys.readouterr().out


def test_check_wants_the_columns_listed_then_passes(site, capsys):
    assert main(["owner", "check", "--config", str(site), "--offline"]) == 2
    assert _lines(capsys) == [
        "problem: policy.columns: empty: no round may read any column until you list the ones "
        "this site shares"
    ]
    _edit(site, "columns = []", COLUMNS)
    assert main(["owner", "check", "--config", str(site), "--offline"]) == 0
    table = capsys.readouterr().out
    for expected in (
        "rows (policy.min_rows 10)",
        "column age",
        "usable as a class label only",
        "issued by the owners' CA",
        "epsilon 5 of",
    ):
        assert expected in table or expected.replace(" of", ",") in table, expected


def test_every_unknown_key_is_named_with_the_key_it_likely_meant(site, capsys):
    _edit(site, "epsilon_total = 5.0", "epsilon_totl = 5.0")
    _edit(site, "min_rows = 10", "min_row = 10")
    assert main(["owner", "check", "--config", str(site), "--offline"]) == 2
    assert sorted(_lines(capsys)) == [
        "problem: config: unknown key 'policy.min_row' (did you mean 'min_rows'?)",
        "problem: config: unknown key 'privacy.epsilon_totl' (did you mean 'epsilon_total'?)",
    ]
    with pytest.raises(ConfigError, match=r"unknown key 'privacy.epsilon_totl' \(did you mean"):
        load_owner_config(site)


def test_data_problems_are_one_line_each(site, tmp_path, capsys):
    _edit(site, "columns = []", 'columns = ["age", "score", "height"]')
    csv = tmp_path / "data" / "site-1.csv"
    csv.write_text("age,score,grade\n10,,a\n11,2.0,b\n")
    assert main(["owner", "check", "--config", str(site), "--offline"]) == 2
    lines = _lines(capsys)
    assert "problem: column height: not in " + str(csv) in lines
    assert any(x.endswith(": 2 rows, fewer than policy.min_rows = 10") for x in lines)
    assert "problem: column score: numeric, 1 missing value(s)" in lines
    csv.unlink()
    assert main(["owner", "check", "--config", str(site), "--offline"]) == 2
    assert any(x.startswith("problem: data: ") and "not found" in x for x in _lines(capsys))


def test_certificate_problems_are_named(site, tmp_path):
    config = load_owner_config(site)
    facts = check_certificate(config.tls)
    assert facts is not None and facts.role == "owner" and facts.days_left > 800
    later = facts.not_after + dt.timedelta(days=1)
    with pytest.raises(ConfigError, match="expired on"):
        check_certificate(config.tls, now=later)
    # another site's certificate under this site's name
    certs = tmp_path / "certs"
    shutil.copy(certs / "site-2.crt", certs / "site-1.crt")
    with pytest.raises(ConfigError, match="is for owner 'site-2'"):
        check_certificate(config.tls)
    # a certificate of another deployment (another owners' CA), with its own key
    create_pki(tmp_path / "other", ["site-1"])
    for ext in ("crt", "key"):
        shutil.copy(tmp_path / "other" / f"site-1.{ext}", certs / f"site-1.{ext}")
    with pytest.raises(ConfigError, match="not issued by the owners' CA"):
        check_certificate(config.tls)
    # a key that is not the certificate's
    shutil.copy(tmp_path / "certs" / "site-2.key", certs / "site-1.key")
    with pytest.raises(ConfigError, match="does not belong to the certificate"):
        check_certificate(config.tls)
    with pytest.raises(ConfigError, match="make certificates with `leteo-fed certs`"):
        check_certificate(TlsConfig.from_dir(tmp_path / "nowhere", "site-1", "owner"))


def test_budget_left_and_a_busy_port(site, tmp_path):
    _edit(site, "columns = []", COLUMNS)
    config = load_owner_config(site)
    assert config.privacy is not None
    ledger = PrivacyLedger(config.privacy.ledger, 5.0, 1e-5)
    ledger.charge("r1", "skellam", Budget(1.5, 0.0))
    _, findings = check_site(site, contact_peers=False)
    assert any(f.check == "budget" and "epsilon 3.5 of 5" in f.detail for f in findings)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        _edit(
            site,
            'mode = "outbound"',
            f'mode = "inbound"\nlisten = "127.0.0.1:{held.getsockname()[1]}"',
        )
        broken = fatal(startup_findings(load_owner_config(site)))
    assert [f.check for f in broken] == ["port"]
    assert problems(broken)[0].detail.startswith("listen = '127.0.0.1:")


@pytest.mark.slow
def test_services_refuse_to_start_on_what_cannot_work(site, tmp_path):
    """Through real processes: an owner whose data file is gone and a CSP without its
    certificates stop at once with one line and exit 2; the CSP makes no secret key first."""
    _edit(site, "columns = []", COLUMNS)
    (tmp_path / "data" / "site-1.csv").unlink()
    owner = [sys.executable, "-m", "leteo_fed", "owner", "serve", "--config", str(site)]
    done = subprocess.run(owner, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "the agent cannot start: data:" in done.stderr and "not found" in done.stderr
    assert "Traceback" not in done.stderr
    csp = [sys.executable, "-m", "leteo_fed", "csp", "serve", "--key-dir", "keys"]
    csp += ["--listen", "127.0.0.1:0", "--tls-dir", "missing"]
    done = subprocess.run(csp, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2 and "TLS ca file not found" in done.stderr
    assert not (tmp_path / "keys").exists()  # no secret key was made for a CSP that cannot run


def test_owner_budget_shows_and_renews_the_period_into_the_audit_log(site, capsys):
    import json

    from owner_agent import audit

    config = load_owner_config(site)
    assert config.privacy is not None
    PrivacyLedger(config.privacy.ledger, 5.0, 1e-5).charge("r1", "skellam", Budget(2.0, 0.0))
    assert main(["owner", "budget", "show", "--config", str(site), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["period"] == 1 and shown["epsilon_left"] == 3.0
    argv = ["owner", "budget", "new-period", "--config", str(site), "--json"]
    assert main([*argv, "--reason", "school year 2027"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["period"] == 2 and doc["epsilon_left"] == 5.0
    assert doc["closed"]["closed_period"] == 1 and doc["closed"]["epsilon_spent"] == 2.0
    events = [e for e in audit.read(config.audit_log) if e["event"] == "budget_period"]
    assert len(events) == 1 and events[0]["reason"] == "school year 2027"
    assert events[0]["epsilon_spent"] == 2.0 and events[0]["archive"].endswith(".period-1.json")
    assert "period 1 closed (school year 2027)" in audit.table(events)


def test_owner_budget_set_raises_lowers_and_refuses_below_spent_audited(site, capsys):
    import json

    from owner_agent import audit

    config = load_owner_config(site)
    assert config.privacy is not None and config.privacy.accountant == "rdp"
    led = PrivacyLedger(config.privacy.ledger, 5.0, 1e-5)
    led.charge("r1", "skellam", Budget(2.0, 0.0))
    # editing the config alone is refused, naming the command
    _edit(site, "epsilon_total = 5.0", "epsilon_total = 8.0")
    with pytest.raises(ConfigError, match="leteo-fed owner budget set"):
        PrivacyLedger(config.privacy.ledger, 8.0, 1e-5)
    _edit(site, "epsilon_total = 8.0", "epsilon_total = 5.0")
    base = ["owner", "budget", "set", "--config", str(site), "--json"]
    assert main([*base, "--epsilon-total", "8", "--reason", "board decision 12"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["epsilon_total"] == 8.0 and doc["epsilon_left"] == 6.0
    assert doc["changed"]["epsilon_total_old"] == 5.0 and doc["accountant"] == "rdp"
    # the config says the same, so the agent's strict open works; comments were kept
    after = load_owner_config(site)
    assert after.privacy is not None and after.privacy.epsilon_total == 8.0
    assert after.privacy.delta_total == 1e-5 and "[privacy]" in site.read_text()
    PrivacyLedger(after.privacy.ledger, 8.0, 1e-5)
    # lowering below what is spent is refused and changes neither file
    before = (site.read_bytes(), after.privacy.ledger.read_bytes())
    assert main([*base, "--epsilon-total", "1.5", "--reason", "oops"]) != 0
    assert "cannot be lowered" in capsys.readouterr().err
    assert (site.read_bytes(), after.privacy.ledger.read_bytes()) == before
    assert main([*base, "--epsilon-total", "3", "--reason", "tighter policy"]) == 0
    capsys.readouterr()
    events = [e for e in audit.read(after.audit_log) if e["event"] == "budget_change"]
    assert [(e["epsilon_total_old"], e["epsilon_total_new"]) for e in events] == [
        (5.0, 8.0),
        (8.0, 3.0),
    ]
    assert events[0]["reason"] == "board decision 12" and events[0]["by"] and events[0]["time"]
    # a running agent's ledger object takes the totals the command changed
    assert led.total == (3.0, 1e-5)


def test_owner_budget_new_period_after_a_config_edit(site, capsys):
    import json

    from owner_agent import audit

    config = load_owner_config(site)
    assert config.privacy is not None
    PrivacyLedger(config.privacy.ledger, 5.0, 1e-5).charge("r1", "skellam", Budget(2.0, 0.0))
    _edit(site, "epsilon_total = 5.0", "epsilon_total = 4.0")
    argv = ["owner", "budget", "new-period", "--config", str(site), "--json"]
    assert main([*argv, "--reason", "new year, new policy"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["period"] == 2 and doc["epsilon_total"] == 4.0 and doc["epsilon_left"] == 4.0
    PrivacyLedger(config.privacy.ledger, 4.0, 1e-5)  # the agent starts
    ev = [e for e in audit.read(config.audit_log) if e["event"] == "budget_period"][0]
    assert (ev["epsilon_total"], ev["next_epsilon_total"]) == (5.0, 4.0)
    assert ev["accountant"] == ev["next_accountant"] == "rdp"


def test_budget_set_help_names_the_privacy_meaning(capsys):
    with pytest.raises(SystemExit):
        main(["owner", "budget", "set", "--help"])
    out = capsys.readouterr().out
    assert "--epsilon-total" in out and "--reason" in out and "weakens" in out


def test_published_bounds_are_read_and_bad_ones_refused_by_name(site):
    """`[bounds]`: the bounds a site publishes for its columns (compared with a request's, the
    narrower noted in the audit log); a malformed table is refused naming `bounds`."""
    text = site.read_text()
    site.write_text(text + "\n[bounds]\nage = [10, 18]\nscore = [0, 5]\n")
    published = {b.column: (b.lower, b.upper) for b in load_owner_config(site).published_bounds}
    assert published == {"age": (10.0, 18.0), "score": (0.0, 5.0)}
    for bad in ("age = [18, 10]", "age = [10]", 'age = "young"'):
        site.write_text(text + f"\n[bounds]\n{bad}\n")
        with pytest.raises(ConfigError) as err:
            load_owner_config(site)
        assert err.value.field == "bounds" and "age" in str(err.value), bad
