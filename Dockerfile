# agentd: one image for a single server (SQLite in /data) or for replicas (DATABASE_URL=postgres://…).
# Untested on the machine that builds agentd (it has no container engine); see docs/deployment.md.
FROM node:24-bookworm-slim

# bubblewrap sandboxes the agent's bash tool; the container must allow user namespaces
# (docs/deployment.md), or set AGENTD_UNSAFE_HOST_BASH=1 and rely on the container alone.
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap ca-certificates \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.client.json ./
COPY bin ./bin
COPY src ./src
COPY web ./web
RUN npm ci --no-audit --no-fund && npm prune --omit=dev --no-audit --no-fund

ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8787 \
    AGENTD_DATA_DIR=/data
# A new named volume takes the owner of the folder it is mounted on; made by Docker, that is root,
# and the server, running as node, could not create its database there.
RUN mkdir -p /data && chown node:node /data
VOLUME ["/data"]
EXPOSE 8787
USER node
CMD ["node", "bin/agentd.js", "serve"]
