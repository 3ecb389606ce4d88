"""What every worker knows about every tenant and character card: the compacted `tenants` and `cards`
topics read whole (all partitions, no consumer group) into memory, and followed while the worker runs.

A consumer group would split the partitions between workers; these records must be on every worker
because any worker may receive any tenant's request.
"""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer, TopicPartition

from credence.config import Settings
from credence.config.tenants import TenantSettings
from credence.errors import RecordError
from credence.kafka import client_options
from credence.records.topics import TOPICS, TopicSpec
from credence.streams.api.cards import Card, card_key, decode_card
from credence.streams.api.tenants import Tenant, decode_tenant, hash_key
from credence.streams.runtime.tenancy import TenantBook

log = logging.getLogger(__name__)


class Directory:
    """Tenants by name and by key hash, cards by tenant/character; `ready` once the topics were read
    up to the end offsets they had when the worker started. Each tenant record's settings also go to
    `book`, the stream's TenantBook (streams/runtime/tenancy.py)."""

    def __init__(self) -> None:
        self.tenants: dict[str, Tenant] = {}
        self._by_hash: dict[str, str] = {}
        self.cards: dict[str, Card] = {}
        self.book = TenantBook()  # what the stream steps each tenant's scopes with, kept in its own layer
        self.ready = self.book.ready
        self.rejected = 0

    def tenant_for_key(self, key: str) -> Tenant | None:
        name = self._by_hash.get(hash_key(key))
        return self.tenants.get(name) if name else None

    def tenant_settings(self, tenant: str) -> TenantSettings | None:
        """The tenant's overrides of the worker's settings (what the stream steps its scopes with)."""
        return self.book.tenant_settings(tenant)

    def watch(self, on_put) -> None:
        self.book.watch(on_put)

    def card(self, tenant: str, character: str) -> Card | None:
        return self.cards.get(card_key(tenant, character))

    def apply(self, topic: TopicSpec, key: bytes | None, value: bytes | None) -> None:
        """One record of the tenants or cards topic (latest per key wins, as compaction keeps it)."""
        try:
            if topic == TOPICS.tenants:
                self._apply_tenant(key, decode_tenant(key, value))
            else:
                self._apply_card(key, decode_card(value))
        except RecordError as exc:
            self.rejected += 1
            log.warning("ignored a %s record keyed %r: %s", topic.name, key, exc)

    def _apply_tenant(self, key: bytes | None, tenant: Tenant | None) -> None:
        name = tenant.name if tenant else (key or b"").decode("utf-8", "replace")
        old = self.tenants.pop(name, None)
        if old is not None:
            self._by_hash.pop(old.key_hash, None)
        if tenant is not None:
            self.tenants[name] = tenant
            self._by_hash[tenant.key_hash] = name
        self.book.put(name, tenant.settings if tenant is not None else None)

    def _apply_card(self, key: bytes | None, card: Card | None) -> None:
        if card is None:
            self.cards.pop((key or b"").decode("utf-8", "replace"), None)
        else:
            self.cards[card_key(card.tenant, card.character)] = card


async def follow(directory: Directory, bootstrap: str, settings: Settings, stop: asyncio.Event | None = None,
                 until_caught_up: bool = False) -> None:
    """Read the tenants and cards topics from the start into `directory`; keep following unless
    `until_caught_up` (what the CLI uses to list tenants)."""
    names = {settings.topic(spec): spec for spec in (TOPICS.tenants, TOPICS.cards)}
    consumer = AIOKafkaConsumer(**client_options(bootstrap, settings.kafka, group_id=None, enable_auto_commit=False,
                                                 auto_offset_reset="earliest"))
    await consumer.start()
    try:
        parts = [TopicPartition(t, p) for t in names for p in range(settings.topic_partitions)]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = {tp: off for tp, off in (await consumer.end_offsets(parts)).items() if off > 0}
        while not (stop and stop.is_set()):
            batch = await consumer.getmany(timeout_ms=200)
            for tp, records in batch.items():
                for rec in records:
                    directory.apply(names[tp.topic], rec.key, rec.value)
                    if rec.offset + 1 >= ends.get(tp, 0):
                        ends.pop(tp, None)
            if not ends and not directory.ready.is_set():
                directory.ready.set()
                if until_caught_up:
                    return
    finally:
        await consumer.stop()
