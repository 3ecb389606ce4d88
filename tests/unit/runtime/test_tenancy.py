"""Per-tenant stream settings: a tenant's scopes are stepped with its record's overrides over the worker's
core config (the powerful-memory switch, the time zone and budgets), and the agent is handed them when it
is built: nothing sets them on it afterwards."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from credence.config import load_settings
from credence.config.memory import MemorySettings
from credence.config.state import StateSettings
from credence.config.tenants import TenantSettings
from credence.records.topics import TOPICS
from credence.streams.api.directory import Directory
from credence.streams.api.tenants import Tenant, hash_key
from credence.streams.runtime.agent import ScopeAgent
from credence.streams.runtime.app import Stats
from credence.streams.runtime.switch import PowerSwitch
from credence.streams.runtime.tenancy import NoTenants, TenantMemory, TenantRecords, TenantSwitch
from credence.streams.state.ownership import Ownership
from credence.streams.state.transaction import WorkerState
from credence.streams.state.writes import TableWrites
from credence.tables.evidence import Evidence, sweep
from tests.support.scope_tables import new_tables

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
SETTINGS = load_settings(topic_prefix="ten")


def tenant(name: str, **settings) -> bytes:
    return Tenant(name, hash_key(name), NOW, TenantSettings(**settings)).encode()


def test_the_directory_is_the_records_the_runtime_reads():
    directory = Directory()
    assert isinstance(directory, TenantRecords) and isinstance(NoTenants(), TenantRecords)
    assert directory.tenant_settings("acme") is None
    directory.apply(TOPICS.tenants, b"acme", tenant("acme", powerful_memory=False))
    assert directory.tenant_settings("acme") == TenantSettings(powerful_memory=False)
    assert NoTenants().ready.is_set() and NoTenants().tenant_settings("acme") is None


def test_the_switch_takes_the_tenant_record_first_then_the_core_config(tmp_path):
    path = tmp_path / "core_config.json"
    path.write_text(json.dumps({"powerful_memory_enabled": False}))
    directory = Directory()
    switch = TenantSwitch(PowerSwitch(path), directory)
    assert switch.enabled("acme") is False  # no record: the file
    directory.apply(TOPICS.tenants, b"acme", tenant("acme", powerful_memory=True))
    directory.apply(TOPICS.tenants, b"globex", tenant("globex"))  # a record that overrides nothing
    assert switch.enabled("acme") is True and switch.enabled("globex") is False
    assert TenantSwitch(PowerSwitch(path), NoTenants()).enabled("acme") is False


def test_a_tenant_record_sets_the_time_zone_and_budgets_its_scopes_are_stepped_with():
    worker = MemorySettings(time_zone="UTC")
    directory = Directory()
    memory_for = TenantMemory(worker, directory)
    assert memory_for("acme") is worker  # no record yet: the worker's settings
    directory.apply(TOPICS.tenants, b"acme", tenant("acme", time_zone="Asia/Tokyo", persona_token_budget=77))
    stepped = memory_for("acme")
    assert str(stepped.zone_for("acme")) == "Asia/Tokyo" and stepped.persona_token_budget == 77
    assert memory_for("acme") is stepped  # one copy per record
    assert memory_for("globex") is worker
    # 2026-01-01 20:00 UTC is already the 2nd in Tokyo: a below-zero entry counts the 2nd as its day
    below = Evidence(disputation=1.0, disp_last_signal_at=NOW)
    at = NOW + timedelta(hours=8)
    assert sweep(below, at, settings=stepped, tenant="acme")[0].sub_zero_last_increment_date.day == 2
    assert sweep(below, at, settings=worker, tenant="acme")[0].sub_zero_last_increment_date.day == 1
    directory.apply(TOPICS.tenants, b"acme", tenant("acme"))
    assert str(memory_for("acme").zone_for("acme")) == "UTC"  # a changed record takes effect


def test_tenant_memory_built_after_the_records_arrived_has_their_settings():
    directory = Directory()
    directory.apply(TOPICS.tenants, b"acme", tenant("acme", persona_token_budget=77))
    memory_for = TenantMemory(MemorySettings(), directory)  # the worker is built after the directory read
    assert memory_for("acme").persona_token_budget == 77
    directory.apply(TOPICS.tenants, b"acme", None)  # the tenant is gone: the worker's settings again
    assert memory_for("acme") is memory_for.memory


def test_the_agent_steps_each_tenant_with_the_settings_it_was_built_with(tmp_path):
    directory = Directory()
    directory.apply(TOPICS.tenants, b"acme", tenant("acme", powerful_memory=False, time_zone="Asia/Tokyo"))
    tables, writes = new_tables(), TableWrites()
    ownership = Ownership(4, SETTINGS.topic("turns"))
    state = WorkerState.over(tables, StateSettings(), ownership, writes, SETTINGS.topic)
    agent = ScopeAgent(SETTINGS, object(), state, TenantSwitch(PowerSwitch(tmp_path / "none.json"), directory),
                       Stats(), memory_for=TenantMemory(SETTINGS.memory, directory))
    assert agent.powerful("acme") is False and agent.powerful("globex") is True
    assert str(agent.context("acme")("acme/ann/aria", NOW, False).memory.zone_for("acme")) == "Asia/Tokyo"
    assert agent.context("globex")("globex/ann/aria", NOW, True).memory is SETTINGS.memory
