"""Live mode's library (tempo.live): the 2-fps sampler, the alert rule, the caps on what a watch keeps, a
synthetic stream watched with Tempo-Tiny (the alert lands on the evidence, Ask now answers in stream time), and
sources that die mid-stream: each ends the watch with one sentence, keeps what was seen and leaves no thread."""

from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest

import tempo
from tempo.live import (
    Alert,
    AlertRule,
    Gap,
    LiveConfig,
    LiveWatch,
    LiveWorld,
    SegmentWatched,
    StreamError,
    WatchEnded,
    WatchStarted,
    stream_frames,
)
from tempo.live.alerts import Alerting
from tempo.live.feed import Sampler
from tempo.live.memory import RecentMemories, Remembered, Replay
from tempo.live.network import RtspReplies, parse_playlist

SEED = 800_005  # in two-minute clips: a green star at 0:20 and 1:19, a white cross between them


@pytest.fixture(scope="module")
def tiny():
    return tempo.from_pretrained(device="cpu")


def feed_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "tempo-live-feed" and t.is_alive()]


# ------------------------------------------------------------------------------------------------ sampling

def test_the_sampler_takes_the_frame_nearest_each_tick_of_the_2_fps_clock():
    sampler = Sampler(2.0)
    arrivals = [0.0, 0.49, 1.01, 1.47, 1.99, 2.52]  # a camera's jitter around every half second
    ticks = [(tick, frame) for t in arrivals for tick, frame in sampler.add(t, t)]
    assert ticks == [(0.0, 0.0), (0.5, 0.49), (1.0, 1.01), (1.5, 1.47), (2.0, 1.99), (2.5, 2.52)]


def test_a_fast_source_gives_2_fps_and_a_long_silence_restarts_the_clock():
    sampler = Sampler(2.0, hold_s=2.0)
    fast = [(t / 30, t) for t in range(90)]  # 3 s at 30 fps
    ticks = [tick for t, frame in fast for tick, _ in sampler.add(t, frame)]
    assert ticks == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert [tick for tick, _ in sampler.add(10.2, "after")] == [10.2]  # 7 s of silence: not held across
    assert sampler.add(10.1, "late") == []  # a timestamp that goes back is dropped


# ------------------------------------------------------------------------------------------------ alerts

def test_one_moment_raises_one_alert_and_a_blip_from_nothing_raises_none():
    alerting = Alerting(AlertRule(rise=4.0, floor=0.5, recent=30, warmup=3))
    quiet = [0.0002] * 20
    scores = quiet + [0.02] + quiet[:5] + [0.99, 0.97] + quiet[:5] + [0.98]
    alerts = [i for i, score in enumerate(scores) if alerting.judge(score)[2]]
    assert alerts == [26, 33]  # the blip to 0.02 is a 100-fold rise, but still "no"; the two high ones are one moment


def test_a_stream_whose_level_is_high_alerts_only_on_a_clear_rise():
    alerting = Alerting(AlertRule(rise=4.0))
    busy = [0.6, 0.7, 0.65] * 10
    # Relevant from its first segment (against the prior level, 0.01): one alert there, then none while it stays.
    assert [i for i, score in enumerate(busy) if alerting.judge(score)[2]] == [0]
    level, rise, alert = alerting.judge(0.9995)
    assert alert and rise >= 4.0 and 0.6 < level < 0.7


# ------------------------------------------------------------------------------------------------ caps

def test_the_recent_memories_and_the_replay_keep_their_caps_and_the_oldest_leave():
    recent = RecentMemories(segments=3)
    for index in range(5):
        recent.add(Remembered(np.zeros((2, 2)), index / 10, tuple(index * 4 + k / 2 for k in range(8))))
    compression = recent.compression("q", "s", 2.0, 8)
    assert compression.relevance == [0.2, 0.3, 0.4]  # the last three segments
    assert compression.plan.span(0) == (8.0, 12.0) and compression.plan.tag_times()[-1] == 18.0  # stream time
    replay = Replay(seconds=10.0)
    for k in range(100):
        replay.add(k / 2, np.full((64, 128, 3), k, np.uint8))
    assert replay.span() == (39.5, 49.5)
    recent.clear()
    replay.clear()
    assert len(recent) == 0 and replay.span() is None and replay.nbytes == 0


def test_a_replay_clip_covers_what_is_asked_and_refuses_what_has_left(tmp_path):
    replay = Replay(seconds=30.0)
    for k in range(120):
        replay.add(k / 2, np.full((90, 160, 3), (k * 3) % 255, np.uint8))
    first, last = replay.clip(tmp_path / "replay.mp4", 40.0, float("inf"), 2.0)
    assert (first, last) == (40.0, 59.5) and (tmp_path / "replay.mp4").stat().st_size > 0
    with pytest.raises(StreamError, match="has left the replay buffer"):
        replay.clip(tmp_path / "old.mp4", 0.0, 10.0, 2.0)


# ------------------------------------------------------------------------------------------------ a watch

def test_a_synthetic_stream_alerts_on_its_event_and_answers_in_stream_time(tiny):
    world = LiveWorld(SEED, clip_s=120.0)
    question, first = world.question()
    live = LiveWatch(tiny, question, LiveConfig(recent_s=60.0), "synthetic")
    events = list(live.follow(world.frames(until=80.0), paced=False))
    assert isinstance(events[0], WatchStarted) and isinstance(events[-1], WatchEnded)
    assert events[-1].reason == "The stream ended." and not events[-1].failed
    segments = [e.segment for e in events if isinstance(e, SegmentWatched)]
    assert len(segments) == 20 and [s.start for s in segments] == [4.0 * i for i in range(20)]
    alerts = [e for e in events if isinstance(e, Alert)]
    shown = [s for s in world.sightings(80.0) if (s.kind, s.colour) == (first.kind, first.colour)]
    assert len(shown) == 2  # the green star, at 0:20 and at 1:19
    assert len(alerts) == len(shown), [round(s.relevance, 4) for s in segments]
    for alert, sighting in zip(alerts, shown):  # each within two segments of its evidence
        assert alert.segment.end > sighting.start and alert.segment.start < sighting.end + 2 * 4.0
    answer = [e for e in live.ask(question)][-1]
    assert answer.video.window == (20.0, 80.0)  # the window: the last minute, in stream time
    assert [s.start for s in answer.segments][:2] == [20.0, 24.0]
    live.close()
    assert len(live.recent) == 0 and live.replay.span() is None


def test_lag_is_measured_from_real_time_and_late_frames_are_skipped_with_a_gap(tiny):
    now = [100.0]
    live = LiveWatch(tiny, "When does the white circle appear?", LiveConfig(max_behind_s=8.0), "camera",
                     clock=lambda: now[0])
    frame = np.zeros((256, 512, 3), np.uint8)
    events = []
    for k in range(16):  # two segments: the first frame sets the clock, the others arrive 0.3 s after their moment
        now[0] = 100.0 + k / 2 + (0.3 if k else 0.0)
        events += live.push(k / 2, frame)
    lags = [e.lag for e in events if isinstance(e, SegmentWatched)]
    assert lags == [pytest.approx(0.3), pytest.approx(0.3)]
    now[0] += 30.0  # the watch fell 30 s behind: frames from then are late
    events = [e for k in range(16, 24) for e in live.push(k / 2, frame)]
    assert events == []
    now[0] = 100.0 + 40.0
    events = [e for k in range(80, 96) for e in live.push(k / 2, frame)]
    assert isinstance(events[0], Gap) and events[0].start == 8.0 and events[0].end == 40.0
    assert [e.segment.start for e in events if isinstance(e, SegmentWatched)] == [40.0, 44.0]


# ------------------------------------------------------------------------------------------------ sources that die

def dying(world: LiveWorld, until: float, error: Exception):
    yield from world.frames(until=until)
    raise error


def test_a_source_that_fails_mid_stream_ends_the_watch_with_its_sentence_and_keeps_what_was_seen(tiny):
    world = LiveWorld(SEED, clip_s=120.0)
    live = LiveWatch(tiny, "When does the green star appear?", LiveConfig(), "dying")
    sentence = "The stream's server example.org cannot be reached (ConnectError), so the watch ended."
    events = list(live.follow(dying(world, 16.0, StreamError(sentence)), paced=False))
    assert events[-1] == WatchEnded(sentence, 4, events[-1].alerts, failed=True)
    assert len(live.recent) == 4 and live.replay.span() == (0.0, 15.5)  # what was seen is kept
    events = list(live.follow(dying(world, 8.0, ValueError("boom")), paced=False))
    assert events[-1].failed and "Reading the stream failed (ValueError)" in events[-1].reason
    assert not feed_threads()


def test_a_source_that_falls_silent_ends_the_watch_and_its_thread(tiny):
    silence = threading.Event()

    def camera():
        yield from LiveWorld(SEED).frames(until=8.0)
        silence.wait(30)  # a camera that stops sending, without an error
        yield 9.0, np.zeros((256, 512, 3), np.uint8)

    live = LiveWatch(tiny, "When does the white circle appear?", LiveConfig(stall_s=1.0), "camera")
    events = list(live.follow(camera(), paced=False))
    silence.set()
    assert events[-1].failed and events[-1].reason.startswith("The stream sent nothing for 1 s")
    assert events[-1].segments == 2
    deadline = time.monotonic() + 10
    while feed_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not feed_threads()


def test_stopping_a_watch_ends_it_at_once_however_quiet_the_source(tiny):
    stop = threading.Event()

    def quiet():
        yield 0.0, np.zeros((256, 512, 3), np.uint8)
        stop.wait(30)

    live = LiveWatch(tiny, "What moves?", LiveConfig(stall_s=60.0), "camera")
    watching = live.follow(quiet(), paced=False, stop=stop)
    assert isinstance(next(watching), WatchStarted)
    threading.Timer(0.5, stop.set).start()
    ended = list(watching)[-1]
    assert ended.reason == "The watch was stopped." and not ended.failed


def test_stopping_an_endless_stream_leaves_no_thread_reading_it(tiny):
    stop = threading.Event()
    live = LiveWatch(tiny, "What moves?", LiveConfig(), "endless")
    for event in live.follow(LiveWorld(SEED).frames(), paced=False, stop=stop):
        if isinstance(event, SegmentWatched) and event.segment.index == 1:
            stop.set()
    assert event.reason == "The watch was stopped." and event.segments == 2
    deadline = time.monotonic() + 10
    while feed_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not feed_threads()


def test_damaged_data_is_refused_with_a_sentence():
    garbage = np.random.default_rng(0).integers(0, 256, 188 * 200, dtype=np.uint8).tobytes()
    with pytest.raises(StreamError, match="is not a video this server can read|has no video|is damaged"):
        list(stream_frames(io.BytesIO(garbage), "mpegts", name="The stream's segment 3"))


# ------------------------------------------------------------------------------------------------ protocols

def test_a_master_playlist_lists_its_variants_and_a_media_playlist_its_segments():
    master = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=800000\nhi.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=200000\nlo.m3u8\n"
    assert parse_playlist(master) == [(800000, "hi.m3u8"), (200000, "lo.m3u8")]
    media = parse_playlist("#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-MEDIA-SEQUENCE:7\n#EXTINF:4,\na.ts\n"
                           "#EXTINF:4,\nb.ts\n")
    assert media.segments == [(7, "a.ts"), (8, "b.ts")] and not media.ended and media.target == 4.0
    assert parse_playlist("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\"\na.ts\n").encrypted
    with pytest.raises(StreamError, match="not an HLS playlist"):
        parse_playlist("<html>")


def test_the_rtsp_relay_lets_replies_and_video_through_and_stops_at_a_redirect():
    replies = RtspReplies()
    ok = b"RTSP/1.0 200 OK\r\nCSeq: 1\r\nContent-Length: 5\r\n\r\nv=0\r\n"
    video = b"$\x00\x00\x04abcd"
    assert replies.feed(ok[:20]) and replies.feed(ok[20:] + video[:3]) and replies.feed(video[3:])
    assert not replies.redirected
    assert not replies.feed(b"RTSP/1.0 302 Found\r\nCSeq: 2\r\nLocation: rtsp://10.0.0.1/cam\r\n\r\n")
    assert replies.redirected
