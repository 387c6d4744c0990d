import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The conformance fixtures ship in the repository; $TEMPO_FIXTURES points the tests at another set.
FIXTURES = Path(os.environ.get("TEMPO_FIXTURES", ROOT / "tests" / "fixtures" / "conformance"))


def pytest_configure(config: pytest.Config) -> None:
    """Each run its own upload folder, set before gradio is imported (some of its modules read it then): a server
    trims its folder to its cap, and two runs sharing gradio's default folder delete each other's uploads."""
    folder = tempfile.mkdtemp(prefix="tempo-test-uploads-")
    os.environ["GRADIO_TEMP_DIR"] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    threads = os.environ.get("TEMPO_TEST_TORCH_THREADS")
    if threads:  # `make test-all` runs two tiers side by side, each on one core
        import torch

        torch.set_num_threads(int(threads))


SLOW_KINDS = ("browser", "load")  # markers whose tests belong to the slow tier


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A browser journey or a load test is in the slow tier whether or not it says so."""
    for item in items:
        if any(item.get_closest_marker(kind) for kind in SLOW_KINDS):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Keep relevance-direction caches and hub lookups inside the test run (no network, no home writes)."""
    os.environ["TEMPO_CACHE"] = str(tmp_path_factory.mktemp("tempo-cache"))
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


@pytest.fixture(scope="session")
def fixtures() -> Path:
    if not (FIXTURES / "tempo" / "config.json").is_file():
        pytest.fail(f"conformance fixtures not found at {FIXTURES} (set TEMPO_FIXTURES)")
    return FIXTURES


@pytest.fixture(scope="session")
def fixture_model(fixtures):
    import tempo

    return tempo.from_pretrained(fixtures / "tempo", base=fixtures / "base" / "tiny-qwen3-vl", device="cpu")


@pytest.fixture()
def fixture_copy(fixtures, tmp_path) -> Path:
    """A writable copy of the fixture directory."""
    target = tmp_path / "conformance"
    shutil.copytree(fixtures, target)
    return target


@pytest.fixture(scope="session")
def hostile_media(tmp_path_factory) -> dict[str, Path]:
    """Hostile and odd media files (tests/media.py), made once per session in pytest's temporary directory."""
    from media import make_media

    return make_media(tmp_path_factory.mktemp("hostile-media"))
