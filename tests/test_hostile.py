"""No video can take the server down: the headers are read before any frame is decoded, a file that claims giant
frames is refused at once, and videos are decoded in a child process whose every failure is one plain sentence.
The fuzz suite (benchmarks/fuzz.py) runs here on a slice of its mutants; the README has the full run's figures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from appserver import ROOT, load_app_model, serve
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

import tempo
from benchmarks import mutants
from tempo.video.readers import PyAVReader

QUESTION = "What moves across the screen?"
CLAIM = "The video's frames are 16000×16000 (its H264 stream claims 16000×16000, its container 96×64)"
ISOLATED = tempo.RunConfig(limits=tempo.Limits(isolate_decoding=True),
                           generation=tempo.GenerationConfig(max_new_tokens=2))


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("seeds")
    made = {}
    for name in mutants.SEEDS:
        made[name] = folder / f"seed-{name}"
        mutants.make_seed(name, made[name])
    return made


@pytest.fixture(scope="module")
def giant_claim(seeds, tmp_path_factory) -> Path:
    """A small mp4 whose H.264 sequence parameter set claims 16000×16000 frames (its container says 96×64)."""
    path = tmp_path_factory.mktemp("claims") / "claims.mp4"
    path.write_bytes(mutants.h264_sps_claim(seeds["h264.mp4"].read_bytes(), (16000, 16000)))
    return path


def test_every_seed_the_fuzz_uses_is_answered(fixture_model, seeds):
    for name, path in seeds.items():
        result = tempo.answer(fixture_model, path, QUESTION, ISOLATED)
        assert len(result.segments) == 2 and result.video.sampled_frames == 12, name


@pytest.mark.slow
def test_the_examples_stream_copied_into_mkv_and_mov_answer_as_the_mp4_does(fixture_model, tmp_path):
    from media import ffmpeg

    example = ROOT / "examples" / "synthetic-900001-2min.mp4"
    results = {}
    for suffix in (".mp4", ".mkv", ".mov"):
        path = tmp_path / f"example{suffix}"
        ffmpeg("-i", str(example), "-c", "copy", str(path))
        results[suffix] = tempo.answer(fixture_model, path, "What colour is the triangle?", ISOLATED)
    mp4 = results[".mp4"]
    for result in results.values():
        assert (result.answer, [s.tokens for s in result.segments]) == (mp4.answer, [s.tokens for s in mp4.segments])
        assert [s.relevance for s in result.segments] == pytest.approx([s.relevance for s in mp4.segments], abs=1e-6)


@pytest.mark.slow
def test_a_claim_of_giant_frames_is_refused_by_the_cli_before_a_frame_is_decoded(giant_claim):
    """The CLI runs under a fresh parent, whose only child it is, to read the CLI's own peak memory: one decoded
    16000² frame would pass the bound."""
    command = [sys.executable, "-m", "tempo", "ask", "--video", str(giant_claim), "--question", QUESTION]
    measure = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
               "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    done = subprocess.run([sys.executable, "-c", measure, *command], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    returncode, peak_kb = map(int, done.stdout.split())
    assert returncode == 2 and done.stderr.strip().startswith(f"error: {CLAIM}")
    assert peak_kb < 900 * 1024  # a 16000² frame alone is 384 MB


def test_a_claim_of_giant_frames_is_refused_by_the_app_and_it_does_not_grow(fixtures, giant_claim):
    with serve(load_app_model(fixtures)) as url:
        client = Client(url, verbose=False)
        before = psutil.Process().memory_info().rss
        with pytest.raises(AppError, match=CLAIM.replace("(", r"\(").replace(")", r"\)")):
            client.predict(handle_file(str(giant_claim)), QUESTION, api_name="/answer")
        assert psutil.Process().memory_info().rss - before < 300 * 2**20


def test_a_stream_that_grows_past_the_limit_part_way_is_refused_at_its_first_big_frame(fixture_model, tmp_path):
    """Headers say 160×120; from the second second on the H.264 stream carries 1600×1200 frames. (In-process
    decoding with decord scales them to the first frame's size instead.)"""
    from media import YUV420, ffmpeg

    parts = []
    for size in ("160x120", "1600x1200"):
        parts.append(tmp_path / f"{size}.h264")
        ffmpeg("-f", "lavfi", "-i", f"testsrc=s={size}:r=8:d=2", *YUV420, "-bsf:v", "h264_mp4toannexb",
               str(parts[-1]))
    (tmp_path / "grows.h264").write_bytes(b"".join(part.read_bytes() for part in parts))
    grows = tmp_path / "grows.mp4"
    ffmpeg("-fflags", "+genpts", "-r", "8", "-i", str(tmp_path / "grows.h264"), "-c", "copy", str(grows))
    said = "The video's frames grow to 1600×1200 part-way: 1.9 megapixels; this server accepts up to 1.0 megapixels"
    config = tempo.RunConfig(limits=tempo.Limits(max_frame_pixels=1_000_000, isolate_decoding=True))
    with pytest.raises(tempo.VideoError, match=f"^{said}"):
        tempo.answer(fixture_model, grows, QUESTION, config)
    with pytest.raises(tempo.VideoError, match=f"^{said}"):
        list(PyAVReader(str(grows), max_pixels=1_000_000).read(list(range(32))))


@pytest.mark.slow
def test_decoding_children_do_not_run_the_callers_script_again(fixtures, seeds, tmp_path):
    """multiprocessing runs the main script again in every child it starts; for app.py that was importing gradio
    anew (2.5 s a video), for a script without a `__main__` guard its whole work, or a crash."""
    script = tmp_path / "unguarded.py"
    script.write_text(f"""
import tempo
print("script ran", flush=True)
model = tempo.from_pretrained({str(fixtures / "tempo")!r}, base={str(fixtures / "base" / "tiny-qwen3-vl")!r})
config = tempo.RunConfig(limits=tempo.Limits(isolate_decoding=True),
                         generation=tempo.GenerationConfig(max_new_tokens=2))
for _ in range(2):
    print("segments", len(tempo.answer(model, {str(seeds["h264.mp4"])!r}, "What moves?", config).segments), flush=True)
""", encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n") == ["script ran", "segments 2", "segments 2", ""]


def test_a_decoder_out_of_memory_is_one_sentence_and_the_next_video_decodes(fixture_model, tmp_path):
    """The child's data memory is bounded: a decode that needs more ends with a message, not with the server."""
    from media import testsrc

    big = tmp_path / "big.mp4"
    testsrc(big, "3840x2160", "2", 4)
    tight = tempo.RunConfig(limits=tempo.Limits(isolate_decoding=True, decode_memory_bytes=600 * 2**20),
                            generation=tempo.GenerationConfig(max_new_tokens=2))
    with pytest.raises(tempo.VideoError, match=r"^big\.mp4 needs more memory to decode than the 600 MB"):
        tempo.answer(fixture_model, big, QUESTION, tight)
    assert len(tempo.answer(fixture_model, big, QUESTION, ISOLATED).segments) == 1


@pytest.mark.parametrize("megabytes", [400, 100])
def test_a_limit_too_low_to_open_the_video_is_still_called_memory(fixture_model, tmp_path, megabytes):
    """Under a tighter limit the child cannot load PyAV, make its queue's thread, or open the file: each of those
    once came out as a 60 s stall or "not a readable video"."""
    from media import testsrc

    big = tmp_path / "big.mp4"
    testsrc(big, "3840x2160", "2", 1)
    tight = tempo.RunConfig(limits=tempo.Limits(isolate_decoding=True, decode_memory_bytes=megabytes * 2**20))
    with pytest.raises(tempo.VideoError, match=rf"^big\.mp4 needs more memory to decode than the {megabytes} MB"):
        tempo.answer(fixture_model, big, QUESTION, tight)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("TEMPO_FUZZ_COUNT") == "0", reason="TEMPO_FUZZ_COUNT=0")
def test_a_slice_of_the_fuzz_suite(tmp_path):
    """Mutants of every seed against app.py, each sent twice: no traceback, hang or leaked internal, the same
    outcome both times, the server's memory bounded (benchmarks/fuzz.py's own verdict)."""
    count = os.environ.get("TEMPO_FUZZ_COUNT", "48")
    done = subprocess.run([sys.executable, "-m", "benchmarks.fuzz", "--count", count, "--workers", "2",
                           "--twice", "--timeout", "120", "--json", str(tmp_path / "fuzz.json")],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
