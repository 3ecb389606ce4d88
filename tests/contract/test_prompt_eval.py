"""benchmarks/prompt_eval.py runs its labelled set against the OpenAI-compatible test server (whose
answers are the rules backend's) and against the rules backend: the harness cannot rot, every request
it sends passes the server's checks, and the two backends score the same case for case."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prompt_eval():
    spec = importlib.util.spec_from_file_location("prompt_eval", ROOT / "benchmarks" / "prompt_eval.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


def test_the_labelled_set_is_large_multilingual_and_well_formed(prompt_eval):
    for task in prompt_eval.TASKS:
        cases = prompt_eval.load_cases(task)
        langs = Counter(c["lang"] for c in cases)
        assert len(cases) >= 40, task.name
        assert langs["en"] >= 10 and langs["de"] >= 8 and langs["es"] >= 8, (task.name, langs)
        assert any(not c["expect"] for c in cases if isinstance(c["expect"], list)) or task.name in ("feedback", "merge", "correction")


def test_harness_on_the_test_server_matches_the_rules_case_for_case(prompt_eval, openai_server_factory, tmp_path,
                                                                    capsys):
    server = openai_server_factory(model="eval-model")
    out = tmp_path / "eval.json"
    assert prompt_eval.main(["--base-url", server.base_url, "--model", "eval-model", "--json", str(out),
                             "--timeout", "5"]) == 0
    rows = {(r["backend"], r["task"]): r for r in json.loads(out.read_text())}
    printed = capsys.readouterr().out
    assert server.violations == []
    for task in prompt_eval.TASKS:
        rules, served = rows[("rules", task.name)], rows[("eval-model", task.name)]
        assert served["wrong"] == rules["wrong"] and served["accuracy"] == rules["accuracy"], task.name
        assert served["failed_calls"] == served["unknown_ids"] == served["retries"] == 0
        assert served["calls"] == served["cases"] >= 40
        assert served["prompt_tokens_per_case"] > 0 and served["completion_tokens_per_case"] > 0
        assert 0.3 < served["static_prefix_share"] < 1  # the examples sit in the cached prefix
        assert rules["prompt_tokens_per_case"] == 0
        assert any(line.split()[:2] == ["eval-model", task.name] for line in printed.splitlines())
    assert server.outcomes() == {"ok": sum(rows[("eval-model", t.name)]["calls"] for t in prompt_eval.TASKS)}


@pytest.mark.parametrize("argv", [["--base-url", "http://x/v1"], ["--tasks", "horoscope"], ["--no-rules"]])
def test_bad_arguments_exit_2_with_a_message(prompt_eval, argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        prompt_eval.main(argv)
    assert exit_.value.code == 2 and "error:" in capsys.readouterr().err
