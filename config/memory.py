"""The seed's memory_settings: thresholds, weights, schedules and budgets of the evidence mechanism.

Owned by the evidence core (tables/). Every default is the seed's number, under the seed's name.
Override through the environment as CREDENCE_MEMORY__<FIELD> (dicts and lists as JSON).
"""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r}: use an IANA name such as 'UTC' or 'Europe/Berlin'") from exc


DEFAULT_NEGATIVE_KEYWORDS: dict[str, list[str]] = {
    # A keyword only nominates a rebuttal; the LLM target check decides whether it applies.
    "en": ["no", "not", "never", "wrong", "incorrect", "that's not true", "not anymore", "i don't", "stop saying"],
    "de": ["nein", "nicht", "nie", "falsch", "stimmt nicht", "nicht mehr"],
    "fr": ["non", "pas", "jamais", "faux", "c'est faux", "plus maintenant"],
    "es": ["no", "nunca", "falso", "incorrecto", "ya no"],
    "zh": ["不是", "不对", "错了", "没有", "不再", "别再说"],
    "ja": ["違う", "ちがう", "いいえ", "そうじゃない", "もう"],
    "ko": ["아니", "아니요", "틀렸", "더 이상"],
}


# A forget request ("please forget what I told you about …") only nominates the entries it speaks about;
# the same LLM target check decides which, and whether the user asks to forget them.
DEFAULT_FORGET_KEYWORDS: dict[str, list[str]] = {
    "en": ["forget", "don't remember", "stop remembering", "delete that", "erase that"],
    "de": ["vergiss", "vergessen"],
    "fr": ["oublie", "oubliez"],
    "es": ["olvida", "olvídate", "olvidate"],
}


DEFAULT_ASSENT_WORDS: dict[str, list[str]] = {
    # A user turn made only of these (and fillers) just agrees: the content is what it answered.
    "en": ["yes", "yeah", "yep", "yup", "ok", "okay", "sure", "right", "correct", "exactly", "true", "indeed",
           "definitely", "absolutely", "mhm", "uh-huh"],
    "de": ["ja", "genau", "stimmt", "richtig", "klar"],
    "fr": ["oui", "ouais", "exactement", "d'accord", "bien", "sûr"],
    "es": ["sí", "si", "claro", "vale", "exacto", "cierto"],
    "zh": ["是", "是的", "对", "对的", "好", "嗯"],
    "ja": ["はい", "うん", "そう", "そうです", "ええ"],
    "ko": ["네", "응", "예", "맞아요", "맞아"],
}


class MemorySettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    # Read-time decay: effective = counter * 0.5 ** (age_days / half_life).
    reinforcement_half_life_days: float = Field(default=30.0, gt=0)
    disputation_half_life_days: float = Field(default=180.0, gt=0)

    # Signal weights, added to the stored counter (user_ignore is negative on purpose).
    user_fact_reinforce_weight: float = 0.5
    user_fact_negate_weight: float = 1.0
    user_confirm_weight: float = 1.0
    user_deny_weight: float = 1.0
    negative_keyword_weight: float = 1.0
    user_ignore_weight: float = -0.2

    # "After more than two lifetime user_fact reinforces, each later reinforce also receives a 0.5 bonus."
    combo_threshold: int = Field(default=2, ge=0)
    combo_bonus: float = 0.5

    # Initial reinforcement by the highest source-fact importance (lower importances seed 0).
    seed_reinforcement_by_importance: dict[int, float] = {10: 0.8, 9: 0.6, 8: 0.4, 7: 0.2}

    # Derived tiers.
    promoted_threshold: float = 2.0
    confirmed_threshold: float = 1.0
    archive_candidate_threshold: float = -2.0

    # Archive sweep.
    archive_after_sub_zero_days: int = Field(default=14, ge=1)
    archive_sweep_interval_hours: float = Field(default=1.0, gt=0)

    # Prompt rendering budgets (tokens of entry text).
    persona_token_budget: int = Field(default=2000, ge=0)
    reflection_token_budget: int = Field(default=2000, ge=0)

    # Merge-on-promote retry/dead-letter state.
    promote_retry_interval_minutes: float = Field(default=30.0, ge=0)
    max_promote_attempts: int = Field(default=5, ge=1)
    # A promote_blocked reflection gets a fresh series of attempts this long (event time) after its last
    # attempt, or sooner when the backend is healthy again: a later successful LLM result on its scope.
    promote_blocked_retry_hours: float = Field(default=24.0, gt=0)
    promote_blocked_retry_on_healthy_backend: bool = True

    # Weak-memory (powerful memory off) time-driven lifecycle.
    fallback_confirm_after_days: float = Field(default=7.0, ge=0)
    fallback_promote_after_days: float = Field(default=7.0, ge=0)

    # recent_mentions anti-repetition.
    mention_window_hours: float = Field(default=5.0, gt=0)
    suppress_after_mentions: int = Field(default=3, ge=1)
    suppression_hours: float = Field(default=5.0, gt=0)
    # When an AI turn carries no surfaced_ids, an entry counts as mentioned if at least this share of its
    # content words appears in the AI text (lexical fallback; surfaced_ids win when present).
    ai_mention_min_overlap: float = Field(default=0.75, gt=0, le=1)

    # Stage-2 signal mapping limits.
    stage2_max_facts_per_batch: int = Field(default=20, ge=1)
    stage2_rerank_above_candidates: int = Field(default=30, ge=1)
    stage2_observation_max_tokens: int = Field(default=200, ge=1)
    stage2_max_prompt_tokens: int = Field(default=15000, ge=1)

    # Never twice (not seed numbers; tables.statement.restates): a new reflection, a promotion or
    # `credence memory dedupe` treats two statements of the same polarity and predicate kind as one when
    # their content stems overlap at this Jaccard share, or when all of one side's stems (at least this
    # many) are in the other's; with embeddings on, also when their cosine similarity reaches
    # restatement_cosine.
    restatement_jaccard: float = Field(default=0.6, gt=0, le=1)
    restatement_containment_min_stems: int = Field(default=1, ge=1)
    restatement_cosine: float = Field(default=0.9, gt=0, le=1)

    # Local negative-keyword hook, per language.
    negative_keywords: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_NEGATIVE_KEYWORDS.items()}
    )
    forget_keywords: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_FORGET_KEYWORDS.items()}
    )
    forget_max_candidates: int = Field(20, ge=1, le=20)  # entries one forget request's target check sees

    # Texts a rewrite replaced, kept per entry (tables/version_history.py); the origin keeps 5
    # (PERSONA_VERSION_HISTORY_MAX).
    version_history_max: int = Field(default=5, ge=1)
    # Correction work (streams/scope/corrections.py): a promotion whose text shares this share of the smaller
    # side's keywords with an active persona entry is queued against it (the origin's detector, 0.4), and one
    # correction call decides at most correction_batch_size queued items (PERSONA_CORRECTION_BATCH_LIMIT).
    correction_topic_overlap: float = Field(default=0.4, gt=0, le=1)
    # Off only to reproduce a store written before correction work existed (twins an operator then dedupes).
    correction_work_enabled: bool = True
    correction_batch_size: int = Field(default=10, ge=1, le=10)

    # Stage-1 fact origin: bare assents per language (tables.origin).
    assent_words: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_ASSENT_WORDS.items()}
    )

    # Refinement loops (the seed: active with powerful memory on; the origin's MEMORY_REFINE_* numbers):
    # every refine_cron_interval_seconds of a scope's event time, at most
    # refine_clusters_per_pass clusters of near-duplicate live entries (of at most refine_cluster_size_max
    # members) go to the refine task; a cluster already answered is asked again only when its membership
    # changes or refine_revisit_after_days have passed.
    refine_cron_interval_seconds: float = Field(default=1800.0, gt=0)
    refine_clusters_per_pass: int = Field(default=3, ge=0)
    refine_cluster_size_max: int = Field(default=6, ge=2)
    refine_revisit_after_days: float = Field(default=30.0, ge=0)
    # With embeddings on (CREDENCE_PIPELINE__EMBEDDINGS), two live entries of the same polarity also share a
    # cluster when their sentence embeddings' cosine similarity reaches this (all-MiniLM-L6-v2: paraphrases
    # with few words in common ~0.7-0.8, "lives in Berlin" / "lives in Lisbon" 0.6, unrelated < 0.35).
    refine_cluster_cosine: float = Field(default=0.7, gt=0, le=1)

    # Recent conversation memo (the origin's recent.json compression and constants, under
    # its names): each scope keeps its newest turns; past the threshold the older ones (all but the newest
    # history_max_items - 1) are summarised with the memo into a new memo. Not switched by powerful memory.
    recent_memory_enabled: bool = True
    recent_compress_threshold_items: int = Field(default=20, ge=2)
    recent_history_max_items: int = Field(default=10, ge=1)
    recent_summary_max_tokens: int = Field(default=1000, ge=16)
    recent_per_message_max_tokens: int = Field(default=500, ge=16)
    # The bound on turns kept while no summary lands (the origin's last-resort hard cap, counted in turns):
    # the oldest go first, and a summary in flight for them is then dropped and asked again.
    recent_max_items: int = Field(default=60, ge=2)
    recent_render_max_tokens: int = Field(default=2000, ge=1)  # GET …/recent without ?max_tokens=

    # The calendar day of the sub-zero tally is counted in this zone (per tenant when listed).
    time_zone: str = "UTC"
    tenant_time_zones: dict[str, str] = {}

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        _zone(value)
        return value

    @field_validator("tenant_time_zones")
    @classmethod
    def _known_zones(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value.values():
            _zone(name)
        return value

    @field_validator("seed_reinforcement_by_importance")
    @classmethod
    def _importance_keys(cls, value: dict[int, float]) -> dict[int, float]:
        bad = [k for k in value if not 1 <= k <= 10]
        if bad:
            raise ValueError(f"seed_reinforcement_by_importance keys must be importances 1..10, got {bad}")
        return value

    @model_validator(mode="after")
    def _recent_bounds(self) -> MemorySettings:
        if not self.recent_history_max_items <= self.recent_compress_threshold_items < self.recent_max_items:
            raise ValueError("recent_history_max_items <= recent_compress_threshold_items < recent_max_items "
                             "must hold: a summary leaves the newest recent_history_max_items - 1 turns")
        return self

    def zone_for(self, tenant: str | None = None) -> ZoneInfo:
        """The time zone whose calendar days the archive sweep counts for ``tenant``."""
        if tenant is not None and tenant in self.tenant_time_zones:
            return _zone(self.tenant_time_zones[tenant])
        return _zone(self.time_zone)


DEFAULT_MEMORY_SETTINGS = MemorySettings()
