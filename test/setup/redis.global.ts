/**
 * Gives the integration tests a real Redis, in this order of preference:
 * 1. `REDIS_URL` when set (CI services, a developer's own Redis);
 * 2. a container via testcontainers when a Docker engine answers;
 * 3. a `redis-server` from PATH on a free port with a temp dir.
 * Whatever it started, it stops after the run. Tests read the URL with
 * `inject('redisUrl')` and isolate themselves with a random key prefix.
 */
import { existsSync } from 'node:fs';
import { startLocalRedis } from '@forge-fleet/local-redis';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    redisSource: 'env' | 'testcontainers' | 'redis-server';
  }
}

/** Docker answers only where an engine runs; probing the socket first avoids a slow testcontainers failure. */
function dockerMayAnswer(): boolean {
  return process.env.DOCKER_HOST !== undefined || existsSync('/var/run/docker.sock');
}

async function tryContainer(): Promise<{ url: string; stop: () => Promise<void> } | undefined> {
  if (!dockerMayAnswer()) return undefined;
  try {
    const { RedisContainer } = await import('@testcontainers/redis');
    const container = await new RedisContainer('redis:7-alpine').start();
    return { url: container.getConnectionUrl(), stop: async () => void (await container.stop()) };
  } catch {
    return undefined; // no working engine after all: fall through to redis-server
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv !== undefined && fromEnv !== '') {
    project.provide('redisUrl', fromEnv);
    project.provide('redisSource', 'env');
    return async () => {};
  }
  const container = await tryContainer();
  if (container !== undefined) {
    project.provide('redisUrl', container.url);
    project.provide('redisSource', 'testcontainers');
    return container.stop;
  }
  const local = await startLocalRedis();
  project.provide('redisUrl', local.url);
  project.provide('redisSource', 'redis-server');
  return local.stop;
}
