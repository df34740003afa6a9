import {
  ApprovalList,
  type ApprovalDecisionRequest,
  ApprovalPendingError,
  argumentValueProblem,
  type PendingApproval,
  BadRequestError,
  type CallView,
  CallView as CallViewSchema,
  InternalError,
  isFinalStatus,
  lineReader,
  MAX_BATCH_CALLS,
  MAX_WAIT_MS,
  QueueStatsList,
  ToolDefinition,
  type ToolResult,
  WaitTimeoutError,
} from '@forge-fleet/shared';
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'undici';
import { CallStream, type StreamedCall, type StreamLoss } from './call-stream.js';
import { errorFrom, errorOfAnswer } from './errors.js';
import { refusalOf } from './outcome.js';

/** How to reach a dispatcher. */
export interface FleetClientOptions {
  /**
   * The dispatcher's base URL, e.g. `http://127.0.0.1:8080`, or several
   * dispatchers of one fleet: requests go to one, and move to the next when
   * it cannot be reached (see {@link FleetClientOptions.retryWindowMs}).
   */
  readonly url: string | readonly string[];
  /**
   * The agent capability token (`forge token mint`), sent as
   * `Authorization: Bearer <token>`: who the agent is, its scope and its
   * Host-tier grants. Required unless the dispatcher runs in dev mode.
   */
  readonly token?: string;
  /** Dev mode only (anonymous callers): sent as `x-forge-task` to pick the scope. Token holders get theirs from the token. */
  readonly task?: string;
  /** Keep-alive connections to the dispatcher (each open call stream has one more of its own). @defaultValue 64 */
  readonly connections?: number;
  /** Default for {@link CallOptions.timeoutMs}. @defaultValue 60000 */
  readonly timeoutMs?: number;
  /**
   * Send the calls made in the same event-loop turn as one `POST /v1/calls/batch`
   * request (each still answered as soon as it ends). Cuts HTTP work per call
   * when an agent runs many calls at once. @defaultValue true
   */
  readonly batch?: boolean;
  /**
   * Send calls (those that batching would send) over one long
   * `POST /v1/calls/stream` request instead: each call a line of the request
   * body, each answer a line of the response, so an agent whose calls end a
   * few at a time does not pay for an HTTP request per call or two. Falls back
   * to batches by itself when the dispatcher does not serve streams or
   * something between buffers request bodies (no answer begins within 10 s).
   * @defaultValue true
   */
  readonly stream?: boolean;
  /**
   * How long a request keeps being retried — on the next dispatcher, with
   * backoff — while dispatchers cannot be reached (refused, reset, killed) or
   * answer `UNAVAILABLE` (their Redis is away). Only requests that are safe to
   * repeat are retried: reads, waits, cancels and submissions (every call
   * carries an id, so a resubmitted call is answered for, never run twice);
   * an approval decision is not. `0` turns retries off. @defaultValue 30000
   */
  readonly retryWindowMs?: number;
}

/** Errors of a request that never reached a dispatcher, or lost it mid-answer (undici and system codes). */
const TRANSPORT_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'UND_ERR_CONNECT_TIMEOUT']);

/** Whether another dispatcher (or the same one, a moment later) may answer where this attempt failed. */
function isTransient(error: unknown): boolean {
  if (error instanceof Error && 'code' in error) {
    const code = (error as { code: unknown }).code;
    if (typeof code === 'string' && TRANSPORT_CODES.has(code)) return true;
    if (code === 'UNAVAILABLE') return true;
  }
  return false;
}

/** A call on a stream, with when it was first sent and how often it has been sent again. */
interface Streamed extends StreamedCall {
  readonly since: number;
  readonly attempt: number;
}

interface Queued {
  readonly body: Record<string, unknown>;
  resolve(view: CallView): void;
  reject(error: unknown): void;
}

/** Options of one call. */
export interface CallOptions {
  /** Choose it to make the call idempotent across your own retries; generated here when absent (so this client's retries are). */
  readonly id?: string;
  /** How long to wait for the result before {@link WaitTimeoutError}; the call itself goes on. */
  readonly timeoutMs?: number;
  /** Aborting stops the wait and cancels the call in the fleet. */
  readonly signal?: AbortSignal;
  /** A call still queued this long after submission is never executed (`EXPIRED`). */
  readonly expireAfterMs?: number;
  /**
   * When the call waits for a person: keep waiting (up to `timeoutMs`) for the
   * decision and its outcome, or, with `false`, throw `APPROVAL_PENDING` at once
   * (the call stays; read it by id later). @defaultValue true
   */
  readonly waitForApproval?: boolean;
  /**
   * Run the call ahead of need; the agent may discard its result. Only for
   * tools flagged `speculatable` (others: `NOT_SPECULATABLE`); never sent to a person.
   */
  readonly speculative?: boolean;
}

/**
 * A client for one dispatcher, several, or a load balancer in front of them.
 * A call whose tool never ran throws a `FleetError` with the server's code —
 * refused at submission (bad arguments, denied, out of scope, no worker…) or
 * ended later without running (denied by a person, expired, cancelled) — on
 * every way calls travel (stream, batch, one request each); a tool that ran
 * and failed resolves to a result with `isError: true`.
 */
export class FleetClient {
  readonly #bases: readonly string[];
  /** The dispatcher requests go to now (an index into #bases); moves on when it cannot be reached. */
  #current = 0;
  readonly #retryWindowMs: number;
  readonly #agent: Agent;
  readonly #headers: Record<string, string>;
  readonly #timeoutMs: number;
  readonly #batching: boolean;
  /** Calls waiting for the end of this turn, by the `wait` they ask for. */
  readonly #queued = new Map<number, Queued[]>();
  /** Whether calls go on streams; turned off for good when a dispatcher cannot stream. */
  #streaming: boolean;
  /** The open call stream for each `wait`. */
  readonly #streams = new Map<number, CallStream<Streamed>>();

  constructor(options: FleetClientOptions) {
    const urls = typeof options.url === 'string' ? [options.url] : options.url;
    if (urls.length === 0) throw new BadRequestError('FleetClient needs at least one dispatcher URL');
    this.#bases = urls.map((u) => u.replace(/\/+$/, ''));
    this.#retryWindowMs = options.retryWindowMs ?? 30_000;
    this.#agent = new Agent({ connections: options.connections ?? 64, keepAliveTimeout: 60_000, pipelining: 1 });
    this.#headers = {
      'content-type': 'application/json',
      ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
      ...(options.task === undefined ? {} : { 'x-forge-task': options.task }),
    };
    this.#timeoutMs = options.timeoutMs ?? 60_000;
    this.#batching = options.batch ?? true;
    this.#streaming = this.#batching && (options.stream ?? true);
  }

  /** The tools this client may call (filtered by its task's scope), sorted by name. */
  async tools(): Promise<ToolDefinition[]> {
    const body = (await this.#send('GET', '/v1/tools', undefined, undefined, true)) as { tools?: unknown };
    return ToolDefinition.array().parse(body.tools);
  }

  /**
   * Calls a tool and waits for its result: the tool's own, `isError: true` when it ran and failed.
   * @throws FleetError with the dispatcher's code when the tool never ran: the call was refused, or ended without
   *   running (APPROVAL_DENIED by a person, EXPIRED, CANCELLED, NO_WORKER, FORGED_CALL); WaitTimeoutError when it
   *   does not end in time.
   */
  async call(name: string, args: Record<string, unknown> = {}, options: CallOptions = {}): Promise<ToolResult> {
    const timeoutMs = options.timeoutMs ?? this.#timeoutMs;
    const deadline = Date.now() + timeoutMs;
    // With a signal the id is chosen here, so a call aborted while its submission still waits can be cancelled by id.
    const id = options.id ?? (options.signal === undefined ? undefined : randomUUID());
    let view: CallView;
    try {
      view = await this.submit(name, args, { ...options, ...(id === undefined ? {} : { id }), waitMs: Math.min(timeoutMs, MAX_WAIT_MS) });
    } catch (error) {
      if (options.signal?.aborted === true && id !== undefined) await this.cancel(id).catch(() => undefined);
      throw error;
    }
    return this.#until(view, deadline, timeoutMs, options.signal, name, options.waitForApproval ?? true);
  }

  /** Submits a call; with `waitMs`, waits that long for it to end. */
  async submit(name: string, args: Record<string, unknown> = {}, options: CallOptions & { waitMs?: number } = {}): Promise<CallView> {
    // The dispatcher's own check, made before sending: JSON.stringify would send NaN or Infinity as null, and the
    // dispatcher would check, and the tool run, other arguments.
    const problem = argumentValueProblem(args);
    if (problem !== undefined) throw problem;
    const body = {
      name,
      arguments: args,
      // Chosen here rather than by the dispatcher, so that a submission retried elsewhere is the same call.
      id: options.id ?? randomUUID(),
      ...(options.expireAfterMs === undefined ? {} : { expireAfterMs: options.expireAfterMs }),
      ...(options.speculative === true ? { speculative: true } : {}),
    };
    // A call with its own signal goes alone, so aborting it never touches a shared request.
    if (this.#batching && options.signal === undefined) return this.#enqueue(body, Math.min(Math.ceil(options.waitMs ?? 0), MAX_WAIT_MS));
    const query = options.waitMs === undefined || options.waitMs <= 0 ? '' : `?wait=${Math.min(Math.ceil(options.waitMs), MAX_WAIT_MS)}`;
    return CallViewSchema.parse(await this.#send('POST', `/v1/calls${query}`, body, options.signal, true));
  }

  /**
   * Waits for a submitted call's result, as {@link FleetClient.call} does.
   * @throws FleetError when the call ended without its tool running (see `call`); WaitTimeoutError
   */
  async wait(id: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<ToolResult> {
    const timeoutMs = options.timeoutMs ?? this.#timeoutMs;
    return this.#until(await this.get(id), Date.now() + timeoutMs, timeoutMs, options.signal);
  }

  /** The call's current view; with `waitMs`, waits that long for it to end. @throws FleetError CALL_NOT_FOUND */
  async get(id: string, options: { waitMs?: number; signal?: AbortSignal } = {}): Promise<CallView> {
    const query = options.waitMs === undefined || options.waitMs <= 0 ? '' : `?wait=${Math.min(Math.ceil(options.waitMs), MAX_WAIT_MS)}`;
    return CallViewSchema.parse(await this.#send('GET', `/v1/calls/${encodeURIComponent(id)}${query}`, undefined, options.signal, true));
  }

  /** Cancels a call; a running handler sees its AbortSignal fire. */
  async cancel(id: string): Promise<CallView> {
    return CallViewSchema.parse(await this.#send('POST', `/v1/calls/${encodeURIComponent(id)}/cancel`, undefined, undefined, true));
  }

  /** Calls waiting for a person, oldest deadline first (approver or admin token). */
  async approvals(): Promise<PendingApproval[]> {
    return ApprovalList.parse(await this.#send('GET', '/v1/approvals', undefined, undefined, true)).approvals;
  }

  /**
   * Decides a call waiting for a person (approver or admin token): approve it,
   * deny it (with a reason the agent sees), or run it with edited arguments.
   * @throws FleetError NOT_AWAITING_APPROVAL, CALL_NOT_FOUND, SCHEMA_VALIDATION (an invalid edit), FORBIDDEN
   */
  async decide(id: string, decision: ApprovalDecisionRequest): Promise<CallView> {
    const problem = decision.arguments === undefined ? undefined : argumentValueProblem(decision.arguments);
    if (problem !== undefined) throw problem;
    return CallViewSchema.parse(await this.#send('POST', `/v1/approvals/${encodeURIComponent(id)}`, decision));
  }

  /**
   * Job counts and live workers per tier and pool queue (approver or admin token).
   * @throws FleetError FORBIDDEN for other roles
   */
  async queues(): Promise<QueueStatsList> {
    return QueueStatsList.parse(await this.#send('GET', '/v1/queues', undefined, undefined, true));
  }

  /**
   * Closes the keep-alive connections (and call streams; calls still on them
   * are given up). A script need not call it to exit: idle connections and
   * idle call streams do not keep the process alive.
   */
  async close(): Promise<void> {
    const streams = [...this.#streams.values()];
    this.#streams.clear();
    await Promise.all([...streams.map((stream) => stream.close()), this.#agent.close()]);
  }

  #enqueue(body: Record<string, unknown>, waitMs: number): Promise<CallView> {
    if (this.#streaming) return new Promise((resolve, reject) => this.#onStream({ body: body as StreamedCall['body'], resolve, reject, since: Date.now(), attempt: 0 }, waitMs));
    return new Promise((resolve, reject) => {
      let queued = this.#queued.get(waitMs);
      if (queued === undefined) {
        queued = [];
        this.#queued.set(waitMs, queued);
        setImmediate(() => this.#flush(waitMs));
      }
      queued.push({ body, resolve, reject });
      if (queued.length >= MAX_BATCH_CALLS) this.#flush(waitMs);
    });
  }

  #flush(waitMs: number): void {
    const items = this.#queued.get(waitMs);
    if (items === undefined) return;
    this.#queued.delete(waitMs);
    const query = waitMs > 0 ? `?wait=${waitMs}` : '';
    if (items.length === 1) {
      const [only] = items as [Queued];
      this.#send('POST', `/v1/calls${query}`, only.body, undefined, true).then(
        (json) => only.resolve(CallViewSchema.parse(json)),
        (error: unknown) => only.reject(error),
      );
      return;
    }
    void this.#sendBatchRetrying(`/v1/calls/batch${query}`, items);
  }

  /** Sends a call on the stream for its `wait`, opening one when there is none taking calls. */
  #onStream(call: Streamed, waitMs: number): void {
    let stream = this.#streams.get(waitMs);
    if (stream === undefined || !stream.accepting) {
      stream?.retire();
      const query = waitMs > 0 ? `?wait=${waitMs}` : '';
      const opened: CallStream<Streamed> = new CallStream<Streamed>({
        url: `${this.#bases[this.#current]}/v1/calls/stream${query}`,
        headers: this.#headers,
        onLoss: (calls, loss) => void this.#streamLoss(calls, loss, waitMs),
        onEnd: () => {
          if (this.#streams.get(waitMs) === opened) this.#streams.delete(waitMs);
        },
      });
      this.#streams.set(waitMs, opened);
      stream = opened;
    }
    stream.send(call);
  }

  /**
   * Calls a stream gave back unanswered: sent again (on the next dispatcher,
   * after a pause) while the failure is one another attempt may get past and
   * the call's retry window is open — every call carries its id, so none runs
   * twice — else failed with the error. A dispatcher that cannot stream turns
   * this client back to batches.
   */
  async #streamLoss(calls: readonly Streamed[], loss: StreamLoss, waitMs: number): Promise<void> {
    if (loss.kind === 'unsupported') {
      this.#streaming = false;
      for (const call of calls) this.#enqueue(call.body, waitMs).then(call.resolve, call.reject);
      return;
    }
    const now = Date.now();
    const again = calls.filter((call) => isTransient(loss.error) && now - call.since < this.#retryWindowMs);
    for (const call of calls) if (!again.includes(call)) call.reject(loss.error);
    if (again.length === 0) return;
    await this.#failover(Math.max(...again.map((call) => call.attempt)));
    for (const call of again) this.#onStream({ ...call, attempt: call.attempt + 1 }, waitMs);
  }

  /**
   * Sends a batch; when its dispatcher cannot be reached or drops the answer
   * half-way, the calls not answered yet go again to the next dispatcher
   * (each carries its id, so none runs twice) until the retry window closes.
   */
  async #sendBatchRetrying(path: string, items: readonly Queued[]): Promise<void> {
    const settled = new Set<Queued>();
    const started = Date.now();
    for (let attempt = 0; ; attempt++) {
      const left = items.filter((item) => !settled.has(item));
      if (left.length === 0) return;
      // An answer that ended before every call had its line: the dispatcher went away mid-answer.
      const incomplete = new InternalError('the dispatcher ended the batch answer before answering every call');
      let failure: unknown = incomplete;
      try {
        await this.#sendBatch(path, left, settled);
      } catch (error) {
        failure = error;
      }
      const dropped = failure === incomplete;
      if (items.every((item) => settled.has(item))) return;
      if (!(dropped || isTransient(failure)) || Date.now() - started >= this.#retryWindowMs) {
        for (const item of items) if (!settled.has(item)) item.reject(failure);
        return;
      }
      await this.#failover(attempt);
    }
  }

  /** One request for many calls; the answer is NDJSON, one line per call, in the order they end. */
  async #sendBatch(path: string, items: readonly Queued[], answered: Set<Queued>): Promise<void> {
    const response = await request(`${this.#bases[this.#current]}${path}`, {
      method: 'POST',
      dispatcher: this.#agent,
      headers: this.#headers,
      body: JSON.stringify({ calls: items.map((i) => i.body) }),
    });
    if (response.statusCode >= 400) throw await errorOfAnswer(response.statusCode, response.body);
    const take = (line: string): void => {
      if (line.trim() === '') return;
      const { index, error, ...view } = JSON.parse(line) as { index: number; error?: Record<string, unknown> };
      const item = items[index];
      if (item === undefined || answered.has(item)) return;
      const failure = error === undefined ? undefined : errorFrom(500, { error });
      // A call refused because the dispatcher's Redis is away is tried again with the batch's unanswered rest.
      if (failure !== undefined && isTransient(failure)) return;
      answered.add(item);
      if (failure === undefined) item.resolve(CallViewSchema.parse(view));
      else item.reject(failure);
    };
    // Whole lines only, decoded across chunk boundaries (a character split between two chunks stays whole). A last
    // line without its newline is an answer cut off mid-way: its call counts as unanswered and is sent again.
    const read = lineReader(take);
    for await (const chunk of response.body) read(chunk as Buffer);
  }

  /** Moves to the next dispatcher, waiting a little longer after each failed attempt (from 50 ms up to 1 s). */
  async #failover(attempt: number): Promise<void> {
    this.#current = (this.#current + 1) % this.#bases.length;
    // With one dispatcher (or a load balancer), the pause is what gives it time to come back.
    await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 50 * 2 ** attempt)));
  }

  async #until(first: CallView, deadline: number, timeoutMs: number, signal?: AbortSignal, toolName = 'the tool', waitForApproval = true): Promise<ToolResult> {
    let view = first;
    try {
      while (!isFinalStatus(view.status)) {
        signal?.throwIfAborted();
        // A person must decide first: wait for the decision, or hand the pending call back to the caller.
        if (view.status === 'awaiting_approval' && !waitForApproval) throw new ApprovalPendingError(toolName, view.reason ?? 'a person must approve it', view.id);
        const left = deadline - Date.now();
        if (left <= 0) throw new WaitTimeoutError(view.id, timeoutMs, view.status);
        view = await this.get(view.id, { waitMs: Math.min(left, MAX_WAIT_MS), ...(signal === undefined ? {} : { signal }) });
      }
    } catch (error) {
      // The caller gave up: the call should not go on running for nobody.
      if (signal?.aborted) await this.cancel(view.id).catch(() => undefined);
      throw error;
    }
    if (view.result === undefined) throw new InternalError(`call '${view.id}' ended (${view.status}) without a result`);
    // Ended without its tool running (denied by a person, expired…): thrown as a refusal at submission is.
    const refusal = refusalOf(view.result);
    if (refusal !== undefined) throw refusal;
    return view.result;
  }

  /** Sends a request; with `retry`, a transient failure moves it to the next dispatcher until the retry window closes. */
  async #send(method: 'GET' | 'POST', path: string, body?: unknown, signal?: AbortSignal, retry = false): Promise<unknown> {
    const started = Date.now();
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#sendOnce(method, path, body, signal);
      } catch (error) {
        if (!retry || !isTransient(error) || signal?.aborted === true || Date.now() - started >= this.#retryWindowMs) throw error;
        await this.#failover(attempt);
      }
    }
  }

  async #sendOnce(method: 'GET' | 'POST', path: string, body?: unknown, signal?: AbortSignal): Promise<unknown> {
    const response = await request(`${this.#bases[this.#current]}${path}`, {
      method,
      dispatcher: this.#agent,
      headers: this.#headers,
      ...(body === undefined ? (method === 'POST' ? { body: '{}' } : {}) : { body: JSON.stringify(body) }),
      ...(signal === undefined ? {} : { signal }),
    });
    const text = await response.body.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      throw new InternalError(`the dispatcher answered ${response.statusCode} with a body that is not JSON: ${text.slice(0, 200)}`);
    }
    if (response.statusCode >= 400) throw errorFrom(response.statusCode, json);
    return json;
  }
}
