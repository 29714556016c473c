"""Build fuzz/corpus/envelope and fuzz/corpus/dispatch from the spec's example messages.

Run once (``python fuzz/seed_corpus.py SPEC_DIR``); the result is committed. Each JSON block of
the specification pages that holds a ``"jsonrpc"`` member becomes one seed, compacted to one line.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

BLOCK = re.compile(r"```json[^\n]*\n(.*?)```", re.DOTALL)
CORPUS = Path(__file__).resolve().parent / "corpus"


def messages(spec: Path) -> list[bytes]:
    found: dict[bytes, None] = {}
    for page in sorted(spec.rglob("*.mdx")):
        for block in BLOCK.findall(page.read_text(encoding="utf-8")):
            try:
                value = json.loads(block)
            except ValueError:
                continue
            items = value if isinstance(value, list) else [value]
            if all(isinstance(item, dict) and "jsonrpc" in item for item in items) and items:
                found[json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()] = None
    return list(found)


def write(target: str, seeds: list[bytes]) -> None:
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        (folder / f"spec-{hashlib.sha1(seed).hexdigest()[:12]}").write_bytes(seed)


def main() -> None:
    seeds = messages(Path(sys.argv[1]))
    write("envelope", seeds)
    write("dispatch", seeds)
    print(f"{len(seeds)} spec messages")


if __name__ == "__main__":
    main()
