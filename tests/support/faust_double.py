"""Faust as the scope agent reads it, in memory: events and their messages, the worker's topics keeping
what is sent, a stream of batches, and a power switch that is always on. A test subclasses `Event` for
its way of naming records and `Topics` for the shape of what it keeps (`keep`)."""

from __future__ import annotations

import asyncio
import json
from typing import NamedTuple


class Message:
    """`event.message`: where the record was read, and its Kafka timestamp (seconds) when it has one."""

    def __init__(self, topic: str, partition: int, offset: int, timestamp: float | None = None) -> None:
        self.topic, self.partition, self.offset, self.timestamp = topic, partition, offset, timestamp


class Event:
    """One input record: its key, its JSON value, its headers and its message."""

    def __init__(self, topic: str, partition: int, offset: int, key: str, record: dict,
                 headers: dict | None = None, timestamp: float | None = None) -> None:
        self.message = Message(topic, partition, offset, timestamp)
        self.key, self.value, self.headers = key.encode(), json.dumps(record).encode(), headers or {}


class Sent(NamedTuple):
    topic: str  # the attribute the agent sent it through (the topic's name in the settings)
    key: bytes
    value: bytes
    partition: int | None
    headers: dict | None


def acknowledged() -> asyncio.Future:
    """What a Faust send returns: a future of the broker's acknowledgement, here already done."""
    done = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


class Channel:
    def __init__(self, topics: Topics, name: str) -> None:
        self.topics, self.name = topics, name

    async def send(self, key, value, partition=None, headers=None):
        self.topics.sent.append(self.topics.keep(Sent(self.name, key, value, partition, headers)))
        return acknowledged()


class Topics:
    """The worker's topics by name (`topics.dlq`, `topics.evidence`, …); `sent` keeps each send as `keep`
    shapes it, in order."""

    @staticmethod
    def keep(sent: Sent):
        return sent

    def __init__(self) -> None:
        self.sent: list = []

    def __getattr__(self, name: str) -> Channel:
        return Channel(self, name)

    def __getitem__(self, spec) -> Channel:  # topics[TOPICS.evidence], as the worker's Topics answers
        return Channel(self, spec.attribute)


class Stream:
    """Faust's stream as the agent reads it: batches of events, each taken once."""

    def __init__(self, batches: list[list[Event]]) -> None:
        self.batches = list(batches)

    async def take_events(self, max_records, within):
        while self.batches:
            yield self.batches.pop(0)


class Switch:
    """The tenants' power switch, on for everyone."""

    def enabled(self, tenant) -> bool:
        return True
