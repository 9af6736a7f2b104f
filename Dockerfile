# The fastpubsub image used by docker-compose.yml (processor and CLI).
# Stage 1 builds the wheel from the source; stage 2 installs that wheel, as a
# user's `pip install` would: the image runs the published package (schemas
# included as package data), not a checkout.
FROM python:3.11-slim AS wheel
WORKDIR /build
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
COPY --from=wheel /wheels /wheels
RUN wheel=$(ls /wheels/fastpubsub-*.whl) && pip install --no-cache-dir "${wheel}[registry]" && rm -rf /wheels
# the numba kernels compiled into the image (~/.cache/fastpubsub/<version>/numba), not at every container start
RUN pubsub warmup --algorithm all
ENTRYPOINT []
CMD ["pubsub", "--help"]
