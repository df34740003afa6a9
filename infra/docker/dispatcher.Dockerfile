# syntax=docker/dockerfile:1.7
#
# forge-dispatcher: the fleet's HTTP API (and /metrics, /healthz, /readyz, /ui, /mcp) on PORT.
#
#   docker build -f infra/docker/dispatcher.Dockerfile -t forge-fleet/dispatcher:0.1.0 .   # from the repository root
#
# CI does not build this image (no Docker engine there); test/integration/deployment.int.test.ts reads this file
# as text (stages, user, secrets, what the runtime stage copies). See infra/README.md.
#
# Keys come at run time, never at build time: FORGE_TOKEN_PUBLIC_KEY_FILE and FORGE_SIGNING_SECRET_FILE name
# mounted files (compose secrets, Kubernetes Secret volumes); REDIS_URL carries the dispatcher's own Redis user.
# The dispatcher spawns no processes and writes no files: run it with `--read-only --cap-drop ALL
# --security-opt no-new-privileges` under the runtime's default seccomp profile.

ARG NODE_IMAGE=node:20-bookworm-slim

# ---- build: the whole workspace, compiled ----------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /src
ENV TURBO_TELEMETRY_DISABLED=1
COPY . .
# --ignore-scripts: the root `prepare` would build every workspace; the next step builds what this image needs.
RUN --mount=type=cache,target=/root/.npm npm ci --ignore-scripts --no-audit --no-fund
RUN npm run build -- --filter=@forge-fleet/dispatcher...

# ---- deps: the dispatcher's production dependencies only -------------------------------------------------------
FROM ${NODE_IMAGE} AS deps
# Only the manifests: npm ci needs every workspace's package.json (the lock file names them all), and /src ends up
# holding nothing but them and the installed node_modules: the root one and the workspaces' own (npm nests a
# package there when two versions are needed, e.g. packages/shared/node_modules/ajv).
COPY . /context
WORKDIR /src
RUN cd /context \
 && find . -name package.json -not -path '*/node_modules/*' -exec cp --parents {} /src/ \; \
 && cp package-lock.json .npmrc /src/
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --ignore-scripts --no-audit --no-fund --workspace=@forge-fleet/dispatcher

# ---- runtime -----------------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
# No package manager at run time (npm, npx, corepack, yarn): nothing here installs anything.
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /opt/yarn-* /usr/local/bin/yarn /usr/local/bin/yarnpkg \
 && groupadd --system --gid 10001 forge \
 && useradd --system --uid 10001 --gid forge --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin forge
WORKDIR /app
# HOST: the dispatcher listens on 127.0.0.1 by default; in a container it must listen on every interface.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080
# Everything below stays owned by root: the dispatcher's user can read it, not change it.
# From the deps stage: node_modules (root and nested) and every workspace's package.json. apps/dispatcher/package.json
# is read at run time (the version in /openapi.json).
COPY --from=deps /src/ ./
COPY --from=build /src/packages/shared/dist ./packages/shared/dist
COPY --from=build /src/packages/store/dist ./packages/store/dist
COPY --from=build /src/packages/telemetry/dist ./packages/telemetry/dist
# console/: the web console's static files (/ui).
COPY --from=build /src/apps/dispatcher/dist ./apps/dispatcher/dist
COPY --from=build /src/apps/dispatcher/console ./apps/dispatcher/console
COPY --from=build --chmod=0555 /src/apps/dispatcher/bin ./apps/dispatcher/bin
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + process.env.PORT + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Node is PID 1: the dispatcher handles SIGTERM itself (FORGE_SHUTDOWN_GRACE_MS) and starts no child processes,
# so no init is needed (use `docker run --init` if you want one anyway).
ENTRYPOINT ["node", "/app/apps/dispatcher/bin/forge-dispatcher.js"]
