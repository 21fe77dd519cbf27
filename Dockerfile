# OneTool's image: `onetool serve --http` on port 8765, as an unprivileged user. From the repository's top:
#   docker build -t onetool .
# The config is not in the image: mount one at /etc/onetool/onetool.yaml (deploy/compose.yaml and deploy/k8s/
# mount deploy/onetool.yaml there).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# tini is pid 1: it hands SIGTERM to the gateway and reaps orphans. In a container the sandbox gets no pid
# namespace of its own, so what its workers or the stdio servers leave behind goes to pid 1, which python as
# pid 1 would never reap. libseccomp2 (the sandbox's seccomp filter) is already there; named so it stays.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini libseccomp2 \
    && rm -rf /var/lib/apt/lists/*

# No Node: stdio servers started with npx need it. To add Node 20 (with npm and npx), uncomment:
# COPY --from=node:20-bookworm-slim /usr/local/bin/node /usr/local/bin/node
# COPY --from=node:20-bookworm-slim /usr/local/lib/node_modules /usr/local/lib/node_modules
# RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
#     && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx
# npx caches packages under $HOME (/var/lib/onetool), which is writable.

WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY onetool/ onetool/
COPY sandbox/ sandbox/
COPY packs/ packs/
# asyncpg, for a PostgreSQL state store, is one of the package's own dependencies.
RUN pip install . && rm -rf /src

# A fixed uid, so Kubernetes' runAsNonRoot can check it (deploy/k8s/deployment.yaml runs as the same one).
RUN groupadd --system --gid 10001 onetool \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/onetool --no-create-home \
        --shell /usr/sbin/nologin onetool \
    && install -d -o onetool -g onetool -m 0700 /var/lib/onetool
# The state folder (SQLite store, OAuth tokens) and the runtime folder (discovery file, upstream records), both
# made 0700 by the gateway inside its home; deploy/k8s mounts a writable volume there.
ENV HOME=/var/lib/onetool \
    ONETOOL_STATE_DIR=/var/lib/onetool/state \
    ONETOOL_RUNTIME_DIR=/var/lib/onetool/run
USER 10001:10001
WORKDIR /var/lib/onetool

EXPOSE 8765
# What `docker stop` and Kubernetes send: the gateway drains (http.drain_seconds) and exits.
STOPSIGNAL SIGTERM
# No curl in the slim image: python's urllib. A non-2xx answer or no answer raises, and python exits 1.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/health', timeout=4)"]
ENTRYPOINT ["tini", "--", "onetool"]
CMD ["serve", "--http", "--host", "0.0.0.0", "--port", "8765", "--config", "/etc/onetool/onetool.yaml"]
