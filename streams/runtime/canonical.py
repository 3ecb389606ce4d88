"""The URL a worker advertises to its group: where the other workers forward a scope's reads to (Faust's
assignor carries each member's URL with its assignment; streams/api/routing.py reads them).

A worker bound to a wildcard address (0.0.0.0 in a container) must not advertise it: every replica would
name the same unroutable URL, each would take the others' partitions for its own, and a read would be
answered from a store without the scope. So the default is the bind host when it names one, else this
machine's first non-loopback address; `CREDENCE_CANONICAL_URL` names it outright. Two members advertising
one URL cannot both be routed to: the one whose partitions the group's map lost refuses to run.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable, Iterable, Mapping

from faust.assignor import PartitionAssignor

log = logging.getLogger(__name__)

WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "*", "[::]"})


def _usable(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    return not (ip.is_loopback or ip.is_unspecified or ip.is_link_local or ip.is_multicast)


def host_addresses() -> list[str]:
    """This machine's addresses as its own name resolves (a container's /etc/hosts names its network
    address), then the one the kernel would send from (a UDP socket's connect sends nothing)."""
    found: list[str] = []
    try:
        found += [info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM)]
    except OSError:
        pass
    for family, target in ((socket.AF_INET, "10.255.255.255"), (socket.AF_INET6, "fd00::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as probe:
                probe.connect((target, 9))
                found.append(probe.getsockname()[0])
        except OSError:
            continue
    return found


def routable_host(addresses: Iterable[str], hostname: str) -> str:
    """The first usable IPv4 address, then IPv6 (bracketed for a URL), else the host name."""
    usable = [a for a in addresses if _usable(a)]
    v4 = [a for a in usable if ":" not in a]
    if v4:
        return v4[0]
    if usable:
        return f"[{usable[0].split('%', 1)[0]}]"
    return hostname


def canonical_url(settings, addresses: Callable[[], list[str]] = host_addresses) -> str:
    """The URL this worker advertises: the setting, else http://<bind host or routable address>:<port>."""
    if settings.canonical_url:
        return settings.canonical_url
    port = settings.web_port or 6066
    host = settings.web_host.strip()
    if host in WILDCARD_HOSTS:
        host = routable_host(addresses(), socket.gethostname())
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _parts(assignment: Mapping[str, Iterable[int]]) -> dict[str, list[int]]:
    return {topic: sorted(parts) for topic, parts in assignment.items() if parts}


def claimed_by_another(own_changelogs: Mapping[str, Iterable[int]],
                       distribution_at_own_url: Mapping[str, Iterable[int]]) -> bool:
    """Whether the group's URL -> partitions map shows other partitions than this member's under its URL:
    the leader keys that map by URL, so a second member advertising the same URL replaced this one's."""
    return _parts(own_changelogs) != _parts(distribution_at_own_url)


def shared_urls(member_urls: Mapping[str, str]) -> dict[str, list[str]]:
    """URL -> the members advertising it, for the URLs more than one member advertises."""
    by_url: dict[str, list[str]] = {}
    for member, url in member_urls.items():
        by_url.setdefault(url, []).append(member)
    return {url: sorted(members) for url, members in by_url.items() if len(members) > 1}


def refusal(url: str) -> str:
    return (f"another member of the consumer group advertises this worker's URL {url}, so reads cannot be "
            "routed to either: set CREDENCE_CANONICAL_URL to a URL the other workers reach this one at "
            "(each worker its own)")


class UniqueUrlAssignor(PartitionAssignor):
    """Faust's assignor, refusing a URL that another member of the group advertises too."""

    def _update_member_urls(self, clients_metadata) -> None:
        super()._update_member_urls(clients_metadata)
        for url, members in shared_urls(self._member_urls).items():  # the leader sees every member's URL
            log.error("members %s of the group all advertise %s: reads for their partitions cannot be routed; "
                      "give each worker its own CREDENCE_CANONICAL_URL", ", ".join(members), url)

    def on_assignment(self, assignment) -> None:
        super().on_assignment(assignment)
        url = str(self._url)
        changelogs = self._table_manager.changelog_topics
        own = {t: p for t, p in self._assignment.actives.items() if t in changelogs}
        if claimed_by_another(own, self.changelog_distribution.get(url, {})):
            from credence.streams.runtime.agent import halt

            log.error("%s", refusal(url))
            halt(refusal(url))
