"""How the console shows bytes and series: message fields as JSON, text or hex; SVG line charts.

Charts are drawn on the server as inline SVG, so a page needs no chart library and a refreshed
fragment carries its own chart. Everything here returns plain strings; the templates escape them,
except the SVG, which is built only from numbers and escaped labels.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

MAX_SHOWN_BYTES = 64 * 1024
COLOURS = ("#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2")


@dataclass(frozen=True)
class Shown:
    kind: str  # "json", "text", "hex" or "null"; "avro", "json" or "protobuf" decoded with a registered schema
    text: str
    size: int
    schema_id: int | None = None  # the registry's id, when the bytes were decoded with its schema


def show_bytes(data: bytes | None) -> Shown:
    """JSON (pretty) when the bytes parse as JSON, text when they are printable UTF-8, hex otherwise."""
    if data is None:
        return Shown("null", "null", 0)
    size = len(data)
    cut = data[:MAX_SHOWN_BYTES]
    suffix = f" … ({size} bytes)" if size > MAX_SHOWN_BYTES else ""
    try:
        text = cut.decode("utf-8")
    except UnicodeDecodeError:
        return Shown("hex", cut.hex(" ") + suffix, size)
    if text.strip() and not suffix:
        try:
            parsed = json.loads(text)
        except ValueError:
            pass
        else:
            if isinstance(parsed, (dict, list)):
                return Shown("json", json.dumps(parsed, indent=2, ensure_ascii=False), size)
    if all(c.isprintable() or c in "\t\n\r" for c in text):
        return Shown("text", text + suffix, size)
    return Shown("hex", cut.hex(" ") + suffix, size)


def show_time(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def show_size(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def show_rate(rate: float | None) -> str:
    if rate is None:
        return "-"
    return f"{rate:.1f}/s" if rate < 100 else f"{rate:,.0f}/s"


def line_chart(
    series: dict[str, list[tuple[float, float]]], title: str, unit: str = "", width: int = 640, height: int = 180
) -> str:
    """An SVG chart of named (time, value) series on one shared time axis, newest on the right."""
    pad_left, pad_right, pad_top, pad_bottom = 56, 12, 24, 22
    points = [pt for values in series.values() for pt in values]
    parts = [
        (
            f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'role="img" aria-label="{escape(title)}">'
        ),
        f'<text x="{pad_left}" y="15" class="chart-title">{escape(title)}</text>',
    ]
    if not points:
        parts.append(
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" class="chart-empty">'
            "collecting samples…</text></svg>"
        )
        return "".join(parts)
    t0, t1 = min(t for t, _ in points), max(t for t, _ in points)
    top = max(v for _, v in points) or 1.0
    span = (t1 - t0) or 1.0
    inner_w, inner_h = width - pad_left - pad_right, height - pad_top - pad_bottom

    def x(t: float) -> float:
        return pad_left + (t - t0) / span * inner_w

    def y(v: float) -> float:
        return pad_top + inner_h - v / top * inner_h

    for fraction in (0.0, 0.5, 1.0):
        gy = pad_top + inner_h - fraction * inner_h
        parts.append(f'<line x1="{pad_left}" y1="{gy:.1f}" x2="{width - pad_right}" y2="{gy:.1f}" class="grid"/>')
        parts.append(
            f'<text x="{pad_left - 4}" y="{gy + 4:.1f}" text-anchor="end" class="axis">'
            f"{_number(top * fraction)}{escape(unit)}</text>"
        )
    parts.append(
        f'<text x="{pad_left}" y="{height - 4}" class="axis">-{span:.0f} s</text>'
        f'<text x="{width - pad_right}" y="{height - 4}" text-anchor="end" class="axis">now</text>'
    )
    legend_x = pad_left + 200
    for index, (name, values) in enumerate(series.items()):
        colour = COLOURS[index % len(COLOURS)]
        if values:
            path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in values)
            top_value = max(v for _, v in values)
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}" '
                f'data-series="{escape(name)}" data-max="{top_value:g}"/>'
            )
        last = values[-1][1] if values else 0
        parts.append(
            f'<text x="{legend_x}" y="15" fill="{colour}" class="legend">{escape(name)}: '
            f"{_number(last)}{escape(unit)}</text>"
        )
        legend_x += 8 * (len(name) + 12)
    parts.append("</svg>")
    return "".join(parts)


def _number(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value == int(value):
        return str(int(value))
    return f"{value:.1f}"
