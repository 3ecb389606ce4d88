# The credence worker image (used by docker-compose.yml). No Java or Maven: in this image Kafka is
# always external (CREDENCE_KAFKA_BOOTSTRAP).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY credence credence
COPY config config
COPY tables tables
COPY streams streams
COPY sinks sinks
RUN pip install . && useradd --create-home --uid 10001 credence && mkdir /data && chown credence /data
USER credence
ENV CREDENCE_DATA_DIR=/data CREDENCE_WEB_HOST=0.0.0.0
EXPOSE 6066
ENTRYPOINT ["credence"]
CMD ["worker"]
