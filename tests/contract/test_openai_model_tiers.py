"""Model tiers: CREDENCE_LLM__MODELS maps a task to a served model, so the frequent cheap checks go to a small
model; every other task keeps CREDENCE_LLM__MODEL. A task name that does not exist is refused at start."""

import asyncio
import json

import pytest

from credence.config import load_settings
from credence.errors import ConfigError
from credence.streams.llm.factory import make_backend
from tests.contract.test_openai_tasks import _all_tasks

TIERS = {"surfaced_feedback": "small-model", "negative_keyword_target": "small-model",
         "stage1_extraction": "small-model"}


def test_each_task_is_sent_to_its_tier_and_the_rest_to_the_default_model(
    openai_server_factory, llm_settings_factory, fifty_turns, observations
):
    server = openai_server_factory(model="big-model", extra_models=("small-model",))
    settings = llm_settings_factory(server, models=TIERS)

    async def go():
        backend = make_backend(settings)
        try:
            await _all_tasks(backend, fifty_turns, observations)
        finally:
            await backend.aclose()

    asyncio.run(go())
    assert not server.violations, server.violations
    used = {task: model for task, model in server.models_seen}
    assert used == {task: TIERS.get(task, "big-model") for task in used}
    assert set(TIERS) <= set(used) and used["reflection_synthesis"] == used["stage2_classification"] == "big-model"


def test_the_tiers_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("CREDENCE_LLM__MODELS", json.dumps(TIERS))
    assert load_settings().llm.models == TIERS


def test_a_tier_for_an_unknown_task_is_refused_with_the_known_names(openai_server_factory, llm_settings_factory):
    server = openai_server_factory()
    with pytest.raises(ConfigError, match="stage1_extraction"):
        make_backend(llm_settings_factory(server, models={"stage_one": "small-model"}))
