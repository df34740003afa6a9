import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { FleetMetrics } from './fleet-metrics.js';

// The Grafana dashboard and Prometheus rules in infra/ name the fleet's metrics in PromQL strings that no
// compiler reads: these tests fail when a metric is renamed (or dropped) without updating them.

/** The repository root: the first directory above this file whose package.json declares workspaces. */
function repoRoot(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && 'workspaces' in (JSON.parse(readFileSync(manifest, 'utf8')) as object)) return dir;
    if (dirname(dir) === dir) throw new Error('no package.json with workspaces above this test');
  }
}

const root = repoRoot();
const read = (path: string): string => readFileSync(join(root, path), 'utf8');

interface Target {
  refId?: string;
  expr?: string;
  datasource?: { type?: string; uid?: string };
}
interface Panel {
  id?: number;
  type?: string;
  title?: string;
  description?: string;
  datasource?: { type?: string; uid?: string } | null;
  targets?: Target[];
  panels?: Panel[];
}
interface Variable {
  name: string;
  type: string;
  query?: string | { query?: string };
  multi?: boolean;
  includeAll?: boolean;
}
interface Dashboard {
  uid?: string;
  title?: string;
  schemaVersion?: number;
  panels?: Panel[];
  templating?: { list?: Variable[] };
}
interface RuleFile {
  groups?: { name?: string; rules?: { alert?: string; record?: string; expr?: string | number }[] }[];
}

const dashboard = JSON.parse(read('infra/grafana/forge-fleet.json')) as Dashboard;
const rules = parse(read('infra/prometheus/alerts.yml')) as RuleFile;

/** Every panel, rows' nested panels included. */
const allPanels = (dashboard.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]);
/** The panels that query something: all but rows. */
const queryPanels = allPanels.filter((p) => p.type !== 'row');

/** Words of PromQL that look like names but are not metrics. */
const PROMQL_WORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);

/**
 * The metric names a PromQL expression selects (Grafana's `$variables` allowed): what is left once strings,
 * label matchers, ranges and label lists are cut out, less function calls, keywords and numbers.
 */
function metricNamesIn(expr: string): string[] {
  const bare = expr
    .replace(/\$\{[^}]*\}|\$\w+/g, ' ')
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names: string[] = [];
  for (const [, number, word, call] of bare.matchAll(/(\d[\w.]*)|([A-Za-z_:][\w:]*)(\s*\()?/g)) {
    if (number === undefined && word !== undefined && call === undefined && !PROMQL_WORDS.has(word.toLowerCase())) names.push(word);
  }
  return names;
}

/** The series selector inside a Grafana variable's `label_values(selector, label)` (the label is no metric). */
function variableSelector(variable: Variable): string | undefined {
  const query = typeof variable.query === 'string' ? variable.query : variable.query?.query;
  if (query === undefined) return undefined;
  const match = /^\s*label_values\(\s*(.*),\s*\w+\s*\)\s*$/s.exec(query);
  return match === null ? query : match[1];
}

/** Where each name is used, for a failure message that points at the panel or rule. */
function usedNames(): Map<string, string[]> {
  const used = new Map<string, string[]>();
  const note = (expr: string, where: string): void => {
    for (const name of metricNamesIn(expr)) used.set(name, [...(used.get(name) ?? []), where]);
  };
  for (const panel of queryPanels) for (const target of panel.targets ?? []) note(target.expr ?? '', `panel "${panel.title}" ${target.refId}`);
  for (const variable of dashboard.templating?.list ?? []) {
    if (variable.type !== 'query') continue;
    const selector = variableSelector(variable);
    if (selector !== undefined) note(selector, `variable ${variable.name}`);
  }
  for (const group of rules.groups ?? []) for (const rule of group.rules ?? []) note(String(rule.expr ?? ''), `rule ${rule.alert ?? rule.record}`);
  return used;
}

/** Each registered metric and the series names Prometheus sees for it (a histogram's `_bucket`, `_sum` and `_count`). */
async function exposedSeries(): Promise<Map<string, string[]>> {
  const dispatcher = new FleetMetrics('dispatcher', { queues: () => Promise.resolve({ at: 0, queues: [] }), approvalsPending: () => Promise.resolve(0) });
  const worker = new FleetMetrics('worker');
  const series = new Map<string, string[]>();
  for (const metrics of [dispatcher, worker]) {
    for (const { name, type } of await metrics.registry.getMetricsAsJSON()) {
      // prom-client's typings say a numeric enum; the values are strings.
      switch (String(type)) {
        case 'histogram':
          series.set(name, [`${name}_bucket`, `${name}_sum`, `${name}_count`]);
          break;
        case 'summary':
          series.set(name, [name, `${name}_sum`, `${name}_count`]);
          break;
        default:
          // Counters are registered with their `_total`.
          series.set(name, [name]);
      }
    }
  }
  return series;
}

describe('metricNamesIn', () => {
  it('finds the selected metrics, and not functions, labels, keywords, strings, ranges or variables', () => {
    const expr =
      'histogram_quantile(0.95, sum by (le, tier) (rate(a_bucket{tier=~"$tier|", tool="x y"}[$__rate_interval]))) ' +
      '/ ignoring(z) group_left(w) b offset 5m > bool 1e-9 or vector(0) unless on (tier) max(c:recorded) ' +
      'and min_over_time(max(d)[1h:1m]) > 0 or sum without(pool) (e) * ${factor}';
    expect(metricNamesIn(expr)).toEqual(['a_bucket', 'b', 'c:recorded', 'd', 'e']);
  });
});

describe('infra/grafana/forge-fleet.json', () => {
  it('is an importable dashboard: uid, title, schema, datasource variable, unique panel ids', () => {
    expect(dashboard.uid).toBe('forge-fleet');
    expect(dashboard.title).toBe('Forge Fleet');
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(39);
    const variables = dashboard.templating?.list ?? [];
    expect(variables.find((v) => v.name === 'datasource')).toMatchObject({ type: 'datasource', query: 'prometheus' });
    for (const name of ['tier', 'tool']) {
      const variable = variables.find((v) => v.name === name);
      expect(variable, name).toMatchObject({ type: 'query', multi: true, includeAll: true });
      expect(variableSelector(variable!), name).toMatch(/^forge_calls_total\b/);
    }
    const ids = allPanels.map((p) => p.id);
    expect(ids.every((id) => Number.isInteger(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(queryPanels.length).toBeGreaterThan(10);
  });

  it('gives every panel a description, the datasource variable and at least one query', () => {
    for (const panel of queryPanels) {
      const what = `panel ${panel.id} "${panel.title}"`;
      expect(panel.title, what).toBeTruthy();
      expect(panel.description?.length ?? 0, what).toBeGreaterThan(40);
      expect(panel.datasource, what).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect(panel.targets?.length ?? 0, what).toBeGreaterThan(0);
      const refIds = (panel.targets ?? []).map((t) => t.refId);
      expect(new Set(refIds).size, `${what}: refIds`).toBe(refIds.length);
      for (const target of panel.targets ?? []) {
        expect(target.expr?.trim(), `${what} ${target.refId}`).toBeTruthy();
        if (target.datasource !== undefined) expect(target.datasource, `${what} ${target.refId}`).toEqual(panel.datasource);
      }
    }
  });
});

describe('infra/prometheus', () => {
  it('has alert rules with expressions, loaded by the example configuration', () => {
    const all = (rules.groups ?? []).flatMap((g) => g.rules ?? []);
    expect(all.length).toBeGreaterThan(0);
    for (const rule of all) {
      expect(rule.alert, JSON.stringify(rule)).toBeTruthy();
      expect(String(rule.expr ?? '').trim(), rule.alert).toBeTruthy();
    }
    const config = parse(read('infra/prometheus/prometheus.yml')) as { rule_files?: string[]; scrape_configs?: unknown[] };
    expect(config.rule_files).toContain('alerts.yml');
    expect(config.scrape_configs?.length ?? 0).toBeGreaterThan(0);
  });
});

describe('the metrics the dashboard and alerts use', () => {
  it('are all served by a dispatcher or a worker (a rename must update infra/grafana and infra/prometheus)', async () => {
    const exposed = new Set([...(await exposedSeries()).values()].flat());
    const used = usedNames();
    expect(used.size).toBeGreaterThan(0);
    const unknown = [...used].filter(([name]) => !exposed.has(name)).map(([name, where]) => `${name} (${[...new Set(where)].join(', ')})`);
    expect(unknown, 'metric names that no FleetMetrics registry serves').toEqual([]);
  });

  it('include every forge_ metric, so a new or renamed one shows on the dashboard', async () => {
    const used = usedNames();
    const missing = [...(await exposedSeries())].filter(([name, series]) => name.startsWith('forge_') && !series.some((s) => used.has(s))).map(([name]) => name);
    expect(missing, 'fleet metrics no panel or rule shows').toEqual([]);
  });

  it('aggregate the gauges every dispatcher reports alike with max, never sum', () => {
    const exprs = [...queryPanels.flatMap((p) => (p.targets ?? []).map((t) => t.expr ?? '')), ...(rules.groups ?? []).flatMap((g) => (g.rules ?? []).map((r) => String(r.expr ?? '')))];
    const summed = exprs.filter((e) => /\bsum\s*(?:(?:by|without)\s*\([^)]*\)\s*)?\(\s*(?:forge_queue_jobs|forge_workers|forge_approvals_pending)\b/.test(e));
    expect(summed).toEqual([]);
  });
});
