"""The release report page of `leteo-fed anonymize`, built from its report.json alone."""

from __future__ import annotations

from typing import Any

from leteo_fed.report.figures import bars, png
from leteo_fed.report.page import Page

SYNTACTIC = (
    "k-anonymity, l-diversity and t-closeness are properties of this table: they limit what an "
    "attacker learns from it alone by linking quasi-identifiers, but give no bound for "
    "combinations with other releases and no differential privacy (epsilon is not defined)."
)


def anonymization_page(report: dict[str, Any]) -> Page:
    job, privacy = report["job"], report["privacy"]
    published = job["published"]
    page = Page(
        f"Release report: anonymization ({job['algorithm']})",
        f"leteo-fed {report.get('leteo_fed_version', '')}; "
        + ("published" if published else "NOT published: the release missed its models"),
    )
    _released(page, report)
    _guarantee(page, privacy)
    _loss(page, report["information_loss"])
    if "risk" in report:
        _risk(page, report["risk"], report["classes"], privacy["k_anonymity"]["required"])
    _parameters(page, report.get("parameters", {}))
    page.section("How to reproduce it")
    page.code(report.get("reproduce") or "(the command line was not recorded: library call)")
    page.paragraph(f"Measured on {report.get('measured_on', 'the written release')}.")
    return page


def _released(page: Page, report: dict[str, Any]) -> None:
    job, rows, ids = report["job"], report["rows"], report["identifiers"]
    page.section("What was released")
    page.pairs(
        [
            ("file", job["output"] if job["published"] else "(nothing: not published)"),
            ("format", job["output_format"]),
            ("rows", f"{rows['out']} of {rows['in']} ({rows['suppressed']} suppressed)"),
            ("equivalence classes", report["classes"]["count"]),
            ("identifiers dropped", ids["dropped"] or None),
            ("identifiers pseudonymized", ids["pseudonymized"] or None),
            ("pseudonyms", ids["pseudonym"]),
            ("engine", job["engine"].get("used")),
        ]
    )


def _guarantee(page: Page, privacy: dict[str, Any]) -> None:
    k = privacy["k_anonymity"]
    page.section("The guarantee", SYNTACTIC)
    page.verdict(
        f"k-anonymity with k = {k['required']} (smallest class {k['achieved']})", k["holds"]
    )
    for column, e in privacy["l_diversity"].items():
        if e["required_l"] is not None:
            page.verdict(
                f"{e['variant']} l-diversity of '{column}' with l = {e['required_l']} "
                f"(achieved {e['achieved']})",
                e["holds"],
            )
    for column, e in privacy["t_closeness"].items():
        if e["required_t"] is not None:
            page.verdict(
                f"t-closeness of '{column}' with t = {e['required_t']} ({e['distance']} "
                f"distance; achieved {e['achieved']:.4g})",
                e["holds"],
            )
    page.verdict("every configured model", privacy["all_hold"])


def _loss(page: Page, loss: dict[str, Any]) -> None:
    page.section(
        "Information loss",
        "NCP: the share of each quasi-identifier's range or hierarchy a released value spans, "
        "0 = exact, 1 = fully generalized or suppressed.",
    )
    ncp = loss["ncp"]
    page.table(["quasi-identifier", "NCP"], ncp.items())
    page.pairs(
        [
            ("GCP (mean NCP)", loss["gcp"]),
            ("discernibility", loss["discernibility"]),
            ("average class size / k (1 is ideal)", loss["average_class_size"]),
        ]
    )
    page.figure(bars(list(ncp), list(ncp.values()), "quasi-identifier", "NCP"), "NCP per QI")


def _risk(page: Page, risk: dict[str, Any], classes: dict[str, Any], k: int) -> None:
    p = risk["prosecutor"]
    page.section(
        "Re-identification risk",
        "Prosecutor model: the attacker knows the person is in the release and their "
        "quasi-identifiers; each record of a class of f rows is theirs with probability 1/f. "
        "Marketer model: the attacker links every record; on average one per class is right.",
    )
    page.pairs(
        [
            ("highest prosecutor risk", p["highest"]),
            ("average prosecutor risk", p["average"]),
            (f"records with risk above {p['threshold']:g}", f"{p['records_at_risk']:.2%}"),
            ("records at the highest risk", f"{p['records_at_highest_risk']:.2%}"),
            ("marketer risk", risk["marketer"]["average"]),
            ("sample uniques", f"{risk['sample_uniques']:.2%}"),
        ]
    )
    dist = classes.get("size_distribution")
    if dist:
        size, count = dist["size"], dist["classes"]

        def draw(ax: Any) -> None:
            ax.bar(size, [s * c for s, c in zip(size, count, strict=True)], color="#0969da")
            ax.axvline(k - 0.5, color="#cf222e", linestyle="--", label=f"k = {k}")
            ax.axvline(
                1 / p["threshold"] - 0.5,
                color="#9a6700",
                linestyle=":",
                label=f"risk {p['threshold']:g}",
            )
            ax.set_xlabel("class size f (record risk 1/f)")
            ax.set_ylabel("records")
            ax.legend()

        page.figure(png(draw), "records by the size of their class: smaller is riskier")


def _parameters(page: Page, parameters: dict[str, Any]) -> None:
    page.section("Parameters and where they came from")
    page.table(
        ["parameter", "value", "source"],
        [(name, e["value"], e["source"]) for name, e in parameters.items()],
    )
