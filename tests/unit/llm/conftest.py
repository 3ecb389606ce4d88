import pytest

from credence.streams.llm.models import Fact, Observation, Turn


@pytest.fixture
def turn_factory():
    counter = iter(range(1, 10_000))

    def make(text: str, role: str = "user", turn_id: str | None = None) -> Turn:
        return Turn(id=turn_id or f"t{next(counter)}", role=role, text=text, ts="2026-01-01T00:00:00Z")

    return make


@pytest.fixture
def fact_factory():
    counter = iter(range(1, 10_000))

    def make(text: str, subject: str, polarity: str = "positive", importance: int = 6) -> Fact:
        return Fact(id=f"f{next(counter)}", text=text, subject=subject, polarity=polarity,
                    importance=importance, source_turn_ids=["t1"])

    return make


@pytest.fixture
def observation_factory():
    counter = iter(range(1, 10_000))

    def make(text: str, subject: str = "") -> Observation:
        return Observation(id=f"o{next(counter)}", text=text, subject=subject)

    return make
