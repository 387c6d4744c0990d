"""The loader diagnosis's own pieces (benchmarks/gpu/aoti_env.py), on hand-made inputs: the stack's exec bit read
and cleared in an ELF-64 header as `spaces` clears it, inside a package archive too, and the verdict each pattern of
passing and crashing loads points to."""

from __future__ import annotations

import struct
import zipfile

import pytest

from benchmarks.gpu.aoti_env import (
    PF_X,
    PT_GNU_STACK,
    TESTS,
    clear_exec_stack,
    stack_flags,
    verdict,
    without_exec_stack,
)

PT_LOAD = 1


def library(stack: int | None) -> bytes:
    """An ELF-64 file of a 64-byte header and two 56-byte program headers at byte 64: PT_LOAD (flags 5), then
    PT_GNU_STACK with `stack` as its flags (or a second PT_LOAD where None)."""
    header = bytearray(64)
    header[:5] = b"\x7fELF\x02"
    struct.pack_into("<Q", header, 32, 64)  # e_phoff
    struct.pack_into("<HH", header, 54, 56, 2)  # e_phentsize, e_phnum
    load = struct.pack("<II", PT_LOAD, 5) + bytes(48)
    second = struct.pack("<II", PT_GNU_STACK, stack) if stack is not None else struct.pack("<II", PT_LOAD, 4)
    return bytes(header) + load + second + bytes(48) + b"rest of the library"


def test_the_exec_bit_is_read_and_cleared_alone():
    """RWE (7) becomes RW (6) at byte 64 + 56 + 4, nothing else moves; RW and a library without the header are left
    as they are."""
    data = library(7)
    assert stack_flags(data) == (120, 7)
    cleared = without_exec_stack(data)
    assert stack_flags(cleared) == (120, 6) and struct.unpack_from("<I", cleared, 124) == (6,)
    assert [i for i, (a, b) in enumerate(zip(data, cleared)) if a != b] == [124]
    assert without_exec_stack(library(6)) == library(6)
    assert stack_flags(library(None)) == (None, None) and without_exec_stack(library(None)) == library(None)
    with pytest.raises(ValueError):
        stack_flags(b"\x7fELF\x01" + bytes(60))  # 32-bit
    assert PF_X == 1


def test_a_package_archive_is_rewritten_with_its_libraries_cleared(tmp_path):
    package = tmp_path / "model.pt2"
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("model/data/aotinductor/model/wrapper.so", library(7))
        archive.writestr("model/data/aotinductor/model/kernels.so", library(6))
        archive.writestr("model/archive_format", "pt2")
    assert clear_exec_stack(package) == 1
    with zipfile.ZipFile(package) as archive:
        assert stack_flags(archive.read("model/data/aotinductor/model/wrapper.so")) == (120, 6)
        assert archive.read("model/data/aotinductor/model/kernels.so") == library(6)
        assert archive.read("model/archive_format") == b"pt2"
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    (unpacked / "a.so").write_bytes(library(7))
    assert clear_exec_stack(unpacked) == 1 and stack_flags((unpacked / "a.so").read_bytes()) == (120, 6)


def outcome(*passing: str) -> dict:
    return {name: {"ok": name in passing} for name in TESTS}


@pytest.mark.parametrize("passing, cause, remedy", [
    (TESTS, "none: a package built with $CXX loads here", "none"),
    (("meta", "dlopen", "system_cxx", "no_exec_stack"), "exec_stack", "clear_exec_stack"),  # spaces' way first
    (("meta", "dlopen", "system_cxx", "preload"), "compiler", "system_compiler"),
    (("meta", "dlopen", "preload"), "compiler (its runtime libraries), but the system compiler's package did not "
                                    "run", "none"),
    ((), "not_dlopen", "none"),
    (("meta",), "unnamed: every way crashed (in dlopen)", "none"),
    (("meta", "dlopen"), "unnamed: every way crashed (after dlopen, in loading or running the model)", "none"),
])
def test_each_pattern_of_crashes_names_its_cause(passing, cause, remedy):
    assert verdict(outcome(*passing)) == {"cause": cause, "remedy": remedy}


def test_the_remedy_reaches_every_later_build(monkeypatch, tmp_path):
    """The system compiler for Inductor in this process (its config read $CXX at import) and in children ($CXX,
    $CC); or every package built after this cleared by `after_build`, which does nothing otherwise."""
    from torch._inductor import config

    from benchmarks.gpu import aoti_env

    for name in ("CXX", "CC", aoti_env.CLEAR_EXEC_STACK):
        monkeypatch.setenv(name, "unset by the test")
        monkeypatch.delenv(name)
    monkeypatch.setattr(config.cpp, "cxx", (None, "g++"))
    package = tmp_path / "built.so"
    package.mkdir()
    (package / "wrapper.so").write_bytes(library(7))
    aoti_env.apply("none")
    aoti_env.after_build(package)
    assert stack_flags((package / "wrapper.so").read_bytes())[1] == 7
    aoti_env.apply("system_compiler")
    assert config.cpp.cxx == (None, "/usr/bin/g++")
    assert (aoti_env.os.environ["CXX"], aoti_env.os.environ["CC"]) == ("/usr/bin/g++", "/usr/bin/gcc")
    aoti_env.apply("clear_exec_stack")
    aoti_env.after_build(package)
    assert stack_flags((package / "wrapper.so").read_bytes())[1] == 6
