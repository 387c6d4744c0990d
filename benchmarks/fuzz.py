"""Hostile videos against a live app: every mutant `mutants.py` makes, uploaded and asked about as a visitor would.

Starts `app.py` on a free loopback port (or uses --url), sends each file to /answer from --workers clients at once,
and sorts what comes back: answered, refused (the message is checked for leaked internals: exception class
names, source files, paths, FFmpeg's words), a traceback (the app's "Something went wrong"), a hang (no answer
within --timeout). It samples the server's resident memory throughout (the decoding children apart). With
--twice every file is sent again and must get the same outcome. The exit status is 1 on any traceback, hang,
leak, changed outcome, or server memory over --memory-mb.

    python -m benchmarks.fuzz [--count 1200] [--seed 0] [--workers 4] [--twice] [--json report.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as Timeout
from contextlib import nullcontext
from pathlib import Path

import psutil
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from benchmarks.app_first_segment import local_app
from benchmarks.mutants import write_mutants

QUESTION = "What moves across the screen?"
GENERIC = "Something went wrong"
INTERNALS = re.compile(r"Error\b|Exception|Traceback|\.cc\b|\.cpp\b|\.py\b|\.c:\d|0x[0-9a-fA-F]{4}|Errno|avcodec|"
                       r"avformat|libav|decord|DECORD|PatchWelcome|/tmp/|/home/|/root/|File \"")


def outcome(client: Client, path: Path) -> tuple[str, str]:
    """(kind, detail) for one upload: answered / refused / traceback / leak."""
    try:
        result = client.predict(handle_file(str(path)), QUESTION, max_new_tokens=4, api_name="/answer")
    except AppError as error:
        message = str(error)
        if GENERIC in message or "verbose error reporting" in message:
            return "traceback", message
        return ("leak" if INTERNALS.search(message.replace(path.name, "")) else "refused"), message
    return "answered", f"{result['num_segments']} segments"


class PeakMemory:
    """The server process's largest resident set, sampled every 0.2 s, and its decoding children's."""

    def __init__(self, pid: int | None):
        self.process = psutil.Process(pid) if pid else None
        self.server = self.children = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        while self.process is not None and not self.stop.wait(0.2):
            try:
                self.server = max(self.server, self.process.memory_info().rss)
                children = self.process.children(recursive=True)
                self.children = max([self.children] + [c.memory_info().rss for c in children if c.is_running()])
            except psutil.Error:
                pass


def send_all(url: str, files: list[Path], workers: int, timeout: float) -> dict[str, tuple[str, str]]:
    clients = [Client(url, verbose=False) for _ in range(workers)]
    results: dict[str, tuple[str, str]] = {}
    with ThreadPoolExecutor(workers) as pool:
        futures = {path.name: pool.submit(outcome, clients[i % workers], path) for i, path in enumerate(files)}
        deadline = time.monotonic() + timeout * len(files) / workers + timeout
        for name, future in futures.items():
            try:
                results[name] = future.result(timeout=max(1.0, min(timeout, deadline - time.monotonic())))
            except Timeout:
                results[name] = ("hang", f"no answer within {timeout:g} s")
            except Exception as exc:  # noqa: BLE001 -- the client itself failed: counted, not fatal
                results[name] = ("traceback", f"client: {type(exc).__name__}: {exc}")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running app (default: start app.py on a free loopback port)")
    parser.add_argument("--count", type=int, default=1200, help="mutants (default 1200), besides the six seeds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=4, help="clients at once (default 4)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a request is a hang")
    parser.add_argument("--memory-mb", type=float, default=6144.0, help="the server's resident memory bound")
    parser.add_argument("--twice", action="store_true", help="send every file again: outcomes must not change")
    parser.add_argument("--dir", help="where the mutants go (default: a temporary folder)")
    parser.add_argument("--json", help="write every file's outcome and the summary here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tempo-fuzz-") as scratch:
        directory = Path(args.dir or scratch)
        index = write_mutants(directory, args.count, args.seed)
        files = [directory / entry["file"] for entry in index]
        started = time.perf_counter()
        with (nullcontext(args.url) if args.url else local_app()) as url:
            app = next((child.pid for child in psutil.Process().children() if "app.py" in " ".join(child.cmdline())),
                       None)
            memory = PeakMemory(None if args.url else app)
            first = send_all(url, files, args.workers, args.timeout)
            second = send_all(url, files, args.workers, args.timeout) if args.twice else first
            memory.stop.set()
        seconds = time.perf_counter() - started

    kinds = {entry["file"]: entry["kind"] for entry in index}
    counts = Counter(kind for kind, _ in first.values())
    by_kind = Counter((kinds[name], kind) for name, (kind, _) in first.items())
    changed = [name for name in first if first[name] != second[name]]
    summary = {"files": len(files), "seconds": round(seconds, 1), "outcomes": dict(counts),
               "by_mutation": {f"{mutation} {kind}": n for (mutation, kind), n in sorted(by_kind.items())},
               "changed_on_second_run": len(changed) if args.twice else None,
               "server_peak_rss_mb": round(memory.server / 2**20),
               "decoder_peak_rss_mb": round(memory.children / 2**20),
               "memory_bound_mb": args.memory_mb}
    print(json.dumps(summary, indent=1))
    bad = {name: result for name, result in first.items() if result[0] in ("traceback", "hang", "leak")}
    for name, (kind, detail) in list(bad.items())[:20]:
        print(f"{kind:9s} {name}: {detail[:200]}")
    for name in changed[:20]:
        print(f"changed   {name}: {first[name][1][:90]} -> {second[name][1][:90]}")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "files": first, "changed": changed}, indent=1),
                                   encoding="utf-8")
    over = memory.server / 2**20 > args.memory_mb
    return 1 if bad or changed or over else 0


if __name__ == "__main__":
    sys.exit(main())
