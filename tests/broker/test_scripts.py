"""The script assembly of scripts.py: each script carries exactly the library parts it uses."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from taskforge.broker.scripts import SCRIPT_NAMES, _lib_chunks, script_source
from tests.conftest import admin_client

LIB = resources.files("taskforge.broker").joinpath("lua", "_lib.lua").read_text(encoding="utf-8")
LIB_NAMES = {name for name, _ in _lib_chunks(LIB)}


def defined_in(source: str) -> set[str]:
    return set(re.findall(r"^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)", source, flags=re.M))


def test_every_script_file_is_registered() -> None:
    files = {
        p.name[:-4]
        for p in resources.files("taskforge.broker").joinpath("lua").iterdir()
        if p.name.endswith(".lua") and not p.name.startswith("_")
    }
    assert files == set(SCRIPT_NAMES)


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_each_library_name_a_script_uses_is_defined_before_its_body(name: str) -> None:
    source = script_source(name)
    used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source)) & LIB_NAMES
    assert used <= defined_in(source)


def test_small_scripts_leave_the_hot_path_helpers_out() -> None:
    assert "claim_ready" not in defined_in(script_source("progress"))
    assert "claim_ready" in defined_in(script_source("succeed"))


def test_every_assembled_script_compiles_in_redis(redis_url: str) -> None:
    client = admin_client(redis_url)
    for name in SCRIPT_NAMES:
        assert client.script_load(script_source(name))
