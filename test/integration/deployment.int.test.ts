import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_FLEET_PREFIX, queueName, type Tier, TierInput } from '@forge-fleet/shared';
import { packQueueName } from '@forge-fleet/store';
import { QueueKeys } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';

/**
 * The deployment material in infra/ — the Dockerfiles, the compose file, the Kubernetes manifests — is not run in
 * CI: there is no Docker engine and no cluster here. This test reads it as written and checks the isolation
 * properties it exists to provide (infra/README.md, "What the test checks"). It needs no Redis.
 *
 * Each check is a function from the parsed files to the problems it finds. The suite asserts that every check finds
 * none in the real files, and that each one finds something in a copy broken on purpose (`BREAKAGES`): a check that
 * cannot fail checks nothing.
 */

/** The repository root: the first directory above this file whose package.json declares workspaces. */
function repoRoot(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && 'workspaces' in (JSON.parse(readFileSync(manifest, 'utf8')) as object)) return dir;
    if (dirname(dir) === dir) throw new Error('no package.json with workspaces above this test');
  }
}
const ROOT = repoRoot();
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

// ---- What the checks read of each file (everything else is ignored) --------------------------------------------

type Labels = Record<string, string>;
interface Metadata {
  name?: string;
  namespace?: string;
  labels?: Labels;
  annotations?: Labels;
}
interface LabelSelector {
  matchLabels?: Labels;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}
interface Probe {
  httpGet?: { path?: string; port?: number | string };
  exec?: { command?: string[] };
  sleep?: { seconds?: number };
}
interface SecurityContext {
  runAsNonRoot?: boolean;
  runAsUser?: number;
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  readOnlyRootFilesystem?: boolean;
  capabilities?: { add?: string[]; drop?: string[] };
  seccompProfile?: { type?: string; localhostProfile?: string };
}
interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: unknown }[];
  envFrom?: { configMapRef?: { name?: string }; secretRef?: { name?: string } }[];
  ports?: { name?: string; containerPort?: number }[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  resources?: { requests?: Labels; limits?: Labels };
  securityContext?: SecurityContext;
  lifecycle?: { preStop?: Probe };
}
interface Toleration {
  key?: string;
  operator?: string;
  value?: string;
  effect?: string;
}
interface PodSpec {
  containers?: Container[];
  initContainers?: Container[];
  securityContext?: SecurityContext;
  nodeSelector?: Labels;
  tolerations?: Toleration[];
  terminationGracePeriodSeconds?: number;
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
}
interface Peer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: { cidr: string; except?: string[] };
}
interface Rule {
  ports?: { protocol?: string; port?: number | string; endPort?: number }[];
  to?: Peer[];
  from?: Peer[];
}
interface K8sObject {
  kind?: string;
  metadata?: Metadata;
  data?: Labels;
  /** Kustomization */
  resources?: string[];
  spec?: {
    /** Deployment, StatefulSet, PodDisruptionBudget: a label selector (a Service's is plain labels). */
    selector?: LabelSelector;
    template?: { metadata?: Metadata; spec?: PodSpec };
    /** Service */
    ports?: { port?: number; targetPort?: number | string }[];
    /** NetworkPolicy */
    podSelector?: LabelSelector;
    policyTypes?: string[];
    ingress?: Rule[];
    egress?: Rule[];
    /** ScaledObject */
    scaleTargetRef?: { name?: string; kind?: string };
    minReplicaCount?: number;
    triggers?: { type?: string; metadata?: Labels; authenticationRef?: { name?: string } }[];
  };
}
interface ComposeService {
  image?: string;
  command?: string[] | string;
  environment?: Labels | string[];
  env_file?: string | (string | { path: string })[];
  networks?: string[] | Record<string, unknown>;
  secrets?: (string | { source: string; target?: string })[];
  security_opt?: string[];
  cap_drop?: string[];
  cap_add?: string[];
  privileged?: boolean;
  read_only?: boolean;
  stop_grace_period?: string;
}
interface Compose {
  services?: Record<string, ComposeService>;
  networks?: Record<string, { internal?: boolean } | null>;
  secrets?: Record<string, { file?: string; environment?: string }>;
}
interface PackageManifest {
  name: string;
  bin?: Record<string, string>;
  dependencies?: Labels;
}

/** Everything the checks read, parsed once; the breakages change a deep copy. */
interface Files {
  /** Every document of every YAML file under infra/k8s. */
  k8s: { file: string; object: K8sObject }[];
  /** The names of the YAML files under infra/k8s, relative to it. */
  k8sFiles: string[];
  compose: Compose;
  /** Env files next to the compose file that are in the repository, by their path relative to it. */
  composeEnvFiles: Record<string, string>;
  composeGitignore: string;
  /** infra/docker/<app>.Dockerfile by app. */
  dockerfiles: Record<string, string>;
  dockerignore: string;
  /** Workspace packages by name, with their directory relative to the root. */
  workspaces: Record<string, { dir: string; manifest: PackageManifest }>;
}

const K8S_DIR = 'infra/k8s';
const COMPOSE_DIR = 'infra/compose';
const COMPOSE_FILE = `${COMPOSE_DIR}/docker-compose.yml`;
/** The taint and label of the host workers' node pool. */
const HOST_POOL = { key: 'forge-fleet/host-pool', value: 'true', effect: 'NoSchedule' } as const;
/** The defaults of the settings the checks read (README.md, "Configuration"). */
const DEFAULT_SHUTDOWN_GRACE_MS = 10_000;
const DEFAULT_DISPATCHER_PORT = 8080;
const SECRET_NAME = /KEY|SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL/i;
/** The cloud providers' instance metadata endpoint: credentials for the node, never a worker's business. */
const METADATA_ADDRESS = '169.254.169.254';

function yamlFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.ya?ml$/.test(e.name))
    .map((e) => relative(join(ROOT, dir), join(e.parentPath, e.name)))
    .sort();
}

/** Parses every document of a YAML file (merge keys on: compose files use `<<: *anchor`), with its errors. */
function parseYaml(path: string): { values: unknown[]; errors: string[] } {
  const docs = parseAllDocuments(read(path), { merge: true, prettyErrors: true });
  if (!Array.isArray(docs)) return { values: [], errors: [] };
  return {
    values: docs.map((d) => d.toJS() as unknown).filter((v) => v !== null && v !== undefined),
    errors: docs.flatMap((d) => [...d.errors, ...d.warnings].map((e) => `${path}: ${e.message}`)),
  };
}

function loadFiles(): { files: Files; errors: string[] } {
  const errors: string[] = [];
  const k8sFiles = yamlFiles(K8S_DIR);
  const k8s = k8sFiles.flatMap((file) => {
    const parsed = parseYaml(`${K8S_DIR}/${file}`);
    errors.push(...parsed.errors);
    return parsed.values.map((object) => ({ file, object: object as K8sObject }));
  });
  const composeFiles = yamlFiles(COMPOSE_DIR);
  let compose: Compose = {};
  for (const file of composeFiles) {
    const parsed = parseYaml(`${COMPOSE_DIR}/${file}`);
    errors.push(...parsed.errors);
    if (`${COMPOSE_DIR}/${file}` === COMPOSE_FILE) compose = (parsed.values[0] as Compose | undefined) ?? {};
  }
  const composeEnvFiles: Record<string, string> = {};
  for (const service of Object.values(compose.services ?? {})) {
    for (const path of envFilesOf(service)) {
      if (existsSync(join(ROOT, COMPOSE_DIR, path))) composeEnvFiles[path] = read(posix.join(COMPOSE_DIR, path));
    }
  }
  const workspaces: Files['workspaces'] = {};
  for (const group of ['packages', 'apps']) {
    for (const name of readdirSync(join(ROOT, group))) {
      const path = join(group, name, 'package.json');
      if (!existsSync(join(ROOT, path))) continue;
      const manifest = JSON.parse(read(path)) as PackageManifest;
      workspaces[manifest.name] = { dir: `${group}/${name}`, manifest };
    }
  }
  const files: Files = {
    k8s,
    k8sFiles,
    compose,
    composeEnvFiles,
    composeGitignore: read(`${COMPOSE_DIR}/.gitignore`),
    dockerfiles: { dispatcher: read('infra/docker/dispatcher.Dockerfile'), worker: read('infra/docker/worker.Dockerfile') },
    dockerignore: read('.dockerignore'),
    workspaces,
  };
  return { files, errors };
}

// ---- Kubernetes helpers ------------------------------------------------------------------------------------------

const namespaceOf = (o: K8sObject): string => o.metadata?.namespace ?? 'default';
const nameOf = (o: K8sObject): string => o.metadata?.name ?? '(unnamed)';
const objects = (f: Files, kind: string): K8sObject[] => f.k8s.map((d) => d.object).filter((o) => o.kind === kind);
const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job', 'CronJob']);
const workloads = (f: Files): K8sObject[] => f.k8s.map((d) => d.object).filter((o) => WORKLOAD_KINDS.has(o.kind ?? ''));
const podSpec = (w: K8sObject): PodSpec => w.spec?.template?.spec ?? {};
const podLabels = (w: K8sObject): Labels => w.spec?.template?.metadata?.labels ?? {};
const containersOf = (w: K8sObject): Container[] => [...(podSpec(w).initContainers ?? []), ...(podSpec(w).containers ?? [])];

/** Kubernetes label selector semantics (matchLabels and matchExpressions; an empty selector selects everything). */
function selects(selector: LabelSelector | undefined, labels: Labels): boolean {
  if (selector === undefined) return false;
  const byLabels = Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  const byExpressions = (selector.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
    switch (operator) {
      case 'In':
        return labels[key] !== undefined && values.includes(labels[key]);
      case 'NotIn':
        return labels[key] === undefined || !values.includes(labels[key]);
      case 'Exists':
        return labels[key] !== undefined;
      case 'DoesNotExist':
        return labels[key] === undefined;
      default:
        return false;
    }
  });
  return byLabels && byExpressions;
}
const selectsEverything = (s: LabelSelector | undefined): boolean =>
  s !== undefined && Object.keys(s.matchLabels ?? {}).length === 0 && (s.matchExpressions ?? []).length === 0;

/** The worker's tier and pool from its command line (`--tier x`, `--tier=x`, `--pool y`), or undefined if not a worker. */
function workerOf(argv: readonly string[]): { tier: Tier; pool: string | undefined; pack: string | undefined } | undefined {
  const option = (flag: string): string | undefined => {
    const i = argv.findIndex((a) => a === flag || a.startsWith(`${flag}=`));
    if (i === -1) return undefined;
    const arg = argv[i]!;
    return arg.includes('=') ? arg.slice(flag.length + 1) : argv[i + 1];
  };
  const tier = option('--tier');
  if (tier === undefined) return undefined;
  const parsed = TierInput.safeParse(tier);
  return parsed.success ? { tier: parsed.data, pool: option('--pool'), pack: option('--pack') } : undefined;
}

/** A Deployment of the fleet: its main container and, for workers, the tier and pool it serves. */
interface FleetDeployment {
  deployment: K8sObject;
  container: Container;
  worker: { tier: Tier; pool: string | undefined; pack: string | undefined } | undefined;
  /** The container's environment: its ConfigMaps' data, then its own `env` (secrets are present, valueless). */
  env: Map<string, string | undefined>;
}
function fleetDeployments(f: Files): FleetDeployment[] {
  return objects(f, 'Deployment').map((deployment) => {
    const containers = podSpec(deployment).containers ?? [];
    const withTier = containers.find((c) => workerOf([...(c.command ?? []), ...(c.args ?? [])]) !== undefined);
    const container = withTier ?? containers[0] ?? { name: '(none)' };
    const env = new Map<string, string | undefined>();
    for (const from of container.envFrom ?? []) {
      const configMap = objects(f, 'ConfigMap').find((c) => nameOf(c) === from.configMapRef?.name && namespaceOf(c) === namespaceOf(deployment));
      for (const [k, v] of Object.entries(configMap?.data ?? {})) env.set(k, v);
    }
    for (const v of container.env ?? []) env.set(v.name, v.value);
    return { deployment, container, worker: workerOf([...(container.command ?? []), ...(container.args ?? [])]), env };
  });
}
const isHostWorker = (d: FleetDeployment): boolean => d.worker?.tier === 'host';
const isSandboxWorker = (d: FleetDeployment): boolean => d.worker !== undefined && d.worker.tier !== 'host';

/** A container port by number or name. */
function containerPort(container: Container, port: number | string | undefined): number | undefined {
  if (typeof port === 'number') return port;
  return container.ports?.find((p) => p.name === port)?.containerPort;
}

/** Where a deployment's REDIS_URL points: the Service's name and port (`$(VAR)` references stand in for credentials). */
function redisTargetOf(d: FleetDeployment): { host: string; port: number } | undefined {
  const value = d.env.get('REDIS_URL');
  if (value === undefined) return undefined;
  const url = new URL(value.replace(/\$\([A-Za-z_][A-Za-z0-9_]*\)/g, 'x'));
  return { host: url.hostname, port: url.port === '' ? 6379 : Number(url.port) };
}

/** The Redis pods behind a deployment's REDIS_URL: their labels and the port the Service sends to. */
function redisPodsOf(f: Files, d: FleetDeployment): { labels: Labels; port: number } | undefined {
  const target = redisTargetOf(d);
  if (target === undefined) return undefined;
  const service = objects(f, 'Service').find((s) => nameOf(s) === target.host.split('.')[0] && namespaceOf(s) === namespaceOf(d.deployment));
  const selector = service?.spec?.selector as unknown as Labels | undefined;
  if (selector === undefined) return undefined;
  const redis = workloads(f).find((w) => namespaceOf(w) === namespaceOf(d.deployment) && Object.entries(selector).every(([k, v]) => podLabels(w)[k] === v));
  if (redis === undefined) return undefined;
  const servicePort = service?.spec?.ports?.find((p) => p.port === target.port);
  const container = podSpec(redis).containers?.[0];
  const port = container === undefined ? undefined : containerPort(container, servicePort?.targetPort ?? target.port);
  return port === undefined ? undefined : { labels: podLabels(redis), port };
}

/** The NetworkPolicies that select a pod, and whether its egress is isolated (some policy lists `Egress`). */
function policiesFor(f: Files, namespace: string, labels: Labels): { policies: K8sObject[]; egressIsolated: boolean; ingressIsolated: boolean } {
  const policies = objects(f, 'NetworkPolicy').filter((p) => namespaceOf(p) === namespace && selects(p.spec?.podSelector, labels));
  const types = (p: K8sObject): string[] => p.spec?.policyTypes ?? (p.spec?.egress === undefined ? ['Ingress'] : ['Ingress', 'Egress']);
  return { policies, egressIsolated: policies.some((p) => types(p).includes('Egress')), ingressIsolated: policies.some((p) => types(p).includes('Ingress')) };
}

const ipv4 = (ip: string): number => ip.split('.').reduce((n, octet) => n * 256 + Number(octet), 0);
/** Whether an IPv4 CIDR holds an address (IPv6 CIDRs hold no IPv4 address). */
function cidrHolds(cidr: string, address: string): boolean {
  const [base, bits] = cidr.split('/');
  if (base === undefined || base.includes(':')) return false;
  const size = 2 ** (32 - Number(bits ?? 32));
  return Math.floor(ipv4(base) / size) === Math.floor(ipv4(address) / size);
}
const ipBlockAllows = (peer: Peer, address: string): boolean =>
  peer.ipBlock !== undefined && cidrHolds(peer.ipBlock.cidr, address) && !(peer.ipBlock.except ?? []).some((e) => cidrHolds(e, address));

/** Whether a toleration tolerates a taint (Kubernetes semantics: an empty key with Exists tolerates every taint). */
function tolerates(t: Toleration, taint: { key: string; value: string; effect: string }): boolean {
  if (t.effect !== undefined && t.effect !== '' && t.effect !== taint.effect) return false;
  if (t.key === undefined || t.key === '') return t.operator === 'Exists';
  if (t.key !== taint.key) return false;
  return t.operator === 'Exists' || t.value === taint.value;
}

/** `sleep N` as a preStop hook: time spent before the process even gets SIGTERM. */
function preStopMs(c: Container): number {
  const hook = c.lifecycle?.preStop;
  if (hook?.sleep?.seconds !== undefined) return hook.sleep.seconds * 1000;
  const command = hook?.exec?.command?.join(' ') ?? '';
  const sleep = /\bsleep\s+(\d+(?:\.\d+)?)\b/.exec(command);
  return sleep === null ? 0 : Number(sleep[1]) * 1000;
}

/** The metrics/probe port a fleet process serves: the dispatcher's PORT, a worker's FORGE_METRICS_PORT. */
function servingPort(d: FleetDeployment): number | undefined {
  const value = d.worker === undefined ? (d.env.get('PORT') ?? String(DEFAULT_DISPATCHER_PORT)) : d.env.get('FORGE_METRICS_PORT');
  const port = Number(value);
  return Number.isInteger(port) && port > 0 ? port : undefined;
}

/**
 * The BullMQ wait list of the queue a worker serves, by BullMQ's own key layout (`<prefix>:<queue>:wait`): its
 * named tool pack's (`--pack`), or `undefined` when the pack is unnamed (its queue is a hash of its tools, not
 * knowable from the manifest).
 */
function waitList(d: FleetDeployment): string | undefined {
  const prefix = d.env.get('FORGE_PREFIX') ?? DEFAULT_FLEET_PREFIX;
  if (d.worker!.pack === undefined) return undefined;
  return new QueueKeys(prefix).toKey(packQueueName(queueName(prefix, d.worker!.tier, d.worker!.pool), d.worker!.pack), 'wait');
}

// ---- Compose helpers ---------------------------------------------------------------------------------------------

function envFilesOf(s: ComposeService): string[] {
  const list = s.env_file === undefined ? [] : Array.isArray(s.env_file) ? s.env_file : [s.env_file];
  return list.map((e) => (typeof e === 'string' ? e : e.path));
}
const argvOf = (s: ComposeService): string[] => (s.command === undefined ? [] : Array.isArray(s.command) ? s.command.map(String) : s.command.split(/\s+/));
const networksOf = (s: ComposeService): string[] => (s.networks === undefined ? ['default'] : Array.isArray(s.networks) ? s.networks : Object.keys(s.networks));
function environmentOf(s: ComposeService): Map<string, string | undefined> {
  const env = new Map<string, string | undefined>();
  if (Array.isArray(s.environment)) {
    for (const entry of s.environment) {
      const [name, ...value] = entry.split('=');
      env.set(name!, value.length === 0 ? undefined : value.join('='));
    }
  } else {
    for (const [k, v] of Object.entries(s.environment ?? {})) env.set(k, v === null ? undefined : String(v));
  }
  return env;
}
/** `NAME=value` lines of an env file. */
function envFileEntries(text: string): Map<string, string> {
  const entries = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$/.exec(line);
    if (m !== null) entries.set(m[1]!, m[2]!.trim());
  }
  return entries;
}
/** A Docker duration (`30s`, `1m30s`, `500ms`) in milliseconds. */
function durationMs(text: string): number {
  const units: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 0.001 };
  let total = 0;
  for (const [, n, unit] of text.matchAll(/(\d+(?:\.\d+)?)(ms|us|h|m|s)/g)) total += Number(n) * (units[unit!] ?? Number.NaN);
  return total;
}
interface ComposeRoles {
  redis: [string, ComposeService][];
  dispatchers: [string, ComposeService][];
  hostWorkers: [string, ComposeService][];
  sandboxWorkers: [string, ComposeService][];
}
function composeRoles(c: Compose): ComposeRoles {
  const services = Object.entries(c.services ?? {});
  const worker = ([, s]: [string, ComposeService]) => workerOf(argvOf(s));
  return {
    redis: services.filter(([, s]) => /^redis(:|$)/.test(s.image ?? '')),
    dispatchers: services.filter(([, s]) => /dispatcher/.test(s.image ?? '')),
    hostWorkers: services.filter((e) => worker(e)?.tier === 'host'),
    sandboxWorkers: services.filter((e) => worker(e) !== undefined && worker(e)?.tier !== 'host'),
  };
}
/** The gitignore patterns next to the compose file (directories end with `/`). */
const ignoredDirs = (f: Files): string[] =>
  f.composeGitignore
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
const isIgnoredPath = (f: Files, path: string): boolean => {
  const normal = posix.normalize(path);
  return ignoredDirs(f).some((dir) => dir.endsWith('/') && normal.startsWith(dir));
};

// ---- Dockerfile helpers ------------------------------------------------------------------------------------------

interface Instruction {
  keyword: string;
  args: string;
}
interface Stage {
  name: string | undefined;
  body: Instruction[];
}
/** Instructions with continuations joined; comment lines dropped (also inside a continuation, as Docker does). */
function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('#') || (current === '' && line === '')) continue;
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1)} `;
      continue;
    }
    current += line;
    const m = /^(\S+)\s*([\s\S]*)$/.exec(current);
    if (m !== null) out.push({ keyword: m[1]!.toUpperCase(), args: m[2]!.trim() });
    current = '';
  }
  return out;
}
/** Stages, each from its FROM (instructions before the first FROM are left out). */
function stagesOf(text: string): Stage[] {
  const stages: Stage[] = [];
  for (const i of instructions(text)) {
    if (i.keyword === 'FROM') stages.push({ name: /\bAS\s+(\S+)/i.exec(i.args)?.[1], body: [] });
    else stages.at(-1)?.body.push(i);
  }
  return stages;
}
/** ENV and ARG names set by an instruction (`ENV A=1 B=2`, legacy `ENV A 1`, `ARG A[=1]`). */
function variablesSet(i: Instruction): string[] {
  if (i.keyword === 'ARG') return [i.args.split('=')[0]!.trim()];
  if (i.keyword !== 'ENV') return [];
  const assigned = [...i.args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=/g)].map((m) => m[1]!);
  return assigned.length > 0 ? assigned : [i.args.split(/\s+/)[0]!];
}
/** A COPY's flags and sources (`COPY --from=build --chmod=0555 /src/a /src/b ./dest`). */
function copyOf(i: Instruction): { from: string | undefined; sources: string[]; dest: string } | undefined {
  if (i.keyword !== 'COPY') return undefined;
  const words = i.args.split(/\s+/);
  const flags = words.filter((w) => w.startsWith('--'));
  const paths = words.filter((w) => !w.startsWith('--'));
  return { from: flags.find((w) => w.startsWith('--from='))?.slice('--from='.length), sources: paths.slice(0, -1), dest: paths.at(-1) ?? '' };
}
const runs = (stage: Stage | undefined): string[] => (stage?.body ?? []).filter((i) => i.keyword === 'RUN').map((i) => i.args);

/** The workspace packages an app needs at run time: itself and its @forge-fleet dependencies, transitively. */
function workspaceClosure(f: Files, name: string, seen = new Set<string>()): Set<string> {
  if (seen.has(name) || f.workspaces[name] === undefined) return seen;
  seen.add(name);
  for (const dep of Object.keys(f.workspaces[name].manifest.dependencies ?? {})) workspaceClosure(f, dep, seen);
  return seen;
}

// ---- The checks --------------------------------------------------------------------------------------------------

type Check = (f: Files) => string[];

const CHECKS = {
  'k8s: kustomization.yaml lists every manifest the test checks': (f) => {
    const listed = new Set(f.k8s.find((d) => d.object.kind === 'Kustomization')?.object.resources ?? []);
    return f.k8sFiles.filter((file) => file !== 'kustomization.yaml' && !listed.has(file)).map((file) => `${file} is not in kustomization.yaml's resources`);
  },

  'k8s: host workers are pinned to the host node pool, and nothing else tolerates it': (f) => {
    const problems: string[] = [];
    const deployments = fleetDeployments(f);
    if (!deployments.some(isHostWorker)) problems.push('no host worker Deployment');
    for (const d of deployments) {
      const spec = podSpec(d.deployment);
      const pinned = spec.nodeSelector?.[HOST_POOL.key] === HOST_POOL.value;
      const tolerant = (spec.tolerations ?? []).some((t) => tolerates(t, HOST_POOL));
      if (isHostWorker(d) && !pinned) problems.push(`${nameOf(d.deployment)}: no nodeSelector ${HOST_POOL.key}=${HOST_POOL.value}`);
      if (isHostWorker(d) && !tolerant) problems.push(`${nameOf(d.deployment)}: does not tolerate ${HOST_POOL.key}=${HOST_POOL.value}:${HOST_POOL.effect}`);
    }
    for (const w of workloads(f)) {
      if (deployments.some((d) => d.deployment === w && isHostWorker(d))) continue;
      if (podSpec(w).nodeSelector?.[HOST_POOL.key] !== undefined) problems.push(`${nameOf(w)}: selects the host node pool but is no host worker`);
      if ((podSpec(w).tolerations ?? []).some((t) => tolerates(t, HOST_POOL))) problems.push(`${nameOf(w)}: tolerates the host pool's taint but is no host worker`);
    }
    return problems;
  },

  "k8s: sandbox workers' egress allows only Redis's port and DNS": (f) => {
    const problems: string[] = [];
    const sandboxWorkers = fleetDeployments(f).filter(isSandboxWorker);
    if (sandboxWorkers.length === 0) problems.push('no sandbox worker Deployment');
    const others = workloads(f);
    for (const d of sandboxWorkers) {
      const name = nameOf(d.deployment);
      const redis = redisPodsOf(f, d);
      if (redis === undefined) {
        problems.push(`${name}: REDIS_URL names no Service of a Redis workload among the manifests`);
        continue;
      }
      const nonRedis = others.map(podLabels).filter((labels) => !selects({ matchLabels: redis.labels }, labels));
      const { policies, egressIsolated } = policiesFor(f, namespaceOf(d.deployment), podLabels(d.deployment));
      if (!egressIsolated) problems.push(`${name}: no NetworkPolicy with policyTypes Egress selects it, so all egress is allowed`);
      for (const rule of policies.flatMap((p) => p.spec?.egress ?? [])) {
        const ports = rule.ports ?? [];
        const peers = rule.to ?? [];
        if (ports.length === 0) problems.push(`${name}: an egress rule allows every port`);
        if (peers.length === 0) problems.push(`${name}: an egress rule allows every destination`);
        const redisRule = ports.every((p) => (p.protocol ?? 'TCP') === 'TCP' && p.port === redis.port && p.endPort === undefined);
        const dnsRule = ports.every((p) => p.port === 53 && p.endPort === undefined);
        if (!redisRule && !dnsRule) problems.push(`${name}: egress to port(s) ${ports.map((p) => `${p.protocol ?? 'TCP'}/${p.port}`).join(', ')} (Redis is ${redis.port}, DNS 53)`);
        for (const peer of peers) {
          if (redisRule) {
            const onlyRedis =
              peer.ipBlock === undefined &&
              peer.namespaceSelector === undefined &&
              selects(peer.podSelector, redis.labels) &&
              !nonRedis.some((labels) => selects(peer.podSelector, labels));
            if (!onlyRedis) problems.push(`${name}: Redis's port is open to more than the Redis pods (${JSON.stringify(peer)})`);
          } else if (dnsRule) {
            const dns =
              peer.ipBlock === undefined &&
              peer.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'] === 'kube-system' &&
              !selectsEverything(peer.podSelector) &&
              peer.podSelector !== undefined;
            if (!dns) problems.push(`${name}: DNS egress goes to more than kube-system's DNS pods (${JSON.stringify(peer)})`);
          }
        }
      }
      const metrics = servingPort(d);
      for (const rule of policies.flatMap((p) => p.spec?.ingress ?? [])) {
        if ((rule.ports ?? []).length === 0 || (rule.ports ?? []).some((p) => containerPort(d.container, p.port) !== metrics)) {
          problems.push(`${name}: ingress on more than its metrics port ${metrics}`);
        }
      }
    }
    return problems;
  },

  'k8s: default deny; the dispatcher is reachable on its port and reaches Redis; host workers reach Redis and the outside, not the metadata endpoint': (f) => {
    const problems: string[] = [];
    const policies = objects(f, 'NetworkPolicy');
    const namespaces = new Set(fleetDeployments(f).map((d) => namespaceOf(d.deployment)));
    for (const ns of namespaces) {
      const denyAll = policies.some(
        (p) =>
          namespaceOf(p) === ns &&
          selectsEverything(p.spec?.podSelector) &&
          ['Ingress', 'Egress'].every((t) => p.spec?.policyTypes?.includes(t)) &&
          (p.spec?.ingress ?? []).length === 0 &&
          (p.spec?.egress ?? []).length === 0,
      );
      if (!denyAll) problems.push(`namespace ${ns}: no default-deny NetworkPolicy (podSelector {}, Ingress and Egress, no rules)`);
    }
    for (const d of fleetDeployments(f)) {
      const name = nameOf(d.deployment);
      const { policies: mine } = policiesFor(f, namespaceOf(d.deployment), podLabels(d.deployment));
      const egress = mine.flatMap((p) => p.spec?.egress ?? []);
      const redis = redisPodsOf(f, d);
      const reachesRedis =
        redis !== undefined && egress.some((r) => (r.ports ?? []).some((p) => p.port === redis.port) && (r.to ?? []).some((peer) => selects(peer.podSelector, redis.labels)));
      if (!reachesRedis) problems.push(`${name}: no egress rule reaches its Redis`);
      if (d.worker === undefined) {
        const port = servingPort(d);
        const reachable = mine.flatMap((p) => p.spec?.ingress ?? []).some((r) => (r.ports ?? []).some((p) => containerPort(d.container, p.port) === port));
        if (!reachable) problems.push(`${name}: no ingress rule opens its port ${port}`);
      }
      if (isHostWorker(d) && !egress.some((r) => (r.to ?? []).some((peer) => peer.ipBlock !== undefined))) {
        problems.push(`${name}: no egress to the outside (an ipBlock rule): host tools could not reach what they exist for`);
      }
      for (const peer of egress.flatMap((r) => r.to ?? [])) {
        if (ipBlockAllows(peer, METADATA_ADDRESS)) problems.push(`${name}: egress reaches the cloud metadata endpoint ${METADATA_ADDRESS} (${peer.ipBlock?.cidr})`);
      }
    }
    return problems;
  },

  'k8s: every container has resource requests and limits': (f) =>
    workloads(f).flatMap((w) =>
      containersOf(w).flatMap((c) =>
        (['requests', 'limits'] as const).flatMap((kind) =>
          ['cpu', 'memory'].filter((r) => c.resources?.[kind]?.[r] === undefined).map((r) => `${nameOf(w)}/${c.name}: no ${kind}.${r}`),
        ),
      ),
    ),

  'k8s: every Deployment has liveness and readiness probes on /healthz and /readyz of its port': (f) =>
    fleetDeployments(f).flatMap((d) => {
      const name = nameOf(d.deployment);
      const port = servingPort(d);
      if (port === undefined) return [`${name}: no fixed port to probe (${d.worker === undefined ? 'PORT' : 'FORGE_METRICS_PORT'})`];
      const problems: string[] = [];
      for (const [probe, path] of [
        ['livenessProbe', '/healthz'],
        ['readinessProbe', '/readyz'],
      ] as const) {
        const get = d.container[probe]?.httpGet;
        if (get?.path !== path) problems.push(`${name}: ${probe} is not an HTTP GET of ${path}`);
        else if (containerPort(d.container, get.port) !== port) problems.push(`${name}: ${probe} asks port ${String(get.port)}, the process serves ${port}`);
      }
      return problems;
    }),

  'k8s: every Deployment waits longer than its shutdown grace before SIGKILL': (f) =>
    fleetDeployments(f).flatMap((d) => {
      const graceMs = Number(d.env.get('FORGE_SHUTDOWN_GRACE_MS') ?? DEFAULT_SHUTDOWN_GRACE_MS);
      const seconds = podSpec(d.deployment).terminationGracePeriodSeconds ?? 30;
      const needed = graceMs + preStopMs(d.container);
      return seconds * 1000 > needed ? [] : [`${nameOf(d.deployment)}: terminationGracePeriodSeconds ${seconds} s is not longer than preStop + FORGE_SHUTDOWN_GRACE_MS (${needed} ms)`];
    }),

  'k8s: pods run as non-root, without privilege, on a read-only root; sandbox workers under their seccomp profile': (f) => {
    const problems: string[] = [];
    const sandbox = new Set(fleetDeployments(f).filter(isSandboxWorker).map((d) => d.deployment));
    for (const w of workloads(f)) {
      const pod = podSpec(w);
      for (const flag of ['hostNetwork', 'hostPID', 'hostIPC'] as const) if (pod[flag] === true) problems.push(`${nameOf(w)}: ${flag}`);
      for (const c of containersOf(w)) {
        const where = `${nameOf(w)}/${c.name}`;
        const sc = { ...pod.securityContext, ...c.securityContext };
        if (sc.runAsNonRoot !== true) problems.push(`${where}: runAsNonRoot is not true`);
        if (sc.runAsUser === 0) problems.push(`${where}: runAsUser 0`);
        if (sc.privileged === true) problems.push(`${where}: privileged`);
        if (sc.allowPrivilegeEscalation !== false) problems.push(`${where}: allowPrivilegeEscalation is not false`);
        if (!(sc.capabilities?.drop ?? []).includes('ALL')) problems.push(`${where}: capabilities do not drop ALL`);
        if ((sc.capabilities?.add ?? []).length > 0) problems.push(`${where}: adds capabilities ${sc.capabilities?.add?.join(', ')}`);
        if (sc.readOnlyRootFilesystem !== true) problems.push(`${where}: root file system is writable`);
        const seccomp = sc.seccompProfile?.type;
        if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') problems.push(`${where}: seccomp profile ${seccomp ?? '(none)'}, not RuntimeDefault or Localhost`);
        // RuntimeDefault refuses unshare(2) without CAP_SYS_ADMIN: the strict sandbox would then refuse to start.
        if (sandbox.has(w) && seccomp !== 'Localhost') problems.push(`${where}: a sandbox worker needs its Localhost seccomp profile (RuntimeDefault + unshare)`);
      }
    }
    return problems;
  },

  "k8s: pods run as their image's user": (f) => {
    const problems: string[] = [];
    for (const d of fleetDeployments(f)) {
      const app = Object.keys(f.dockerfiles).find((a) => (d.container.image ?? '').includes(`/${a}`));
      if (app === undefined) {
        problems.push(`${nameOf(d.deployment)}: image ${d.container.image} is built by no infra/docker/*.Dockerfile`);
        continue;
      }
      const user = stagesOf(f.dockerfiles[app]!).at(-1)?.body.filter((i) => i.keyword === 'USER').at(-1)?.args.split(':')[0];
      const runAs = d.container.securityContext?.runAsUser ?? podSpec(d.deployment).securityContext?.runAsUser;
      if (runAs !== undefined && String(runAs) !== user) problems.push(`${nameOf(d.deployment)}: runAsUser ${runAs}, the ${app} image's USER is ${user}`);
    }
    return problems;
  },

  "k8s: Prometheus scrape annotations name each process's port": (f) =>
    fleetDeployments(f).flatMap((d) => {
      const annotations = d.deployment.spec?.template?.metadata?.annotations ?? {};
      const port = servingPort(d);
      return annotations['prometheus.io/scrape'] === 'true' && annotations['prometheus.io/port'] === String(port)
        ? []
        : [`${nameOf(d.deployment)}: prometheus.io/scrape "true" and prometheus.io/port "${port}" missing from the pod template`];
    }),

  "k8s: a ScaledObject per worker Deployment on its queue's BullMQ wait list": (f) =>
    fleetDeployments(f)
      .filter((d) => d.worker !== undefined)
      .flatMap((d) => {
        const name = nameOf(d.deployment);
        const scaled = objects(f, 'ScaledObject').filter(
          (s) => namespaceOf(s) === namespaceOf(d.deployment) && s.spec?.scaleTargetRef?.name === name && (s.spec.scaleTargetRef.kind ?? 'Deployment') === 'Deployment',
        );
        if (scaled.length !== 1) return [`${name}: ${scaled.length} ScaledObjects scale it (want 1)`];
        const spec = scaled[0]!.spec!;
        const problems: string[] = [];
        // Zero workers: no live lease, the dispatcher answers NO_WORKER and enqueues nothing, the list never grows.
        if ((spec.minReplicaCount ?? 0) < 1) problems.push(`${name}: minReplicaCount ${spec.minReplicaCount ?? 0}; a pool scaled to zero never wakes`);
        const redis = redisTargetOf(d);
        const triggers = (spec.triggers ?? []).filter((t) => t.type === 'redis');
        if (triggers.length === 0) problems.push(`${name}: no redis trigger`);
        if (waitList(d) === undefined) problems.push(`${name}: the worker names no --pack, so its queue (a hash of its tools) is unknown to the ScaledObject`);
        for (const t of triggers) {
          if (t.metadata?.listName !== waitList(d)) problems.push(`${name}: trigger watches ${t.metadata?.listName}, the worker's queue waits in ${waitList(d)}`);
          const [host, port] = (t.metadata?.address ?? '').split(':');
          if (redis === undefined || host?.split('.')[0] !== redis.host.split('.')[0] || Number(port) !== redis.port) {
            problems.push(`${name}: trigger reads ${t.metadata?.address}, the worker's REDIS_URL is ${redis?.host}:${redis?.port}`);
          }
          const auth = t.authenticationRef?.name;
          if (!objects(f, 'TriggerAuthentication').some((a) => nameOf(a) === auth && namespaceOf(a) === namespaceOf(d.deployment))) {
            problems.push(`${name}: trigger authentication ${auth} is not among the manifests`);
          }
        }
        return problems;
      }),

  'k8s: a PodDisruptionBudget per Deployment': (f) =>
    fleetDeployments(f)
      .filter((d) => !objects(f, 'PodDisruptionBudget').some((p) => namespaceOf(p) === namespaceOf(d.deployment) && selects(p.spec?.selector, podLabels(d.deployment))))
      .map((d) => `${nameOf(d.deployment)}: no PodDisruptionBudget selects its pods`),

  'Redis (compose and k8s): append-only file and the ACL file': (f) => {
    const problems: string[] = [];
    const checkArgs = (where: string, argv: string[]): void => {
      const option = (name: string): string | undefined => argv[argv.indexOf(name) + 1];
      if (!argv.includes('--appendonly') || option('--appendonly') !== 'yes') problems.push(`${where}: not started with --appendonly yes`);
      if (!['everysec', 'always'].includes(option('--appendfsync') ?? 'everysec')) problems.push(`${where}: --appendfsync ${option('--appendfsync')}`);
      if (!argv.includes('--aclfile')) problems.push(`${where}: not started with --aclfile`);
    };
    const { redis } = composeRoles(f.compose);
    if (redis.length === 0) problems.push('compose: no Redis service');
    for (const [name, s] of redis) {
      const argv = argvOf(s);
      checkArgs(`compose ${name}`, argv);
      const aclFile = argv[argv.indexOf('--aclfile') + 1] ?? '';
      const mounted = (s.secrets ?? []).some((x) => (typeof x === 'string' ? `/run/secrets/${x}` : (x.target ?? `/run/secrets/${x.source}`)) === aclFile);
      if (!mounted) problems.push(`compose ${name}: the ACL file ${aclFile} is not one of its secrets`);
    }
    const k8sRedis = workloads(f).filter((w) => containersOf(w).some((c) => /^redis(:|$)/.test(c.image ?? '')));
    if (k8sRedis.length === 0) problems.push('k8s: no Redis workload');
    for (const w of k8sRedis) {
      for (const c of containersOf(w).filter((x) => /^redis(:|$)/.test(x.image ?? ''))) checkArgs(`k8s ${nameOf(w)}`, [...(c.command ?? []), ...(c.args ?? [])]);
    }
    return problems;
  },

  'compose: host workers on a network the sandbox workers are not on; sandbox networks internal and shared with Redis only': (f) => {
    const problems: string[] = [];
    const { redis, hostWorkers, sandboxWorkers } = composeRoles(f.compose);
    const tiers = new Set(sandboxWorkers.map(([, s]) => workerOf(argvOf(s))?.tier));
    for (const tier of ['platform', 'embedded']) if (!tiers.has(tier as Tier)) problems.push(`no ${tier} worker service`);
    if (hostWorkers.length === 0) problems.push('no host worker service');
    const sandboxNetworks = new Set(sandboxWorkers.flatMap(([, s]) => networksOf(s)));
    for (const [name, s] of hostWorkers) {
      if (networksOf(s).every((n) => sandboxNetworks.has(n))) problems.push(`${name}: every network it is on has sandbox workers too`);
    }
    const allowed = new Set([...redis, ...sandboxWorkers].map(([name]) => name));
    for (const network of sandboxNetworks) {
      if (f.compose.networks?.[network]?.internal !== true) problems.push(`network ${network} (sandbox workers): not internal, so it routes out`);
      for (const [name, s] of Object.entries(f.compose.services ?? {})) {
        if (!allowed.has(name) && networksOf(s).includes(network)) problems.push(`network ${network} (sandbox workers): ${name} is on it too`);
      }
    }
    return problems;
  },

  'compose: no secret in the compose file or the env files committed beside it; secret files git-ignored': (f) => {
    const problems: string[] = [];
    const credentials = /\w+:\/\/[^/\s:@]+:[^/\s@]+@/;
    for (const [name, s] of Object.entries(f.compose.services ?? {})) {
      for (const [key, value] of environmentOf(s)) {
        if (SECRET_NAME.test(key) && !key.endsWith('_FILE') && value !== undefined) problems.push(`${name}: environment ${key} has a value in the compose file`);
        if (value !== undefined && credentials.test(value)) problems.push(`${name}: environment ${key} holds credentials`);
      }
      for (const path of envFilesOf(s)) {
        const text = f.composeEnvFiles[path];
        if (text === undefined) {
          if (!isIgnoredPath(f, path)) problems.push(`${name}: env file ${path} is neither in the repository nor git-ignored`);
          continue;
        }
        if (isIgnoredPath(f, path)) continue;
        for (const [key, value] of envFileEntries(text)) {
          if (SECRET_NAME.test(key) && !key.endsWith('_FILE')) problems.push(`${path}: ${key} is committed`);
          if (credentials.test(value)) problems.push(`${path}: ${key} holds credentials`);
        }
      }
    }
    for (const [name, secret] of Object.entries(f.compose.secrets ?? {})) {
      if (secret.file !== undefined && !isIgnoredPath(f, secret.file)) problems.push(`secret ${name}: ${secret.file} is not under a directory ${COMPOSE_DIR}/.gitignore ignores`);
    }
    return problems;
  },

  'compose: fleet services stop later than their shutdown grace, without capabilities; sandbox workers under their seccomp profile': (f) => {
    const problems: string[] = [];
    const { dispatchers, hostWorkers, sandboxWorkers } = composeRoles(f.compose);
    const sandbox = new Set(sandboxWorkers.map(([name]) => name));
    for (const [name, s] of [...dispatchers, ...hostWorkers, ...sandboxWorkers]) {
      const env = new Map<string, string | undefined>();
      for (const path of envFilesOf(s)) for (const [k, v] of envFileEntries(f.composeEnvFiles[path] ?? '')) env.set(k, v);
      for (const [k, v] of environmentOf(s)) env.set(k, v);
      const graceMs = Number(env.get('FORGE_SHUTDOWN_GRACE_MS') ?? DEFAULT_SHUTDOWN_GRACE_MS);
      const stopMs = durationMs(s.stop_grace_period ?? '10s');
      if (!(stopMs > graceMs)) problems.push(`${name}: stop_grace_period ${s.stop_grace_period ?? '10s'} is not longer than FORGE_SHUTDOWN_GRACE_MS ${graceMs}`);
      if (!(s.cap_drop ?? []).includes('ALL')) problems.push(`${name}: cap_drop does not hold ALL`);
      if ((s.cap_add ?? []).length > 0) problems.push(`${name}: cap_add ${s.cap_add?.join(', ')}`);
      if (s.privileged === true) problems.push(`${name}: privileged`);
      if (s.read_only !== true) problems.push(`${name}: root file system is writable`);
      const options = s.security_opt ?? [];
      if (!options.some((o) => /^no-new-privileges(:true|=true)?$/.test(o))) problems.push(`${name}: no no-new-privileges`);
      const seccomp = options.find((o) => /^seccomp[:=]/.test(o))?.slice('seccomp='.length);
      if (seccomp === 'unconfined') problems.push(`${name}: seccomp unconfined`);
      if (sandbox.has(name) && (seccomp === undefined || seccomp === 'unconfined')) problems.push(`${name}: a sandbox worker needs its seccomp profile (the default + unshare)`);
    }
    return problems;
  },

  'Dockerfiles: multi-stage, a numeric non-root USER, NODE_ENV=production and a HEALTHCHECK in the final stage': (f) =>
    Object.entries(f.dockerfiles).flatMap(([app, text]) => {
      const problems: string[] = [];
      const stages = stagesOf(text);
      if (stages.length < 2) problems.push(`${app}: ${stages.length} stage(s); build and runtime must be separate`);
      const final = stages.at(-1)?.body ?? [];
      const user = final.filter((i) => i.keyword === 'USER').at(-1)?.args.split(':')[0];
      // Numeric: Kubernetes can only check runAsNonRoot against a numeric user.
      if (user === undefined || !/^\d+$/.test(user) || Number(user) === 0) problems.push(`${app}: final stage's USER is ${user ?? '(none)'}, not a numeric non-root uid`);
      if (!final.some((i) => i.keyword === 'ENV' && /(^|\s)NODE_ENV=("?)production\2(\s|$)/.test(i.args))) problems.push(`${app}: final stage does not set NODE_ENV=production`);
      if (!final.some((i) => i.keyword === 'HEALTHCHECK' && !/^NONE\b/i.test(i.args))) problems.push(`${app}: final stage has no HEALTHCHECK`);
      return problems;
    }),

  'Dockerfiles: no secret in ENV or ARG; .dockerignore keeps secrets out of the build context': (f) => {
    const problems = Object.entries(f.dockerfiles).flatMap(([app, text]) =>
      instructions(text)
        .flatMap(variablesSet)
        .filter((name) => SECRET_NAME.test(name))
        .map((name) => `${app}: ${name} is set at build time; secrets come at run time`),
    );
    const ignored = new Set(f.dockerignore.split('\n').map((l) => l.trim()));
    for (const entry of ['.forge', '**/*.key', '**/*.secret', '**/*.env', 'infra/compose/secrets']) {
      if (!ignored.has(entry)) problems.push(`.dockerignore does not exclude ${entry}`);
    }
    return problems;
  },

  'Dockerfiles: the runtime stage holds production dependencies, the built packages its app imports and the bin it runs': (f) =>
    Object.entries(f.dockerfiles).flatMap(([app, text]) => {
      const problems: string[] = [];
      const stages = stagesOf(text);
      const final = stages.at(-1);
      const stage = (name: string | undefined): Stage | undefined => stages.find((s) => s.name === name);
      const build = stages.find((s) => runs(s).some((r) => /\bnpm run build\b/.test(r)));
      if (build === undefined || !runs(build).some((r) => /\bnpm ci\b/.test(r))) problems.push(`${app}: no build stage running npm ci and npm run build`);
      if (runs(final).some((r) => /(^|&&|;|\|\|?)\s*(npm|npx|yarn|pnpm|corepack)\s/.test(r))) problems.push(`${app}: the runtime stage runs a package manager`);
      const copies = (final?.body ?? []).map(copyOf).filter((c) => c?.from !== undefined);
      const fromDeps = copies.filter((c) => runs(stage(c!.from)).some((r) => /\bnpm ci\b/.test(r) && /--omit=dev\b/.test(r)));
      if (fromDeps.length === 0) problems.push(`${app}: the runtime stage copies no node_modules from a stage running npm ci --omit=dev`);
      for (const c of copies.filter((x) => x!.from === build?.name)) {
        for (const source of c!.sources) if (!/\/(dist|bin|console)\/?$/.test(source)) problems.push(`${app}: copies ${source} from the build stage (dist, bin or console only)`);
      }
      const copied = new Set(copies.flatMap((c) => c!.sources.map((s) => s.replace(/^\/src\//, '').replace(/\/$/, ''))));
      const pkg = Object.values(f.workspaces).find((w) => w.dir === `apps/${app}`);
      if (pkg === undefined) return [...problems, `${app}: no workspace apps/${app}`];
      for (const dep of workspaceClosure(f, pkg.manifest.name)) {
        const dir = f.workspaces[dep]!.dir;
        if (!copied.has(`${dir}/dist`)) problems.push(`${app}: the runtime stage lacks ${dir}/dist (${dep})`);
      }
      const entry = (final?.body ?? []).filter((i) => i.keyword === 'ENTRYPOINT').at(-1)?.args ?? '';
      for (const bin of Object.values(pkg.manifest.bin ?? {})) {
        const path = posix.join(pkg.dir, bin);
        if (!copied.has(posix.dirname(path))) problems.push(`${app}: the runtime stage lacks ${posix.dirname(path)}`);
        if (!entry.includes(path)) problems.push(`${app}: ENTRYPOINT ${entry} does not run ${path}`);
      }
      if (app === 'worker' && !runs(final).some((r) => /\bapt-get install\b[^&;]*\butil-linux\b/.test(r))) problems.push('worker: util-linux (unshare, prlimit) is not installed');
      return problems;
    }),
} satisfies Record<string, Check>;

type CheckName = keyof typeof CHECKS;

// ---- Breakages: each must make its check fail --------------------------------------------------------------------

function k8sObject(f: Files, kind: string, name: string): K8sObject {
  const found = f.k8s.find((d) => d.object.kind === kind && d.object.metadata?.name === name)?.object;
  if (found === undefined) throw new Error(`breakage: no ${kind} ${name} in ${K8S_DIR}`);
  return found;
}
const deploymentPod = (f: Files, name: string): PodSpec => podSpec(k8sObject(f, 'Deployment', name));
const mainContainer = (f: Files, name: string): Container => deploymentPod(f, name).containers![0]!;
function policy(f: Files, name: string): NonNullable<K8sObject['spec']> {
  return k8sObject(f, 'NetworkPolicy', name).spec!;
}
function service(f: Files, name: string): ComposeService {
  const found = f.compose.services?.[name];
  if (found === undefined) throw new Error(`breakage: no compose service ${name}`);
  return found;
}
/** Replaces text in a Dockerfile or an ignore file, and fails the breakage when the text is not there. */
function edit(text: string, from: string | RegExp, to: string): string {
  const changed = text.replace(from, to);
  if (changed === text) throw new Error(`breakage: ${String(from)} not found`);
  return changed;
}

/**
 * Per check, ways to break the material and a problem the check must then report. A Record over every check name:
 * a check without breakages does not compile.
 */
const BREAKAGES: Record<CheckName, [what: string, breakIt: (f: Files) => void, expected: RegExp][]> = {
  'k8s: kustomization.yaml lists every manifest the test checks': [
    ['a manifest left out', (f) => {
      const k = f.k8s.find((d) => d.object.kind === 'Kustomization')!.object;
      k.resources = k.resources!.filter((r) => r !== 'worker-host.yaml');
    }, /worker-host\.yaml is not in kustomization/],
  ],
  'k8s: host workers are pinned to the host node pool, and nothing else tolerates it': [
    ['host worker without nodeSelector', (f) => {
      delete deploymentPod(f, 'forge-worker-host').nodeSelector;
    }, /forge-worker-host: no nodeSelector/],
    ['host worker without toleration', (f) => {
      deploymentPod(f, 'forge-worker-host').tolerations = [];
    }, /forge-worker-host: does not tolerate/],
    ['platform worker tolerating the host pool', (f) => {
      deploymentPod(f, 'forge-worker-platform').tolerations = [{ key: HOST_POOL.key, operator: 'Exists' }];
    }, /forge-worker-platform: tolerates the host pool/],
    ['dispatcher tolerating every taint', (f) => {
      deploymentPod(f, 'forge-dispatcher').tolerations = [{ operator: 'Exists' }];
    }, /forge-dispatcher: tolerates the host pool/],
    ['embedded worker on the host pool', (f) => {
      deploymentPod(f, 'forge-worker-embedded').nodeSelector = { [HOST_POOL.key]: 'true' };
    }, /forge-worker-embedded: selects the host node pool/],
  ],
  "k8s: sandbox workers' egress allows only Redis's port and DNS": [
    ['HTTPS egress', (f) => {
      policy(f, 'forge-sandbox-workers').egress!.push({ ports: [{ protocol: 'TCP', port: 443 }], to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] });
    }, /egress to port\(s\) TCP\/443/],
    ["Redis's port open to any address", (f) => {
      policy(f, 'forge-sandbox-workers').egress![0]!.to!.push({ ipBlock: { cidr: '0.0.0.0/0' } });
    }, /Redis's port is open to more than the Redis pods .*ipBlock/],
    ["Redis's port open to every pod", (f) => {
      policy(f, 'forge-sandbox-workers').egress![0]!.to = [{ podSelector: {} }];
    }, /Redis's port is open to more than the Redis pods/],
    ['every port to Redis', (f) => {
      delete policy(f, 'forge-sandbox-workers').egress![0]!.ports;
    }, /an egress rule allows every port/],
    ['another policy allowing all egress to every pod', (f) => {
      f.k8s.push({ file: 'extra.yaml', object: { kind: 'NetworkPolicy', metadata: { name: 'allow-all', namespace: 'forge-fleet' }, spec: { podSelector: {}, policyTypes: ['Egress'], egress: [{}] } } });
    }, /allows every (port|destination)/],
    ['egress not isolated', (f) => {
      for (const p of objects(f, 'NetworkPolicy')) p.spec!.policyTypes = ['Ingress'];
    }, /so all egress is allowed/],
    ['DNS to every namespace', (f) => {
      delete policy(f, 'forge-sandbox-workers').egress![1]!.to![0]!.namespaceSelector;
    }, /DNS egress goes to more than/],
    ['worker pointed at another Redis port', (f) => {
      const url = mainContainer(f, 'forge-worker-platform').env!.find((e) => e.name === 'REDIS_URL')!;
      url.value = url.value!.replace(':6379', ':6380');
    }, /forge-worker-platform: egress to port\(s\) TCP\/6379 \(Redis is 6380/],
  ],
  'k8s: default deny; the dispatcher is reachable on its port and reaches Redis; host workers reach Redis and the outside, not the metadata endpoint': [
    ['no default deny', (f) => {
      f.k8s = f.k8s.filter((d) => d.object.metadata?.name !== 'default-deny');
    }, /no default-deny NetworkPolicy/],
    ['dispatcher ingress on another port', (f) => {
      policy(f, 'forge-dispatcher').ingress![0]!.ports![0]!.port = 9999;
    }, /forge-dispatcher: no ingress rule opens its port 8080/],
    ['dispatcher without Redis egress', (f) => {
      policy(f, 'forge-dispatcher').egress!.shift();
    }, /forge-dispatcher: no egress rule reaches its Redis/],
    ['host workers reaching the metadata endpoint', (f) => {
      const block = policy(f, 'forge-host-workers').egress![2]!.to![0]!.ipBlock!;
      block.except = block.except!.filter((c) => c !== '169.254.0.0/16');
    }, /forge-worker-host: egress reaches the cloud metadata endpoint/],
    ['host workers without a way out', (f) => {
      policy(f, 'forge-host-workers').egress!.pop();
    }, /forge-worker-host: no egress to the outside/],
  ],
  'k8s: every container has resource requests and limits': [
    ['no memory limit', (f) => {
      delete mainContainer(f, 'forge-worker-host').resources!.limits!.memory;
    }, /forge-worker-host\/worker: no limits\.memory/],
    ['Redis without requests', (f) => {
      delete podSpec(k8sObject(f, 'StatefulSet', 'forge-redis')).containers![0]!.resources!.requests;
    }, /forge-redis\/redis: no requests\.cpu/],
  ],
  'k8s: every Deployment has liveness and readiness probes on /healthz and /readyz of its port': [
    ['liveness on /metrics', (f) => {
      mainContainer(f, 'forge-worker-embedded').livenessProbe!.httpGet!.path = '/metrics';
    }, /forge-worker-embedded: livenessProbe is not an HTTP GET of \/healthz/],
    ['readiness on another port', (f) => {
      mainContainer(f, 'forge-dispatcher').readinessProbe!.httpGet!.port = 8081;
    }, /forge-dispatcher: readinessProbe asks port 8081/],
    ['no readiness probe', (f) => {
      delete mainContainer(f, 'forge-worker-platform').readinessProbe;
    }, /forge-worker-platform: readinessProbe is not/],
    ['workers on a random metrics port', (f) => {
      k8sObject(f, 'ConfigMap', 'forge-config').data!.FORGE_METRICS_PORT = '0';
    }, /no fixed port to probe \(FORGE_METRICS_PORT\)/],
  ],
  'k8s: every Deployment waits longer than its shutdown grace before SIGKILL': [
    ['grace period equal to the shutdown grace', (f) => {
      deploymentPod(f, 'forge-worker-host').terminationGracePeriodSeconds = 20;
    }, /forge-worker-host: terminationGracePeriodSeconds 20 s/],
    ['preStop not counted', (f) => {
      deploymentPod(f, 'forge-dispatcher').terminationGracePeriodSeconds = 25;
    }, /forge-dispatcher: terminationGracePeriodSeconds 25 s .*25000 ms/],
    ['shutdown grace raised in the ConfigMap', (f) => {
      k8sObject(f, 'ConfigMap', 'forge-config').data!.FORGE_SHUTDOWN_GRACE_MS = '40000';
    }, /\(40000 ms\)/],
  ],
  'k8s: pods run as non-root, without privilege, on a read-only root; sandbox workers under their seccomp profile': [
    ['runAsNonRoot off', (f) => {
      mainContainer(f, 'forge-dispatcher').securityContext!.runAsNonRoot = false;
    }, /forge-dispatcher\/dispatcher: runAsNonRoot is not true/],
    ['CAP_SYS_ADMIN added', (f) => {
      mainContainer(f, 'forge-worker-platform').securityContext!.capabilities!.add = ['SYS_ADMIN'];
    }, /forge-worker-platform\/worker: adds capabilities SYS_ADMIN/],
    ['sandbox worker under RuntimeDefault', (f) => {
      deploymentPod(f, 'forge-worker-embedded').securityContext!.seccompProfile = { type: 'RuntimeDefault' };
    }, /forge-worker-embedded\/worker: a sandbox worker needs its Localhost seccomp profile/],
    ['unconfined seccomp', (f) => {
      deploymentPod(f, 'forge-worker-host').securityContext!.seccompProfile = { type: 'Unconfined' };
    }, /forge-worker-host\/worker: seccomp profile Unconfined/],
    ['writable root file system', (f) => {
      podSpec(k8sObject(f, 'StatefulSet', 'forge-redis')).containers![0]!.securityContext!.readOnlyRootFilesystem = false;
    }, /forge-redis\/redis: root file system is writable/],
    ['host network', (f) => {
      deploymentPod(f, 'forge-worker-host').hostNetwork = true;
    }, /forge-worker-host: hostNetwork/],
  ],
  "k8s: pods run as their image's user": [
    ['another uid', (f) => {
      deploymentPod(f, 'forge-worker-platform').securityContext!.runAsUser = 1000;
    }, /forge-worker-platform: runAsUser 1000, the worker image's USER is 10001/],
  ],
  "k8s: Prometheus scrape annotations name each process's port": [
    ['no scrape annotation', (f) => {
      delete k8sObject(f, 'Deployment', 'forge-worker-host').spec!.template!.metadata!.annotations!['prometheus.io/scrape'];
    }, /forge-worker-host: prometheus\.io\/scrape/],
    ['wrong port', (f) => {
      k8sObject(f, 'Deployment', 'forge-worker-platform').spec!.template!.metadata!.annotations!['prometheus.io/port'] = '8080';
    }, /forge-worker-platform: prometheus\.io\/scrape "true" and prometheus\.io\/port "9464"/],
  ],
  "k8s: a ScaledObject per worker Deployment on its queue's BullMQ wait list": [
    ['list name without the prefix', (f) => {
      k8sObject(f, 'ScaledObject', 'forge-worker-platform').spec!.triggers![0]!.metadata!.listName = '{forge.platform}:wait';
    }, /forge-worker-platform: trigger watches \{forge\.platform\}:wait/],
    ["another tier's list", (f) => {
      k8sObject(f, 'ScaledObject', 'forge-worker-embedded').spec!.triggers![0]!.metadata!.listName = 'forge:{forge.platform}:wait';
    }, /forge-worker-embedded: trigger watches forge:\{forge\.platform\}:wait, the worker.s queue waits in forge:\{forge\.embedded\}\.tools:wait/],
    ['host worker moved to a pool, ScaledObject not', (f) => {
      mainContainer(f, 'forge-worker-host').args!.push('--pool', 'gpu');
    }, /waits in forge:\{forge\.host\.gpu\}\.tools:wait/],
    ['another fleet prefix', (f) => {
      k8sObject(f, 'ConfigMap', 'forge-config').data!.FORGE_PREFIX = 'fleet2';
    }, /waits in fleet2:\{fleet2\.platform\}\.tools:wait/],
    ['a worker that names no pack', (f) => {
      const args = mainContainer(f, 'forge-worker-platform').args!;
      args.splice(args.indexOf('--pack'), 2);
    }, /forge-worker-platform: the worker names no --pack/],
    ['no ScaledObject', (f) => {
      f.k8s = f.k8s.filter((d) => !(d.object.kind === 'ScaledObject' && d.object.metadata?.name === 'forge-worker-embedded'));
    }, /forge-worker-embedded: 0 ScaledObjects/],
    ['scaled to zero', (f) => {
      k8sObject(f, 'ScaledObject', 'forge-worker-host').spec!.minReplicaCount = 0;
    }, /forge-worker-host: minReplicaCount 0/],
    ['another Redis', (f) => {
      k8sObject(f, 'ScaledObject', 'forge-worker-host').spec!.triggers![0]!.metadata!.address = 'other-redis.forge-fleet.svc:6379';
    }, /forge-worker-host: trigger reads other-redis/],
    ['missing TriggerAuthentication', (f) => {
      f.k8s = f.k8s.filter((d) => d.object.kind !== 'TriggerAuthentication');
    }, /trigger authentication forge-worker-platform-redis is not among/],
  ],
  'k8s: a PodDisruptionBudget per Deployment': [
    ['no PDB', (f) => {
      f.k8s = f.k8s.filter((d) => !(d.object.kind === 'PodDisruptionBudget' && d.object.metadata?.name === 'forge-dispatcher'));
    }, /forge-dispatcher: no PodDisruptionBudget/],
    ['PDB selecting other pods', (f) => {
      k8sObject(f, 'PodDisruptionBudget', 'forge-worker-platform').spec!.selector = { matchLabels: { 'app.kubernetes.io/component': 'worker-embedded' } };
    }, /forge-worker-platform: no PodDisruptionBudget/],
  ],
  'Redis (compose and k8s): append-only file and the ACL file': [
    ['compose Redis without AOF', (f) => {
      service(f, 'redis').command = argvOf(service(f, 'redis')).filter((a) => a !== '--appendonly');
    }, /compose redis: not started with --appendonly yes/],
    ['compose Redis fsyncing never', (f) => {
      const argv = argvOf(service(f, 'redis'));
      argv[argv.indexOf('--appendfsync') + 1] = 'no';
      service(f, 'redis').command = argv;
    }, /compose redis: --appendfsync no/],
    ['compose Redis without the ACL', (f) => {
      service(f, 'redis').command = argvOf(service(f, 'redis')).filter((a) => a !== '--aclfile');
    }, /compose redis: not started with --aclfile/],
    ['ACL file not mounted', (f) => {
      service(f, 'redis').secrets = [];
    }, /compose redis: the ACL file \/run\/secrets\/redis-acl is not one of its secrets/],
    ['k8s Redis without AOF', (f) => {
      const c = podSpec(k8sObject(f, 'StatefulSet', 'forge-redis')).containers![0]!;
      c.args = c.args!.map((a) => (a === 'yes' ? 'no' : a));
    }, /k8s forge-redis: not started with --appendonly yes/],
  ],
  'compose: host workers on a network the sandbox workers are not on; sandbox networks internal and shared with Redis only': [
    ['sandbox worker on the egress network', (f) => {
      service(f, 'worker-platform').networks = ['sandbox', 'egress'];
    }, /(every network it is on has sandbox workers too|network egress \(sandbox workers\))/],
    ['sandbox network routing out', (f) => {
      f.compose.networks!.sandbox = { internal: false };
    }, /network sandbox \(sandbox workers\): not internal/],
    ['dispatcher on the sandbox network', (f) => {
      service(f, 'dispatcher').networks = ['public', 'dispatcher', 'sandbox'];
    }, /network sandbox \(sandbox workers\): dispatcher is on it too/],
    ['host worker on the sandbox network only', (f) => {
      service(f, 'worker-host').networks = ['sandbox'];
    }, /worker-host: every network it is on has sandbox workers too/],
    ['no embedded worker', (f) => {
      delete f.compose.services!['worker-embedded'];
    }, /no embedded worker service/],
  ],
  'compose: no secret in the compose file or the env files committed beside it; secret files git-ignored': [
    ['inline signing secret', (f) => {
      service(f, 'dispatcher').environment = { ...(service(f, 'dispatcher').environment as Labels), FORGE_SIGNING_SECRET: 'c2VjcmV0' };
    }, /dispatcher: environment FORGE_SIGNING_SECRET has a value/],
    ['Redis password in the committed env file', (f) => {
      f.composeEnvFiles['forge.env'] += '\nREDIS_URL=redis://forge-dispatcher:hunter2hunter2@redis:6379\n';
    }, /forge\.env: REDIS_URL holds credentials/],
    ['secrets directory not ignored', (f) => {
      f.composeGitignore = edit(f.composeGitignore, /^secrets\/$/m, '');
    }, /(is neither in the repository nor git-ignored|is not under a directory)/],
    ['a key file outside the ignored directory', (f) => {
      f.compose.secrets!['signing-secret'] = { file: './signing.secret' };
    }, /secret signing-secret: \.\/signing\.secret is not under/],
  ],
  'compose: fleet services stop later than their shutdown grace, without capabilities; sandbox workers under their seccomp profile': [
    ['short stop grace', (f) => {
      service(f, 'worker-embedded').stop_grace_period = '10s';
    }, /worker-embedded: stop_grace_period 10s/],
    ['seccomp unconfined', (f) => {
      service(f, 'worker-platform').security_opt = ['no-new-privileges:true', 'seccomp=unconfined'];
    }, /worker-platform: seccomp unconfined/],
    ['sandbox worker without its profile', (f) => {
      service(f, 'worker-platform').security_opt = ['no-new-privileges:true'];
    }, /worker-platform: a sandbox worker needs its seccomp profile/],
    ['CAP_SYS_ADMIN', (f) => {
      service(f, 'worker-host').cap_add = ['SYS_ADMIN'];
    }, /worker-host: cap_add SYS_ADMIN/],
    ['writable root', (f) => {
      service(f, 'dispatcher').read_only = false;
    }, /dispatcher: root file system is writable/],
  ],
  'Dockerfiles: multi-stage, a numeric non-root USER, NODE_ENV=production and a HEALTHCHECK in the final stage': [
    ['single stage', (f) => {
      f.dockerfiles.worker = f.dockerfiles.worker!.slice(f.dockerfiles.worker!.lastIndexOf('FROM ${NODE_IMAGE} AS runtime'));
    }, /worker: 1 stage\(s\)/],
    ['USER root', (f) => {
      f.dockerfiles.dispatcher = edit(f.dockerfiles.dispatcher!, /^USER .*$/m, 'USER root');
    }, /dispatcher: final stage's USER is root/],
    ['USER by name', (f) => {
      f.dockerfiles.worker = edit(f.dockerfiles.worker!, /^USER .*$/m, 'USER forge');
    }, /worker: final stage's USER is forge/],
    ['no NODE_ENV', (f) => {
      f.dockerfiles.worker = edit(f.dockerfiles.worker!, /^ENV NODE_ENV=production/m, 'ENV NODE_ENV=development');
    }, /worker: final stage does not set NODE_ENV=production/],
    ['no HEALTHCHECK', (f) => {
      f.dockerfiles.dispatcher = edit(f.dockerfiles.dispatcher!, /^HEALTHCHECK [^\n]*\\\n[^\n]*\n/m, '');
    }, /dispatcher: final stage has no HEALTHCHECK/],
  ],
  'Dockerfiles: no secret in ENV or ARG; .dockerignore keeps secrets out of the build context': [
    ['ENV with a secret', (f) => {
      f.dockerfiles.dispatcher = edit(f.dockerfiles.dispatcher!, /^USER /m, 'ENV FORGE_SIGNING_SECRET=c2VjcmV0\nUSER ');
    }, /dispatcher: FORGE_SIGNING_SECRET is set at build time/],
    ['ARG with a password', (f) => {
      f.dockerfiles.worker = edit(f.dockerfiles.worker!, /^ARG NODE_IMAGE/m, 'ARG REDIS_PASSWORD\nARG NODE_IMAGE');
    }, /worker: REDIS_PASSWORD is set at build time/],
    ['.forge in the build context', (f) => {
      f.dockerignore = edit(f.dockerignore, /^\.forge$/m, '');
    }, /\.dockerignore does not exclude \.forge/],
  ],
  'Dockerfiles: the runtime stage holds production dependencies, the built packages its app imports and the bin it runs': [
    ['dev dependencies installed', (f) => {
      f.dockerfiles.worker = edit(f.dockerfiles.worker!, 'npm ci --omit=dev', 'npm ci');
    }, /worker: the runtime stage copies no node_modules from a stage running npm ci --omit=dev/],
    ['a workspace package missing', (f) => {
      f.dockerfiles.dispatcher = edit(f.dockerfiles.dispatcher!, /^COPY --from=build \/src\/packages\/store\/dist.*\n/m, '');
    }, /dispatcher: the runtime stage lacks packages\/store\/dist/],
    ['node_modules from the build stage', (f) => {
      f.dockerfiles.worker = edit(f.dockerfiles.worker!, /^USER /m, 'COPY --from=build /src/node_modules ./node_modules\nUSER ');
    }, /worker: copies \/src\/node_modules from the build stage/],
    ['npm at run time', (f) => {
      f.dockerfiles.dispatcher = edit(f.dockerfiles.dispatcher!, /^USER /m, 'RUN npm install left-pad\nUSER ');
    }, /dispatcher: the runtime stage runs a package manager/],
    ['no util-linux', (f) => {
      f.dockerfiles.worker = edit(f.dockerfiles.worker!, 'util-linux tini', 'tini');
    }, /worker: util-linux \(unshare, prlimit\) is not installed/],
    ['another entry point', (f) => {
      f.dockerfiles.worker = edit(f.dockerfiles.worker!, '"/app/apps/worker/bin/forge-worker.js"', '"/app/apps/worker/dist/main.js"');
    }, /worker: ENTRYPOINT .* does not run apps\/worker\/bin\/forge-worker\.js/],
  ],
};

// ---- The suite ---------------------------------------------------------------------------------------------------

const { files, errors } = loadFiles();

describe('deployment material (infra/)', () => {
  it('every YAML file under infra/k8s and infra/compose parses', () => {
    expect(errors).toEqual([]);
    expect(files.k8s.length).toBeGreaterThan(0);
    expect(Object.keys(files.compose.services ?? {}).length).toBeGreaterThan(0);
  });

  it.each(Object.keys(CHECKS) as CheckName[])('%s', (name) => {
    expect(CHECKS[name](files)).toEqual([]);
  });
});

describe('each check fails on material broken on purpose', () => {
  it('every check has at least one breakage', () => {
    expect((Object.keys(CHECKS) as CheckName[]).filter((name) => BREAKAGES[name].length === 0)).toEqual([]);
  });

  const cases = (Object.keys(BREAKAGES) as CheckName[]).flatMap((name) => BREAKAGES[name].map(([what, breakIt, expected]) => [name, what, breakIt, expected] as const));
  it.each(cases)('%s — %s', (name, _what, breakIt, expected) => {
    const broken = structuredClone(files);
    breakIt(broken);
    expect(CHECKS[name](broken)).toEqual(expect.arrayContaining([expect.stringMatching(expected)]));
  });
});
