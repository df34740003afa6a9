import { errorResult, isFleetError, NoWorkerError, validateArguments, WorkerLostError, type CallEnvelope, type FleetError } from '@forge-fleet/shared';
import { type CallStore, type CatalogSnapshot, type PackEntry, parseLane, type TierQueues } from '@forge-fleet/store';
import type { Logger } from 'pino';
import type { DecisionAudit } from '../audit/decisions.js';
import type { CatalogView } from '../catalog/catalog-view.js';
import type { PackRouter } from './pack-router.js';

export interface StrandedCallsDeps {
  readonly queues: TierQueues;
  readonly store: CallStore;
  readonly router: PackRouter;
  /** The tools' definitions of now, against which a call admitted under another one is checked again. */
  readonly catalog: Pick<CatalogView, 'definitionOf' | 'packsOf'>;
  readonly audit: DecisionAudit;
  readonly log: Logger;
}

/**
 * Calls left in the queue of a pack that has no live worker any more (its
 * last worker stopped or died after the call was enqueued) would wait there
 * for ever. After every catalog read — periodic, and at once when a worker
 * says it left — each such queue is emptied: every call still waiting (or
 * running on the gone worker) moves to another pack serving its tool, or,
 * when none is live, ends with NO_WORKER (WORKER_LOST if it had started). A
 * pack that serves the tool under another definition than the dead one did
 * (an MCP server changed its schema, and its worker's new generation serves
 * the new one) takes the call only if its arguments fit the definition of
 * now; otherwise the call ends SCHEMA_VALIDATION, never reaching a tool that
 * refuses them. So no call waits on a queue without a live worker for
 * longer than a lease period and one catalog refresh.
 *
 * Several dispatchers may sweep the same queue: each job is taken by one
 * (see TierQueues.takeStranded), and a call ends once (its record's script).
 */
export class StrandedCalls {
  readonly #d: StrandedCallsDeps;
  #sweeping: Promise<void> | undefined;

  constructor(deps: StrandedCallsDeps) {
    this.#d = deps;
  }

  /** Sweeps the packs of a catalog read that have no live worker but hold jobs; one sweep at a time. */
  sweep(snapshot: CatalogSnapshot): void {
    const dead = snapshot.packs.filter((p) => p.liveWorkers === 0 && p.waiting + p.delayed + p.active > 0);
    if (dead.length === 0) return;
    // One at a time: what a sweep under way leaves is seen by the next catalog read's.
    if (this.#sweeping !== undefined) return;
    this.#sweeping = this.#sweepAll(dead)
      .catch((err: unknown) => this.#d.log.error({ err }, 'could not re-home the calls of a pack without workers'))
      .finally(() => (this.#sweeping = undefined));
  }

  /** Resolves when the sweep under way (if any) is done. */
  async settled(): Promise<void> {
    await this.#sweeping;
  }

  async #sweepAll(dead: readonly PackEntry[]): Promise<void> {
    for (const pack of dead) {
      for (;;) {
        const envelopes = await this.#d.queues.takeStranded(pack.queue);
        if (envelopes.length === 0) break;
        await Promise.all(envelopes.map((e) => this.#rehome(pack, e)));
      }
    }
  }

  async #rehome(from: PackEntry, envelope: CallEnvelope): Promise<void> {
    const d = this.#d;
    const { id, name } = envelope.call;
    const record = await d.store.getIn(from.lane, id);
    // Ended, withdrawn, or taken over by a later submission (another token): nothing of this job runs.
    if (record === undefined || (record.status !== 'queued' && record.status !== 'running')) return;
    if (record.envelope?.token !== envelope.token) return;
    const log = d.log.child({ callId: id, tool: name, from: from.queue });
    const route = d.router.route(name, from.queue);
    const refusal = route === undefined ? undefined : this.#refusedByDefinitionOfNow(from, envelope);
    if (refusal !== undefined) {
      if (await d.store.end(from.lane, id, 'failed', errorResult(envelope.call, refusal), { onlyFrom: record.status })) {
        d.audit.write({ decision: 'failed', code: refusal.code, callId: id, tool: name, ...(envelope.caller === undefined ? {} : { caller: envelope.caller }) });
        log.warn({ code: refusal.code }, "call ended: its tool's definition changed and refuses its arguments");
      }
      return;
    }
    if (route !== undefined) {
      // Same lane, same signing key: the envelope moves as it is. A call that had started is seen by its
      // next worker as redelivered (lost with its worker: run again only if its tool is retryable).
      await d.queues.enqueueRecorded(envelope, route.queue, { moved: true });
      log.info({ to: route.queue, status: record.status }, 'call re-homed from a pack without live workers');
      return;
    }
    // A call that had started is lost with its worker. A retryable tool's would run again, were there a worker: it
    // ends NO_WORKER saying how often it ran. Any other ends WORKER_LOST, and must not be sent again (retryable: false).
    const retryable = d.catalog.definitionOf(name)?.retryable === true;
    const lost = record.status === 'running' && !retryable;
    const error = lost ? new WorkerLostError(name, 'lock_expired', { detail: 'its worker stopped and no other live worker serves the tool' }) : new NoWorkerError(name, from.queue, { runs: record.starts, lane: parseLane(from.lane), ended: true });
    const result = errorResult(envelope.call, error);
    if (await d.store.end(from.lane, id, 'failed', lost ? { ...result, error: { ...result.error!, retryable: false } } : result, { onlyFrom: record.status })) {
      d.audit.write({ decision: 'failed', code: error.code, callId: id, tool: name, ...(envelope.caller === undefined ? {} : { caller: envelope.caller }) });
      log.warn({ code: error.code }, 'call ended: its pack lost its workers and no other live worker serves the tool');
    }
  }

  /**
   * Why a call admitted under the dead pack's definition of its tool must not run under the definition served now:
   * `undefined` when it is the same one, or its arguments fit the new one.
   */
  #refusedByDefinitionOfNow(from: PackEntry, envelope: CallEnvelope): FleetError | undefined {
    const { name, arguments: args } = envelope.call;
    const admitted = from.tools.get(name);
    const now = this.#d.catalog.packsOf(name)[0]?.tools.get(name);
    const definition = this.#d.catalog.definitionOf(name);
    if (admitted === undefined || now === undefined || admitted === now || definition === undefined) return undefined;
    try {
      validateArguments(definition, args, 'definition_changed');
      return undefined;
    } catch (err) {
      if (isFleetError(err)) return err;
      throw err;
    }
  }
}
