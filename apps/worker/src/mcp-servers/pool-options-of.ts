import type { z } from 'zod';
import type { McpServerPoolOptions } from './pool-options.js';
import { revealAll } from './secret-value.js';
import type { McpServerConfig } from './servers-file.js';

/**
 * A server's pool options from its entry in the servers file. Secrets are
 * revealed here, into the launch options only: they go to the server's
 * environment (or its upstream's headers) and nowhere else.
 *
 * @param how.maxMessageBytes the bound on one message of the server (see messageBoundFor); the default one when absent.
 * @param how.sandbox confine the process (Platform/Embedded workers): its filesystem view is the file's `filesystem`, nothing when it declares none.
 */
export function poolOptionsOf(config: McpServerConfig, how: { readonly sandbox: boolean; readonly maxMessageBytes?: number }): z.input<typeof McpServerPoolOptions> {
  const bound = how.maxMessageBytes === undefined ? {} : { maxMessageBytes: how.maxMessageBytes };
  const t = config.transport;
  const launch =
    t.kind === 'stdio'
      ? {
          command: t.command,
          args: [...t.args],
          ...(t.cwd === undefined ? {} : { cwd: t.cwd }),
          env: revealAll(t.env),
          secrets: Object.values(t.env).flatMap((v) => (typeof v === 'string' ? [] : [v.reveal()])),
          startupTimeoutMs: config.startupTimeoutMs,
          ...bound,
          ...(how.sandbox ? { sandbox: { read: [...(config.filesystem?.read ?? [])], write: [...(config.filesystem?.write ?? [])] } } : {}),
        }
      : // Header values stay wrapped (SecretValue) until the request that sends them.
        { url: t.url, headers: { ...t.headers }, startupTimeoutMs: config.startupTimeoutMs, ...bound };
  return {
    server: config.name,
    launch,
    instances: { min: config.instances.min, max: config.instances.max, callsPerInstance: config.callsPerInstance, idleMs: config.idleMs },
    session: config.session,
    restart: { initialDelayMs: config.restartBackoff.initialMs, maxDelayMs: config.restartBackoff.maxMs, crashLoopFailures: config.crashLoop.failures, crashLoopWindowMs: config.crashLoop.windowMs },
  };
}
