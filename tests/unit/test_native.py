"""The native library's home: where it is looked for, turned off, and built (or said not to be)."""

from __future__ import annotations

from pathlib import Path

from onceflow import native


def test_the_checkout_holds_the_built_library():
    """`onceflow setup` (make setup, make test) built it: both entry points are there."""
    lib = native.library()
    assert lib is not None, f"not built at {native.library_path()}: run `onceflow setup`"
    assert hasattr(lib, "onceflow_judge") and hasattr(lib, "onceflow_reader_fill")


def test_a_path_from_the_environment_and_off(monkeypatch, tmp_path):
    monkeypatch.setenv(native.LIBRARY_ENV, str(tmp_path / "elsewhere.so"))
    assert native.library_path() == tmp_path / "elsewhere.so"
    native.library.cache_clear()
    try:
        assert native.library() is None  # not there: the Python paths serve
        monkeypatch.setenv(native.LIBRARY_ENV, "off")
        native.library.cache_clear()
        assert native.library() is None
    finally:
        monkeypatch.delenv(native.LIBRARY_ENV)
        native.library.cache_clear()
    assert native.library() is not None


def test_no_crate_or_no_cargo_is_said_not_failed(monkeypatch, tmp_path):
    said: list[str] = []
    monkeypatch.setenv("ONCEFLOW_PROJECT", str(tmp_path))
    assert native.build(log=said.append) is None and not said  # an installed package: nothing to build
    crate = tmp_path / "native" / "judge"
    crate.mkdir(parents=True)
    (crate / "Cargo.toml").write_text("[package]\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert native.build(log=said.append) is None
    assert len(said) == 1 and "no cargo" in said[0] and "Fix: install Rust" in said[0]
    assert not (tmp_path / ".onceflow").exists()
    assert Path(native.library_path()).name == "libonceflow_judge.so"


def test_a_failing_build_is_said_with_the_fix(monkeypatch, tmp_path):
    """A toolchain that cannot build the crate (too old, say) leaves the Python paths serving and says
    why, instead of failing `onceflow setup`."""
    said: list[str] = []
    monkeypatch.setenv("ONCEFLOW_PROJECT", str(tmp_path))
    crate = tmp_path / "native" / "judge"
    crate.mkdir(parents=True)
    (crate / "Cargo.toml").write_text("[package]\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cargo = bin_dir / "cargo"
    cargo.write_text("#!/bin/sh\necho 'error: this toolchain is too old' >&2\nexit 101\n")
    cargo.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert native.build(log=said.append) is None
    assert "cargo failed (exit 101)" in said[-1] and "too old" in said[-1] and "Fix: a Rust toolchain" in said[-1]
