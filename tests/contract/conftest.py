import pytest

from credence.config.llm import LLMSettings
from credence.streams.llm.models import Observation, Turn
from tests.support.openai_server import OpenAICompatibleServer


@pytest.fixture
def openai_server_factory():
    servers: list[OpenAICompatibleServer] = []

    def make(**options) -> OpenAICompatibleServer:
        server = OpenAICompatibleServer(**options).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def llm_settings_factory():
    """Settings for the openai backend against a test server: short timeouts and backoff keep the
    suite fast while exercising the same retry path as production."""

    def make(server: OpenAICompatibleServer, **overrides) -> LLMSettings:
        values = dict(
            backend="openai", base_url=server.base_url, model=server.model, timeout_s=0.3,
            max_retries=6, max_concurrency=4, backoff_base_s=0.005, backoff_max_s=0.02,
        )
        values.update(overrides)
        return LLMSettings(**values)

    return make


_USER_LINES = [
    "I love {x}", "I hate {x}", "I am learning {x}", "I don't like {x}", "I really like {x}",
    "I stopped playing {x}", "I prefer {x} to nothing", "I dislike {x}",
]
_SUBJECTS = ["coffee", "tea", "rust", "chess", "jazz", "tennis", "python", "sushi", "hiking", "opera"]


@pytest.fixture
def fifty_turns() -> list[Turn]:
    """A fixed conversation: 40 user turns with one fact each, 10 AI turns with none."""
    turns = []
    for i in range(50):
        if i % 5 == 4:
            turns.append(Turn(id=f"turn-{i:02d}", role="ai", text="I love hearing that!", ts=f"2026-01-01T00:{i:02d}:00Z"))
        else:
            line = _USER_LINES[i % len(_USER_LINES)].format(x=_SUBJECTS[i % len(_SUBJECTS)])
            turns.append(Turn(id=f"turn-{i:02d}", role="user", text=line, ts=f"2026-01-01T00:{i:02d}:00Z"))
    return turns


@pytest.fixture
def observations() -> list[Observation]:
    out = []
    for i, subject in enumerate(_SUBJECTS):
        out.append(Observation(id=f"obs-like-{subject}", text=f"The user likes {subject}.", subject=subject))
        if i % 2:
            out.append(Observation(id=f"obs-not-{subject}", text=f"The user does not enjoy {subject}.", subject=subject))
    out.append(Observation(id="obs-dog", text="The user has a dog.", subject="dog"))
    return out
