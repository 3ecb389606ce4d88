"""How credence's Kafka clients reach and authenticate to the cluster.

Environment: CREDENCE_KAFKA__SECURITY_PROTOCOL=SASL_SSL, CREDENCE_KAFKA__SASL_MECHANISM=SCRAM-SHA-512,
CREDENCE_KAFKA__USERNAME=credence, CREDENCE_KAFKA__PASSWORD_FILE=/run/secrets/kafka, … (nested under the
one Settings object; the bootstrap servers stay CREDENCE_KAFKA_BOOTSTRAP). Every client is built from
these by ``credence.kafka.client_options``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class KafkaSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    security_protocol: Protocol = "PLAINTEXT"
    sasl_mechanism: Mechanism = "SCRAM-SHA-512"
    username: str = ""
    # The password itself, or a file holding it (container secrets); never logged, never reported.
    password: SecretStr | None = None
    password_file: Path | None = None
    # PEM CA bundle that signed the brokers' certificates (empty: the system's trust store).
    ca_file: Path | None = None
    # PEM client certificate and key for mutual TLS (the SSL protocol with client authentication).
    cert_file: Path | None = None
    key_file: Path | None = None
    check_hostname: bool = True

    # aiokafka's pause between retries of one request (metadata refresh, leader change).
    retry_backoff_ms: int = Field(default=100, ge=10)
    # While the brokers are unreachable: credence's own retries back off exponentially with full jitter
    # up to this cap, and each component logs at most one warning per `outage_warning_interval_s`.
    outage_backoff_max_s: float = Field(default=10.0, gt=0)
    outage_warning_interval_s: float = Field(default=10.0, gt=0)
    # How long a client waits for one answer; also how soon a wrong endpoint or credential is reported.
    request_timeout_ms: int = Field(default=15_000, ge=1000)
    # The worker's producer (changelogs, journal, results): a batch of one flush holds many similar JSON
    # values (one scope's control value per batch is most of the changelog), which lz4 shrinks cheaply.
    compression_type: Literal["none", "gzip", "lz4", "zstd"] = "lz4"
    # The largest record credence produces (key and value, uncompressed): the broker's limit
    # (`max.message.bytes`, the producer's `max.request.size`, 1 MiB by default) less headroom for the
    # batch and record framing. A record over it is never sent: the input that would produce it is
    # dead-lettered with the reason instead, and the scope and its partition go on. At least 512 KiB: a
    # dead letter keeps up to 256 kB of its original, base64-encoded (credence.records.dead_letter).
    max_record_bytes: int = Field(default=1024 * 1024 - 16 * 1024, ge=512 * 1024)

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSettings:
        if self.password is not None and self.password_file is not None:
            raise ValueError("set the Kafka password or password_file, not both")
        if self.sasl and not self.username:
            raise ValueError(f"security_protocol {self.security_protocol} needs a username")
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("mutual TLS needs both cert_file and key_file")
        return self

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL")

    @property
    def tls(self) -> bool:
        return self.security_protocol.endswith("SSL")

    def secret(self) -> str:
        """The SASL password (from the file when one is named); read at connect time, never stored."""
        if self.password_file is not None:
            try:
                return self.password_file.read_text().rstrip("\r\n")
            except OSError as exc:
                from credence.errors import ConfigError

                raise ConfigError(f"cannot read the Kafka password file {self.password_file}: "
                                  f"{exc.strerror}") from None
        return self.password.get_secret_value() if self.password is not None else ""
