"""The synthetic evaluation: its report's schema, and an oracle row that really allocates to the evidence."""

import json

import pytest

from tempo.eval_synthetic import STRATEGIES, evaluate, format_table, main
from tempo.synthetic import FAMILIES


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    import tempo

    model = tempo.from_pretrained(device="cpu")
    directory = tmp_path_factory.mktemp("eval-videos")
    return evaluate(model, n=1, seed=7, budget=None, min_duration=60.0, max_duration=60.0,
                    directory=str(directory), max_new_tokens=8)


def test_report_has_every_strategy_truncation_and_the_oracle(report):
    rows = [*report["strategies"].values(), *report["truncation"].values(), report["oracle"]]
    assert set(report["strategies"]) == set(STRATEGIES) and set(report["truncation"]) == {"head", "tail"}
    for row in rows:
        assert 0.0 <= row["accuracy"] <= 1.0 and 0.0 <= row["localization"] <= 1.0
        assert set(row["per_family"]) == set(FAMILIES) and row["questions"] == len(FAMILIES)
        assert 0.0 < row["tokens_per_frame"] <= 32 / 8 / 4 + 1e-9  # a quarter of k_max per 8-frame segment
    assert report["strategies"]["ata"] == report["truncation"]["head"]


def test_oracle_puts_the_most_tokens_on_the_evidence(report):
    # the ground-truth relevance: the most-allocated segment always overlaps the asked-about event
    assert report["oracle"]["localization"] == 1.0
    assert report["strategies"]["adversarial"]["localization"] < 1.0


def test_table_and_json_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "eval.json"
    assert main(["--n", "1", "--seed", "7", "--min-duration", "60", "--max-duration", "60",
                 "--videos-dir", str(tmp_path), "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| ATA on true relevance (oracle) |" in table and table.count("\n|") >= 8
    assert json.loads(out.read_text())["oracle"]["questions"] == len(FAMILIES)
    assert format_table(json.loads(out.read_text())).splitlines()[0].startswith("| allocation |")


def test_training_seeds_are_refused(tmp_path):
    with pytest.raises(SystemExit):
        main(["--n", "2", "--seed", "999999", "--videos-dir", str(tmp_path)])
