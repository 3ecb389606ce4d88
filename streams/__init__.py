"""The worker and everything around it: the runtime over Faust, its state, the pure scope step, the LLM
tasks, the HTTP and MCP API, serving and the operator's commands (layers: docs/architecture.md)."""
