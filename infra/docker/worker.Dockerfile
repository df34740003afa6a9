# syntax=docker/dockerfile:1.7
#
# forge-worker: one image for every tier and pool. The command line picks which:
#
#   docker build -f infra/docker/worker.Dockerfile -t forge-fleet/worker:0.1.0 .     # from the repository root
#   docker run ... forge-fleet/worker:0.1.0 --tier platform --tools /app/tools/tools.mjs --concurrency 32
#
# CI does not build this image (no Docker engine there); test/integration/deployment.int.test.ts reads this file
# as text (stages, user, secrets, what the runtime stage copies). See infra/README.md.
#
# ---------------------------------------------------------------------------------------------------------------
# What the sandbox needs from the container runtime (Platform and Embedded workers; docs/sandbox.md)
# ---------------------------------------------------------------------------------------------------------------
# Platform and Embedded handlers run in sandbox processes started as
#   prlimit … -- unshare --user --map-root-user --net --pid --fork --kill-child -- node …
# so the container must let an unprivileged process create user, network and PID namespaces:
#   - util-linux's `unshare` and `prlimit` (installed below);
#   - a node kernel with unprivileged user namespaces (user.max_user_namespaces > 0; on Debian/Ubuntu kernels
#     kernel.unprivileged_userns_clone=1). On Ubuntu >= 23.10 hosts, kernel.apparmor_restrict_unprivileged_userns=1
#     also refuses them unless the container's AppArmor profile allows `userns`;
#   - a seccomp profile that allows the unshare(2) system call. Docker's and containerd's default profiles allow it
#     only to CAP_SYS_ADMIN, which this container must never get. Use the runtime's default profile with `unshare`
#     added (infra/compose/init-secrets.sh makes one for Docker; infra/README.md explains Kubernetes). Not
#     `seccomp=unconfined`, not `--privileged`, not CAP_SYS_ADMIN: a user namespace needs no capability, so run
#     with `--cap-drop ALL --security-opt no-new-privileges --read-only --tmpfs /tmp`.
# NODE_ENV=production turns the strict sandbox on: a Platform/Embedded worker that cannot create the namespaces
# refuses to start (CONFIG_INVALID "this machine cannot enforce: …") instead of running handlers unisolated.
# Host workers never sandbox (their isolation is a node pool of their own): they need none of the above and run
# under the runtime's default seccomp profile; the strict sandbox changes nothing for them.
#
# Writable paths: /tmp only (the sandbox bundles the tools module into /tmp/forge-sandbox-*; tsx caches there).
#
# ---------------------------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------------------------
# The image holds no tools module. Mount one read-only under /app/tools and pass `--tools /app/tools/<file>`:
# under /app, its imports of @forge-fleet/* (and this image's other dependencies) resolve to /app/node_modules,
# so the worker recognises its own classes (WebAssembly tools are told apart by class). A module with
# dependencies of its own: bundle them in (`esbuild --bundle --format=esm --platform=node
# --external:@forge-fleet/* …`), or build a derived image (`FROM forge-fleet/worker` + `COPY tools/ /app/tools/`).
# TypeScript modules work too (loaded through tsx).

ARG NODE_IMAGE=node:20-bookworm-slim

# ---- build: the whole workspace, compiled ----------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /src
ENV TURBO_TELEMETRY_DISABLED=1
COPY . .
# --ignore-scripts: the root `prepare` would build every workspace; the next step builds what this image needs.
RUN --mount=type=cache,target=/root/.npm npm ci --ignore-scripts --no-audit --no-fund
RUN npm run build -- --filter=@forge-fleet/worker...

# ---- deps: the worker's production dependencies only -----------------------------------------------------------
FROM ${NODE_IMAGE} AS deps
# Only the manifests: npm ci needs every workspace's package.json (the lock file names them all), and /src ends up
# holding nothing but them and the installed node_modules: the root one and the workspaces' own (npm nests a
# package there when two versions are needed, e.g. packages/shared/node_modules/ajv).
COPY . /context
WORKDIR /src
RUN cd /context \
 && find . -name package.json -not -path '*/node_modules/*' -exec cp --parents {} /src/ \; \
 && cp package-lock.json .npmrc /src/
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --ignore-scripts --no-audit --no-fund --workspace=@forge-fleet/worker

# ---- runtime -----------------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
# util-linux: `unshare` and `prlimit` for the sandbox (Essential in Debian, named here because the sandbox needs it).
# tini: PID 1 that forwards SIGTERM and reaps orphans; a sandbox process whose `unshare` parent died is re-parented
# to PID 1, and Node as PID 1 would never reap it. npm, npx, corepack and yarn go: nothing installs at run time.
RUN apt-get update \
 && apt-get install -y --no-install-recommends util-linux tini \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /opt/yarn-* /usr/local/bin/yarn /usr/local/bin/yarnpkg \
 && groupadd --system --gid 10001 forge \
 && useradd --system --uid 10001 --gid forge --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin forge
WORKDIR /app
ENV NODE_ENV=production \
    FORGE_METRICS_PORT=9464 \
    FORGE_METRICS_HOST=0.0.0.0
# Everything below stays owned by root: the worker's user can read it, not change it.
# From the deps stage: node_modules (root and nested) and every workspace's package.json. The root package.json declares
# "type": "module", so a tools module named *.js under /app/tools loads as an ES module.
COPY --from=deps /src/ ./
COPY --from=build /src/packages/shared/dist ./packages/shared/dist
COPY --from=build /src/packages/store/dist ./packages/store/dist
COPY --from=build /src/packages/telemetry/dist ./packages/telemetry/dist
COPY --from=build /src/apps/worker/dist ./apps/worker/dist
# Run directly: the bin's shebang carries the worker's heap flags (`env -S node --max-semi-space-size=8 …`).
COPY --from=build --chmod=0555 /src/apps/worker/bin ./apps/worker/bin
RUN mkdir -p /app/tools
USER 10001:10001
EXPOSE 9464
# /healthz on the metrics port (Kubernetes uses its own probes and ignores this).
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + process.env.FORGE_METRICS_PORT + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--", "/app/apps/worker/bin/forge-worker.js"]
CMD ["--help"]
