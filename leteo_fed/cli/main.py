"""`leteo-fed`: one command for every party and job.

Exit codes: 0 success; 2 bad input or a refused request (one readable line on stderr);
1 a failure of the run itself (a peer unreachable, a round that ended without a result).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from leteo_fed import __version__
from leteo_fed.errors import ConfigError, LeteoError, PeerUnavailable

DESCRIPTION = """\
LETEO-Fed: privacy-preserving analytics across many data owners.

Three services cooperate over mutually authenticated gRPC (mTLS):
  csp         holds the Paillier secret key; decrypts only blinded aggregates
  aggregator  runs rounds for the data user; adds encrypted shares, blinds, unblinds
  owner       one per site, next to the data; sends only encrypted statistics

Quick start (everything on this machine, separate processes, fresh certificates):
  leteo-fed demo pca --out out/demo-pca
"""


ANONYMIZE_DESCRIPTION = """\
Release a generalized copy of a dataset on Spark (local[*] unless SPARK_MASTER is set;
rows never reach the driver):

  1. drop direct identifiers, replace others by keyed HMAC-SHA256 pseudonyms;
  2. generalize the quasi-identifiers (Mondrian or TDS) until every equivalence class has
     >= k rows and meets the configured l-diversity / t-closeness on the sensitive columns;
  3. write the release atomically (OUT.csv: one CSV file; otherwise a Parquet folder);
  4. measure k, l, t, NCP/GCP, discernibility and average class size ON THE WRITTEN OUTPUT
     into a JSON report; publish only if every configured model holds.

Minimal config (paths relative to the TOML file; every key in docs/anonymization.md):

  [anonymization]
  algorithm = "mondrian"          # or "tds"
  k = 10
  [[quasi_identifier]]
  column = "age"
  type = "numeric"
  [[quasi_identifier]]
  column = "education"
  type = "categorical"
  hierarchy = "hierarchies/education.csv"   # ARX format: value;level1;...;*
  [[sensitive]]
  column = "disease"
  l_diversity = { variant = "distinct", l = 3 }
  t_closeness = { t = 0.2 }
  [identifiers]
  drop = ["ssn"]
  pseudonymize = ["patient_id"]
  key_env = "LETEO_HMAC_KEY"      # or key_file = "hmac.key" (mode 600), >= 16 bytes

Exit codes: 0 released; 2 refused (bad config, unknown column, missing value, value outside
its hierarchy, k or l/t that no output can reach), nothing written; 1 the run failed.
"""


def _add_tls(p: argparse.ArgumentParser, default_name: str, role: str) -> None:
    g = p.add_argument_group("transport security")
    g.add_argument(
        "--tls-dir",
        type=Path,
        default=Path("certs"),
        help="folder with ca.crt, NAME.crt and NAME.key from `leteo-fed certs` (default: ./certs)",
    )
    g.add_argument(
        "--name",
        default=default_name,
        help=f"this party's certificate name (default: {default_name})",
    )
    g.add_argument(
        "--insecure",
        action="store_true",
        help="plaintext gRPC with NO authentication: local experiments only",
    )
    p.set_defaults(role=role)


def _tls(args):
    from leteo_fed.transport.grpc_io import TlsConfig

    if args.insecure:
        return TlsConfig.insecure_as(args.name, args.role)
    return TlsConfig.from_dir(args.tls_dir, args.name, args.role)


def _csv_list(text: str) -> list[str]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def _add_dp_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("differential privacy (distributed Skellam noise added by the owners)")
    g.add_argument(
        "--dp-epsilon", type=float, default=None, help="release the statistics (epsilon, delta)-DP"
    )
    g.add_argument("--dp-delta", type=float, default=None, help="DP delta (default: 1e-6)")
    g.add_argument(
        "--row-norm-bound",
        type=float,
        default=None,
        help="DP: every row is clipped to this L2 norm (required with --dp-epsilon)",
    )


LDP_MECHANISMS = ["grr", "sue", "oue", "she", "the", "olh", "laplace", "duchi", "pm", "hm"]


def _bounds(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError("expected LO,HI") from exc
    return lo, hi


def _add_ldp_args(p: argparse.ArgumentParser, default_out: Path) -> None:
    p.add_argument("--data", type=Path, required=True, help="CSV or Parquet file")
    p.add_argument("--column", required=True, help="column to collect")
    p.add_argument("--mechanism", required=True, choices=LDP_MECHANISMS, help="LDP mechanism")
    p.add_argument("--epsilon", type=float, required=True, help="per-record epsilon")
    p.add_argument("--bounds", type=_bounds, default=None, help="numeric mechanisms: public LO,HI")
    p.add_argument(
        "--domain",
        type=_csv_list,
        default=None,
        help="frequency oracles: the public values (default: the values found in the data)",
    )
    p.add_argument(
        "--consistency", action="store_true", help="also report non-negative counts summing to n"
    )
    p.add_argument("--out", type=Path, default=default_out, help=f"output (default: {default_out})")


def _add_projection_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--projection-only",
        action="store_true",
        help="the aggregator learns only the directions and eigenvalues (the CSP solves a secretly rotated problem)",
    )


def _add_round_args(p: argparse.ArgumentParser, default_out: Path) -> None:
    p.add_argument("--aggregator", default="127.0.0.1:50052", help="aggregator address")
    p.add_argument(
        "--features", type=_csv_list, required=True, help="comma-separated feature columns"
    )
    p.add_argument(
        "--components", type=int, default=0, help="number of components (default: the method's)"
    )
    p.add_argument(
        "--min-owners", type=int, default=2, help="quorum: minimum shares (>= 2; default: 2)"
    )
    p.add_argument(
        "--deadline", type=float, default=120.0, help="round deadline in seconds (default: 120)"
    )
    p.add_argument("--value-bound", type=float, default=0.0, help="declared max |x| (default: 1e6)")
    p.add_argument(
        "--scale-bits", type=int, default=0, help="fixed-point fraction bits (default: 32)"
    )
    p.add_argument(
        "--owners", type=_csv_list, default=[], help="invite only these sites (default: all)"
    )
    p.add_argument(
        "--out", type=Path, default=default_out, help=f"output folder (default: {default_out})"
    )
    _add_projection_flag(p)
    _add_dp_flags(p)
    _add_tls(p, "analyst", "analyst")


def _add_discriminant_args(p: argparse.ArgumentParser, with_label: bool = True) -> None:
    p.add_argument(
        "--method", choices=["dca", "lda", "mdr"], default="dca", help="analysis (default: dca)"
    )
    if with_label:
        p.add_argument("--label-column", required=True, help="the (utility) class label column")
    p.add_argument(
        "--rho",
        type=float,
        default=None,
        help="ridge on the denominator matrix (default: DCA 0.02 lambda_max(S_W), LDA 1e-9 "
        "lambda_max(S_W), MDR 0.02 lambda_max(S_B privacy))",
    )
    p.add_argument(
        "--rho-prime", type=float, default=None, help="DCA ridge on S_B (default: 0.1 rho)"
    )


def _add_demo_args(p: argparse.ArgumentParser, default_out: Path, label_required: bool) -> None:
    p.add_argument(
        "--data",
        type=Path,
        default=None,
        help="CSV file (default: scikit-learn's breast cancer set)",
    )
    p.add_argument(
        "--features",
        type=_csv_list,
        default=None,
        help="columns (default: all numeric except labels)",
    )
    if label_required:
        p.add_argument(
            "--label-column", default=None, help="class label column (default data set: diagnosis)"
        )
    else:
        p.add_argument("--label-column", default=None, help="label column: only colours the plot")
    p.add_argument("--owners", type=int, default=3, help="number of owner agents (default: 3)")
    p.add_argument(
        "--components",
        type=int,
        default=0,
        help="number of components (default: PCA 2, else classes - 1)",
    )
    p.add_argument("--key-bits", type=int, default=2048, help="Paillier key size (default: 2048)")
    p.add_argument(
        "--insecure-small-key",
        action="store_true",
        help="allow --key-bits below 2048 (experiments only)",
    )
    p.add_argument("--value-bound", type=float, default=0.0, help="declared max |x| (default: 1e6)")
    p.add_argument(
        "--out", type=Path, default=default_out, help=f"output folder (default: {default_out})"
    )
    p.add_argument("--seed", type=int, default=7, help="seed of the horizontal split (default: 7)")
    p.add_argument(
        "--insecure", action="store_true", help="run the demo without TLS (not recommended)"
    )
    _add_projection_flag(p)
    _add_dp_flags(p)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="leteo-fed",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"leteo-fed {__version__}")
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log verbosity",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # certs
    p = sub.add_parser(
        "certs",
        help="create a CA and mTLS certificates for every party",
        description="Create a private CA and one certificate per party (csp, aggregator, analyst "
        "and each owner site). Identity = certificate common name; role = organizational unit. "
        "Private keys are written with mode 600.",
    )
    p.add_argument(
        "--out", type=Path, default=Path("certs"), help="output folder (default: ./certs)"
    )
    p.add_argument(
        "--owners", type=_csv_list, required=True, help="owner site ids, e.g. site-1,site-2"
    )
    p.add_argument(
        "--hosts",
        type=_csv_list,
        default=[],
        help="extra host names / IPs the services are reached at (localhost and 127.0.0.1 are always included)",
    )
    p.add_argument("--days", type=int, default=825, help="validity in days (default: 825)")

    # csp serve
    csp = sub.add_parser("csp", help="the crypto service provider").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = csp.add_parser(
        "serve",
        help="run the CSP service",
        description="Serve the CSP: creates a Paillier key pair in --key-dir on first start "
        "(secret key mode 600; sealed with a passphrase if LETEO_CSP_PASSPHRASE is set), serves "
        "the public key, and decrypts blinded aggregates for the aggregator only.",
    )
    p.add_argument(
        "--listen", default="127.0.0.1:50051", help="host:port (default: 127.0.0.1:50051)"
    )
    p.add_argument(
        "--key-dir", type=Path, default=Path("csp-keys"), help="key folder (default: ./csp-keys)"
    )
    p.add_argument(
        "--key-bits",
        type=int,
        default=2048,
        help="Paillier modulus size for a new key (default: 2048)",
    )
    p.add_argument(
        "--insecure-small-key", action="store_true", help="allow keys below 2048 bits (tests only)"
    )
    p.add_argument(
        "--transcript",
        type=Path,
        default=None,
        help="append every decrypted (blinded) value to this file, for audits",
    )
    _add_tls(p, "csp", "csp")

    # aggregator serve
    agg = sub.add_parser("aggregator", help="the aggregator (data user)").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = agg.add_parser(
        "serve",
        help="run the aggregator service",
        description="Serve the aggregator: owners register with it; the data user starts rounds "
        "against it (`leteo-fed pca`).",
    )
    p.add_argument(
        "--listen", default="127.0.0.1:50052", help="host:port (default: 127.0.0.1:50052)"
    )
    p.add_argument(
        "--csp", default="127.0.0.1:50051", help="CSP address (default: 127.0.0.1:50051)"
    )
    p.add_argument(
        "--transcript",
        type=Path,
        default=None,
        help="append what the aggregator learns per round to this file, for audits",
    )
    p.add_argument(
        "--spark-report-threshold",
        type=int,
        default=5_000_000,
        metavar="N",
        help="LDP rounds expecting more than N reports spill them to files and estimate with "
        "Spark (default: 5000000)",
    )
    _add_tls(p, "aggregator", "aggregator")

    # owner serve
    own = sub.add_parser("owner", help="an owner agent (one per site)").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = own.add_parser(
        "serve",
        help="run an owner agent",
        description="Serve an owner agent next to a site's data. All settings come from one TOML "
        "file: site_id, listen, advertise, [data] path/format/label_column/engine, [peers] "
        "aggregator/csp, [tls] dir or ca/cert/key. See docs/owner-config.md.",
    )
    p.add_argument("--config", type=Path, required=True, help="owner TOML config file")

    # analyst rounds: pca, dca
    p = sub.add_parser(
        "pca",
        help="run a federated PCA round against running services",
        description="Start a federated PCA round at the aggregator and wait for the result. "
        "Owners send encrypted sums of x x^T, x and counts; the result equals PCA on the pooled "
        "rows. Writes OUT/pca.json.",
    )
    _add_round_args(p, Path("out/pca"))
    p.add_argument("--standardize", action="store_true", help="PCA of the correlation matrix")
    p = sub.add_parser(
        "dca",
        help="run a federated DCA / LDA / MDR round against running services",
        description="Start a federated discriminant analysis at the aggregator. Owners send "
        "encrypted sums of x x^T and per-class sums and counts for ALL declared classes "
        "(zero-filled), so no share reveals which classes a site holds. Writes OUT/dca.json.",
    )
    _add_round_args(p, Path("out/dca"))
    _add_discriminant_args(p)
    p.add_argument(
        "--classes", type=_csv_list, required=True, help="the label's class names, e.g. 0,1,2"
    )
    p.add_argument(
        "--privacy-label-column", default=None, help="MDR: the label whose classes to hide"
    )
    p.add_argument(
        "--privacy-classes", type=_csv_list, default=None, help="MDR: the privacy label's classes"
    )

    # demos
    demo = sub.add_parser("demo", help="run a complete local deployment end to end").add_subparsers(
        dest="action", required=True, metavar="DEMO"
    )
    p = demo.add_parser(
        "pca",
        help="federated PCA demo with real processes, mTLS and 2048-bit Paillier",
        description="Start a CSP, an aggregator and N owner agents as separate local processes on "
        "loopback with fresh certificates; split a data set horizontally across the owners; run "
        "one PCA round; compare with centralized NumPy PCA; write OUT/pca.json and "
        "OUT/pca_scatter.png; stop every process.",
    )
    _add_demo_args(p, Path("out/demo-pca"), label_required=False)
    p.add_argument("--standardize", action="store_true", help="PCA of the correlation matrix")
    p = demo.add_parser(
        "dca",
        help="federated DCA / LDA / MDR demo with real processes, mTLS and 2048-bit Paillier",
        description="Like `demo pca`, for discriminant analysis: owners send per-class encrypted "
        "shares; the result is compared with the same computation on the pooled rows. Writes "
        "OUT/dca.json and OUT/dca_scatter.png.",
    )
    _add_demo_args(p, Path("out/demo-dca"), label_required=True)
    _add_discriminant_args(p, with_label=False)
    p.add_argument(
        "--privacy-label-column", default=None, help="MDR: the label whose classes to hide"
    )

    p = demo.add_parser(
        "ldp",
        help="local-DP collection demo: N owners perturb every record, the aggregator estimates",
        description="Start a CSP, an aggregator and N owner agents (each with a persistent privacy "
        "ledger), split a CSV across them, collect one column under a local-DP mechanism, and "
        "write OUT/ldp.json plus OUT/ldp_estimates.png (true vs estimated, +-2 standard errors).",
    )
    _add_ldp_args(p, Path("out/demo-ldp"))
    p.add_argument("--owners", type=int, default=3, help="number of owner agents (default: 3)")
    p.add_argument("--insecure", action="store_true", help="run without TLS (not recommended)")

    ldp = sub.add_parser("ldp", help="local differential privacy").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = ldp.add_parser(
        "simulate",
        help="perturb and estimate one column in this process, to plan epsilon",
        description="Perturb every record of one column with a local-DP mechanism and estimate "
        "frequencies (grr, sue, oue, she, the, olh) or the mean (laplace, duchi, pm, hm; needs "
        "--bounds), with standard errors from each mechanism's variance formula. Writes JSON.",
    )
    _add_ldp_args(p, Path("out/ldp/est.json"))
    p.add_argument("--seed", type=int, default=None, help="seed, for reproducible planning runs")
    p = ldp.add_parser(
        "collect",
        help="collect one column from running owner agents",
        description="Ask the aggregator for an LDP collection: every owner checks and charges its "
        "privacy ledger, perturbs every record and streams the reports. Writes OUT/ldp.json.",
    )
    p.add_argument("--aggregator", default="127.0.0.1:50052", help="aggregator address")
    p.add_argument("--column", required=True, help="column to collect")
    p.add_argument("--mechanism", required=True, choices=LDP_MECHANISMS, help="LDP mechanism")
    p.add_argument("--epsilon", type=float, required=True, help="per-record epsilon")
    p.add_argument(
        "--domain", type=_csv_list, default=None, help="frequency oracles: the public values"
    )
    p.add_argument("--bounds", type=_bounds, default=None, help="numeric mechanisms: public LO,HI")
    p.add_argument(
        "--consistency", action="store_true", help="also report non-negative counts summing to n"
    )
    p.add_argument(
        "--min-owners", type=int, default=1, help="minimum number of owners (default: 1)"
    )
    p.add_argument(
        "--out", type=Path, default=Path("out/ldp"), help="output folder (default: out/ldp)"
    )
    _add_tls(p, "analyst", "analyst")

    # anonymize
    p = sub.add_parser(
        "anonymize",
        help="k-anonymize / l-diversify / t-close a dataset on Spark (Mondrian or TDS)",
        description=ANONYMIZE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--input",
        required=True,
        metavar="PATH",
        help="CSV (with header) or Parquet: a file or folder, any Spark-readable path",
    )
    p.add_argument(
        "--config", type=Path, required=True, metavar="FILE", help="anonymization TOML file"
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="PATH",
        help="release: NAME.csv is one CSV file, any other name a Parquet folder; an existing "
        "output is replaced only when the job succeeds",
    )
    p.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="FILE.json",
        help="JSON report (default: beside --out, e.g. released.csv -> released.report.json)",
    )
    p.add_argument(
        "--format",
        choices=["csv", "parquet"],
        default=None,
        help="input format (default: from the input's name)",
    )

    # benchmarks
    from leteo_fed.bench import DESCRIPTION as BENCH_DESCRIPTION
    from leteo_fed.bench import add_pca_arguments

    bench = sub.add_parser("bench", help="benchmarks (the book's tables 9.1 and 9.2)")
    p = bench.add_subparsers(dest="action", required=True, metavar="BENCH").add_parser(
        "pca",
        help="owner, aggregator, CSP and eigendecomposition times per feature count vs phe",
        description=BENCH_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_pca_arguments(p)

    from leteo_fed.cli import kmeans as kmeans_cli  # `kmeans` and `demo kmeans`

    kmeans_cli.add_parsers(sub, demo)

    from leteo_fed.cli import dp_kmeans as dp_kmeans_cli  # `dp-kmeans` (central, on Spark)

    dp_kmeans_cli.add_parser(sub)
    return parser


def _run(args) -> int:
    if args.command == "certs":
        from leteo_fed.transport.certs import create_pki

        parties = create_pki(args.out, args.owners, args.hosts, args.days)
        print(
            f"wrote CA and {len(parties)} certificates to {args.out}: "
            + ", ".join(p.name for p in parties)
        )
        return 0
    if args.command == "csp":
        from csp.server import serve

        serve(
            args.listen,
            _tls(args),
            args.key_dir,
            args.key_bits,
            args.insecure_small_key,
            args.transcript,
        )
        return 0
    if args.command == "aggregator":
        from aggregator.server import serve

        serve(args.listen, _tls(args), args.csp, args.transcript, args.spark_report_threshold)
        return 0
    if args.command == "owner":
        from owner_agent.server import serve

        serve(args.config)
        return 0
    if args.command in ("pca", "dca"):
        return _run_round(args)
    if args.command == "ldp" or (args.command == "demo" and args.action == "ldp"):
        return _run_ldp(args)
    if args.command == "kmeans" or (args.command == "demo" and args.action == "kmeans"):
        from leteo_fed.cli import kmeans as kmeans_cli

        return kmeans_cli.run(args)
    if args.command == "demo":
        from leteo_fed.demo.runner import DemoOptions, run_demo

        discriminant = args.action == "dca"
        opts = DemoOptions(
            method=args.method if discriminant else "pca",
            privacy_label_column=getattr(args, "privacy_label_column", None),
            rho=getattr(args, "rho", None),
            rho_prime=getattr(args, "rho_prime", None),
            data=args.data,
            features=args.features,
            label_column=args.label_column,
            owners=args.owners,
            components=args.components,
            key_bits=args.key_bits,
            allow_small_key=args.insecure_small_key,
            standardize=getattr(args, "standardize", False),
            value_bound=args.value_bound,
            out=args.out,
            seed=args.seed,
            insecure=args.insecure,
            projection_only=args.projection_only,
            dp_epsilon=args.dp_epsilon,
            dp_delta=args.dp_delta,
            row_norm_bound=args.row_norm_bound,
        )
        run_demo(opts)
        return 0
    if args.command == "dp-kmeans":
        from leteo_fed.cli import dp_kmeans as dp_kmeans_cli

        return dp_kmeans_cli.run(args)
    if args.command == "anonymize":
        return _run_anonymize(args)
    if args.command == "bench":
        from leteo_fed.bench.share_bench import run_cli

        return run_cli(args)
    raise ConfigError(f"unknown command {args.command}")


def _run_round(args) -> int:
    from leteo_fed.client import AnalystClient, RoundParams
    from leteo_fed.fileio import atomic_write_json

    groupings: tuple = ()
    if args.command == "dca":
        groupings = ((args.label_column, tuple(args.classes)),)
        if args.method == "mdr":
            if not args.privacy_label_column or not args.privacy_classes:
                raise ConfigError("--method mdr needs --privacy-label-column and --privacy-classes")
            groupings += ((args.privacy_label_column, tuple(args.privacy_classes)),)
    params = RoundParams(
        features=args.features,
        method=getattr(args, "method", "pca"),
        components=args.components,
        min_owners=args.min_owners,
        deadline_seconds=args.deadline,
        standardize=getattr(args, "standardize", False),
        scale_bits=args.scale_bits,
        value_bound=args.value_bound,
        owners=tuple(args.owners),
        groupings=groupings,
        rho=getattr(args, "rho", None),
        rho_prime=getattr(args, "rho_prime", None),
        projection_only=args.projection_only,
        dp_epsilon=args.dp_epsilon,
        dp_delta=args.dp_delta,
        row_norm_bound=args.row_norm_bound,
    )
    with AnalystClient(args.aggregator, _tls(args)) as client:
        result = client.run_round(params)
    out = Path(args.out) / f"{args.command}.json"
    atomic_write_json(out, result)
    print(json.dumps({k: result[k] for k in ("round_id", "owners", "n_samples", "eigenvalues")}))
    print(f"wrote {out}", file=sys.stderr)
    return 0


def _run_ldp(args) -> int:
    from leteo_fed.demo import ldp_runner

    if args.command == "ldp" and args.action == "collect":
        from leteo_fed.client import AnalystClient, LdpParams
        from leteo_fed.fileio import atomic_write_json

        params = LdpParams(
            column=args.column,
            mechanism=args.mechanism,
            epsilon=args.epsilon,
            domain=tuple(args.domain or ()),
            lower=args.bounds[0] if args.bounds else None,
            upper=args.bounds[1] if args.bounds else None,
            min_owners=args.min_owners,
            consistency=args.consistency,
        )
        with AnalystClient(args.aggregator, _tls(args)) as client:
            result = client.run_ldp(params)
        atomic_write_json(Path(args.out) / "ldp.json", result)
        print(json.dumps({k: result[k] for k in ("round_id", "owners", "n")}))
        return 0
    opts = ldp_runner.LdpOptions(
        data=args.data,
        column=args.column,
        mechanism=args.mechanism,
        epsilon=args.epsilon,
        bounds=args.bounds,
        domain=args.domain,
        seed=getattr(args, "seed", None),
        out=args.out,
        owners=getattr(args, "owners", 3),
        consistency=args.consistency,
        insecure=getattr(args, "insecure", False),
    )
    if args.command == "demo":
        ldp_runner.run_demo(opts)
        return 0
    doc = ldp_runner.simulate(opts)
    keys = ("estimates", "std_errors") if "estimates" in doc else ("mean", "std_error")
    print(
        json.dumps(
            {
                "mechanism": doc["mechanism"],
                "epsilon": doc["epsilon"],
                "n": doc["n"],
                **{k: doc[k] for k in keys},
            }
        )
    )
    return 0


def _score(value: float | None) -> str:
    return "inf" if value is None else f"{value:.4g}"


def _run_anonymize(args) -> int:
    from leteo_fed.anonymize.job import AnonymizationFailed, run_job

    try:
        report = run_job(args.input, args.config, args.out, args.report, input_fmt=args.format)
    except AnonymizationFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rows, privacy = report["rows"], report["privacy"]
    models = [f"k={privacy['k_anonymity']['achieved']}"]
    for c, e in privacy["l_diversity"].items():
        if e["variant"] == "recursive":  # achieved is r1 / (r_l + ... + r_m), must stay < c
            models.append(f"r1/tail[{c}]={_score(e['achieved'])} (< c={e['c']:g})")
        else:
            models.append(f"l[{c}]={_score(e['achieved'])}")
    models += [f"t[{c}]={_score(e['achieved'])}" for c, e in privacy["t_closeness"].items()]
    print(
        f"released {rows['out']} of {rows['in']} rows ({rows['suppressed']} suppressed) in "
        f"{report['classes']['count']} classes; {', '.join(models)}; "
        f"GCP {report['information_loss']['gcp']:.3f}; all models hold: {privacy['all_hold']}"
    )
    print(f"wrote {report['job']['output']}")
    print(f"report: {report['job']['report']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from leteo_fed.demo.cluster import die_with_parent_if_asked

    die_with_parent_if_asked()
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    from leteo_fed.client import RoundFailed

    try:
        return _run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (PeerUnavailable, RoundFailed) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except LeteoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
