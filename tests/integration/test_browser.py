"""The memory browser in a real headless Chromium (Debian's package) against a real worker with /v1: the
page loads a scope's entries by tier and draws an entry's score history; a wrong key shows nothing.

The page is driven through its URL fragment (#key=…&tenant=…&user=…&character=…&entry=…), the DOM is
read with --dump-dom after the script ran (--virtual-time-budget lets the fetches finish), and a
screenshot is saved under the test's tmp dir.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import uuid
from html.parser import HTMLParser
from pathlib import Path

import pytest

from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.pipeline import (
    discard,
    flush_and_wait_idle,
    pipeline_settings,
    sample_lines,
    scopes_of,
    turn_counts,
    valid_turn_counts,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(300),
    pytest.mark.skipif(importlib.util.find_spec("credence.streams.api") is None,
                       reason="the /v1 API (credence.streams.api) is not on this branch yet"),
    pytest.mark.skipif(shutil.which("chromium") is None,
                       reason="needs Debian's chromium (.ci/run installs it: apt-get install -y chromium)"),
]

SCOPE = "acme/alice/barista"
CHROMIUM_TIMEOUT_S = 90


def chromium(tmp_path: Path, url: str, *args: str) -> str:
    command = ["chromium", "--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
               f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1280,900",
               "--virtual-time-budget=15000", *args, url]
    if os.geteuid() == 0:
        command.insert(1, "--no-sandbox")  # Chromium refuses to run its sandbox as root (CI containers)
    done = subprocess.run(command, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S, check=True)
    return done.stdout


class Page(HTMLParser):
    """What the test reads from the dumped DOM: entries per tier, chart points, body flags."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tier: str | None = None
        self.entries: set[tuple[str, str]] = set()
        self.points: list[float] = []
        self.body: dict[str, str] = {}
        self.status = ""
        self._in_status = False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if "data-tier" in a:
            self.tier = a["data-tier"]
        if "data-entry-id" in a and tag == "li":
            self.entries.add((self.tier, a["data-entry-id"]))
        if tag == "circle" and "point" in (a.get("class") or ""):
            self.points.append(float(a["data-score"]))
        self._in_status = a.get("id") == "status"

    def handle_data(self, data):
        if self._in_status:
            self.status += data


@pytest.fixture(scope="module")
def served(kafka_bootstrap, tmp_path_factory):
    from tests.support.api import add_tenant, client, turn_bodies

    root = tmp_path_factory.mktemp("browser")
    settings = pipeline_settings(kafka_bootstrap, root, f"br{uuid.uuid4().hex[:8]}")
    key = add_tenant(kafka_bootstrap, settings, "acme")
    worker = WorkerProcess(settings, kafka_bootstrap, root / "worker.log").start()
    try:
        lines = sample_lines([SCOPE])
        with client(worker, key, "acme") as api:
            api.send_turns(turn_bodies(lines)["acme"])
        expected = valid_turn_counts(lines)
        wait_until(lambda: turn_counts(worker) == expected, 90, "the scope's turns to be applied")
        flush_and_wait_idle(worker, kafka_bootstrap, settings, scopes_of(lines))
        yield worker, key
    finally:
        discard(worker)


def url(worker: WorkerProcess, key: str, entry: str = "") -> str:
    tenant, user, character = SCOPE.split("/")
    return f"{worker.url}/browser#key={key}&tenant={tenant}&user={user}&character={character}&entry={entry}"


def test_the_page_shows_entries_by_tier_and_an_entry_score_chart(served, tmp_path):
    from tests.support.api import client

    worker, key = served
    _, user, character = SCOPE.split("/")
    with client(worker, key, "acme") as api:
        listing = api.entries(user, character)
        target = next(e for e in listing.entries if e.kind == "reflection" and e.status in ("pending", "confirmed"))
        api.feedback(user, character, target.id, "confirm", wait=True)  # at least one signal to draw
        listing = api.entries(user, character)
        detail = api.entry(user, character, target.id)
    scored = [(h.at, h.score) for h in detail.history if h.at is not None and h.score is not None]
    # The store keeps each entry's signal history: the signals that scored it (the one confirmed above
    # among them) are points of the chart, not only its "now" point.
    assert len(scored) >= 2, detail.history

    page = Page(chromium(tmp_path, url(worker, key, target.id), "--dump-dom"))
    assert page.body.get("data-ready") == "true" and "data-error" not in page.body
    assert page.entries == {(e.tier, e.id) for e in listing.entries} and page.entries
    assert page.body.get("data-chart") == target.id
    # One point per scored signal, then the score now (decayed) when the clock is past the last signal.
    later = detail.clock is not None and (not scored or detail.clock > scored[-1][0])
    expected = [score for _, score in scored] + ([detail.entry.score] if later else [])
    assert page.points == pytest.approx(expected) and page.points

    shot = tmp_path / "browser.png"
    chromium(tmp_path, url(worker, key, target.id), f"--screenshot={shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_a_wrong_key_shows_no_entries(served, tmp_path):
    worker, _ = served
    page = Page(chromium(tmp_path, url(worker, "not-a-key"), "--dump-dom"))
    assert page.entries == set() and page.points == []
    assert page.body.get("data-error", "").startswith("401") and "Could not load" in page.status
