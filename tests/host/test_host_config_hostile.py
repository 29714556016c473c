"""Host config fields that once escaped as bare exceptions (found by fuzz/host_config.py).

A config file is often someone else's (a cloned repository's ``.vscode/mcp.json``): every
bad value must be a :class:`ConfigError` naming the server and field, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpkit.host import ConfigError, parse_config


@pytest.mark.parametrize("url", ["http://[", "https://[::1/mcp", "http://]x"])
def test_unparseable_url_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"mcpServers": {"remote": {"url": url}}}, environ={})
    assert (info.value.server, info.value.field) == ("remote", "url")


def test_env_file_path_with_a_nul_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"mcpServers": {"s": {"command": "x", "envFile": "a\x00b"}}}, environ={})
    assert (info.value.server, info.value.field) == ("s", "envFile")
    assert "null byte" in str(info.value)


def test_env_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "binary.env").write_bytes(b"KEY=\xff\xfe\n")
    with pytest.raises(ConfigError) as info:
        parse_config(
            {"mcpServers": {"s": {"command": "x", "envFile": "binary.env"}}}, environ={}, base_dir=tmp_path
        )
    assert (info.value.server, info.value.field) == ("s", "envFile")


@pytest.mark.timeout(20)
@pytest.mark.parametrize("target", ["/dev/zero", "huge"])
def test_an_env_file_that_never_ends_is_refused(tmp_path: Path, target: str) -> None:
    if target == "huge":
        huge = tmp_path / "huge.env"
        huge.write_bytes(b"A=1\n" * (300 * 1024))  # 1.2 MB: more than an envFile holds
        target = str(huge)
    with pytest.raises(ConfigError) as info:
        parse_config({"mcpServers": {"s": {"command": "x", "envFile": target}}}, environ={})
    assert (info.value.server, info.value.field) == ("s", "envFile")
    assert "larger than 1048576 bytes" in str(info.value)


@pytest.mark.timeout(20)
def test_a_config_that_never_ends_is_refused() -> None:
    from mcpkit.host import load_config

    with pytest.raises(ConfigError, match="larger than"):
        load_config("/dev/zero")
