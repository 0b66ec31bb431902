"""``scripts/screenshots`` regenerates the pictures of ``docs/img`` the docs show: run into a
temporary folder (never over the tracked files), it writes each of them, and none is blank —
each is decoded here (the standard library's zlib and the PNG format) and must have many
colours; the dark one is darker than the light one."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

from browser_support import require_browser

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "screenshots"
PICTURES = ("serve-sessions.png", "serve-run.png", "serve-run-dark.png", "serve-inbox.png")


def _decode(data: bytes) -> tuple[int, int, list[bytes], int]:
    """Width, height, the unfiltered rows and the bytes per pixel of an 8-bit RGB or RGBA,
    non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, chunks, head = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
    assert head is not None
    width, height, depth, colour, _, _, interlace = head
    assert depth == 8 and colour in (2, 6) and interlace == 0, head
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(chunks)), width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    at = 0
    for _ in range(height):
        kind, line = raw[at], bytearray(raw[at + 1 : at + 1 + stride])
        at += 1 + stride
        if kind == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
        elif kind in (3, 4):
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                b = prev[x]
                if kind == 3:
                    line[x] = (line[x] + ((a + b) >> 1)) & 255
                    continue
                c = prev[x - bpp] if x >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def test_the_script_writes_every_picture_and_none_is_blank(tmp_path: Path) -> None:
    require_browser()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRISM_")}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(PICTURES)
    brightness = {}
    for name in PICTURES:
        width, height, rows, bpp = _decode((tmp_path / name).read_bytes())
        assert width == 1280 and height >= 600, (name, width, height)
        colours = {row[x : x + 3] for row in rows for x in range(0, len(row), bpp)}
        assert len(colours) > 200, f"{name} has {len(colours)} colours: blank?"
        sample = [row[x] for row in rows[::8] for x in range(0, len(row), bpp * 8)]
        brightness[name] = sum(sample) / len(sample)
    assert brightness["serve-run-dark.png"] < brightness["serve-run.png"] / 2
    for name in PICTURES:  # the docs show what the script writes
        assert (ROOT / "docs" / "img" / name).is_file(), name
