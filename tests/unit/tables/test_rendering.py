from datetime import UTC, datetime, timedelta

import pytest

from credence.config.memory import MemorySettings
from credence.tables.evidence import Evidence
from credence.tables.mentions import record_mention
from credence.tables.rendering import by_priority, fill_budget, render_memory_block
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SCOPE = Scope("acme", "u1", "aria")


def words(text: str) -> int:
    """A test counter: one token per word, so budgets are easy to read."""
    return len(text.split())


def scored(r: float = 0.0, d: float = 0.0) -> Evidence:
    return Evidence(reinforcement=r, disputation=d, rein_last_signal_at=T0, disp_last_signal_at=T0)


def render(entries, settings=None):
    return render_memory_block(SCOPE, entries, T0, settings=settings or MemorySettings(), count_tokens=words)


def text_of(n: int, tag: str) -> str:
    return " ".join([tag] * n)


def test_persona_and_reflections_have_separate_budgets_of_2000(persona_factory, reflection_factory):
    personas = [persona_factory(text=text_of(1000, f"p{i}"), evidence=scored(3 - i)) for i in range(3)]
    reflections = [reflection_factory(text=text_of(1000, f"r{i}"), evidence=scored(0.5 - i / 10)) for i in range(3)]
    block = render(personas + reflections)
    assert block.persona == tuple(personas[:2]) and block.persona_tokens == 2000
    assert block.reflections == tuple(reflections[:2]) and block.reflection_tokens == 2000


def test_exactly_filling_the_budget_fits_one_more_token_does_not(persona_factory):
    fits = persona_factory(text=text_of(2000, "a"))
    too_big = persona_factory(text=text_of(2001, "a"))
    assert render([fits]).persona == (fits,)
    assert render([too_big]).persona == ()


def test_an_entry_that_does_not_fit_is_skipped_and_the_scan_continues(persona_factory):
    big = persona_factory(text=text_of(1500, "big"), evidence=scored(3))
    bigger = persona_factory(text=text_of(600, "bigger"), evidence=scored(2))
    small = persona_factory(text=text_of(400, "small"), evidence=scored(1))
    assert render([small, bigger, big]).persona == (big, small)


def test_order_is_score_then_importance_descending_and_stable(persona_factory):
    low = persona_factory(text="low", evidence=scored(1), importance=9)
    high = persona_factory(text="high", evidence=scored(2), importance=1)
    tie_important = persona_factory(text="tie important", evidence=scored(1), importance=10)
    tie_a = persona_factory(text="tie a", evidence=scored(1), importance=9)
    assert by_priority([low, tie_a, high, tie_important], T0) == [high, tie_important, low, tie_a]


def test_higher_score_wins_budget_pressure(reflection_factory):
    weak = reflection_factory(text=text_of(1500, "weak"), evidence=scored(0.1), importance=10)
    strong = reflection_factory(text=text_of(1500, "strong"), evidence=scored(0.9), importance=1)
    assert render([weak, strong]).reflections == (strong,)


def test_confirmed_reflection_at_zero_or_below_is_not_rendered(reflection_factory):
    zero = reflection_factory(status="confirmed", text="zero", evidence=scored(1.0, 1.0))
    below = reflection_factory(status="confirmed", text="below", evidence=scored(0.0, 0.5))
    above = reflection_factory(status="confirmed", text="above", evidence=scored(0.01))
    negative_pending = reflection_factory(status="pending", text="pending", evidence=scored(0.0, 1.0))
    block = render([zero, below, above, negative_pending])
    # The seed keeps a net-negative pending reflection eligible; it is shown as disputed, never as current.
    assert (block.reflections, block.disputed) == ((above,), (negative_pending,))


@pytest.mark.parametrize("status", ["promoted", "denied", "archived"])
def test_only_pending_and_confirmed_reflections_render(reflection_factory, status):
    assert render([reflection_factory(status=status, evidence=scored(5))]).reflections == ()


def test_a_promote_blocked_reflection_renders_as_the_confirmed_one_it_is(reflection_factory):
    blocked = reflection_factory(status="promote_blocked", evidence=scored(5))
    assert render([blocked]).reflections == (blocked,)
    assert render([reflection_factory(status="promote_blocked", evidence=scored(0))]).reflections == ()


def test_archived_persona_entries_do_not_render(persona_factory):
    from credence.tables.lifecycle import archive

    assert render([archive(persona_factory(), T0)]).persona == ()


def test_suppressed_entries_are_not_rendered_until_the_suppression_ends(persona_factory):
    entry = persona_factory(text="repeats itself")
    for hours in (0, 1, 2):
        entry = record_mention(entry, T0 - timedelta(hours=3) + timedelta(hours=hours))
    assert render([entry]).persona == ()
    later = render_memory_block(SCOPE, [entry], T0 + timedelta(hours=4), count_tokens=words)
    assert later.persona == (entry,)


def test_protected_entries_always_render_outside_the_budget(persona_factory):
    card = persona_factory(text=text_of(5000, "card"), protected=True)
    regular = persona_factory(text=text_of(2000, "regular"))
    block = render([regular, card])
    assert block.protected == (card,) and block.persona == (regular,) and block.persona_tokens == 2000


def test_protected_entries_render_even_when_suppression_fields_are_set(persona_factory):
    card = persona_factory(text="a pirate", protected=True, suppressed_at=T0)
    assert render([card]).protected == (card,)


def test_other_scopes_are_ignored(persona_factory):
    elsewhere = persona_factory(scope=Scope("acme", "u2", "aria"))
    assert render([elsewhere]).entries == ()


def test_budgets_come_from_settings(persona_factory, reflection_factory):
    settings = MemorySettings(persona_token_budget=1, reflection_token_budget=0)
    one, two = persona_factory(text="one"), persona_factory(text="two words")
    block = render([one, two, reflection_factory(text="x")], settings)
    assert block.persona == (one,) and block.reflections == ()


def test_the_count_is_of_the_entry_text_alone(persona_factory):
    seen = []
    render_memory_block(SCOPE, [persona_factory(text="just this")], T0, count_tokens=lambda t: seen.append(t) or 1)
    assert seen == ["just this"]


def test_text_lists_sections_in_order(persona_factory, reflection_factory):
    block = render([
        reflection_factory(text="might like jazz"), persona_factory(text="likes tea"),
        persona_factory(text="a pirate", protected=True),
    ])  # fmt: skip
    assert block.text == (
        "Character card:\n- a pirate\n\n"
        "What you know about the user:\n- likes tea\n\n"
        "Observations about the user (pending or confirmed; the user may correct them):\n- might like jazz"
    )
    assert render([]).text == ""


def test_fill_budget_with_zero_cost_entries(persona_factory):
    entries = [persona_factory(text="") for _ in range(3)]
    assert fill_budget(entries, 0, words) == (tuple(entries), 0)


def test_default_counter_is_used_when_none_is_given(persona_factory):
    block = render_memory_block(SCOPE, [persona_factory(text="hello world")], T0)
    assert block.persona_tokens == 2


def test_an_entry_the_users_latest_word_disputes_is_shown_as_disputed_never_as_current(persona_factory):
    from credence.tables.rendering import DISPUTED_HEADING, PERSONA_HEADING

    day = timedelta(days=1)
    # Well reinforced, then corrected: the score is still positive, the user's latest word is a dispute.
    corrected = persona_factory(text="The user loves coffee.", evidence=Evidence(
        reinforcement=3.0, disputation=1.0, rein_last_signal_at=T0 - 5 * day, disp_last_signal_at=T0 - day))
    kept = persona_factory(text="The user has a dog.", evidence=scored(2.0))
    block = render([corrected, kept])
    assert (block.persona, block.disputed) == ((kept,), (corrected,))
    assert block.text.index(DISPUTED_HEADING) < block.text.index("- The user loves coffee.")
    assert "- The user loves coffee." not in block.text.split(DISPUTED_HEADING)[0]
    assert PERSONA_HEADING in block.text and block.persona_tokens == 9
    # Said again after the dispute: current again.
    reaffirmed = persona_factory(text="The user loves coffee.", evidence=Evidence(
        reinforcement=3.5, disputation=1.0, rein_last_signal_at=T0, disp_last_signal_at=T0 - day))
    assert render([reaffirmed]).persona == (reaffirmed,)
