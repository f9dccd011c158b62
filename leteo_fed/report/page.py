"""A self-contained HTML page: inline style, figures as data URIs, no script, no external
request of any kind, so it opens the same offline, in a mail client or in an archive."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leteo_fed.fileio import atomic_write_bytes

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:60rem;margin:2rem auto;
padding:0 1rem;color:#1b1f24;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;
border-bottom:1px solid #d0d7de;padding-bottom:.2rem}
.sub{color:#57606a;margin-top:0}
table{border-collapse:collapse;margin:.6rem 0;font-size:.92rem}
th,td{border:1px solid #d0d7de;padding:.25rem .6rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}
.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}
.note{background:#fff8c5;border:1px solid #d4a72c;padding:.5rem .8rem;border-radius:4px}
figure{margin:1rem 0}figure img{max-width:100%;border:1px solid #d0d7de}
figcaption{color:#57606a;font-size:.88rem}
pre{background:#f6f8fa;padding:.6rem;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
"""


def text(value: Any) -> str:
    """A value as a table cell: numbers short, None as a dash, lists joined."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(text(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {text(v)}" for k, v in value.items())
    return str(value)


@dataclass
class Page:
    title: str
    subtitle: str = ""
    _parts: list[str] = field(default_factory=list)

    def section(self, title: str, intro: str = "") -> Page:
        self._parts.append(f"<h2>{html.escape(title)}</h2>")
        if intro:
            self.paragraph(intro)
        return self

    def paragraph(self, body: str, css: str = "") -> Page:
        cls = f' class="{css}"' if css else ""
        self._parts.append(f"<p{cls}>{html.escape(body)}</p>")
        return self

    def verdict(self, label: str, holds: bool | None) -> Page:
        if holds is None:
            word, css = "not configured", ""
        else:
            word, css = ("holds", "ok") if holds else ("does NOT hold", "bad")
        cls = f' class="{css}"' if css else ""
        self._parts.append(f"<p>{html.escape(label)}: <span{cls}>{word}</span></p>")
        return self

    def pairs(self, rows: Iterable[tuple[str, Any]]) -> Page:
        body = "".join(
            f"<tr><th>{html.escape(k)}</th><td>{html.escape(text(v))}</td></tr>" for k, v in rows
        )
        self._parts.append(f"<table>{body}</table>")
        return self

    def table(self, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Page:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(text(c))}</td>" for c in row) + "</tr>"
            for row in rows
        )
        self._parts.append(f"<table><tr>{head}</tr>{body}</table>")
        return self

    def figure(self, png: bytes | None, caption: str) -> Page:
        """A PNG inline; None (no [plots] extra) leaves a note instead of a broken image."""
        if png is None:
            return self.paragraph(f"({caption}: figures need the [plots] extra)", "note")
        data = base64.b64encode(png).decode("ascii")
        self._parts.append(
            f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )
        return self

    def code(self, body: str) -> Page:
        self._parts.append(f"<pre>{html.escape(body)}</pre>")
        return self

    def render(self) -> str:
        sub = f'<p class="sub">{html.escape(self.subtitle)}</p>' if self.subtitle else ""
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            # no request may leave the page: not even a favicon lookup
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            "img-src data:; style-src 'unsafe-inline'\">"
            f"<title>{html.escape(self.title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{html.escape(self.title)}</h1>{sub}{''.join(self._parts)}</body></html>\n"
        )

    def write(self, path: Path) -> None:
        atomic_write_bytes(Path(path), self.render().encode("utf-8"))
