# syntax=docker/dockerfile:1
# kqueue controller image: `docker build -t ghcr.io/kqueue/kqueue:<version> .`
#
# Stage 1 builds the wheel; stage 2 installs it (with its dependencies from PyPI) into a virtual
# environment, mounting the wheel from stage 1 instead of copying it, so neither the source tree,
# build tools nor the wheel end up in a layer. tests/chart/test_image.py runs the same
# `pip wheel .` / `pip install <wheel>` steps in a clean venv, as no image can be built where the
# tests run.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# Only what the wheel is built from: a change to tests or docs does not invalidate the layer.
COPY pyproject.toml README.md ./
COPY kqueue ./kqueue
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.source="https://github.com/kqueue/kqueue" \
      org.opencontainers.image.description="kqueue: Kueue-style admission and quota controller" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv /opt/kqueue \
 && /opt/kqueue/bin/pip install /wheels/kqueue-*.whl \
 && /opt/kqueue/bin/kqueue version
ENV PATH=/opt/kqueue/bin:$PATH \
    # The root filesystem is read-only in the chart: never try to write .pyc files at run time
    # (pip compiled them at install time), and send logs straight to the container runtime.
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Non-root, the "nonroot" uid of distroless images; the chart's securityContext matches it.
USER 65532:65532
WORKDIR /tmp
# Webhook (TLS), metrics, health probes: the Configuration's default ports.
EXPOSE 9443 8080 8081
ENTRYPOINT ["kqueue", "run"]
