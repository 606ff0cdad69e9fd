"""``strom gen-access-log --rate N [--count N] [--out FILE]``: realistic nginx access-log lines.

Lines are nginx's ``combined`` format::

    203.0.113.7 - - [22/Nov/2026:08:12:13 +0000] "GET /products/42 HTTP/1.1" 200 5123 "https://www.google.com/" "Mozilla/5.0 (...)"

Client IPs come from a pool where a few addresses (crawlers, offices behind NAT) send much of
the traffic; URLs follow a Zipf-like popularity (a handful of pages get most views); status
codes are mostly 200 with some 304/301/404 and rare 5xx; user agents and referrers are drawn
from real-looking lists; timestamps are the wall clock (or a given start and rate). Lines are
written at ``--rate`` lines per second, paced in 0.1 s ticks, and flushed each tick so a tailer
sees them as they come; ``--count`` stops after that many lines. ``--out`` appends to a file.
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
import time
from datetime import UTC, datetime

# public-looking first octets (no 10/8, 127/8)
FIRST_OCTETS = tuple(o for o in range(1, 224) if o not in (10, 127))
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

SECTIONS = [
    ("/", 1),
    ("/products/{}", 400),
    ("/category/{}", 40),
    ("/blog/{}", 120),
    ("/search?q={}", 200),
    ("/cart", 1),
    ("/checkout", 1),
    ("/account/login", 1),
    ("/static/app.{}.js", 3),
    ("/static/style.{}.css", 3),
    ("/api/v1/items/{}", 300),
    ("/about", 1),
    ("/favicon.ico", 1),
]
SEARCH_WORDS = ("shoes", "jacket", "lamp", "coffee", "desk", "chair", "phone", "cable", "book", "socks")
STATUSES = (
    (200, 0.80),
    (304, 0.07),
    (301, 0.03),
    (302, 0.02),
    (404, 0.05),
    (403, 0.005),
    (500, 0.015),
    (502, 0.005),
    (503, 0.005),
)
METHODS = (("GET", 0.9), ("POST", 0.08), ("HEAD", 0.02))
AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    "curl/8.5.0",
    "python-requests/2.31.0",
)
AGENT_WEIGHTS = (30, 18, 8, 20, 14, 4, 2, 2, 2)
REFERRERS = (
    "-",
    "https://www.google.com/",
    "https://www.bing.com/",
    "https://duckduckgo.com/",
    "https://news.ycombinator.com/",
    "https://t.co/xyz",
    "https://shop.example.com/",
)
REFERRER_WEIGHTS = (40, 30, 5, 5, 3, 2, 15)


@functools.lru_cache(maxsize=64)
def nginx_time(epoch: int) -> str:
    """``22/Nov/2026:08:12:13 +0000`` ($time_local, in UTC) of a whole second."""
    t = datetime.fromtimestamp(epoch, tz=UTC)
    return f"{t.day:02d}/{MONTHS[t.month - 1]}/{t.year}:{t.hour:02d}:{t.minute:02d}:{t.second:02d} +0000"


class AccessLogGenerator:
    """Deterministic for a given seed: ``line(epoch)`` returns one combined-format line."""

    def __init__(self, seed: int | None = None, n_ips: int = 5000, n_urls: int = 2000, zipf_s: float = 1.1):
        self.rng = random.Random(seed)
        rng = self.rng
        self.ips = [
            f"{rng.choice(FIRST_OCTETS)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
            for _ in range(n_ips)
        ]
        # Zipf-like weights: rank r gets 1/r^s (heavy hitters first)
        self.ip_weights = _cumulative([1.0 / (r**0.9) for r in range(1, n_ips + 1)])
        urls: dict[str, None] = {"/": None}  # insertion-ordered set: rank = order of first draw
        for _ in range(n_urls * 20):
            if len(urls) >= n_urls:
                break
            template, n = SECTIONS[rng.randrange(len(SECTIONS))]
            value = rng.choice(SEARCH_WORDS) if "q=" in template else rng.randint(1, n)
            urls[template.format(value) if "{}" in template else template] = None
        self.urls = list(urls)
        self.url_weights = _cumulative([1.0 / (r**zipf_s) for r in range(1, len(self.urls) + 1)])
        self.statuses = [s for s, _ in STATUSES]
        self.status_weights = _cumulative([w for _, w in STATUSES])
        self.methods = [m for m, _ in METHODS]
        self.method_weights = _cumulative([w for _, w in METHODS])
        self.agent_weights = _cumulative(AGENT_WEIGHTS)
        self.referrer_weights = _cumulative(REFERRER_WEIGHTS)

    def line(self, epoch: float) -> str:
        rng = self.rng
        pick = rng.choices
        ip = pick(self.ips, cum_weights=self.ip_weights)[0]
        url = pick(self.urls, cum_weights=self.url_weights)[0]
        status = pick(self.statuses, cum_weights=self.status_weights)[0]
        method = pick(self.methods, cum_weights=self.method_weights)[0]
        agent = pick(AGENTS, cum_weights=self.agent_weights)[0]
        referrer = pick(REFERRERS, cum_weights=self.referrer_weights)[0]
        size = 0 if status in (301, 302, 304) or method == "HEAD" else int(rng.lognormvariate(8.5, 1.0))
        return f'{ip} - - [{nginx_time(int(epoch))}] "{method} {url} HTTP/1.1" {status} {size} "{referrer}" "{agent}"'

    def lines(self, count: int, start_epoch: float, per_second: float) -> list[str]:
        """``count`` lines with timestamps from ``start_epoch`` at ``per_second`` lines a second."""
        return [self.line(start_epoch + i / per_second) for i in range(count)]


def _cumulative(weights) -> list[float]:
    out, total = [], 0.0
    for w in weights:
        total += w
        out.append(total)
    return out


def generate(rate: float, count: int | None, out, stop=None, seed: int | None = None, on_tick=None) -> int:
    """Write lines to ``out`` at ``rate`` lines/s (wall-clock timestamps) until ``count`` or ``stop()``."""
    gen = AccessLogGenerator(seed)
    written = 0
    tick = 0.1
    started = time.monotonic()
    while count is None or written < count:
        if stop is not None and stop():
            break
        due = int((time.monotonic() - started) * rate) + 1
        n = due - written if count is None else min(due, count) - written
        if n > 0:
            now = time.time()
            out.write("".join(gen.line(now) + "\n" for _ in range(n)))
            out.flush()
            written += n
            if on_tick is not None:
                on_tick(written)
        time.sleep(tick)
    return written


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, required=True, help="lines per second")
    parser.add_argument(
        "--count", type=int, default=None, help="stop after this many lines (default: run until Ctrl-C)"
    )
    parser.add_argument("--out", default=None, help="append to this file (default: standard output)")
    parser.add_argument("--seed", type=int, default=None, help="random seed, for repeatable output")


def run(args: argparse.Namespace) -> int:
    if args.rate <= 0:
        print("--rate must be positive", file=sys.stderr)
        return 2
    out = open(args.out, "a", encoding="utf-8") if args.out else sys.stdout
    try:
        generate(args.rate, args.count, out, seed=args.seed)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        return 0
    finally:
        if args.out:
            out.close()
    return 0
