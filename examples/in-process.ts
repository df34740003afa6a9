/**
 * The call pipeline in one process: define tools of all three tiers, scope
 * them per task type, and run calls the way an agent would — structured calls
 * and fenced `tool_call` blocks from a model's text. The distributed fleet
 * (dispatcher + tier worker pools over Redis) runs this same pipeline.
 *
 * Run: `npm start` (or `npx tsx --conditions=forge-source examples/in-process.ts`).
 */
import {
  allOf,
  defineTool,
  isFleetError,
  MemoryAuditLogger,
  MemoryRiskSignalQueue,
  ScopedToolExecutor,
  TierBasedApproval,
  ToolBuilder,
  ToolRegistry,
  ToolScope,
  TrustGate,
  type ToolCallOutcome,
} from '@forge-fleet/shared';

const registry = new ToolRegistry()
  .register(new ToolBuilder('clock').description('Current UTC time').tier('platform').speculatable().handler(() => new Date().toISOString()).build())
  .register(
    defineTool({
      name: 'echo',
      description: 'Returns its arguments',
      tier: 'embedded',
      parameters: { type: 'object', properties: { text: { type: 'string', maxLength: 200 } }, required: ['text'] },
      handler: (args) => ({ echoed: args.text }),
    }),
  )
  .register(
    defineTool({
      name: 'http_get',
      description: 'Fetches a URL (host tier: runs outside the sandbox)',
      tier: 'host',
      parameters: { type: 'object', properties: { url: { type: 'string', format: 'uri' } }, required: ['url'] },
      // This demo never touches the network: it only reports what it would fetch.
      handler: (args) => `would GET ${String(args.url)}`,
    }),
  )
  .freeze();

const audit = new MemoryAuditLogger();
const risk = new MemoryRiskSignalQueue();
const agent = new ScopedToolExecutor({ registry, approval: allOf(new TrustGate(), new TierBasedApproval()), audit, risk })
  .registerScope('research', ToolScope.allow(['clock', 'echo']))
  .registerScope('fetch', ToolScope.allow(['http_get', 'clock']));

function show(label: string, outcome: ToolCallOutcome | Error): void {
  if (outcome instanceof Error) {
    console.log(`${label.padEnd(34)} → ${isFleetError(outcome) ? outcome.code : 'ERROR'}: ${outcome.message}`);
  } else if (outcome.status === 'awaiting_approval') {
    console.log(`${label.padEnd(34)} → awaiting_approval (${outcome.reason})`);
  } else {
    console.log(`${label.padEnd(34)} → ${outcome.status}: ${outcome.result.content}`);
  }
}

async function attempt(label: string, run: () => Promise<ToolCallOutcome>): Promise<void> {
  try {
    show(label, await run());
  } catch (error) {
    show(label, error instanceof Error ? error : new Error(String(error)));
  }
}

console.log('Forge Fleet — in-process pipeline demo\n');
agent.setScopeForTask('research');
console.log(`tools visible under 'research': ${agent.toolDefinitions().map((d) => `${d.name} (${d.tier})`).join(', ')}\n`);

await attempt('platform: clock', () => agent.executeToolCall({ id: 'c1', name: 'clock', arguments: {} }));
await attempt('embedded: echo', () => agent.executeToolCall({ id: 'c2', name: 'echo', arguments: { text: 'hi' } }));
await attempt('bad arguments', () => agent.executeToolCall({ id: 'c3', name: 'echo', arguments: { text: 42 } }));
await attempt('out of scope: http_get', () => agent.executeToolCall({ id: 'c4', name: 'http_get', arguments: { url: 'https://example.com' } }));

agent.setScopeForTask('fetch');
await attempt('host, no authorization', () => agent.executeToolCall({ id: 'c5', name: 'http_get', arguments: { url: 'https://example.com' } }));
await attempt('host, authorized', () =>
  agent.executeToolCall({ id: 'c6', name: 'http_get', arguments: { url: 'https://example.com' } }, { authorization: { subject: 'demo-agent', tools: ['http_get'] } }),
);

const modelText = 'Checking the time first.\n```tool_call\n{"name": "clock", "arguments": {}}\n```\n```tool_call\n{"name": 42}\n```';
const fromText = await agent.execute(modelText);
for (const item of fromText.calls) show(`model text: ${item.call.name}`, item.ok ? item.outcome : item.error);
for (const error of fromText.errors) show('model text: malformed block', error);

console.log(`\naudit entries: ${audit.entries.length} (${audit.entries.map((e) => `${e.tool} ${e.errorCategory}`).join(', ')}); risk signals: ${risk.signals.length}`);
