"""The URL a worker advertises to its group (streams/runtime/canonical.py): routable by default, and
refused when another member advertises it too."""

from __future__ import annotations

import pytest

from credence.config import load_settings
from credence.errors import ConfigError
from credence.streams.runtime.canonical import canonical_url, claimed_by_another, routable_host, shared_urls


def test_a_wildcard_bind_advertises_the_first_routable_address_not_0_0_0_0():
    settings = load_settings(web_host="0.0.0.0", web_port=6066)
    url = canonical_url(settings, addresses=lambda: ["127.0.0.1", "fe80::1%eth0", "172.18.0.4", "10.1.2.3"])
    assert url == "http://172.18.0.4:6066"
    assert canonical_url(load_settings(web_host="::"), addresses=lambda: ["::1", "2001:db8::5"]) == \
        "http://[2001:db8::5]:6066"
    assert routable_host(["127.0.0.1"], "worker-7") == "worker-7"  # no address: the host name


def test_a_named_bind_host_or_the_setting_is_advertised_as_is():
    assert canonical_url(load_settings(web_host="127.0.0.1", web_port=7001), addresses=list) == "http://127.0.0.1:7001"
    assert canonical_url(load_settings(web_host="0.0.0.0", canonical_url="http://worker-2.internal:6066/"),
                         addresses=lambda: ["10.0.0.9"]) == "http://worker-2.internal:6066"


@pytest.mark.parametrize("url", ["http://0.0.0.0:6066", "http://[::]:6066", "worker:6066", "http://a b:1"])
def test_an_unroutable_canonical_url_is_refused_at_start(url):
    with pytest.raises(ConfigError, match="canonical_url"):
        load_settings(canonical_url=url)


def test_a_member_whose_partitions_another_took_under_its_url_sees_it():
    mine = {"app-scopes-changelog": [0, 2], "app-entries-changelog": [2, 0]}
    # The leader keys the group's map by URL: a second member with this URL replaced this one's entry.
    assert claimed_by_another(mine, {"app-scopes-changelog": [1, 3], "app-entries-changelog": [1, 3]})
    assert not claimed_by_another(mine, {"app-scopes-changelog": [0, 2], "app-entries-changelog": [0, 2]})
    assert not claimed_by_another({"t": []}, {})


def test_the_leader_names_every_url_two_members_share():
    urls = {"m1": "http://10.0.0.1:6066", "m2": "http://0.0.0.0:6066", "m3": "http://0.0.0.0:6066"}
    assert shared_urls(urls) == {"http://0.0.0.0:6066": ["m2", "m3"]}
    assert shared_urls({"m1": "http://a:1", "m2": "http://b:1"}) == {}


def member_assignment(assignor, actives: dict, distribution: dict):
    from faust.assignor.client_assignment import ClientAssignment, ClientMetadata
    from faust.assignor.partition_assignor import ConsumerProtocolMemberAssignment

    assignment = ClientAssignment(actives=actives, standbys={})
    metadata = ClientMetadata(assignment=assignment, url=str(assignor._url), changelog_distribution=distribution)
    return ConsumerProtocolMemberAssignment(assignor.version,
                                            sorted(assignment.kafka_protocol_assignment(assignor._table_manager)),
                                            assignor._compress(metadata.dumps()))


def test_a_worker_refuses_to_run_when_another_member_advertises_its_url(tmp_path, monkeypatch):
    from credence.streams.runtime import agent
    from credence.streams.runtime.app import faust_app, raw_table

    settings = load_settings(web_host="0.0.0.0", canonical_url="http://worker:6066", data_dir=tmp_path,
                             topic_partitions=4)
    app = faust_app(settings, "localhost:1")
    table = raw_table(app, "scopes", 4, {})
    changelog = table.changelog_topic.get_topic_name()
    halted: list[str] = []
    monkeypatch.setattr(agent, "halt", halted.append)
    mine = {changelog: [0, 2]}
    app.assignor.on_assignment(member_assignment(app.assignor, mine, {"http://worker:6066": mine}))
    assert halted == []
    # Another member with the same URL got partitions 1 and 3; the group's map kept its entry, not ours.
    app.assignor.on_assignment(member_assignment(app.assignor, mine, {"http://worker:6066": {changelog: [1, 3]}}))
    assert len(halted) == 1 and "http://worker:6066" in halted[0] and "CREDENCE_CANONICAL_URL" in halted[0]


class Cluster:
    """The cluster metadata the group leader assigns from: every topic with `partitions` partitions."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions

    def partitions_for_topic(self, topic):
        return set(range(self.partitions))


@pytest.mark.parametrize(("urls", "refusals"), [(("http://worker:6066", "http://worker:6066"), 1),
                                                (("http://worker-a:6066", "http://worker-b:6066"), 0)])
def test_of_two_members_advertising_one_url_through_fausts_assignment_one_refuses(tmp_path, monkeypatch, urls,
                                                                                   refusals):
    from credence.streams.runtime import agent
    from credence.streams.runtime.app import faust_app, raw_table

    members = []
    for name, url in zip("ab", urls):
        settings = load_settings(canonical_url=url, data_dir=tmp_path / name, topic_partitions=4)
        app = faust_app(settings, "localhost:1")
        changelog = raw_table(app, "scopes", 4, {}).changelog_topic.get_topic_name()
        members.append(app.assignor)
    halted: list[str] = []
    monkeypatch.setattr(agent, "halt", halted.append)
    topics = {"credence.turns", changelog}
    leader = members[0]
    assignment = leader.assign(Cluster(4), {"m-a": members[0].metadata(topics), "m-b": members[1].metadata(topics)})
    members[0].on_assignment(assignment["m-a"])
    members[1].on_assignment(assignment["m-b"])
    assert len(halted) == refusals and all(urls[0] in reason for reason in halted)
