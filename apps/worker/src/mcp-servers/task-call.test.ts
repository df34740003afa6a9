import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, CancelTaskRequestSchema, GetTaskPayloadRequestSchema, GetTaskRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { callAsTask } from './task-call.js';

/** A task as the server keeps it. */
interface FakeTask {
  status: string;
  statusMessage?: string;
  result?: { content: { type: 'text'; text: string }[] };
  settle?: () => void;
}

const TASK_CAPABILITIES = { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } };

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((o) => o.close()));
});

/** A client connected to a low-level SDK server whose tools/call is `onCall`, with tasks kept in `tasks`. */
async function connected(onCall: (params: Record<string, unknown>) => Record<string, unknown>, tasks: Map<string, FakeTask>): Promise<{ client: Client; cancels: string[] }> {
  const server = new Server({ name: 'tasks', version: '1' }, { capabilities: TASK_CAPABILITIES });
  const cancels: string[] = [];
  const now = new Date().toISOString();
  const view = (taskId: string, t: FakeTask) => ({ taskId, status: t.status, ...(t.statusMessage === undefined ? {} : { statusMessage: t.statusMessage }), createdAt: now, lastUpdatedAt: now, ttl: 60_000 });
  server.setRequestHandler(CallToolRequestSchema, (request) => onCall(request.params) as never);
  server.setRequestHandler(GetTaskRequestSchema, (request) => view(request.params.taskId, tasks.get(request.params.taskId)!) as never);
  server.setRequestHandler(GetTaskPayloadRequestSchema, async (request) => {
    const task = tasks.get(request.params.taskId)!;
    if (task.result === undefined) await new Promise<void>((resolve) => (task.settle = resolve));
    return task.result as never;
  });
  server.setRequestHandler(CancelTaskRequestSchema, (request) => {
    cancels.push(request.params.taskId);
    const task = tasks.get(request.params.taskId)!;
    task.status = 'cancelled';
    return view(request.params.taskId, task);
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'worker', version: '1' });
  await client.connect(clientSide);
  open.push(client, server);
  return { client, cancels };
}

describe('callAsTask', () => {
  it('asks for a task, then waits for its result with tasks/result; the messages of its status are reported as they change', async () => {
    const tasks = new Map<string, FakeTask>();
    const asked: Record<string, unknown>[] = [];
    const { client, cancels } = await connected((params) => {
      asked.push(params);
      tasks.set('t1', { status: 'working', statusMessage: 'starting' });
      return { task: { taskId: 't1', status: 'working', statusMessage: 'starting', createdAt: new Date().toISOString(), lastUpdatedAt: new Date().toISOString(), ttl: 60_000, pollInterval: 1 } };
    }, tasks);
    const messages: string[] = [];
    const call = callAsTask(client, { name: 'slow', arguments: { n: 1 } }, { timeoutMs: 10_000, onStatus: (m) => messages.push(m) });
    await vi.waitFor(() => expect(messages).toEqual(['starting']));
    tasks.get('t1')!.statusMessage = 'halfway';
    await vi.waitFor(() => expect(messages).toEqual(['starting', 'halfway']));
    const task = tasks.get('t1')!;
    Object.assign(task, { status: 'completed', result: { content: [{ type: 'text', text: 'done' }] } });
    task.settle?.();
    expect(await call).toMatchObject({ content: [{ type: 'text', text: 'done' }] });
    expect(asked).toEqual([{ name: 'slow', arguments: { n: 1 }, task: { ttl: 70_000 } }]);
    expect(cancels).toEqual([]);
  });

  it('takes a plain result when the server ran the call without a task', async () => {
    // Not an SDK server (the SDK's insists on a task for a task-augmented request): a peer that answers every call at once.
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    serverSide.onmessage = (message) => {
      const m = message as { id?: number; method?: string };
      if (m.id === undefined) return;
      const result = m.method === 'initialize' ? { protocolVersion: '2025-11-25', capabilities: TASK_CAPABILITIES, serverInfo: { name: 'plain', version: '1' } } : { content: [{ type: 'text', text: 'at once' }] };
      void serverSide.send({ jsonrpc: '2.0', id: m.id, result });
    };
    await serverSide.start();
    const client = new Client({ name: 'worker', version: '1' });
    await client.connect(clientSide);
    open.push(client);
    expect(await callAsTask(client, { name: 'quick', arguments: {} }, { timeoutMs: 5_000 })).toEqual({ content: [{ type: 'text', text: 'at once' }] });
  });

  it('sends tasks/cancel for its task when the call is aborted, and rejects', async () => {
    const tasks = new Map<string, FakeTask>([['t2', { status: 'working' }]]);
    const { client, cancels } = await connected(() => ({ task: { taskId: 't2', status: 'working', createdAt: new Date().toISOString(), lastUpdatedAt: new Date().toISOString(), ttl: 60_000 } }), tasks);
    const controller = new AbortController();
    const call = callAsTask(client, { name: 'slow', arguments: {} }, { timeoutMs: 10_000, signal: controller.signal });
    await vi.waitFor(() => expect(tasks.get('t2')?.settle).toBeDefined());
    controller.abort(new Error('gave up'));
    await expect(call).rejects.toThrow('gave up');
    await vi.waitFor(() => expect(cancels).toEqual(['t2']));
  });
});
