"""The one place Kafka client options are built: every producer, consumer, admin client and the Faust app
get their bootstrap servers, security protocol, TLS context and SASL credentials from ``client_options``.

``tests/unit/kafka/test_kafka_clients.py`` scans the repository and fails on a client built any other way.
When a client cannot reach the cluster, ``diagnose`` names the cause (nothing listening, untrusted
certificate, wrong password, a plaintext client on a secured port) instead of aiokafka's
"Unable to bootstrap".
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

from credence.config.kafka import KafkaSettings
from credence.errors import BrokerError, ConfigError

PLAINTEXT = KafkaSettings()


def ssl_context(kafka: KafkaSettings) -> ssl.SSLContext:
    """A client TLS context: the configured CA (or the system's), the client certificate for mTLS."""
    try:
        context = ssl.create_default_context(cafile=str(kafka.ca_file) if kafka.ca_file else None)
        if kafka.cert_file is not None:
            context.load_cert_chain(str(kafka.cert_file), str(kafka.key_file))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the Kafka TLS files (ca_file {kafka.ca_file}, cert_file "
                          f"{kafka.cert_file}, key_file {kafka.key_file}): {exc}") from None
    context.check_hostname = kafka.check_hostname
    return context


def client_options(bootstrap: str, kafka: KafkaSettings | None = None, **extra: Any) -> dict[str, Any]:
    """aiokafka keyword arguments for a client of the cluster at `bootstrap` (``extra`` adds the
    client's own options, e.g. acks or group_id)."""
    kafka = kafka or PLAINTEXT
    if not bootstrap:
        raise ConfigError("no Kafka bootstrap servers given (CREDENCE_KAFKA_BOOTSTRAP)")
    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "security_protocol": kafka.security_protocol,
        "request_timeout_ms": kafka.request_timeout_ms,
        "retry_backoff_ms": kafka.retry_backoff_ms,
    }
    if kafka.tls:
        options["ssl_context"] = ssl_context(kafka)
    if kafka.sasl:
        options |= {"sasl_mechanism": kafka.sasl_mechanism, "sasl_plain_username": kafka.username,
                    "sasl_plain_password": kafka.secret()}
    return options | extra


# How long a record a worker produces may wait for the brokers before it fails (aiokafka's request_timeout_ms
# is also its batches' time to live): an outage shorter than this is waited out, not a reason to halt. Faust's
# own producer default, kept for the changelogs' transactional writers too (fence.py).
DELIVERY_TIMEOUT_S = 1200.0


RECORD_FRAMING = 16 * 1024  # a record's batch and record framing, headers: the producer counts them


def producer_max_request_size(kafka: KafkaSettings) -> int:
    """The producer's own limit on one record: above credence's record limit by the framing, so a record
    credence checked against its limit is never refused by the producer (Faust's default, 1,000,000, was
    below the limit's default, and a forwarded record between them halted its partition for good)."""
    return kafka.max_record_bytes + RECORD_FRAMING


def faust_options(bootstrap: str, kafka: KafkaSettings | None = None) -> dict[str, Any]:
    """faust.App keyword arguments for the same connection (Faust wants credential objects)."""
    import faust

    options = client_options(bootstrap, kafka)
    servers = ";".join(f"kafka://{host}" for host in options["bootstrap_servers"].split(","))
    protocol = options["security_protocol"]
    context = options.get("ssl_context")
    out: dict[str, Any] = {"broker": servers, "broker_request_timeout": options["request_timeout_ms"] / 1000,
                           "producer_request_timeout": DELIVERY_TIMEOUT_S,
                           "producer_max_request_size": producer_max_request_size(kafka or PLAINTEXT)}
    compression = (kafka or PLAINTEXT).compression_type
    if compression != "none":
        out["producer_compression_type"] = compression
    if protocol.startswith("SASL"):
        out["broker_credentials"] = faust.SASLCredentials(
            username=options["sasl_plain_username"], password=options["sasl_plain_password"],
            ssl_context=context, mechanism=options["sasl_mechanism"])
    elif protocol == "SSL":
        out["broker_credentials"] = faust.SSLCredentials(context)
    return out


def send_now(app) -> None:
    """Let the records a Faust app's producer holds go out now instead of after its linger.

    A worker awaits every record's acknowledgement right after queueing its batch (emits, redo record,
    table writes, an LLM result), so the linger only delays it: ~5 ms per send, several sends per LLM round
    trip, on which a scope waits. Closing the open batches and waking the sender is what aiokafka's own
    flush before a transaction commit does, without waiting: the records queued together still share
    their produce requests (and their compression). Faust has no public call for it, so this reaches into
    aiokafka (pinned <0.15; tests/integration/test_broker.py checks it still works)."""
    release(getattr(getattr(app, "producer", None), "_producer", None))


def release(producer) -> None:
    """`send_now` for an aiokafka producer (None, or not started yet: nothing to do)."""
    accumulator = getattr(producer, "_message_accumulator", None)
    if accumulator is None:
        return  # not started yet: nothing is queued
    for batches in accumulator._batches.values():
        for batch in batches:
            batch._builder.close()
    waiter = accumulator._waiter_future
    if not waiter.done():
        waiter.set_result(None)


async def diagnose(bootstrap: str, kafka: KafkaSettings | None = None) -> str:
    """Why a client of `bootstrap` cannot connect, in one sentence naming the cause ("" if it can)."""
    from aiokafka.conn import create_conn
    from aiokafka.errors import KafkaConnectionError, KafkaError

    kafka = kafka or PLAINTEXT
    options = client_options(bootstrap, kafka)
    host, _, port = options["bootstrap_servers"].split(",")[0].strip().rpartition(":")
    where = f"the Kafka broker at {host}:{port} ({kafka.security_protocol})"
    try:
        conn = await asyncio.wait_for(create_conn(
            host, int(port), request_timeout_ms=options["request_timeout_ms"],
            ssl_context=options.get("ssl_context"), security_protocol=options["security_protocol"],
            sasl_mechanism=options.get("sasl_mechanism", "PLAIN"),
            sasl_plain_username=options.get("sasl_plain_username"),
            sasl_plain_password=options.get("sasl_plain_password")), options["request_timeout_ms"] / 1000)
    except ssl.SSLCertVerificationError as exc:
        return (f"{where}: its TLS certificate is not trusted ({exc.verify_message}); set "
                "CREDENCE_KAFKA__CA_FILE to the CA that signed it")
    except ssl.SSLError as exc:
        return f"{where}: the TLS handshake failed ({exc.reason or exc}); check the protocol and certificates"
    except ConnectionRefusedError:
        return f"{where}: nothing listens there (connection refused); check CREDENCE_KAFKA_BOOTSTRAP"
    except TimeoutError:
        return f"{where}: no answer within {options['request_timeout_ms'] / 1000:.0f}s"
    except KafkaConnectionError as exc:
        return _closed_cause(where, kafka, exc)
    except KafkaError as exc:
        if "auth" in type(exc).__name__.lower() or "sasl" in str(exc).lower():
            return (f"{where}: SASL authentication failed for user {kafka.username!r} with "
                    f"{kafka.sasl_mechanism}: wrong username or password ({type(exc).__name__})")
        return f"{where}: {type(exc).__name__}: {exc}"
    except OSError as exc:
        return _closed_cause(where, kafka, exc)
    try:
        await asyncio.wait_for(conn.send(_metadata_request()), options["request_timeout_ms"] / 1000)
    except (TimeoutError, KafkaError, OSError) as exc:
        return _closed_cause(where, kafka, exc)
    finally:
        conn.close()
    return ""


def _metadata_request():
    from aiokafka.protocol.metadata import MetadataRequest

    return MetadataRequest([])


def _closed_cause(where: str, kafka: KafkaSettings, exc: BaseException) -> str:
    """A broker that hangs up during the handshake is speaking another protocol on that port."""
    if not kafka.tls:
        return (f"{where}: the broker closed the connection at once; the port probably expects TLS: check "
                "CREDENCE_KAFKA__SECURITY_PROTOCOL and the port")
    if not kafka.sasl and kafka.cert_file is None:
        return (f"{where}: the broker closed the TLS connection; it probably requires a client certificate "
                "(CREDENCE_KAFKA__CERT_FILE and KEY_FILE) or SASL on this port")
    if not kafka.sasl:
        return (f"{where}: the broker closed the TLS connection; it rejected the client certificate or "
                "expects SASL on this port")
    return f"{where}: the connection failed ({type(exc).__name__}: {exc})"


async def unreachable(bootstrap: str, kafka: KafkaSettings | None, exc: BaseException) -> BrokerError:
    """The BrokerError to raise when a client could not start: the diagnosed cause, else `exc`."""
    cause = await diagnose(bootstrap, kafka)
    return BrokerError(cause or f"cannot reach the Kafka cluster at {bootstrap}: {exc}")


class _DuringStart(logging.Filter):
    """aiokafka logs its own line for a failed bootstrap; `start` reports the diagnosed cause instead,
    so the user reads one message, not two."""

    active = 0

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.active and record.getMessage().startswith("Unable connect to"))


_DURING_START = _DuringStart()
for _name in ("aiokafka", "aiokafka.client"):  # aiokafka logs under its package name
    logging.getLogger(_name).addFilter(_DURING_START)


async def start(client, bootstrap: str, kafka: KafkaSettings | None) -> None:
    """``await client.start()``, turning a failed connection into a BrokerError that names the cause."""
    from aiokafka.errors import KafkaError

    _DURING_START.active += 1
    try:
        await client.start()
    except (TimeoutError, KafkaError, OSError) as exc:
        stop = getattr(client, "stop", None) or getattr(client, "close")
        try:
            await stop()
        except Exception:  # noqa: BLE001 - the client never started; its cleanup error says nothing new
            pass
        raise await unreachable(bootstrap, kafka, exc) from None
    finally:
        _DURING_START.active -= 1
