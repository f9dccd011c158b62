"""The CLI as a user meets it: help that explains, one-line errors with exit code 2, and the
full demo on a data set that is not in the repository."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from sklearn.datasets import load_wine

from leteo_fed.protocols.pca import reference_pca


def run_cli(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "leteo_fed", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["csp", "serve"],
        ["aggregator", "serve"],
        ["owner", "serve"],
        ["pca"],
        ["demo", "pca"],
        ["certs"],
    ],
)
def test_help_explains_every_command(args):
    proc = run_cli(*args, "--help")
    assert proc.returncode == 0
    assert "usage: leteo-fed" in proc.stdout
    assert len(proc.stdout.splitlines()) > 5


def test_malformed_owner_config_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "owner.toml"
    bad.write_text('site_id = "site-1"\nlisten = [unclosed\n')
    proc = run_cli("owner", "serve", "--config", str(bad))
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error:") and "not valid TOML" in proc.stderr
    assert "Traceback" not in proc.stderr

    missing = tmp_path / "owner2.toml"
    missing.write_text(
        'site_id = "site-1"\nlisten = "127.0.0.1:0"\n[peers]\naggregator="a:1"\ncsp="c:1"\n'
    )
    proc = run_cli("owner", "serve", "--config", str(missing))
    assert proc.returncode == 2 and "'data'" in proc.stderr


def test_small_key_needs_explicit_flag(tmp_path):
    proc = run_cli(
        "csp", "serve", "--key-bits", "1024", "--key-dir", str(tmp_path / "k"), "--insecure"
    )
    assert proc.returncode == 2 and "--insecure-small-key" in proc.stderr
    assert not (tmp_path / "k").exists()  # refused before any key (or folder) is written


def test_missing_certificates_named(tmp_path):
    proc = run_cli(
        "aggregator", "serve", "--tls-dir", str(tmp_path / "nowhere"), "--listen", "127.0.0.1:0"
    )
    assert proc.returncode == 2 and "ca" in proc.stderr and "not found" in proc.stderr


def test_pca_against_nothing_is_a_clear_failure(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "leteo_fed",
            "certs",
            "--out",
            str(tmp_path / "c"),
            "--owners",
            "s1",
        ],
        check=True,
        capture_output=True,
    )
    proc = run_cli(
        "pca",
        "--aggregator",
        "127.0.0.1:9",
        "--features",
        "a,b",
        "--tls-dir",
        str(tmp_path / "c"),
        "--out",
        str(tmp_path / "o"),
    )
    assert proc.returncode == 1 and "aggregator at 127.0.0.1:9" in proc.stderr
    assert not (tmp_path / "o" / "pca.json").exists()


def test_demo_bad_inputs(tmp_path):
    proc = run_cli("demo", "pca", "--owners", "1", "--out", str(tmp_path))
    assert proc.returncode == 2 and "--owners" in proc.stderr
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,y\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n")
    proc = run_cli(
        "demo", "pca", "--data", str(csv), "--features", "a,zz", "--out", str(tmp_path / "o")
    )
    assert proc.returncode == 2 and "'zz'" in proc.stderr
    proc = run_cli(
        "demo", "pca", "--data", str(tmp_path / "none.csv"), "--out", str(tmp_path / "o")
    )
    assert proc.returncode == 2 and "not found" in proc.stderr


@pytest.mark.slow
def test_demo_on_external_csv_matches_numpy(tmp_path):
    """The issue's acceptance run: a CSV not in the repository, 4 owners, 3 components."""
    bunch = load_wine()
    names = [n.replace("/", "_") for n in bunch.feature_names]
    table = pa.table(
        {**{n: bunch.data[:, i] for i, n in enumerate(names)}, "cultivar": bunch.target}
    )
    data = tmp_path / "wine.csv"
    pacsv.write_csv(table, data)
    out = tmp_path / "demo"
    proc = run_cli(
        "demo",
        "pca",
        "--data",
        str(data),
        "--label-column",
        "cultivar",
        "--owners",
        "4",
        "--components",
        "3",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "pca.json").read_text())
    for key in (
        "eigenvalues",
        "components",
        "explained_variance_ratio",
        "mean",
        "features",
        "n_samples",
        "owners",
        "timings",
    ):
        assert key in result
    assert result["features"] == names  # the label is not a feature
    assert len(result["owners"]) == 4 and result["n_samples"] == 178
    evals, comps, mean = reference_pca(bunch.data, 3)
    np.testing.assert_allclose(result["eigenvalues"], evals, rtol=1e-9)
    cos = np.abs(np.sum(np.array(result["components"]).T * comps, axis=0))
    assert np.all(cos >= 1 - 1e-9)
    assert set(result["timings"]) >= {"owners", "aggregator", "csp", "demo"}
    png = (out / "pca_scatter.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert "Federated PCA vs the same computation on the pooled rows" in proc.stdout
    # every child process is gone
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(out) not in ps


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "delay"), [("SIGINT", 0.6), ("SIGTERM", 0.6), ("SIGINT", 1.8)])
def test_demo_interrupted_leaves_no_processes(tmp_path, sig, delay):
    import signal
    import time

    out = tmp_path / "demo"
    proc = subprocess.Popen(
        [sys.executable, "-m", "leteo_fed", "demo", "pca", "--owners", "3", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    for line in proc.stdout:  # the split is done; the services are starting (takes seconds)
        lines.append(line)
        if "split rows" in line:
            break
    time.sleep(delay)  # services spawned, start-up (gRPC health polling) under way
    children = subprocess.run(
        ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
    ).stdout.split()
    assert len(children) >= 2, lines
    proc.send_signal(getattr(signal, sig))
    rest = proc.stdout.read()
    assert proc.wait(30) == 130, rest
    assert "interrupted" in rest
    time.sleep(0.5)
    alive = [
        pid
        for pid in children
        if Path(f"/proc/{pid}").exists()
        and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    ]
    assert not alive
    assert not (out / "pca.json").exists()


def test_demo_small_key_needs_explicit_flag(tmp_path):
    proc = run_cli("demo", "pca", "--key-bits", "1024", "--out", str(tmp_path))
    assert proc.returncode == 2 and "--insecure-small-key" in proc.stderr


@pytest.mark.parametrize(
    "args, says",
    [
        (["--key-bits", "1024"], "--insecure-small-key"),
        (["--threshold", "2"], "--threshold needs --keyholders"),
        (["--keyholders", "4", "--threshold", "2"], "--keyholders 4 --threshold 2"),
    ],
)
def test_simulate_refuses_the_demos_key_flags_as_the_demos_do(tmp_path, args, says):
    out = tmp_path / "sim"
    proc = run_cli("simulate", "--owners", "2", *args, "--out", str(out))
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert not out.exists()  # refused before anything is written or started


# ---------------------------------------------------------------------------- module layout

CLI_DIR = Path(__file__).resolve().parents[3] / "leteo_fed" / "cli"


def cli_imports() -> dict[str, set[str]]:
    """For each module of leteo_fed/cli, the other leteo_fed/cli modules it imports (anywhere)."""
    import ast

    names = {p.stem for p in CLI_DIR.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in CLI_DIR.glob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "leteo_fed.cli":
                found |= {a.name for a in node.names if a.name in names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "leteo_fed.cli."
            ):
                found.add(node.module.split(".")[2])
            elif isinstance(node, ast.Import):
                found |= {
                    a.name.split(".")[2] for a in node.names if a.name.startswith("leteo_fed.cli.")
                }
        graph[path.stem] = found
    return graph


def test_cli_modules_form_no_import_cycle():
    graph = cli_imports()
    assert not any("main" in deps for name, deps in graph.items() if name != "main")
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"import cycle: {' -> '.join((*path, name))}"
        if name not in done:
            for dep in graph.get(name, ()):
                visit(dep, (*path, name))
            done.add(name)

    for name in graph:
        visit(name, ())


def test_help_imports_no_service_or_heavy_module():
    """Building the parser and printing help must stay quick: gRPC, the services, Spark,
    plotting and benchmark libraries are imported only when a command runs."""
    code = (
        "import json, sys\n"
        "from leteo_fed.cli.main import main\n"
        "try:\n"
        "    main(['owner', 'serve', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted({m.partition('.')[0] for m in sys.modules})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    heavy = {"grpc", "aggregator", "csp", "owner_agent", "pyspark", "pandas", "matplotlib"}
    heavy |= {"sklearn", "phe", "scipy", "cryptography"}
    assert not loaded & heavy


def test_defaults_in_help_come_from_one_place():
    from leteo_fed import defaults
    from leteo_fed.cli.main import build_parser

    args = build_parser().parse_args(["pca", "--features", "a"])
    assert args.deadline == defaults.DEFAULT_DEADLINE_SECONDS
    assert args.min_owners == 0  # the protocol's default: DEFAULT_QUORUM, capped by the invited
    assert args.aggregator == defaults.DEFAULT_AGGREGATOR_ADDRESS
    args = build_parser().parse_args(["kmeans", "--features", "a"])
    assert args.deadline == defaults.DEFAULT_DEADLINE_SECONDS
    args = build_parser().parse_args(["ldp", "collect", "--column", "c", "--mechanism", "grr",
                                      "--epsilon", "1"])  # fmt: skip
    assert args.min_owners == defaults.MIN_QUORUM_LDP
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    helps = {a.dest: a.help for a in commands["pca"]._actions}
    assert helps["deadline"] == "round deadline in seconds (default: 120)"
    assert helps["dp_delta"] == "DP delta (default: 1e-6)"
    assert helps["value_bound"] == "declared max |x| (default: 1e6)"


def test_central_jobs_write_into_an_out_folder_like_every_command():
    """`dp-kmeans` and `anonymize` take `--out DIR` with a default, as the federated commands do;
    the file names inside it are fixed and shown in the help."""
    from pathlib import Path

    from leteo_fed.cli.main import build_parser

    parser = build_parser()
    kmeans = parser.parse_args(["dp-kmeans", "--data", "x.csv", "--k", "2", "--epsilon", "1",
                                "--method", "eugkm"])  # fmt: skip
    assert kmeans.out == Path("out/dp-kmeans")
    anonymize = parser.parse_args(["anonymize", "--input", "x.csv", "--config", "a.toml"])
    assert (anonymize.out, anonymize.release_format) == ("out/anonymize", "csv")
    assert not hasattr(anonymize, "report")
    commands = next(a for a in parser._actions if a.dest == "command").choices
    helps = {a.dest: a.help for a in commands["dp-kmeans"]._actions}
    assert "DIR/dp_kmeans.json and DIR/dp_kmeans.png" in helps["out"]
    helps = {a.dest: a.help for a in commands["anonymize"]._actions}
    assert "DIR/release.csv (or .parquet) and DIR/report.json" in helps["out"]


def test_anonymize_out_folder_paths(tmp_path):
    from leteo_fed.cli.anonymize import output_paths
    from leteo_fed.errors import ConfigError

    assert output_paths(str(tmp_path / "o"), "csv", "in.csv") == (
        tmp_path / "o" / "release.csv",
        tmp_path / "o" / "report.json",
    )
    release, _ = output_paths(f"file://{tmp_path}/o", "parquet", "hdfs:///pool/in.parquet")
    assert release == tmp_path / "o" / "release.parquet"
    refused = [
        ("hdfs:///pool/out", "csv", "in.csv", "must be a local folder"),
        (str(tmp_path), "csv", str(tmp_path / "release.csv"), "would overwrite the input"),
        (str(tmp_path), "csv", f"file://{tmp_path}/report.json", "would overwrite the input"),
        (str(tmp_path), "parquet", str(tmp_path / "release.parquet" / "p.parquet"), "overwrite"),
        (str(tmp_path / "in" / "o"), "csv", str(tmp_path / "in"), "is the input"),
        (str(tmp_path), "csv", str(tmp_path), "or inside it"),
    ]
    for out, fmt, data, message in refused:
        with pytest.raises(ConfigError, match=message):
            output_paths(out, fmt, data)
    assert output_paths(str(tmp_path), "csv", str(tmp_path / "release.parquet"))[0].name == (
        "release.csv"
    )  # the other format's name is not the release of this run


LDP_SIMULATE = ["ldp", "simulate", "--data", "x.csv", "--column", "a", "--mechanism", "duchi"]
LDP_SIMULATE += ["--epsilon", "1"]
DP_KMEANS = ["dp-kmeans", "--data", "x.csv", "--k", "2", "--epsilon", "1", "--method", "eugkm"]
DP_KMEANS += ["--out", "o"]
KMEANS = ["kmeans", "--features", "a,b", "--k", "2"]


@pytest.mark.parametrize(
    "argv, dest, expected",
    [
        ([*LDP_SIMULATE, "--bounds", "-1,1"], "bounds", (-1.0, 1.0)),
        ([*DP_KMEANS, "--bounds", "-3,3,-0.5,2e1"], "bounds", (-3.0, 3.0, -0.5, 20.0)),
        ([*KMEANS, "--init-bounds", "-1.5,1"], "flag_init_bounds", (-1.5, 1.0)),
    ],
)
def test_bounds_with_a_negative_first_value_need_no_equals_sign(argv, dest, expected):
    """argparse alone reads `-1,1` after `--bounds` as an option and refuses the line."""
    from leteo_fed.cli.main import build_parser
    from leteo_fed.cli.options import join_negative_values

    parser = build_parser()
    with pytest.raises(SystemExit):  # what a user saw before
        parser.parse_args(argv)
    args = parser.parse_args(join_negative_values(parser, argv))
    assert tuple(getattr(args, dest)) == pytest.approx(expected)
    equals = [*argv[:-2], f"{argv[-2]}={argv[-1]}"]  # the = form still works
    assert tuple(getattr(parser.parse_args(equals), dest)) == pytest.approx(expected)


def test_negative_values_are_joined_only_after_options_that_take_a_value():
    from leteo_fed.cli.main import build_parser
    from leteo_fed.cli.options import join_negative_values

    parser = build_parser()
    assert join_negative_values(parser, ["dp-kmeans", "--bounds", "-1,1"]) == [
        "dp-kmeans",
        "--bounds=-1,1",
    ]
    # a flag, a non-number, and everything after `--` are left as they are
    unchanged = ["ldp", "collect", "--consistency", "-1", "--column", "-x", "--", "--bounds", "-1"]
    assert join_negative_values(parser, unchanged) == unchanged


def test_bounds_with_a_negative_first_value_through_the_cli(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "z.csv"
    pacsv.write_csv(pa.table({"a": rng.uniform(-1, 1, 200), "b": rng.uniform(-1, 1, 200)}), path)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "leteo_fed",
            "ldp",
            "simulate",
            "--data",
            str(path),
            "--column",
            "a",
            "--mechanism",
            "duchi",
            "--epsilon",
            "1",
            "--bounds",
            "-1,1",
            "--seed",
            "1",
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["jobs", "--insecure", "--aggregator", "127.0.0.1"], "--aggregator"),
        (["pca", "--features", "a", "--insecure", "--aggregator", "127.0.0.1"], "--aggregator"),
        (["aggregator", "serve", "--insecure", "--csp", "localhost"], "--csp"),
        (["aggregator", "serve", "--insecure", "--listen", "127.0.0.1:70000"], "--listen"),
        (["csp", "serve", "--insecure", "--listen", "[::1"], "--listen"),
        (["owner", "init", "--site-id", "s", "--out", "s.toml", "--csp", "h:"], "--csp"),
        (["health", "127.0.0.1"], "address"),
    ],
)
def test_an_address_without_a_port_is_a_usage_error_naming_the_flag(tmp_path, args, flag):
    """Bad input exits 2 with argparse's usage line, before anything is dialled or bound."""
    proc = run_cli(*args, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"argument {flag}: must be host:port" in proc.stderr
    assert proc.stderr.startswith("usage: leteo-fed")
    assert "Traceback" not in proc.stderr and "UNAVAILABLE" not in proc.stderr
    assert not (tmp_path / "s.toml").exists()


@pytest.mark.parametrize("address", ["127.0.0.1:50052", "agg.example.org:443", "[::1]:8080"])
def test_addresses_a_user_writes_are_taken_as_they_are(address):
    from leteo_fed.cli.options import host_port, listen_address

    assert host_port(address) == address
    assert listen_address(address) == address
    assert listen_address("0.0.0.0:0") == "0.0.0.0:0"


def test_an_output_folder_that_cannot_be_written_is_refused_before_any_round(tmp_path):
    """One line and exit 2 before the aggregator is contacted (nothing listens at :9): no round
    starts, no budget is spent, for a result that could not be saved."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    proc = run_cli(
        "pca", "--aggregator", "127.0.0.1:9", "--features", "a,b", "--insecure",
        "--out", str(blocker / "out"),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "--out" in proc.stderr and "cannot write there" in proc.stderr
    assert "Traceback" not in proc.stderr and "127.0.0.1:9" not in proc.stderr
