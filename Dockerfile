# aigw image: build with `docker build -t aigw .` (no container engine runs in this repo's CI;
# tests/test_image.py runs docker/install.sh, the build step below, in a fresh venv instead).
# The base is pinned to an exact tag; pin its digest too (`python:3.11.11-slim-bookworm@sha256:…`)
# where your registry policy asks for it. Both stages use the same base, so the venv's
# interpreter links stay valid.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Every dependency ships wheels for linux/amd64 and arm64: no compiler is installed anywhere.
COPY pyproject.toml README.md ./
COPY docker/install.sh docker/install.sh
COPY gateway gateway
RUN sh docker/install.sh /opt/aigw .

FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 aigw \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin aigw
COPY --from=build /opt/aigw /opt/aigw
# Read-only root filesystem: bytecode was compiled at install, nothing is written at run time
# (the chart mounts an emptyDir at /tmp for libraries that want a scratch folder).
ENV PATH=/opt/aigw/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /etc/aigw
EXPOSE 8080 9090
# SIGTERM starts the drain: /readyz turns 503, in-flight requests finish within shutdown.grace.
STOPSIGNAL SIGTERM
ENTRYPOINT ["aigw"]
CMD ["run", "--config", "/etc/aigw/aigw.yaml"]
