"""Per-second series of the perf tools, written as CSV (``--csv FILE``) and drawn as a chart (``--plot FILE``).

A row is taken once a second from counters the tools keep anyway, so sampling adds nothing per record;
rates are over the row's own interval (a little over a second, and the last one shorter), and its
count column sums to the run's total. The chart is an HTML page with one hand-drawn inline SVG line
chart per column, readable offline and with no extra dependency; ``--plot FILE.svg`` writes the
SVG alone, and ``--plot FILE.png`` uses matplotlib when it is installed.
"""

from __future__ import annotations

import csv
import html
import time

from strom.cli.client_props import ToolError

WIDTH, HEIGHT, MARGIN_X, MARGIN_Y = 640, 200, 64, 28


class Series:
    """Rows of ``(time_s, count, *derived)``: ``derive(count, bytes, extra, seconds)`` gives the rest."""

    def __init__(self, title: str, columns: tuple[str, ...], derive, interval_s: float = 1.0):
        self.title = title
        self.columns = ("time_s", *columns)
        self.derive = derive
        self.interval_s = interval_s
        self.start = self.last = time.monotonic()
        self.marks = (0, 0, 0.0)  # count, bytes, extra (e.g. total latency) at the start of the row
        self.rows: list[tuple] = []

    def sample(self, now: float, count: int, nbytes: int, extra: float = 0.0, final: bool = False) -> None:
        """Close the current row if a second has passed (or, with ``final``, whatever is left of it)."""
        seconds = now - self.last
        if seconds < self.interval_s and not (final and count > self.marks[0]):
            return
        count0, bytes0, extra0 = self.marks
        self.rows.append(
            (
                round(now - self.start, 3),
                count - count0,
                *self.derive(count - count0, nbytes - bytes0, extra - extra0, max(seconds, 1e-9)),
            )
        )
        self.last = now
        self.marks = (count, nbytes, extra)

    def write(self, csv_path: str | None, plot_path: str | None) -> None:
        try:
            if csv_path:
                with open(csv_path, "w", encoding="utf-8", newline="") as handle:
                    writer = csv.writer(handle, lineterminator="\n")
                    writer.writerow(self.columns)
                    writer.writerows(self.rows)
            if plot_path:
                self._plot(plot_path)
        except OSError as exc:
            raise ToolError(f"cannot write {exc.filename}: {exc.strerror}") from None

    def _plot(self, path: str) -> None:
        if path.lower().endswith(".png"):
            self._png(path)
            return
        charts = [
            svg_chart(name, [(row[0], row[i]) for row in self.rows]) for i, name in enumerate(self.columns[1:], 1)
        ]
        if path.lower().endswith(".svg"):
            content = svg_stack(charts)
        else:
            content = (
                f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{html.escape(self.title)}'
                '</title></head>\n<body style="font-family: sans-serif">\n'
                f'<h1 style="font-size: 1.2em">{html.escape(self.title)}</h1>\n'
                + "\n".join(charts)
                + "\n</body></html>\n"
            )
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(content)

    def _png(self, path: str) -> None:
        try:
            import matplotlib

            matplotlib.use("Agg")
            from matplotlib import pyplot
        except ImportError:
            raise ToolError(
                f"cannot draw {path}: PNG needs matplotlib, which is not installed; "
                "use --plot FILE.html (or .svg) instead"
            ) from None
        names = self.columns[1:]
        figure, axes = pyplot.subplots(len(names), 1, figsize=(8, 2.2 * len(names)), sharex=True, squeeze=False)
        times = [row[0] for row in self.rows]
        for i, (name, axis) in enumerate(zip(names, axes[:, 0]), 1):
            axis.plot(times, [row[i] for row in self.rows])
            axis.set_ylabel(name)
        axes[-1, 0].set_xlabel("time_s")
        figure.suptitle(self.title)
        figure.savefig(path)
        pyplot.close(figure)


def svg_chart(name: str, points: list[tuple[float, float]]) -> str:
    """One line chart: y from 0 to the maximum, x over the run, the extremes labelled."""
    top = max([y for _, y in points] + [0]) or 1
    right = max([x for x, _ in points] + [0]) or 1
    plot_w, plot_h = WIDTH - 2 * MARGIN_X, HEIGHT - 2 * MARGIN_Y

    def xy(x: float, y: float) -> str:
        return f"{MARGIN_X + x / right * plot_w:.1f},{MARGIN_Y + plot_h - y / top * plot_h:.1f}"

    line = " ".join(xy(x, y) for x, y in points)
    label = html.escape(name)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">'
        f"<title>{label}</title>"
        f'<text x="{MARGIN_X}" y="16" font-weight="bold">{label}</text>'
        f'<line x1="{MARGIN_X}" y1="{MARGIN_Y}" x2="{MARGIN_X}" y2="{MARGIN_Y + plot_h}" stroke="#888"/>'
        f'<line x1="{MARGIN_X}" y1="{MARGIN_Y + plot_h}" x2="{MARGIN_X + plot_w}" y2="{MARGIN_Y + plot_h}" '
        f'stroke="#888"/>'
        f'<text x="{MARGIN_X - 6}" y="{MARGIN_Y + 4}" text-anchor="end">{_number(top)}</text>'
        f'<text x="{MARGIN_X - 6}" y="{MARGIN_Y + plot_h + 4}" text-anchor="end">0</text>'
        f'<text x="{MARGIN_X + plot_w}" y="{MARGIN_Y + plot_h + 16}" text-anchor="end">{_number(right)} s</text>'
        f'<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{line}"/></svg>'
    )


def svg_stack(charts: list[str]) -> str:
    """The charts one below the other in one SVG document."""
    inner = "".join(f'<g transform="translate(0,{i * HEIGHT})">{chart}</g>' for i, chart in enumerate(charts))
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT * len(charts)}">{inner}</svg>\n'


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"
