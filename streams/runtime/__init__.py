"""The Faust runtime: app, scope agent, LLM runner, timers, web views, topics and their records."""
