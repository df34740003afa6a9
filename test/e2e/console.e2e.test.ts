import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import type { ToolResult } from '@forge-fleet/shared';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARKUP } from '../fixtures/console-block-tools.js';
import { ROOT, TestFleet } from '../fixtures/fleet.js';

/** Debian's `chromium` package (.ci/run installs it when missing); playwright-core downloads no browser. */
const CHROMIUM = '/usr/bin/chromium';
/** Test artifacts (git-ignored). */
const RESULTS_DIR = join(ROOT, 'test-results');
/** The README's screenshot: rewritten only when asked, so a test run leaves the work tree as it was. */
const DOCS_SCREENSHOT = join(ROOT, 'docs', 'console.png');
/** Host tools answering with MCP content blocks (audio alone; every kind; markup). */
const BLOCK_TOOLS = join(ROOT, 'test', 'fixtures', 'console-block-tools.ts');

/**
 * The web console at /ui in a real browser, against a running fleet: an agent's
 * call waits for a person, who approves, edits or denies it on the page; the
 * agent hears the outcome. The page's own failures (uncaught errors, CSP
 * refusals) fail the test.
 */
describe('web console', () => {
  const fleet = new TestFleet();
  let url: string;
  let agent: FleetClient;
  let blocksAgent: FleetClient;
  let admin: FleetClient;
  let adminToken: string;
  let approverToken: string;
  let browser: Browser;

  beforeAll(async () => {
    await Promise.all([fleet.worker({ tier: 'platform' }), fleet.worker({ tier: 'host', tools: BLOCK_TOOLS })]);
    ({ url } = await fleet.dispatcher({ FORGE_DEV_MODE: '0', FORGE_APPROVAL_DEADLINE_MS: '120000' }));
    agent = new FleetClient({ url, token: await fleet.token({ subject: 'agent-7' }) });
    blocksAgent = new FleetClient({ url, token: await fleet.token({ subject: 'agent-8', grants: ['console_audio', 'console_blocks', 'console_markup'] }) });
    adminToken = await fleet.token({ subject: 'ops-1', role: 'admin' });
    approverToken = await fleet.token({ subject: 'alice', role: 'approver' });
    admin = new FleetClient({ url, token: adminToken });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu'] });
  });

  afterAll(async () => {
    await Promise.all([agent?.close(), blocksAgent?.close(), admin?.close(), browser?.close()]);
    await fleet.stopAll();
  });

  /**
   * Opens /ui in a fresh browser context (its own sessionStorage) and signs in.
   * `problems` collects what the page got wrong; the browser's own line for each
   * refused request ("Failed to load resource: … 403") is expected where the test
   * provokes a refusal, and left out.
   */
  async function openConsole(token: string): Promise<{ page: Page; problems: string[]; close: () => Promise<void> }> {
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(30_000);
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`uncaught: ${error.message}`));
    page.on('console', (message) => {
      if ((message.type() === 'error' || message.type() === 'warning') && !message.text().startsWith('Failed to load resource: the server responded with a status of')) {
        problems.push(`console.${message.type()}: ${message.text()}`);
      }
    });
    const response = await page.goto(`${url}/ui`);
    expect(response?.headers()['content-security-policy']).toMatch(/^default-src 'self'/);
    expect(response?.headers()['x-frame-options']).toBe('DENY');
    await page.getByTestId('token-input').fill(token);
    await page.getByTestId('token-submit').click();
    await page.getByTestId('console').waitFor();
    return { page, problems, close: () => context.close() };
  }

  /** Submits a confirm_echo call as the agent; it waits through the approval like any `client.call`. */
  function submit(text: string): { id: string; result: Promise<ToolResult> } {
    const id = `console-${randomUUID()}`;
    return { id, result: agent.call('confirm_echo', { text }, { id, timeoutMs: 90_000 }) };
  }

  const card = (page: Page, id: string) => page.locator(`[data-testid="approval"][data-call-id="${id}"]`);
  const callRow = (page: Page, id: string) => page.locator(`[data-testid="call-row"][data-call-id="${id}"]`);

  it('shows a waiting call, approves it for the waiting agent, and shows queues and the call with its audit trail', async () => {
    const { page, problems, close } = await openConsole(adminToken);
    try {
      await page.getByTestId('whoami').filter({ hasText: 'ops-1 (admin)' }).waitFor();

      const first = submit('hello');
      const pending = card(page, first.id);
      await pending.waitFor();
      expect(await pending.getByTestId('approval-tool').textContent()).toBe('confirm_echo');
      expect(await pending.getByTestId('approval-caller').textContent()).toBe('agent-7');
      expect(await pending.getByTestId('approval-reason').textContent()).toContain('confirm');
      expect(JSON.parse((await pending.getByTestId('approval-arguments').textContent()) ?? '')).toEqual({ text: 'hello' });

      await pending.getByTestId('approve').click();
      expect(await first.result).toMatchObject({ isError: false, structuredContent: { echo: 'hello', runs: 1 } });
      await pending.waitFor({ state: 'detached' });

      const platform = page.locator('[data-testid="queue-row"][data-lane="platform"]');
      await platform.waitFor();
      expect(Number(await platform.getByTestId('queue-workers').textContent())).toBeGreaterThanOrEqual(1);

      const row = callRow(page, first.id);
      await row.locator('[data-testid="call-status"]', { hasText: /^completed$/ }).waitFor();
      expect(await row.getByTestId('call-tool').textContent()).toBe('confirm_echo');
      expect(await row.getByTestId('call-tier').textContent()).toBe('platform');
      expect(await row.getByTestId('call-caller').textContent()).toBe('agent-7');
      // The dispatcher audits the approval; the worker may have audited the end since. The record and
      // the audit trail are read separately and the trail is archived asynchronously, so the row may
      // show the record's status one refresh before the trail's decision.
      await row.locator('[data-testid="call-decision"]', { hasText: /^(approved|completed)/ }).waitFor();

      await row.getByTestId('call-open').click();
      await page.getByTestId('detail-id').filter({ hasText: first.id }).waitFor();
      await page.getByTestId('detail-status').filter({ hasText: /^completed$/ }).waitFor();
      expect(JSON.parse((await page.getByTestId('detail-result').textContent()) ?? '')).toEqual({ echo: 'hello', runs: 1 });
      await page.locator('[data-testid="trail-row"][data-decision="approved"]').waitFor();
      const trail = await page.getByTestId('trail-decision').allTextContents();
      expect(trail.slice(0, 2)).toEqual(['awaiting_approval', 'approved']);

      // A second call waiting, so the screenshot shows every panel at work.
      const second = submit('ship it?');
      await card(page, second.id).waitFor();
      await callRow(page, second.id).locator('[data-testid="call-status"]', { hasText: /^awaiting_approval$/ }).waitFor();
      mkdirSync(RESULTS_DIR, { recursive: true });
      const screenshot = join(RESULTS_DIR, 'console.png');
      await page.screenshot({ path: screenshot, fullPage: true });
      if (process.env['FORGE_UPDATE_SCREENSHOT'] === '1') copyFileSync(screenshot, DOCS_SCREENSHOT);

      await card(page, second.id).getByTestId('approve').click();
      expect(await second.result).toMatchObject({ isError: false, structuredContent: { echo: 'ship it?' } });
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  /** Runs a block tool to its end and opens its call in the console's detail. */
  async function openBlocksCall(page: Page, tool: string): Promise<ToolResult> {
    const result = await blocksAgent.call(tool, {}, { timeoutMs: 30_000 });
    expect(result).toMatchObject({ isError: false });
    await callRow(page, result.toolCallId).getByTestId('call-open').click();
    await page.getByTestId('detail-id').filter({ hasText: result.toolCallId }).waitFor();
    await page.getByTestId('detail-status').filter({ hasText: /^completed$/ }).waitFor();
    return result;
  }

  it("lists a result's content blocks in the call detail, one line per non-text block as `forge call` prints them", async () => {
    const { page, problems, close } = await openConsole(adminToken);
    try {
      // One audio block and nothing else: no text, no structured content. The result is that block.
      await openBlocksCall(page, 'console_audio');
      const result = page.getByTestId('detail-result');
      await result.getByTestId('detail-block').first().waitFor();
      expect(await result.getByTestId('detail-block').allTextContents()).toEqual(['[audio audio/wav, 3000 bytes]']);

      // Every kind, with structured content: the object is the result, and every block is listed beside it, in order.
      await openBlocksCall(page, 'console_blocks');
      await page.getByTestId('detail-blocks').getByTestId('detail-block').first().waitFor();
      expect(JSON.parse((await page.getByTestId('detail-result').textContent()) ?? '')).toEqual({ points: 3, unit: 'ms' });
      expect(await page.getByTestId('detail-blocks').getByTestId('detail-block').allTextContents()).toEqual([
        'here is the chart',
        '[image image/png, 20000 bytes]',
        '[audio audio/wav, 3000 bytes]',
        '[resource_link file:///data/chart.csv text/csv, chart.csv]',
        'and its sources ✓',
        `[resource mem://notes/1 text/markdown, ${Buffer.byteLength('# Notes\nünïcödé and "quotes"')} bytes of text]`,
        '[resource mem://raw/1 application/octet-stream, 257 bytes]',
      ]);
      const types = await Promise.all((await page.getByTestId('detail-block').all()).map((block) => block.getAttribute('data-type')));
      expect(types).toEqual(['text', 'image', 'audio', 'resource_link', 'text', 'resource', 'resource']);

      // What the tool sends is shown as text, never parsed as markup.
      await openBlocksCall(page, 'console_markup');
      const blocks = page.getByTestId('detail-result').getByTestId('detail-block');
      await blocks.first().waitFor();
      expect(await blocks.allTextContents()).toEqual([MARKUP, `[resource_link mem://markup, ${MARKUP}]`]);
      expect(await page.getByTestId('injected').count()).toBe(0);
      expect(await page.getByTestId('detail-view').locator('b, img').count()).toBe(0);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('shows an invalid edit refused inline (the call keeps waiting), and runs a valid edit', async () => {
    const { page, problems, close } = await openConsole(adminToken);
    try {
      const call = submit('original');
      const pending = card(page, call.id);
      await pending.getByTestId('edit').click();
      const editor = pending.getByTestId('edit-arguments');
      expect(JSON.parse(await editor.inputValue())).toEqual({ text: 'original' });

      await editor.fill(JSON.stringify({ text: 'x'.repeat(50) }));
      await pending.getByTestId('edit-confirm').click();
      const error = pending.locator('[data-testid="approval-error"][data-code="SCHEMA_VALIDATION"]');
      await error.waitFor();
      expect(await error.textContent()).toMatch(/^SCHEMA_VALIDATION: /);
      expect(await admin.get(call.id)).toMatchObject({ status: 'awaiting_approval' });
      expect((await admin.approvals()).find((a) => a.id === call.id)?.arguments).toEqual({ text: 'original' });

      await editor.fill(JSON.stringify({ text: 'edited' }));
      await pending.getByTestId('edit-reason').fill('softer wording');
      await pending.getByTestId('edit-confirm').click();
      await page.locator(`[data-testid="approvals-notice"][data-call-id="${call.id}"]`, { hasText: /^Approved with edited arguments: .* is queued/ }).waitFor();
      expect(await call.result).toMatchObject({ isError: false, structuredContent: { echo: 'edited', runs: 1 } });

      await callRow(page, call.id).getByTestId('call-open').click();
      const modified = page.locator('[data-testid="trail-row"][data-decision="modified"]');
      await modified.waitFor();
      expect(await modified.textContent()).toContain('ops-1 (decided)');
      expect(await modified.textContent()).toContain('softer wording');
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('lets an approver deny with a reason the agent hears, and shows the audit refusal in its panel alone', async () => {
    const { page, problems, close } = await openConsole(approverToken);
    try {
      await page.getByTestId('whoami').filter({ hasText: 'alice (approver)' }).waitFor();
      // Approvers may not read the audit stream: that panel shows the API's refusal, the others work.
      const refused = page.locator('[data-testid="calls-error"][data-code="FORBIDDEN"]');
      await refused.waitFor();
      expect(await refused.textContent()).toMatch(/^FORBIDDEN: .*admin/);
      await page.locator('[data-testid="queue-row"][data-lane="platform"]').waitFor();

      const call = submit('no');
      // Settled now: denied, the call throws (it never ran), and its rejection must not go unhandled meanwhile.
      const outcome = call.result.then(() => 'resolved', (error: unknown) => error);
      const pending = card(page, call.id);
      await pending.getByTestId('deny').click();
      await pending.getByTestId('deny-reason').fill('not during the freeze');
      await pending.getByTestId('deny-confirm').click();
      await page.locator(`[data-testid="approvals-notice"][data-call-id="${call.id}"]`, { hasText: /^Denied: confirm_echo .* is failed/ }).waitFor();
      // Denied, it never ran: the agent's call throws, as a denial at submission does.
      expect(await outcome).toMatchObject({ code: 'APPROVAL_DENIED', message: expect.stringContaining('not during the freeze') as string });
      expect(await page.getByTestId('approvals-error').isHidden()).toBe(true);
      expect(await page.getByTestId('queues-error').isHidden()).toBe(true);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it("shows the API's refusal of a token it does not accept in every panel", async () => {
    const { page, problems, close } = await openConsole('not-a-token');
    try {
      for (const panel of ['queues', 'approvals', 'calls']) {
        const error = page.locator(`[data-testid="${panel}-error"][data-code="UNAUTHENTICATED"]`);
        await error.waitFor();
        expect(await error.textContent()).toMatch(/^UNAUTHENTICATED: \S/);
      }
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });
});
