# chatops in a container (docs/operations.md, "Docker"). A bot people can reach needs a surface:
# put SLACK_* (or FEISHU_*) and the model's settings in .env (see .env.example), then
#   docker build -t chatops .                      # add --build-arg WITH_NODE=1 for npx MCP servers
#   docker run --rm -p 8080:8080 --env-file .env -v chatops-data:/data chatops
# compose.yaml runs two of these on PostgreSQL.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Node.js and npm, only for connectors that start an MCP server with `npx` (docs/connectors.md)
ARG WITH_NODE=0
RUN if [ "$WITH_NODE" = "1" ]; then \
        apt-get update && apt-get install -y --no-install-recommends nodejs npm \
        && rm -rf /var/lib/apt/lists/*; \
    fi

# The runtime dependencies exactly as locked (every file's hash checked), then the package
# itself (not editable, no dev dependencies); the sources are not kept.
COPY requirements.lock /tmp/src/
RUN pip install --require-hashes -r /tmp/src/requirements.lock
COPY pyproject.toml README.md /tmp/src/
COPY bot /tmp/src/bot
COPY connectors /tmp/src/connectors
COPY hooks /tmp/src/hooks
RUN pip install --no-deps /tmp/src && rm -rf /tmp/src

# An unprivileged user owns the data volume; nothing runs as root.
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/chatops chatops \
    && mkdir /data \
    && chown chatops:chatops /data
COPY manifests /app/manifests
COPY triggers /app/triggers
WORKDIR /app
USER chatops

ENV DATABASE_URL=sqlite:////data/chatops.db \
    CHATOPS_MANIFESTS_DIR=/app/manifests \
    PORT=8080
VOLUME ["/data"]
EXPOSE 8080

# Liveness: the database answers (GET /healthz from inside the container, a loopback client).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '8080'), timeout=4)"]

# Every interface, said explicitly: a container is reached through its published port.
CMD ["chatops", "serve", "--host", "0.0.0.0"]
