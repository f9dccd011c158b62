"""Threshold keys: `keys deal` (the key ceremony) and `keyholder serve|add-share|list-keys|
retire-key` (one holder's service and its folder of shares). See docs/threshold-keys.md."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from leteo_fed.cli.health import add_health_listen, add_metrics_listen
from leteo_fed.cli.options import (
    SubParsers,
    add_key_size_flags,
    add_spark_sum_flag,
    add_tls,
    listen_address,
    set_handler,
    tls_config,
)
from leteo_fed.defaults import DEFAULT_KEYHOLDER_ADDRESS

DEAL_DESCRIPTION = """\
Generate a threshold Paillier key (safe-prime modulus) and split its secret among M key holders,
any T of whom decrypt: OUT/keyholder-<i>.share for every holder (mode 600) and OUT/<key_id>.pub.json.
T must be more than half of M. The owners' encryption is unchanged: the key is an ordinary
Paillier public key.

A dealer exists: while this command runs, its process knows the whole key. It writes nothing of
it but the shares, and exits. Hand keyholder-<i>.share to holder i over a secure channel; holder i
files it with `leteo-fed keyholder add-share`, which deletes the file. See docs/threshold-keys.md.

example:
  leteo-fed keys deal --holders 5 --threshold 3 --out dealt
"""


def add_parsers(sub: SubParsers) -> None:
    keys = sub.add_parser("keys", help="the key ceremony of a threshold key (keys deal)")
    actions = keys.add_subparsers(dest="action", required=True, metavar="ACTION")
    deal = actions.add_parser(
        "deal",
        help="deal a new threshold key into one share file per holder",
        description=DEAL_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    deal.add_argument("--holders", type=int, required=True, metavar="M", help="key holders")
    deal.add_argument(
        "--threshold",
        type=int,
        required=True,
        metavar="T",
        help="how many holders decrypt together (more than M / 2)",
    )
    deal.add_argument("--out", type=Path, required=True, help="an empty folder for the files")
    add_key_size_flags(deal)
    deal.add_argument("--json", action="store_true", help="print what was dealt as JSON")
    set_handler(deal, run_deal)
    _add_keyholder(sub)


def _add_keyholder(sub: SubParsers) -> None:
    holder = sub.add_parser("keyholder", help="a holder of one share of a threshold key")
    actions = holder.add_subparsers(dest="action", required=True, metavar="ACTION")
    serve = actions.add_parser(
        "serve",
        help="run a key holder service",
        description="Serve one holder's share of a threshold key: it checks every round as the "
        "CSP does (the owners' signed shares, the quorum, one spec digest, each round once) and "
        "returns its partial decryption of the sum it computed itself, with a proof that it "
        "used its real share. --key-dir must hold a share filed by `keyholder add-share`.",
    )
    serve.add_argument(
        "--listen",
        type=listen_address,
        default=DEFAULT_KEYHOLDER_ADDRESS,
        help=f"host:port (default: {DEFAULT_KEYHOLDER_ADDRESS})",
    )
    serve.add_argument(
        "--key-dir", type=Path, default=Path("keyholder-keys"), help="this holder's share folder"
    )
    add_key_size_flags(serve, key_bits_help=None)
    add_spark_sum_flag(serve)
    add_tls(serve, "keyholder-1", "keyholder")
    add_health_listen(serve)
    add_metrics_listen(serve)
    set_handler(serve, run_serve)

    add = actions.add_parser(
        "add-share",
        help="file a dealt share into this holder's folder",
        description="File SHARE_FILE (from `keys deal`) into --key-dir (mode 600; sealed with "
        "LETEO_CSP_PASSPHRASE if set) and make its key current: new rounds use it, rounds "
        "already open finish on theirs. The dealt file is deleted unless --keep.",
    )
    add.add_argument("share_file", type=Path, metavar="SHARE_FILE")
    add.add_argument("--key-dir", type=Path, required=True, help="this holder's share folder")
    add.add_argument("--keep", action="store_true", help="do not delete SHARE_FILE")
    add.add_argument(
        "--not-current",
        action="store_true",
        help="file it without making it current (a rotation prepared ahead)",
    )
    set_handler(add, run_add_share)

    listing = actions.add_parser(
        "list-keys", help="list the shares of a holder's folder", description="As csp list-keys."
    )
    retire = actions.add_parser(
        "retire-key",
        help="delete an old share",
        description="Delete the share of KEY_ID from --key-dir (not the current one): this "
        "holder can no longer take part in decrypting rounds on that key.",
    )
    for q in (listing, retire):
        q.add_argument("--key-dir", type=Path, required=True, help="this holder's share folder")
    retire.add_argument("--key-id", required=True, help="the key to retire (32 hex digits)")
    from leteo_fed.cli.services import run_csp_keys

    for q in (listing, retire):
        set_handler(q, run_csp_keys)


def run_deal(args: argparse.Namespace) -> int:
    from csp.dealing import deal_to

    dealt = deal_to(args.out, args.key_bits, args.holders, args.threshold, args.insecure_small_key)
    key = dealt.key
    if args.json:
        doc = {
            "key_id": key.key_id,
            "bits": key.public.bits,
            "holders": key.holders,
            "threshold": key.threshold,
            "shares": [str(p) for p in dealt.shares],
            "public_key": str(dealt.public),
            "seconds": round(dealt.seconds, 3),
        }
        print(json.dumps(doc, indent=1))
        return 0
    print(
        f"dealt key {key.key_id}: {key.public.bits}-bit, any {key.threshold} of "
        f"{key.holders} holders decrypt ({dealt.seconds:.1f} s)"
    )
    for index, path in enumerate(dealt.shares, start=1):
        print(f"  holder {index}: {path} (mode 600)")
    print(f"  public key: {dealt.public}")
    print(
        "the dealer kept nothing else: no factor of n was written. Give each holder its file "
        "over a secure channel; it runs `leteo-fed keyholder add-share FILE --key-dir DIR`, "
        "which deletes the file"
    )
    return 0


def run_serve(args: argparse.Namespace) -> int:
    from csp.server import serve_keyholder

    serve_keyholder(
        args.listen,
        tls_config(args),
        args.key_dir,
        args.insecure_small_key,
        args.health_listen,
        args.metrics,
        args.spark_ciphertext_threshold,
    )
    return 0


def run_add_share(args: argparse.Namespace) -> int:
    from csp.dealing import add_share

    share = add_share(args.share_file, args.key_dir, args.keep, not args.not_current)
    key = share.key
    state = "not current (file it as current later)" if args.not_current else "current"
    print(
        f"filed share {share.index} of key {key.key_id} ({key.threshold} of {key.holders}) in "
        f"{args.key_dir}: {state}"
    )
    if not args.keep:
        print(f"deleted {args.share_file}")
    return 0
