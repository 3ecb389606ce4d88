"""One module per LLM task: VERSION, SYSTEM (the static prefix), Input/Output models, render_user,
MAX_TOKENS. The JSON schema sent for structured output is the Output model's schema.

A prompt's NAME is its own (the key of CREDENCE_LLM__MODELS, the schema name a server sees): a task
(credence.streams.scope.tasks.TaskName) uses one prompt or more."""

from types import ModuleType

from credence.streams.llm.prompts import (
    candidate_rerank,
    correction,
    merge_decision,
    negative_keyword_target,
    recent_summary,
    refine_cluster,
    reflection_synthesis,
    stage1_extraction,
    stage2_classification,
    surfaced_feedback,
)

PROMPTS: dict[str, ModuleType] = {
    module.NAME: module
    for module in (
        stage1_extraction,
        stage2_classification,
        candidate_rerank,
        surfaced_feedback,
        negative_keyword_target,
        reflection_synthesis,
        merge_decision,
        # -- correction work (issue 32 item 1) --
        correction,
        refine_cluster,
        recent_summary,
    )
}

__all__ = ["PROMPTS"]
