"""A tiny PNG line plot in pure Python (zlib + struct): the scaling curve, without matplotlib.

Draws axes, ticks, lines with point markers and text in a 3×5 bitmap font (upper case, digits,
a few signs), and writes an 8-bit RGB PNG.
"""

from __future__ import annotations

import itertools
import math
import struct
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

Color = tuple[int, int, int]

WHITE: Color = (255, 255, 255)
BLACK: Color = (0, 0, 0)
GREY: Color = (200, 200, 200)
COLORS: tuple[Color, ...] = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (148, 103, 189))
LIMIT: Color = (214, 39, 40)

# 3 columns × 5 rows per glyph, "1" = ink. Lower case is drawn as upper case.
_FONT: dict[str, tuple[str, ...]] = {
    "0": ("111", "101", "101", "101", "111"), "1": ("010", "110", "010", "010", "111"),
    "2": ("111", "001", "111", "100", "111"), "3": ("111", "001", "111", "001", "111"),
    "4": ("101", "101", "111", "001", "001"), "5": ("111", "100", "111", "001", "111"),
    "6": ("111", "100", "111", "101", "111"), "7": ("111", "001", "010", "010", "010"),
    "8": ("111", "101", "111", "101", "111"), "9": ("111", "101", "111", "001", "111"),
    "A": ("010", "101", "111", "101", "101"), "B": ("110", "101", "110", "101", "110"),
    "C": ("011", "100", "100", "100", "011"), "D": ("110", "101", "101", "101", "110"),
    "E": ("111", "100", "110", "100", "111"), "F": ("111", "100", "110", "100", "100"),
    "G": ("011", "100", "101", "101", "011"), "H": ("101", "101", "111", "101", "101"),
    "I": ("111", "010", "010", "010", "111"), "J": ("001", "001", "001", "101", "010"),
    "K": ("101", "101", "110", "101", "101"), "L": ("100", "100", "100", "100", "111"),
    "M": ("101", "111", "111", "101", "101"), "N": ("110", "101", "101", "101", "101"),
    "O": ("010", "101", "101", "101", "010"), "P": ("110", "101", "110", "100", "100"),
    "Q": ("010", "101", "101", "110", "011"), "R": ("110", "101", "110", "101", "101"),
    "S": ("011", "100", "010", "001", "110"), "T": ("111", "010", "010", "010", "010"),
    "U": ("101", "101", "101", "101", "111"), "V": ("101", "101", "101", "101", "010"),
    "W": ("101", "101", "111", "111", "101"), "X": ("101", "101", "010", "101", "101"),
    "Y": ("101", "101", "010", "010", "010"), "Z": ("111", "001", "010", "100", "111"),
    ".": ("000", "000", "000", "000", "010"), ",": ("000", "000", "000", "010", "100"),
    "-": ("000", "000", "111", "000", "000"), "/": ("001", "001", "010", "100", "100"),
    ":": ("000", "010", "000", "010", "000"), "(": ("010", "100", "100", "100", "010"),
    ")": ("010", "001", "001", "001", "010"), "=": ("000", "111", "000", "111", "000"),
    "+": ("000", "010", "111", "010", "000"), "%": ("101", "001", "010", "100", "101"),
    " ": ("000", "000", "000", "000", "000"),
}


class Canvas:
    """An RGB pixel buffer with the few drawing operations a line plot needs."""

    def __init__(self, width: int, height: int, background: Color = WHITE) -> None:
        self.width = width
        self.height = height
        self.pixels = bytearray(bytes(background) * (width * height))

    def set(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i:i + 3] = bytes(color)

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        for y in range(min(y0, y1), max(y0, y1) + 1):
            for x in range(min(x0, x1), max(x0, x1) + 1):
                self.set(x, y, color)

    def line(self, x0: int, y0: int, x1: int, y1: int, color: Color, width: int = 1, dash: int = 0) -> None:
        """Bresenham's line, ``width`` pixels thick; ``dash`` > 0 draws dashes of that many steps."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        half = width // 2
        for step in range(dx - dy + 1):  # bounded: one iteration per pixel of the longer axis
            if not dash or (step // dash) % 2 == 0:
                self.rect(x0 - half, y0 - half, x0 - half + width - 1, y0 - half + width - 1, color)
            if x0 == x1 and y0 == y1:
                break
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x: int, y: int, text: str, color: Color = BLACK, scale: int = 2) -> int:
        """Draw ``text`` with its top-left corner at (x, y); returns the x after it."""
        for ch in text.upper():
            glyph = _FONT.get(ch, _FONT[" "])
            for row, bits in enumerate(glyph):
                for col, bit in enumerate(bits):
                    if bit == "1":
                        self.rect(x + col * scale, y + row * scale, x + (col + 1) * scale - 1,
                                  y + (row + 1) * scale - 1, color)
            x += 4 * scale
        return x

    @staticmethod
    def text_width(text: str, scale: int = 2) -> int:
        return len(text) * 4 * scale - scale

    def png(self) -> bytes:
        """The buffer as a PNG file (colour type 2, 8 bits, filter 0 on every row)."""
        stride = self.width * 3
        raw = b"".join(b"\x00" + bytes(self.pixels[y * stride:(y + 1) * stride]) for y in range(self.height))

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(
            b"IEND", b"")


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)


def _fmt(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _events(n: float) -> str:
    return f"{n / 1e6:.1f}M" if n >= 999_500 else f"{n / 1e3:.0f}K"


def plot_scaling(path: Path, events: Sequence[int], per_event_us: Mapping[str, Sequence[float]],
                 limit: float, width: int = 760, height: int = 460) -> None:
    """Cost per event relative to the smallest size (log x), one line per curve, the limit dashed.

    Each point is labelled with its absolute cost in microseconds per event.
    """
    canvas = Canvas(width, height)
    left, right, top, bottom = 70, width - 190, 50, height - 60
    relative = {name: [v / values[0] if values[0] else float("nan") for v in values]
                for name, values in per_event_us.items()}
    finite = [v for vs in relative.values() for v in vs if math.isfinite(v)]
    y_max = max([limit * 1.15, *(v * 1.1 for v in finite)])
    step = _nice_step(y_max)
    y_max = math.ceil(y_max / step) * step
    lx = [math.log10(max(e, 1)) for e in events]
    x_lo, x_hi = min(lx), max(lx)
    pad = (x_hi - x_lo) * 0.06 or 0.5

    def px(i: int) -> int:
        return round(left + (lx[i] - x_lo + pad) / (x_hi - x_lo + 2 * pad) * (right - left))

    def py(v: float) -> int:
        return round(bottom - v / y_max * (bottom - top))

    canvas.text(left, 16, "COST PER EVENT RELATIVE TO THE SMALLEST SIZE (LABELS: US/EVENT)")
    for k in range(round(y_max / step) + 1):  # horizontal grid and y tick labels
        v = k * step
        canvas.line(left, py(v), right, py(v), GREY)
        label = f"{v:g}"
        canvas.text(left - 10 - canvas.text_width(label), py(v) - 5, label)
    canvas.line(left, top, left, bottom, BLACK, 2)
    canvas.line(left, bottom, right, bottom, BLACK, 2)
    for i, e in enumerate(events):  # x ticks at the measured sizes
        canvas.line(px(i), bottom, px(i), bottom + 6, BLACK, 2)
        label = _events(e)
        canvas.text(px(i) - canvas.text_width(label) // 2, bottom + 12, label)
    canvas.text((left + right) // 2 - canvas.text_width("EVENTS (LOG)") // 2, bottom + 34, "EVENTS (LOG)")
    canvas.line(left, py(limit), right, py(limit), LIMIT, 2, dash=8)
    legend_y = top + 10
    for n, (name, values) in enumerate(relative.items()):
        color = COLORS[n % len(COLORS)]
        points = [(px(i), py(v)) for i, v in enumerate(values) if math.isfinite(v)]
        for (x0, y0), (x1, y1) in itertools.pairwise(points):
            canvas.line(x0, y0, x1, y1, color, 3)
        for i, (x, y) in enumerate(points):
            canvas.rect(x - 4, y - 4, x + 4, y + 4, color)
            canvas.text(x + 8, y - 14 if n % 2 == 0 else y + 6, _fmt(per_event_us[name][i]), color)
        canvas.line(right + 20, legend_y + 5, right + 50, legend_y + 5, color, 3)
        canvas.text(right + 58, legend_y, name)
        legend_y += 24
    canvas.line(right + 20, legend_y + 5, right + 50, legend_y + 5, LIMIT, 2, dash=4)
    canvas.text(right + 58, legend_y, f"LIMIT {limit:g}X")
    path.write_bytes(canvas.png())
