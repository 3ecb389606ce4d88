"""The pure domain: entries, evidence math, tiers, lifecycle, rendering, sweeps.

No Kafka, HTTP, Arrow or DuckDB here, and no clock reads: time is always a parameter (``now``/``at``).
"""

from credence.tables.entries import Entry, apply_snapshot, changed, new_persona_entry, new_reflection, record_signal
from credence.tables.evidence import (
    Evidence,
    apply_signal,
    derived_tier,
    evidence_score,
    seed_reinforcement,
    sweep,
)
from credence.tables.fallback import fallback_tick
from credence.tables.lifecycle import (
    LifecycleStep,
    MergeOutcome,
    PromotionTicket,
    apply_merge_decision,
    archive,
    block_promotion,
    confirm_by_score,
    deny,
    merge_evidence,
    merge_into_persona,
    promote_decision,
    promotion_is_current,
    record_promote_attempt,
    sweep_entry,
)
from credence.tables.mentions import is_suppressed, lift_suppression, record_mention
from credence.tables.rendering import MemoryBlock, render_memory_block
from credence.tables.scope import Scope
from credence.tables.tokens import TokenCounter, approximate_tokens, default_token_counter, default_tokenizer_name
from credence.tables.usage import Usage, decay_sweep, reinforce, usage_strength
from credence.tables.validity import as_of

__all__ = [
    "Entry", "Evidence", "LifecycleStep", "MemoryBlock", "MergeOutcome", "PromotionTicket", "Scope",
    "TokenCounter", "apply_merge_decision", "apply_signal", "apply_snapshot", "approximate_tokens", "archive",
    "block_promotion", "changed", "confirm_by_score", "default_token_counter", "default_tokenizer_name", "deny",
    "derived_tier", "evidence_score", "fallback_tick", "is_suppressed", "lift_suppression", "merge_evidence",
    "merge_into_persona", "new_persona_entry", "new_reflection", "promote_decision", "promotion_is_current",
    "record_mention", "record_promote_attempt", "record_signal", "render_memory_block", "seed_reinforcement",
    "sweep", "sweep_entry", "Usage", "as_of", "decay_sweep", "reinforce", "usage_strength",
]  # fmt: skip
