# The fastpubsub image used by docker-compose.yml (processor and CLI).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
# Editable install: the processor reads the Avro schemas from /app/schemas.
RUN pip install --no-cache-dir -e .
ENTRYPOINT []
CMD ["pubsub", "--help"]
