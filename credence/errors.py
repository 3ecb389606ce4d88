"""The one error root. Every error credence raises on purpose is a CredenceError; messages say what to do."""


class CredenceError(Exception):
    """Root of every error raised by credence."""


class ConfigError(CredenceError):
    """Settings or a config file is invalid."""


class RecordError(CredenceError):
    """A topic record could not be decoded or failed validation (goes to the dead-letter topic)."""


class BrokerError(CredenceError):
    """The embedded Kafka broker could not be resolved, started or reached."""


class LLMError(CredenceError):
    """The LLM backend failed after its retries, or returned output that fails its schema."""


class LLMUnavailable(LLMError):
    """The server was unreachable, overloaded or answered unusably on every attempt: the request itself
    was not refused, so the same request may succeed later."""


class SinkError(CredenceError):
    """A sink could not consume its topics or make a batch durable."""


class ArchiveError(SinkError):
    """Writing or querying the Parquet archive failed."""


class DomainError(CredenceError, ValueError):
    """A domain rule was given input it cannot apply (unknown signal kind, invalid entry, wrong status)."""


class StateError(CredenceError):
    """A stored table value cannot be read (unknown schema version, corrupt bytes)."""


class ApiError(CredenceError):
    """An HTTP request is refused: `status` is the HTTP status, the message is the reason sent back."""

    def __init__(self, status: int, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = headers or {}


class TenantError(CredenceError):
    """A tenant command or record is invalid (unknown tenant, duplicate, bad override)."""


class BridgeError(CredenceError):
    """The bridge from memory to verified facts refused a nomination or approval."""


class BridgeRetired(BridgeError):
    """The bridge is switched off (bridge_enabled is false): nothing is nominated or approved, nothing is
    emitted, existing candidates stay as they are. Set CREDENCE_BRIDGE__BRIDGE_ENABLED=true to open it."""


class FencedError(StateError):
    """Another worker took over a partition this worker was writing: the broker refuses this worker's
    changelog writes. The worker must stop; it rejoins as a new member when restarted."""
