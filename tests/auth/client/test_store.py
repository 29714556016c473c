"""Token stores: keyed by (resource, issuer); the file store is 0600 and atomic."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from mcpkit.auth.client import ClientRegistration, FileTokenStore, InMemoryTokenStore, TokenSet, TokenStore

TOKENS = TokenSet("at", expires_at=123.0, refresh_token="rt", scope=["a"], requested_scope=["a"])
CLIENT = ClientRegistration("https://as", "cid", "secret", "client_secret_basic", ["http://127.0.0.1/cb"])


async def _exercise(store: TokenStore) -> None:
    assert await store.load_tokens("https://rs/mcp", "https://as") is None
    await store.save_tokens("https://rs/mcp", "https://as", TOKENS)
    assert await store.load_tokens("https://rs/mcp", "https://as") == TOKENS
    # A different issuer or resource never sees these tokens.
    assert await store.load_tokens("https://rs/mcp", "https://as2") is None
    assert await store.load_tokens("https://rs/other", "https://as") is None
    await store.save_client("https://as", CLIENT)
    assert await store.load_client("https://as") == CLIENT
    assert await store.load_client("https://as2") is None
    await store.save_tokens("https://rs/mcp", "https://as", None)
    await store.save_client("https://as", None)
    assert await store.load_tokens("https://rs/mcp", "https://as") is None
    assert await store.load_client("https://as") is None


async def test_in_memory_store() -> None:
    store = InMemoryTokenStore()
    assert isinstance(store, TokenStore)
    await _exercise(store)


async def test_file_store_roundtrip_and_permissions(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "tokens.json"
    store = FileTokenStore(path)
    assert isinstance(store, TokenStore)
    await _exercise(store)
    await store.save_tokens("https://rs/mcp", "https://as", TOKENS)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = json.loads(path.read_text())
    assert data["version"] == 1 and list(data["tokens"]) == ['["https://rs/mcp", "https://as"]']
    # A second instance (a new process) reads what the first wrote.
    assert await FileTokenStore(path).load_tokens("https://rs/mcp", "https://as") == TOKENS
    assert [p.name for p in path.parent.iterdir()] == ["tokens.json"]  # no temp files left


async def test_file_store_tightens_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text("{}")
    os.chmod(path, 0o644)
    await FileTokenStore(path).save_client("https://as", CLIENT)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "content", ["not json", "[1, 2]", '{"tokens": [], "clients": 5}', '{"tokens": {"k": 1}}']
)
async def test_file_store_survives_corruption(tmp_path: Path, content: str) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(content)
    store = FileTokenStore(path)
    assert await store.load_tokens("r", "i") is None
    await store.save_tokens("r", "i", TOKENS)
    assert await store.load_tokens("r", "i") == TOKENS
    path.write_text(json.dumps({"tokens": {json.dumps(["r", "i"]): {"bogus": 1}}}))
    assert await store.load_tokens("r", "i") is None
