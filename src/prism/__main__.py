"""``python -m prism``: the ``prism`` command (see [`prism.cli`][prism.cli])."""

from __future__ import annotations

from prism.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
