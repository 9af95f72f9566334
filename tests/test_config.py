"""Config: built-in defaults == configs/default.toml; errors name the key; CLI overrides."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from voicepipe import config
from voicepipe.cli import main


def test_defaults_equal_default_toml() -> None:
    assert config.to_dict(config.load(config.DEFAULT_TOML)) == config.to_dict(config.Config())


def test_default_toml_spells_out_every_key() -> None:
    import tomllib

    data = tomllib.loads(config.DEFAULT_TOML.read_text())
    for f in dataclasses.fields(config.Config):
        section = getattr(config.Config(), f.name)
        assert set(data[f.name]) == {k.name for k in dataclasses.fields(section)}, f.name


def test_unknown_key_is_named(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text("[llm]\nspec_kk = 3\n")
    with pytest.raises(config.ConfigError, match=r"llm\.spec_kk"):
        config.load(p)
    with pytest.raises(config.ConfigError, match=r"\[nope\]"):
        config.load(None, ["nope.x=1"])


@pytest.mark.parametrize(
    "override, key",
    [
        ("llm.spec_k=four", "llm.spec_k"),
        ("tts.beta=high", "tts.beta"),
        ("llm.adaptive_k=maybe", "llm.adaptive_k"),
        ("server.port=1.5", "server.port"),
        ("tools.filler_after_ms=-5", "tools.filler_after_ms"),
        ("tools.filler_after_ms=inf", "tools.filler_after_ms"),
        ("tools.filler= ...", "tools.filler"),
    ],
)
def test_bad_value_is_named(override: str, key: str) -> None:
    with pytest.raises(config.ConfigError, match=key.replace(".", r"\.")):
        config.load(None, [override])


def test_bad_value_in_file_is_named(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text('[server]\nmax_sessions = "many"\n')
    with pytest.raises(config.ConfigError, match=r"server\.max_sessions"):
        config.load(p)


def test_overrides_and_file_order(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text("[llm]\nspec_k = 6\n[server]\nallowed_origins = ['http://a']\n")
    cfg = config.load(
        p, ["llm.spec_k=8", "tts.beta=0.5", "server.allowed_origins=http://x,http://y"]
    )
    assert cfg.llm.spec_k == 8 and cfg.tts.beta == 0.5
    assert cfg.server.allowed_origins == ["http://x", "http://y"]
    assert config.load(p).llm.spec_k == 6


def test_split_overrides() -> None:
    rest, ov = config.split_overrides(
        ["serve", "--llm.spec_k", "3", "--port", "1", "--tts.beta=0.1"]
    )
    assert rest == ["serve", "--port", "1"] and ov == ["llm.spec_k=3", "tts.beta=0.1"]


def test_cli_reports_the_bad_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "summarize", "x.jsonl", "--llm.nope=1"]) == 2
    assert "llm.nope" in capsys.readouterr().err
    assert main(["trace", "summarize", "x.jsonl", "--server.port=abc"]) == 2
    assert "server.port" in capsys.readouterr().err


def test_a_bench_variant_with_a_bad_key_is_named_before_any_server(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from voicepipe.bench import _serve

    def no_server(*a: object, **k: object) -> None:
        raise AssertionError("a server was started before the variants were checked")

    monkeypatch.setattr(_serve, "serve_process", no_server)
    assert main(["bench", "e2e", "--variant", "llm.nope=1", "--questions", "1"]) == 2
    assert "llm.nope" in capsys.readouterr().err


def test_every_shipped_config_loads() -> None:
    files = sorted((config.DEFAULT_TOML.parent).glob("*.toml"))
    assert config.DEFAULT_TOML in files and len(files) >= 2
    for p in files:
        config.load(p)  # raises ConfigError naming the key if a file went stale


def test_fast_profile_pins_the_135m_and_changes_only_the_llm() -> None:
    import tomllib

    p = config.DEFAULT_TOML.parent / "fast.toml"
    data = tomllib.loads(p.read_text())
    assert set(data) == {"llm"}
    # Every key spelled out: the profile stays the 135M whatever the defaults become.
    assert set(data["llm"]) == {f.name for f in dataclasses.fields(config.LlmConfig)}
    cfg = config.load(p)
    assert cfg.llm.model == "smollm2-135m" and cfg.llm.drafter == "ngram+smollm2-draft"
    default = config.to_dict(config.Config())
    assert {k: v for k, v in config.to_dict(cfg).items() if k != "llm"} == {
        k: v for k, v in default.items() if k != "llm"
    }
    # Overrides still apply on top of the profile.
    assert config.load(p, ["llm.max_new_tokens=80"]).llm.max_new_tokens == 80


def test_turns_eagerness_is_checked() -> None:
    from voicepipe.config import ConfigError, load

    assert load(overrides=["turns.eagerness=high"]).turns.eagerness == "high"
    assert load().turns.eagerness == "auto" and load().turns.prefill_ahead
    with pytest.raises(ConfigError, match="turns.eagerness"):
        load(overrides=["turns.eagerness=eager"])
