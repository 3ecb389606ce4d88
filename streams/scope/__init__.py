"""One scope's stream state and the pure steps that move it (no Kafka here; the agent adapts them).

A step takes (state, input, now, context) and returns the new state plus effects: records to emit and
LLM requests to run. Time comes in as `now` (event time: the scope's clock only moves forward).
"""
