"""Why an AOTInductor package will not load on this machine, named in one short run. On the H200 of 2026-11-28 (torch
2.11.0+cu130) a one-layer `nn.Linear` package died of SIGSEGV on load, for the CPU and CUDA alike; that machine set
CXX=/opt/gcc/bin/g++, a second gcc beside the system's, and Inductor compiles and links a package's shared library
with $CXX. Here a one-layer package is built with $CXX and with the system's g++, its library read (compiler, needed
libraries, stack flags, symbol versions), then loaded in fresh processes, each way telling one cause from another:

    compiler     the library built by $CXX brings that compiler's libstdc++/libgomp against the ones torch runs with
    exec_stack   the library asks for an executable stack; `spaces` clears that bit on every AOTI library it loads
    not_dlopen   the crash is before the library is opened (reading the package's metadata, unpacking it)

The GPU check's loader part runs `diagnose` first and `apply`s its remedy before it builds anything.

    python -m benchmarks.gpu.aoti_env DIR [--device cpu|cuda] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

SYSTEM_CXX, SYSTEM_CC = "/usr/bin/g++", "/usr/bin/gcc"
CLEAR_EXEC_STACK = "TEMPO_AOTI_CLEAR_EXEC_STACK"  # set to 1: every package the check builds has the bit cleared
PT_GNU_STACK, PF_X = 0x6474E551, 0x1
WIDTH = 64


@dataclass(frozen=True)
class Test:
    """One load in a fresh process: which package, how far (metadata only, a bare dlopen, or in full and run), with
    what in the environment, and what its passing says."""

    package: str  # "default" ($CXX), "system" (/usr/bin/g++) or "no_exec_stack" (default, the bit cleared)
    mode: str  # "meta", "dlopen" or "full"
    passing_means: str
    preload: bool = False  # $CXX's libstdc++ and libgomp preloaded
    ld_debug: bool = False  # LD_DEBUG=files: the last library initialised before a crash


TESTS = {
    "meta": Test("default", "meta", "the metadata reads: a crash here would be not_dlopen"),
    "dlopen": Test("default", "dlopen", "the library opens: a crash here points to compiler or exec_stack"),
    "default": Test("default", "full", "a $CXX package loads and runs here: nothing to work around"),
    "system_cxx": Test("system", "full", "the system compiler's package runs: compiler (build with /usr/bin/g++)"),
    "preload": Test("default", "full", "runs with $CXX's runtime preloaded: compiler (its libstdc++/libgomp)",
                    preload=True),
    "no_exec_stack": Test("no_exec_stack", "full", "runs with the exec bit cleared: exec_stack (clear it, as spaces)"),
    "ld_debug": Test("default", "full", "its last 'calling init' names the library that crashed", ld_debug=True),
}


def compiler() -> str:
    return os.environ.get("CXX") or "g++"


def command_output(command: list[str], timeout: float = 30.0) -> str | None:
    """What `command` prints (stdout and stderr), or None where it cannot run."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def environment() -> dict:
    """The compilers, their C++ ABI, the C library and the kernel: what a compiler cause would differ in."""
    import torch

    figures: dict = {"CXX": os.environ.get("CXX"), "CC": os.environ.get("CC"), "kernel": os.uname().release,
                     "glibc": os.confstr("CS_GNU_LIBC_VERSION"), "torch": torch.__version__,
                     "torch_cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI), "compilers": {}}
    for cxx in dict.fromkeys((compiler(), SYSTEM_CXX)):
        version = command_output([cxx, "--version"])
        macros = command_output(["sh", "-c", f"echo '#include <string>' | {cxx} -xc++ -dM -E -"]) or ""
        abi = re.search(r"_GLIBCXX_USE_CXX11_ABI (\d)", macros)
        figures["compilers"][cxx] = {"version": version.splitlines()[0] if version else None,
                                     "cxx11_abi": abi and abi.group(1),
                                     "libstdcxx": (command_output([cxx, "-print-file-name=libstdc++.so.6"]) or
                                                   "").strip()}
    with open("/proc/self/maps") as maps:
        figures["runtime_in_this_process"] = sorted({line.split()[-1] for line in maps
                                                     if "stdc++" in line or "gomp" in line})
    return figures


def build(path: Path, device: str) -> None:
    """In a child: a Linear(64, 64) and ReLU exported and compiled into a package at `path`."""
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()).to(device)
    program = torch.export.export(model, (torch.randn(2, WIDTH, device=device),))
    torch._inductor.aoti_compile_and_package(program, package_path=str(path))


def load(path: Path, mode: str, device: str) -> str:
    """In a child: the package read as far as `mode` says; what it gave."""
    import ctypes

    import torch

    if mode == "meta":
        return str(torch._C._aoti.AOTIModelPackageLoader.load_metadata_from_package(str(path), "model"))
    if mode == "dlopen":
        unpacked = path.with_suffix(".unpacked")
        zipfile.ZipFile(path).extractall(unpacked)
        libraries = sorted(unpacked.rglob("*.so"))
        for library in libraries:
            ctypes.CDLL(str(library))
        return f"opened {len(libraries)} libraries"
    out = torch._inductor.aoti_load_package(str(path))(torch.randn(2, WIDTH, device=device))
    return f"ran: {tuple(out.shape)}"


def child(arguments: list[str], env: dict[str, str], timeout: float) -> dict:
    """This module in a fresh interpreter: whether it ended well, or the signal it died of, and its last lines."""
    started = time.perf_counter()
    quick = {}
    if "cpu" in arguments:  # Inductor would check each vector ISA in processes of its own (a minute on a busy CPU)
        quick["TORCHINDUCTOR_VEC_ISA_OK"] = os.environ.get("TORCHINDUCTOR_VEC_ISA_OK", "1")
    try:
        done = subprocess.run([sys.executable, "-m", "benchmarks.gpu.aoti_env", *arguments], capture_output=True,
                              text=True, timeout=timeout,
                              env={**os.environ, "PYTHONFAULTHANDLER": "1", **quick, **env})
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"no answer in {timeout:.0f} s"}
    seconds = round(time.perf_counter() - started, 1)
    said = [line for line in (done.stdout + done.stderr).splitlines()
            if line.strip() and not re.search(r"[Ww]arn|^\s+return", line)]
    result = {"ok": done.returncode == 0, "seconds": seconds, "tail": said[-4:]}
    if done.returncode < 0:
        result["error"] = f"died of {signal.Signals(-done.returncode).name}"
    elif done.returncode:
        result["error"] = f"exit {done.returncode}"
    return result


def stack_flags(data: bytes | bytearray) -> tuple[int | None, int | None]:
    """(where, flags) of an ELF-64 library's PT_GNU_STACK header, or (None, None) where it has none."""
    if data[:5] != b"\x7fELF\x02":
        raise ValueError("not a 64-bit ELF file")
    (table,) = struct.unpack_from("<Q", data, 32)
    size, count = struct.unpack_from("<HH", data, 54)
    for where in range(table, table + size * count, size):
        kind, flags = struct.unpack_from("<II", data, where)
        if kind == PT_GNU_STACK:
            return where, flags
    return None, None


def without_exec_stack(data: bytes) -> bytes:
    """The library with its stack's exec bit cleared (as `spaces` does before it loads one); unchanged without it."""
    where, flags = stack_flags(data)
    if where is None or flags is None or not flags & PF_X:
        return data
    changed = bytearray(data)
    struct.pack_into("<I", changed, where + 4, flags & ~PF_X)
    return bytes(changed)


def clear_exec_stack(path: Path) -> int:
    """Every shared library in the package at `path` (a .pt2 archive or a directory) without the exec bit; how many
    had it."""
    cleared = 0
    if path.is_dir():
        for library in path.rglob("*.so"):
            data = library.read_bytes()
            if (new := without_exec_stack(data)) != data:
                library.write_bytes(new)
                cleared += 1
        return cleared
    rewritten = path.with_suffix(".rewriting")
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(rewritten, "w") as target:
        for member in source.infolist():
            data = source.read(member)
            if member.filename.endswith(".so") and (new := without_exec_stack(data)) != data:
                data, cleared = new, cleared + 1
            target.writestr(member, data)
    rewritten.replace(path)
    return cleared


def after_build(path: Path) -> None:
    """What `apply` asked of every package built after it (the exec bit cleared), in this process or a child."""
    if os.environ.get(CLEAR_EXEC_STACK) == "1":
        clear_exec_stack(path)


def inspect(library: Path) -> dict:
    """A library's compiler, needed libraries, search paths, stack flags and the newest C++ runtime versions it asks
    for (readelf's reading; None where readelf is missing)."""
    data = library.read_bytes()
    _, flags = stack_flags(data)
    figures: dict = {"name": library.name, "stack": None if flags is None else ("RWE" if flags & PF_X else "RW")}
    comment = command_output(["readelf", "-p", ".comment", str(library)])
    dynamic = command_output(["readelf", "-d", str(library)])
    versions = command_output(["readelf", "-V", str(library)])
    if comment is not None:
        figures["compiled_by"] = sorted(set(re.findall(r"\]\s+(.+)", comment)))
    if dynamic is not None:
        figures["needed"] = re.findall(r"\(NEEDED\).*\[(.+)\]", dynamic)
        figures["search_path"] = re.findall(r"\((?:RPATH|RUNPATH)\).*\[(.+)\]", dynamic)
    if versions is not None:
        newest: dict[str, str] = {}
        for family, found in re.findall(r"\b(GLIBCXX|CXXABI|GOMP|GLIBC)_([0-9.]+)", versions):
            number = found.strip(".")
            if tuple(map(int, number.split("."))) > tuple(map(int, newest.get(family, "0").split("."))):
                newest[family] = number
        figures["newest_versions"] = {family: f"{family}_{number}" for family, number in sorted(newest.items())}
    return figures


def same_compiler() -> bool:
    """Whether $CXX (or g++ where it is unset) is the system's compiler itself."""
    found = shutil.which(compiler())
    return found is not None and Path(SYSTEM_CXX).exists() and Path(found).resolve() == Path(SYSTEM_CXX).resolve()


def preloaded() -> str:
    """$CXX's own libstdc++ and libgomp, for LD_PRELOAD."""
    paths = [(command_output([compiler(), f"-print-file-name={name}"]) or name).strip()
             for name in ("libstdc++.so.6", "libgomp.so.1")]
    return ":".join(paths)


def diagnose(directory: Path, device: str, timeout: float = 240.0, at_once: int = 4) -> dict:
    """Both packages built, the default one's library read and the `TESTS` run, `at_once` at a time; `cause` and
    `remedy` say what they point to."""
    directory.mkdir(parents=True, exist_ok=True)
    figures: dict = {"device": device, "environment": environment(), "builds": {}, "tests": {}}
    system = {"CXX": SYSTEM_CXX, "CC": SYSTEM_CC}
    builds = {"default": {}, "system": system if Path(SYSTEM_CXX).exists() else None}
    same = same_compiler()
    if same:  # one compiler: the system's package would be the default one again
        builds.pop("system")

    def build_one(name: str) -> dict:
        if builds[name] is None:
            return {"ok": False, "error": f"no {SYSTEM_CXX} here"}
        env = {**(builds[name] or {}), "TORCHINDUCTOR_CACHE_DIR": str(directory / f"cache-{name}")}
        return child(["build", str(directory / f"{name}.pt2"), device], env, timeout)

    with ThreadPoolExecutor(at_once) as pool:
        figures["builds"] = dict(zip(builds, pool.map(build_one, builds)))
    default = directory / "default.pt2"
    if not figures["builds"]["default"]["ok"]:
        return {**figures, "cause": "unknown: the package did not build", "remedy": "none"}
    if same:
        shutil.copy(default, directory / "system.pt2")
        figures["builds"]["system"] = {"ok": True, "same_compiler": f"$CXX is {SYSTEM_CXX}: the default package"}
    shutil.copy(default, directory / "no_exec_stack.pt2")
    figures["exec_stack_cleared"] = clear_exec_stack(directory / "no_exec_stack.pt2")
    unpacked = directory / "inspected"
    zipfile.ZipFile(default).extractall(unpacked)
    figures["libraries"] = [inspect(library) for library in sorted(unpacked.rglob("*.so"))]

    def test(name: str) -> dict:
        spec = TESTS[name]
        if spec.package == "system" and not figures["builds"]["system"]["ok"]:
            return {"ok": False, "error": "the system compiler's package was not built"}
        env = {"LD_PRELOAD": preloaded()} if spec.preload else {}
        env.update({"LD_DEBUG": "files"} if spec.ld_debug else {})
        result = child(["load", str(directory / f"{spec.package}.pt2"), spec.mode, device], env, timeout)
        if spec.ld_debug:
            result["tail"] = [line for line in result["tail"] if "calling init" in line] or result["tail"]
        return {**result, "passing_means": spec.passing_means}

    with ThreadPoolExecutor(at_once) as pool:
        figures["tests"] = dict(zip(TESTS, pool.map(test, TESTS)))
    return {**figures, **verdict(figures["tests"])}


def verdict(tests: dict) -> dict:
    """The cause the tests point to and what to build with: clearing the exec bit first (what `spaces` does on
    ZeroGPU, so a Space would load the same way), then the system compiler."""
    passed = {name for name, result in tests.items() if result.get("ok")}
    if "default" in passed:
        return {"cause": "none: a package built with $CXX loads here", "remedy": "none"}
    if "no_exec_stack" in passed:
        return {"cause": "exec_stack", "remedy": "clear_exec_stack"}
    if "system_cxx" in passed:
        return {"cause": "compiler", "remedy": "system_compiler"}
    if "preload" in passed:
        return {"cause": "compiler (its runtime libraries), but the system compiler's package did not run",
                "remedy": "none"}
    if "meta" not in passed:
        return {"cause": "not_dlopen", "remedy": "none"}
    where = "in dlopen" if "dlopen" not in passed else "after dlopen, in loading or running the model"
    return {"cause": f"unnamed: every way crashed ({where})", "remedy": "none"}


def apply(remedy: str) -> None:
    """Every package built after this, here and in child processes, built as `remedy` says."""
    if remedy == "system_compiler":
        from torch._inductor import config

        os.environ.update(CXX=SYSTEM_CXX, CC=SYSTEM_CC)
        config.cpp.cxx = (None, SYSTEM_CXX)  # read from $CXX when Inductor's config was first imported
    elif remedy == "clear_exec_stack":
        os.environ[CLEAR_EXEC_STACK] = "1"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu.aoti_env", description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="+", help="DIR; or (in a child) build PATH DEVICE, load PATH MODE DEVICE")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda where there is one)")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args(argv)
    if args.what[0] == "build":
        build(Path(args.what[1]), args.what[2])
        print("built", args.what[1], flush=True)
        return 0
    if args.what[0] == "load":
        print(load(Path(args.what[1]), args.what[2], args.what[3]), flush=True)
        return 0
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    figures = diagnose(Path(args.what[0]), device)
    text = json.dumps(figures, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # a process that loaded a package may crash at exit (tests/aoti_process.py says when)
