"""The skills extension's sans-IO core (protocol/skills.py): skill:// URIs with traversal
refused, SKILL.md frontmatter read as YAML 1.2 hosts read it, the Agent Skills rules,
digests, the wire shapes, and the checks a client runs on what it reads."""

from __future__ import annotations

import hashlib

import msgspec
import pytest

from mcpkit.protocol.skills import (
    DYNAMIC,
    GetSkillResult,
    ListSkillsResult,
    ReadDirectoryParams,
    Skill,
    SkillError,
    SkillFormatError,
    SkillResource,
    SkillVerificationError,
    check_limits,
    digest,
    file_uri,
    frontmatter_problems,
    is_digest,
    parse_frontmatter,
    resolve_reference,
    skill_name,
    skill_root,
    skill_uri,
    split_frontmatter,
    split_uri,
    valid_name,
    verify,
    verify_frontmatter,
)

SKILL_MD = "---\nname: pdf-processing\ndescription: Extract PDF text\nlicense: MIT\n---\n\n# PDF\n"


# -- URIs ---------------------------------------------------------------------------------


def test_uris_are_built_and_taken_apart() -> None:
    assert skill_uri("git-workflow") == "skill://git-workflow/SKILL.md"
    assert skill_uri("acme/billing/refunds") == "skill://acme/billing/refunds/SKILL.md"
    assert file_uri("pdf", "templates/my invoice.md") == "skill://pdf/templates/my%20invoice.md"
    assert file_uri("pdf") == "skill://pdf"
    assert split_uri("skill://pdf/templates/my%20invoice.md") == ("pdf", "templates", "my invoice.md")
    assert skill_name("skill://acme/billing/refunds/SKILL.md") == "refunds"
    assert skill_root("skill://acme/billing/refunds/SKILL.md") == "skill://acme/billing/refunds"


@pytest.mark.parametrize(
    "uri",
    [
        "file:///etc/passwd",
        "skill:///etc/passwd",  # an empty authority: an absolute path in disguise
        "skill://pdf/../secrets/SKILL.md",
        "skill://pdf/%2e%2e/secrets",
        "skill://pdf/%2E%2E%2Fsecrets",
        "skill://pdf/a%2Fb",
        "skill://pdf/a%5Cb",
        "skill://pdf/./SKILL.md",
        "skill://pdf//SKILL.md",
        "skill://pdf/",
        "skill://pdf/a%00b",
        "skill://pdf/SKILL.md?x=1",
        "skill://pdf/SKILL.md#top",
    ],
)
def test_uris_that_could_leave_a_skill_are_refused(uri: str) -> None:
    with pytest.raises(SkillError):
        split_uri(uri)


def test_building_a_uri_refuses_traversal_too() -> None:
    for path in ("..", "a/../b", "a//b", ""):
        with pytest.raises(SkillError):
            file_uri("pdf", path) if path else file_uri("", "x")


def test_relative_references_resolve_against_the_skill_root() -> None:
    skill = "skill://acme/billing/refunds/SKILL.md"
    assert (
        resolve_reference(skill, "references/GUIDE.md") == "skill://acme/billing/refunds/references/GUIDE.md"
    )
    assert resolve_reference(skill, "./a/./b.md") == "skill://acme/billing/refunds/a/b.md"
    for bad in (
        "../other/SKILL.md",
        "a/%2e%2e/../x",
        "/etc/passwd",
        "https://evil.example/x",
        "a\\..\\b",
        ".",
    ):
        with pytest.raises(SkillError):
            resolve_reference(skill, bad)


def test_skill_name_needs_a_skill_md_uri() -> None:
    with pytest.raises(SkillError):
        skill_name("skill://pdf/README.md")
    with pytest.raises(SkillError):
        skill_root("skill://SKILL.md")


# -- frontmatter ----------------------------------------------------------------------------


def test_frontmatter_is_read_as_yaml_1_2_core() -> None:
    text = (
        "\ufeff---\r\nname: x\r\ndescription: d\r\non: yes\r\nno_value: no\r\nwhen: 2026-01-02\r\n"
        "octal_looking: 010\r\noctal: 0o17\r\nhex: 0x1F\r\nflag: true\r\nnothing: null\r\n"
        "ratio: 1.5\r\nversion: 1.10\r\nmetadata:\r\n  version: '2.1'\r\n  tags: [a, b]\r\n---\r\nbody\r\n"
    )
    assert parse_frontmatter(text) == {
        "name": "x",
        "description": "d",
        "on": "yes",  # YAML 1.1 would say True (and the key itself too)
        "no_value": "no",
        "when": "2026-01-02",  # not a date
        "octal_looking": 10,
        "octal": 15,
        "hex": 31,
        "flag": True,
        "nothing": None,
        "ratio": 1.5,
        "version": 1.1,
        "metadata": {"version": "2.1", "tags": ["a", "b"]},
    }


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# no frontmatter\n", "does not begin"),
        ("---\nname: x\n", "does not begin"),  # never closed
        ("---\n- a\n- b\n---\n", "not a mapping"),
        ("---\nname: [unclosed\n---\n", "not valid YAML"),
        ("---\nname: x\ndata: !!binary aGk=\n---\n", "not JSON data"),
        ("---\nname: x\n1: one\n---\n", "non-string key"),
        ("---\nname: x\nbig: .inf\n---\n", "JSON cannot carry"),
    ],
)
def test_bad_frontmatter_is_a_format_error(text: str, problem: str) -> None:
    with pytest.raises(SkillFormatError, match=problem):
        parse_frontmatter(text)


def test_the_body_follows_the_frontmatter() -> None:
    yaml, body = split_frontmatter(SKILL_MD)
    assert yaml.startswith("name: pdf-processing") and body == "\n# PDF\n"


@pytest.mark.parametrize(
    ("frontmatter", "problem"),
    [
        ({"description": "d"}, "'name' is missing"),
        ({"name": "PDF", "description": "d"}, "naming rules"),
        ({"name": "-pdf", "description": "d"}, "naming rules"),
        ({"name": "pdf-", "description": "d"}, "naming rules"),
        ({"name": "pdf--x", "description": "d"}, "naming rules"),
        ({"name": "a" * 65, "description": "d"}, "naming rules"),
        ({"name": "pdf_x", "description": "d"}, "naming rules"),
        ({"name": "pdf"}, "'description' is missing"),
        ({"name": "pdf", "description": "   "}, "'description' is missing"),
        ({"name": "pdf", "description": "d" * 1025}, "at most 1024"),
        ({"name": "pdf", "description": "d", "compatibility": "c" * 501}, "compatibility"),
        ({"name": "pdf", "description": "d", "metadata": ["x"]}, "'metadata' must be a mapping"),
        ({"name": "other", "description": "d"}, "does not match its directory 'pdf'"),
    ],
)
def test_the_agent_skills_rules(frontmatter: dict[str, object], problem: str) -> None:
    problems = frontmatter_problems(frontmatter, expected_name="pdf")
    assert any(problem in p for p in problems), problems


def test_a_valid_frontmatter_has_no_problems() -> None:
    assert frontmatter_problems({"name": "a", "description": "d"}, expected_name="a") == []
    assert frontmatter_problems({"name": "a" * 64, "description": "d" * 1024, "metadata": {}}) == []


# -- digests and verification ---------------------------------------------------------------


def test_digest_format() -> None:
    assert digest(b"hi") == "sha256:" + hashlib.sha256(b"hi").hexdigest()
    assert is_digest(digest(b""))
    assert not is_digest("sha256:" + "A" * 64)  # uppercase hex is not the format
    assert not is_digest("sha256:" + "a" * 63)
    assert not is_digest("md5:" + "a" * 64)


def test_verify_accepts_only_the_exact_bytes() -> None:
    data = SKILL_MD.encode()
    entry = SkillResource(uri="skill://pdf-processing/SKILL.md", digest=digest(data), size=len(data))
    verify(data, entry)
    with pytest.raises(SkillVerificationError, match="bytes"):
        verify(data + b"x", entry)
    with pytest.raises(SkillVerificationError, match="digest"):
        verify(data.replace(b"PDF", b"EVL"), entry)  # same size, other bytes
    with pytest.raises(SkillVerificationError, match="malformed"):
        verify(data, SkillResource(uri=entry.uri, digest="sha256:zz", size=len(data)))


def entry_for(text: str = SKILL_MD, **frontmatter: object) -> Skill:
    data = text.encode()
    uri = "skill://pdf-processing/SKILL.md"
    fm = {"name": "pdf-processing", "description": "Extract PDF text", "license": "MIT", **frontmatter}
    return Skill(
        uri=uri, frontmatter=fm, resources=[SkillResource(uri=uri, digest=digest(data), size=len(data))]
    )


def test_frontmatter_verification_compares_every_field() -> None:
    assert verify_frontmatter(SKILL_MD, entry_for())["license"] == "MIT"
    with pytest.raises(SkillVerificationError, match="'license'"):
        verify_frontmatter(SKILL_MD, entry_for(license="Apache-2.0"))
    with pytest.raises(SkillVerificationError, match="'allowed-tools'"):
        verify_frontmatter(SKILL_MD, entry_for(**{"allowed-tools": "Bash"}))
    with pytest.raises(SkillVerificationError):
        verify_frontmatter("no frontmatter", entry_for())


def test_limits_and_manifest_rules() -> None:
    assert check_limits(entry_for()) == []
    uri = "skill://pdf-processing/SKILL.md"
    other = SkillResource(uri="skill://elsewhere/x.md", digest=digest(b""), size=0)
    bad = Skill(uri=uri, frontmatter={"name": "pdf"}, resources=[other, other])
    problems = "\n".join(check_limits(bad))
    for expected in ("frontmatter name", "more than once", "outside the skill", "no entry for SKILL.md"):
        assert expected in problems, problems
    big = entry_for()
    assert isinstance(big.resources, list)
    big.resources[0].size = 17 << 20
    assert any("bytes in all" in p for p in check_limits(big))
    many = entry_for()
    assert isinstance(many.resources, list)
    many.resources += [
        SkillResource(uri=f"skill://pdf-processing/f{i}", digest=digest(b""), size=0) for i in range(512)
    ]
    assert any("513 files" in p for p in check_limits(many))
    dynamic = Skill(uri=uri, frontmatter={"name": "pdf-processing"}, resources=DYNAMIC)
    assert check_limits(dynamic) == []


# -- wire shapes ----------------------------------------------------------------------------


def test_the_spec_example_decodes_and_encodes_back() -> None:
    raw = {
        "resultType": "complete",
        "skills": [
            {
                "uri": "skill://git-workflow/SKILL.md",
                "frontmatter": {"name": "git-workflow", "description": "d", "metadata": {"x-y": 1}},
                "resources": [{"uri": "skill://git-workflow/SKILL.md", "digest": digest(b""), "size": 0}],
            },
            {
                "uri": "skill://reports/daily/SKILL.md",
                "frontmatter": {"name": "daily", "description": "d"},
                "resources": "dynamic",
            },
        ],
        "nextCursor": "abc",
        "ttlMs": 300000,
        "cacheScope": "public",
    }
    result = msgspec.json.decode(msgspec.json.encode(raw), type=ListSkillsResult)
    assert result.skills[1].resources == DYNAMIC
    assert result.skills[0].frontmatter["metadata"] == {"x-y": 1}
    assert msgspec.to_builtins(result) == {k: v for k, v in raw.items()}
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(
            b'{"skill": {"uri": "u", "frontmatter": {}, "resources": "static"}}', type=GetSkillResult
        )
    params = msgspec.json.decode(b'{"uri": "skill://a", "cursor": "c"}', type=ReadDirectoryParams)
    assert (params.uri, params.cursor) == ("skill://a", "c")


def test_the_authority_segment_cannot_grow_a_port_or_user_info() -> None:
    uri = file_uri("team:8080@host/refunds", "notes:v1@2.md")
    assert uri == "skill://team%3A8080%40host/refunds/notes:v1@2.md"
    assert split_uri(uri) == ("team:8080@host", "refunds", "notes:v1@2.md")


def test_an_escape_that_is_not_utf8_is_a_skill_error() -> None:
    with pytest.raises(SkillError, match="not UTF-8"):
        split_uri("skill://pdf/%ff%fe")


def test_names_and_digests_with_a_final_newline_are_invalid() -> None:
    # A pattern ending in "$" also matches before a final "\n" (found by fuzzing a sibling pattern).
    assert valid_name("pdf") and not valid_name("pdf\n")
    good = digest(b"x")
    assert is_digest(good) and not is_digest(good + "\n")
