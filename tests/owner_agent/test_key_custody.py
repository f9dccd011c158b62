"""Who holds the key, on the owner's side: the `[keyholders]` table, the rule by which the key
holders' withdrawal answers give a charge back, and the key a site accepts from its pinned
holders (in-process holders with real threshold keys: tests/keyholder_standin.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from keyholder_standin import start_standins

from leteo_fed.config import load_owner_config
from leteo_fed.crypto import threshold
from leteo_fed.errors import ConfigError, PeerUnavailable, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.transport.grpc_io import TlsConfig
from owner_agent.key_custody import (
    NOT_INCLUDED,
    WITHDRAWN,
    KeyHolders,
    SingleCsp,
    combined_withdrawal,
)
from owner_agent.site_check import check_site

BASE = """\
site_id = "site-1"

[data]
path = "site-1.csv"

[peers]
aggregator = "127.0.0.1:9"
{csp}
[tls]
insecure = true
{holders}"""


def _config(tmp_path: Path, holders: str, csp: str = "") -> Path:
    path = tmp_path / "site-1.toml"
    path.write_text(BASE.format(csp=csp, holders=holders))
    return path


def _holders(addresses: list[str], t: int) -> str:
    quoted = ", ".join(f'"{a}"' for a in addresses)
    return f"\n[keyholders]\naddresses = [{quoted}]\nthreshold = {t}\n"


# ---------------------------------------------------------------------- the configuration


def test_keyholders_replace_the_csp(tmp_path) -> None:
    config = load_owner_config(_config(tmp_path, _holders(["h1:1", "h2:1", "h3:1"], 2)))
    assert config.csp == "" and config.keyholders is not None
    assert config.keyholders.addresses == ("h1:1", "h2:1", "h3:1")
    assert config.keyholders.threshold == 2 and config.keyholders.holders == 3
    plain = load_owner_config(_config(tmp_path, "", csp='csp = "csp:50051"'))
    assert plain.csp == "csp:50051" and plain.keyholders is None


@pytest.mark.parametrize(
    ("holders", "csp", "field", "says"),
    [
        (_holders(["h1:1", "h2:1"], 2), 'csp = "csp:1"', "peers.csp", "alternatives"),
        ("", "", "peers.csp", "or a [keyholders] table"),
        (_holders(["h1:1"], 2), "", "keyholders.addresses", "2 to 32, got 1"),
        (_holders(["h1:1", "h1:1", "h2:1"], 2), "", "keyholders.addresses", "h1:1 twice"),
        (_holders(["h1", "h2:1"], 2), "", "keyholders.addresses", "host:port"),
        (_holders(["h1:1", "h2:1", "h3:1"], 1), "", "keyholders.threshold", "in 2..3"),
        (_holders(["h1:1", "h2:1", "h3:1"], 4), "", "keyholders.threshold", "in 2..3"),
        (_holders(["h1:1", "h2:1", "h3:1", "h4:1"], 2), "", "keyholders.threshold", "majority"),
        ('\n[keyholders]\naddresses = ["h1:1", "h2:1"]\n', "", "keyholders.threshold", "missing"),
        (
            _holders(["h1:1", "h2:1"], 2) + "quorum = 2\n",
            "",
            "keyholders.quorum",
            "unknown key",
        ),
    ],
)
def test_a_bad_keyholders_table_is_named(tmp_path, holders, csp, field, says) -> None:
    with pytest.raises(ConfigError) as err:
        load_owner_config(_config(tmp_path, holders, csp))
    assert err.value.field == field and says in str(err.value)


# ---------------------------------------------------------------------- the withdrawal rule


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        # 3 of 5: a share is safe once m - t + 1 = 3 holders will not decrypt it
        (["withdrawn"] * 3 + ["", ""], WITHDRAWN),
        (["withdrawn", "withdrawn", "", "", ""], ""),  # two more could still decrypt it
        (["not_included"] * 3 + ["decrypted", ""], NOT_INCLUDED),
        (["not_included", "not_included", "withdrawn", "", ""], WITHDRAWN),
        (["withdrawn", "withdrawn", "decrypted", "", ""], "decrypted"),
        (["withdrawn", "claimed", "", "", ""], "claimed"),
        (["decrypted", "claimed", "decrypted", "", ""], "decrypted"),
        ([""] * 5, ""),
    ],
)
def test_a_charge_comes_back_once_no_t_holders_can_decrypt_the_share(states, expected) -> None:
    answers = {f"h{i}": s for i, s in enumerate(states, start=1)}
    assert combined_withdrawal(answers, holders=5, threshold=3) == expected


def test_two_of_three_need_two_holders_to_give_it_back() -> None:
    assert combined_withdrawal({"a": "withdrawn", "b": "", "c": ""}, 3, 2) == ""
    assert combined_withdrawal({"a": "withdrawn", "b": "withdrawn", "c": ""}, 3, 2) == WITHDRAWN
    assert combined_withdrawal({"a": "withdrawn", "b": "withdrawn", "c": "x"}, 3, 3) == WITHDRAWN


class _Csp:
    def __init__(self, state: str) -> None:
        self.state = state

    def WithdrawRound(self, request, timeout):
        return pb.WithdrawReply(round_id=request.round_id, state=self.state)


def test_one_csps_word_decides_in_its_own_words() -> None:
    said = SingleCsp(_Csp("withdrawn"), "csp:1").withdraw("r1")
    assert said.state == WITHDRAWN and "the CSP attests it never decrypted the round" in said.says
    said = SingleCsp(_Csp("not_included"), "csp:1").withdraw("r1")
    assert said.state == NOT_INCLUDED and "without this site's share" in said.says
    assert SingleCsp(_Csp("decrypted"), "csp:1").withdraw("r1").state == "decrypted"


# ---------------------------------------------------------------------- against key holders


@pytest.fixture(scope="module")
def dealt():
    return threshold.deal(512, 5, 3)


def _custody(addresses: list[str], t: int) -> KeyHolders:
    tls = TlsConfig.insecure_as("site-1", "owner")
    channels = {a: tls.channel(a, peer="keyholder") for a in addresses}
    stubs = {a: pb_grpc.KeyHolderStub(c) for a, c in channels.items()}
    return KeyHolders(stubs, t, channels.values(), timeout=1.0)


def test_the_site_takes_only_the_key_its_pinned_holders_agree_on(dealt) -> None:
    key, shares = dealt
    holders = start_standins(shares, {5: "down"})
    try:
        custody = _custody(holders.addresses, 3)
        assert custody.public_key() == key.public
        assert custody.public_key(key.key_id) == key.public
        custody.close()
        # a DPO who pinned another threshold, or fewer holders, gets no key at all
        with pytest.raises(ProtocolError, match="4 of 5"):
            _custody(holders.addresses[:4] + [holders.addresses[4]], 4).public_key()
        with pytest.raises((ProtocolError, PeerUnavailable), match="3 of 4"):
            _custody(holders.addresses[:4], 3).public_key()
    finally:
        holders.stop()


def test_a_minority_of_holders_cannot_hand_the_site_a_key_of_their_own(dealt) -> None:
    """Two holders answer a 2-of-3 key they share between themselves (with a third, absent):
    the site pinned 3 of 5, so that key does not fit, and the honest three decide."""
    key, shares = dealt
    own, own_shares = threshold.deal(512, 3, 2)
    honest = start_standins(shares[:3])
    liars = start_standins(own_shares[:2])
    try:
        addresses = honest.addresses + liars.addresses
        assert _custody(addresses, 3).public_key() == key.public
        with pytest.raises(PeerUnavailable) as err:  # two honest holders are not enough
            _custody(honest.addresses[:2] + liars.addresses + ["127.0.0.1:9"], 3).public_key()
        assert f"key {own.key_id} (2 of 3" in str(err.value)
    finally:
        honest.stop()
        liars.stop()


def test_withdrawal_asks_every_holder(dealt) -> None:
    _, shares = dealt
    holders = start_standins(shares, {4: "down", 5: "down"})
    try:
        custody = _custody(holders.addresses, 3)
        said = custody.withdraw("r1")  # three holders never decrypted r1: given back
        assert said.state == WITHDRAWN
        assert "the key holders attest" in said.says and "3 of 5" in said.says
        for holder in list(holders.holders.values())[:1]:
            holder.decrypted.append("r2")
        said = custody.withdraw("r2")  # one decrypted it, two are down: it stays
        assert said.state == "decrypted" and "decryptable" in said.says
        custody.close()
    finally:
        holders.stop()


def test_owner_check_checks_every_holder_and_the_key_rule(dealt, tmp_path) -> None:
    _, shares = dealt
    holders = start_standins(shares, {5: "down"})
    (tmp_path / "site-1.csv").write_text("age\n1\n")
    try:
        path = _config(tmp_path, _holders(holders.addresses, 3))
        _, findings = check_site(path)
        by_check = {f.check: f for f in findings}
        for address in holders.addresses[:4]:
            assert by_check[f"keyholders {address}"].ok
        assert not by_check[f"keyholders {holders.addresses[4]}"].ok
        assert by_check["keyholders.key"].ok and "3 of 5" in by_check["keyholders.key"].detail
        assert "peers.csp" not in by_check
    finally:
        holders.stop()


def test_owner_init_writes_a_keyholders_table_the_agent_reads(tmp_path) -> None:
    from leteo_fed.cli.main import main

    out = tmp_path / "site-1.toml"
    assert (
        main(
            [
                "owner",
                "init",
                "--keyholders",
                "h1:1,h2:1,h3:1",
                "--threshold",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    config = load_owner_config(out)
    assert config.csp == "" and config.keyholders is not None
    assert config.keyholders.addresses == ("h1:1", "h2:1", "h3:1")
    assert config.keyholders.threshold == 2
    assert main(["owner", "init", "--keyholders", "h1:1,h2:1", "--out", str(out), "--force"]) == 2
