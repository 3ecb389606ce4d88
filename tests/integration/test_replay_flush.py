"""`credence replay FILE --flush` ends a historical replay: a flush per scope of the file, sent only once the
worker group has read the turns (sent sooner, it could be applied before a scope's last turns). The worker is
stood in for by a consumer of its group committing the turns' end offsets: the flush waits on exactly that."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from credence.errors import CredenceError
from credence.kafka import client_options
from credence.streams.ops.replay import flush_when_read, replay, scopes_in
from tests.support.turns import end_offsets, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
SCOPES = ["acme/alice/barista", "acme/bob/barista", "globex/carol/coach"]


async def commit_turns(settings) -> None:
    """What a worker of the group does once it applied every turn."""
    topic = settings.topic("turns")
    ends = await end_offsets(settings.kafka_bootstrap, topic, settings.topic_partitions)
    consumer = AIOKafkaConsumer(**client_options(settings.kafka_bootstrap, group_id=settings.app_id,
                                                 enable_auto_commit=False))
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in ends])
        await consumer.commit({TopicPartition(topic, p): end for p, end in ends.items() if end})
    finally:
        await consumer.stop()


def test_the_flush_goes_out_only_once_the_worker_group_has_read_the_turns(settings_factory, tmp_path):
    settings = settings_factory(topic_partitions=2)
    path = tmp_path / "turns.jsonl"
    path.write_text("".join(
        json.dumps({"v": 1, "tenant": t, "user": u, "character": c, "turn_id": f"{u}-{i}", "role": "user",
                    "text": f"turn {i}", "ts": f"2026-05-0{i + 1}T10:00:00Z"}) + "\n"
        for t, u, c in (s.split("/") for s in SCOPES) for i in range(2)))

    async def scenario():
        assert await replay(path, settings.kafka_bootstrap, settings, progress=False) == 2 * len(SCOPES)
        with pytest.raises(CredenceError, match="has not read"):
            await flush_when_read(settings.kafka_bootstrap, settings, scopes_in(path), timeout_s=1.0)
        unread = await read_topic(settings.kafka_bootstrap, settings.topic("control"), 2)
        await commit_turns(settings)
        flushed = await flush_when_read(settings.kafka_bootstrap, settings, scopes_in(path), timeout_s=60.0)
        return unread, flushed, await read_topic(settings.kafka_bootstrap, settings.topic("control"), 2)

    unread, flushed, control = asyncio.run(scenario())
    assert unread == []  # nothing was sent while the turns were unread
    assert flushed == len(SCOPES)
    records = sorted((r.key.decode(), json.loads(r.value)["type"]) for r in control)
    assert records == [(scope, "flush") for scope in sorted(SCOPES)]
