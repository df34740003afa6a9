/**
 * `forge-worker`: serves the tools of one tier (and, for host, one pool) from
 * a tools module. Reads REDIS_URL and the FORGE_* variables (see env.ts).
 */
import { randomBytes } from 'node:crypto';
import { availableParallelism, hostname } from 'node:os';
import { ConfigInvalidError, isFleetError, runMain, secretFromEnv, type Tool } from '@forge-fleet/shared';
import { FleetMetrics, type MetricsServer, serveMetrics, setupTracing, ToolTracer } from '@forge-fleet/telemetry';
import { pino } from 'pino';
import { DEFAULT_CONCURRENCY, MAX_CONCURRENCY, parseWorkerArgs, USAGE } from './cli.js';
import { parseWorkerEnv } from './env.js';
import type { WorkerServers } from './mcp-servers/worker-servers.js';
import { ServingPool } from './pools/serving-pool.js';
import { WorkerPool } from './pools/worker-pool.js';
import { closeInheritedDescriptors, type Sandbox, startSandbox, unenforced } from './sandbox/index.js';
import { loadToolsModule, selectTools } from './tools/load.js';
import { WasmToolExecutor } from './wasm/index.js';

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  process.stdout.write(`${USAGE}\nEnvironment: REDIS_URL (required), FORGE_PREFIX, LOG_LEVEL and the FORGE_* settings listed in README.md.\n`);
  process.exit(0);
}

runMain('forge-worker', async (stopRequested) => {
  // Before anything is spawned (a tools module's imports may spawn too): what this process inherited without
  // close-on-exec would reach every server, reaper and sandbox it starts, past their filesystem view.
  const closedDescriptors = closeInheritedDescriptors();
  const env = parseWorkerEnv(process.env);
  const args = parseWorkerArgs(process.argv.slice(2));
  // This queue's call-verification key only (`forge keys worker-key`): it cannot sign calls for any other queue.
  const callKey = secretFromEnv(process.env, 'FORGE_CALL_KEY', 'worker environment');
  const log = pino({ level: env.LOG_LEVEL, base: { app: 'forge-worker', tier: args.tier, pool: args.pool, pid: process.pid } });
  if (closedDescriptors === undefined) log.debug('no /proc/self/fdinfo: descriptors inherited without close-on-exec are not looked for');
  else if (closedDescriptors.length > 0) log.info({ descriptors: closedDescriptors }, `closed ${closedDescriptors.length} descriptors inherited without close-on-exec: no process this worker starts gets them`);
  const metrics = new FleetMetrics('worker', {}, { tier: args.tier, ...(args.pool === undefined ? {} : { pool: args.pool }) });
  const tracing = await setupTracing('forge-worker');
  let tools = args.tools === undefined ? [] : selectTools(await loadToolsModule(args.tools), args.tier, args.pool);
  const strict = args['strict-sandbox'] || (env.FORGE_STRICT_SANDBOX === undefined ? env.NODE_ENV === 'production' : env.FORGE_STRICT_SANDBOX === '1' || env.FORGE_STRICT_SANDBOX === 'true');
  if (strict && args.tier !== 'host' && env.FORGE_SANDBOX === 'off') {
    throw new ConfigInvalidError('worker environment', ['FORGE_SANDBOX=off contradicts the strict sandbox (--strict-sandbox, FORGE_STRICT_SANDBOX, or NODE_ENV=production)']);
  }
  // Platform and Embedded handlers leave this process: it holds the Redis connection and the queue's key.
  let sandbox: Sandbox | undefined;
  // WebAssembly tools isolate themselves (WASI without preopens or environment, in worker threads: see docs/wasm.md);
  // Node's permission model in the sandbox would forbid both. Every other Platform/Embedded handler is sandboxed.
  const boxed = tools.filter((t) => !(t.executor instanceof WasmToolExecutor));
  if (args.tier !== 'host' && env.FORGE_SANDBOX === 'on' && boxed.length > 0 && args.tools !== undefined) {
    // The flag wins over the environment; the defaults live in the sandbox's AssignmentOptions.
    const processIsolation = args['sandbox-isolation'] ?? env.FORGE_SANDBOX_ISOLATION;
    sandbox = await startSandbox({
      modulePath: args.tools,
      tools: boxed,
      size: env.FORGE_SANDBOX_SIZE ?? Math.max(2, availableParallelism()),
      ...(env.FORGE_SANDBOX_CALLS_PER_PROCESS === undefined ? {} : { callsPerProcess: env.FORGE_SANDBOX_CALLS_PER_PROCESS }),
      ...(processIsolation === undefined ? {} : { isolation: processIsolation }),
      ...(env.FORGE_SANDBOX_MAX_PROCESSES === undefined ? {} : { maxProcesses: env.FORGE_SANDBOX_MAX_PROCESSES }),
      ...(env.FORGE_SANDBOX_PROCESSES_PER_CALLER === undefined ? {} : { processesPerCaller: env.FORGE_SANDBOX_PROCESSES_PER_CALLER }),
      ...(env.FORGE_SANDBOX_IDLE_MS === undefined ? {} : { idleMs: env.FORGE_SANDBOX_IDLE_MS }),
      limits: {
        ...(env.FORGE_SANDBOX_CPU_SECONDS === undefined ? {} : { cpuSeconds: env.FORGE_SANDBOX_CPU_SECONDS }),
        ...(env.FORGE_SANDBOX_MEMORY_MB === undefined ? {} : { memoryMb: env.FORGE_SANDBOX_MEMORY_MB }),
        ...(env.FORGE_SANDBOX_OUTPUT_BYTES === undefined ? {} : { outputBytes: env.FORGE_SANDBOX_OUTPUT_BYTES }),
      },
      log,
      onProcess: (event) => (event.kind === 'started' ? metrics.sandboxStarted.inc() : metrics.sandboxStopped.inc({ reason: event.reason })),
    });
    const missing = unenforced(sandbox.isolation);
    if (missing.length > 0 && strict) {
      await sandbox.close();
      throw new ConfigInvalidError('worker sandbox', [`this machine cannot enforce: ${missing.join('; ')}`, 'run where user namespaces and prlimit are available, or drop the strict sandbox (development only)']);
    }
    for (const layer of missing) log.warn({ layer }, 'sandbox layer not enforced on this machine');
    const box = sandbox;
    tools = tools.map((t) => (t.executor instanceof WasmToolExecutor ? t : { definition: t.definition, executor: box.executorFor(t.definition.name) }));
  } else if (args.tier !== 'host' && boxed.length > 0) {
    log.warn('FORGE_SANDBOX=off: platform/embedded handlers run inside the worker process (development only)');
  }
  let stopping = false;
  // A wrong call key found after start (no dispatcher had published its lane's check then), or a servers file whose
  // slow server turns out to clash with the tools module: stop and exit 1, saying why in one line.
  const fatal = (error: unknown): void => {
    stopping = true;
    void (async () => {
      await serving.stop().catch(() => undefined);
      await sandbox?.close().catch(() => undefined);
      await servers?.close().catch(() => undefined);
      await server?.close().catch(() => undefined);
      process.stderr.write(`forge-worker: ${isFleetError(error) ? `${error.code}: ${error.message}` : String(error)}\n`);
      process.exit(1);
    })();
  };
  // Set once the servers are known (below): a worker of MCP servers alone takes only the calls they can run at once.
  let concurrency = args.concurrency ?? DEFAULT_CONCURRENCY;
  // The process's id: every generation of its pool is this worker, holding the same servers' sessions.
  const workerId = args.id ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const makePool = (served: readonly Tool[], id: string, options: { takeOverDefinitions?: boolean } = {}): WorkerPool =>
    new WorkerPool({
      redis: env.REDIS_URL,
      prefix: env.FORGE_PREFIX,
      tier: args.tier,
      pool: args.pool,
      pack: args.pack,
      tools: served,
      concurrency,
      lockDurationMs: env.FORGE_LOCK_DURATION_MS,
      leaseMs: env.FORGE_LEASE_MS,
      keyCheckWaitMs: env.FORGE_KEY_CHECK_WAIT_MS,
      shutdownGraceMs: env.FORGE_SHUTDOWN_GRACE_MS,
      retentionMs: env.FORGE_RESULT_RETENTION_MS,
      retryAttempts: env.FORGE_RETRY_ATTEMPTS,
      retryBackoffMs: env.FORGE_RETRY_BACKOFF_MS,
      id,
      takeOverDefinitions: options.takeOverDefinitions,
      sessionHolder: workerId,
      callKey,
      maxResultBytes: env.FORGE_MAX_RESULT_BYTES,
      progressIntervalMs: env.FORGE_PROGRESS_INTERVAL_MS,
      metrics,
      tracer: ToolTracer.of(tracing),
      // A call key found wrong after start (no dispatcher had published its lane's check then): stop and exit 1.
      onFatal: (error) => fatal(error),
      log,
    });
  // The process's pool of generations; it takes calls once started, below, with the tools then known.
  const serving = new ServingPool({ make: makePool, id: workerId, shutdownGraceMs: env.FORGE_SHUTDOWN_GRACE_MS, log });
  // Set below; the probes, which listen from here on, read them as they come.
  let servers: WorkerServers | undefined;
  let server: MetricsServer | undefined;
  if (env.FORGE_METRICS_PORT !== 'off') {
    // Ready while it takes calls, once each server's first start is over; a server that is down leaves the worker
    // ready for its other tools, and is named. One still on its first start is named too (`starting`), not ready yet.
    // They listen before the servers start: a liveness probe must not find a worker waiting for a slow server dead.
    const ready = () => {
      const taking = serving.ready;
      return servers === undefined ? taking : { ok: taking && servers.settled, servers: servers.status() };
    };
    server = await serveMetrics({ port: env.FORGE_METRICS_PORT, host: env.FORGE_METRICS_HOST, metrics, ready });
    log.info({ port: server.port }, 'metrics and probes listening (/metrics, /healthz, /readyz)');
  }
  const moduleTools = tools;
  try {
    // MCP servers (--mcp): the file's servers placed in this worker's lane run here, in its tier's isolation.
    // Loaded only then: a worker without servers does not load the MCP SDK.
    if (args.mcp !== undefined) {
      await (await import('./mcp-servers/start-servers.js')).startWorkerServers({
        file: args.mcp,
        tier: args.tier,
        pool: args.pool,
        sandbox: env.FORGE_SANDBOX === 'on',
        strict,
        reviveAfterMs: env.FORGE_MCP_RETRY_AFTER_MS,
        maxResultBytes: env.FORGE_MAX_RESULT_BYTES,
        stopRequested,
        onServers: (made) => (servers = made),
        log,
      });
    }
    if (stopRequested.aborted) {
      // Stopped while its servers started: nothing is announced, and what was started goes (runMain then stops this).
      await servers?.close();
      await sandbox?.close();
      await server?.close();
      await tracing.shutdown();
      return { log, stop: () => Promise.resolve() };
    }
  } catch (error) {
    await servers?.close();
    await sandbox?.close();
    await server?.close();
    throw error;
  }
  const mcp = servers;
  // Calls past what its servers can run at once would wait inside this worker for an instance, counted as started
  // here: lost with it if it dies (WORKER_LOST, though they never reached the server), and kept from an idle worker.
  if (args.concurrency === undefined && moduleTools.length === 0 && mcp !== undefined) concurrency = Math.min(MAX_CONCURRENCY, Math.max(1, mcp.callSlots()));
  const own = new Set(moduleTools.map((t) => t.definition.name));
  const served = (): Tool[] => {
    const fromServers = mcp?.tools() ?? [];
    // The module's tools win: a server whose list gains one of their names does not take it over.
    for (const t of fromServers) if (own.has(t.definition.name)) log.warn({ tool: t.definition.name }, "an MCP server lists a tool of the tools module's name; the module's is served");
    return [...moduleTools, ...fromServers.filter((t) => !own.has(t.definition.name))];
  };
  // A tool of the module and a server's of the same name are refused once the servers' first start is over, whether
  // that was before the worker served (a fast server) or after (one slower than the head start): one answer for one
  // configuration. A list that gains such a name later changes nothing (the module's is served).
  const clash = (): ConfigInvalidError | undefined => {
    const clashes = (mcp?.tools() ?? []).map((t) => t.definition.name).filter((n) => own.has(n));
    return clashes.length === 0 ? undefined : new ConfigInvalidError('worker tools', [`the tools module and the MCP servers file both offer ${clashes.join(', ')}: rename the module's tools or give the server another prefix`]);
  };
  if (mcp?.settled === true) {
    const refused = clash();
    if (refused !== undefined) {
      await mcp.close();
      await sandbox?.close();
      await server?.close();
      throw refused;
    }
  }
  try {
    await serving.start(served());
    const retool = (): Promise<void> => serving.retool(served()).catch((err: unknown) => log.error({ err }, 'could not serve the MCP servers\' new tools; the previous set is served'));
    mcp?.on('toolsChanged', () => void retool());
    // Said once the last server's first start is over and what it gave is served (its tools announced): from this
    // line on, every server is up or known down, and a tool of one that is up is found by any dispatcher.
    void mcp?.whenSettled().then(async () => {
      if (stopRequested.aborted || stopping) return;
      const refused = clash();
      if (refused !== undefined) return fatal(refused);
      await retool();
      log.info({ servers: mcp.status().map((st) => ({ name: st.name, state: st.state, tools: st.tools })) }, 'MCP servers settled');
    });
  } catch (error) {
    await serving.stop();
    await sandbox?.close();
    await mcp?.close();
    await server?.close();
    throw error;
  }
  // The pool bounds its own shutdown: after the grace period it aborts what is still running; then the sandbox goes.
  return {
    log,
    // The pool aborts what still runs after the grace; closing connections and pools after that is bounded too
    // (a stop whose Redis went first must not hang the process).
    forceExitAfterMs: env.FORGE_SHUTDOWN_GRACE_MS + 15_000,
    stop: async () => {
      stopping = true;
      await serving.stop();
      await sandbox?.close();
      await mcp?.close();
      await server?.close();
      await tracing.shutdown();
    },
  };
});
