/*
 * The fleet's Redis key layout: every key and channel of the fleet's own
 * state, made from the fleet's prefix (several fleets, or test runs, can share
 * one Redis), and the queue name of each tool pack. This package owns it: the
 * apps ask for keys here and never spell one.
 *
 * Per-call keys are tagged by call id, per-dispatcher keys by dispatcher id,
 * the catalog's keys by one tag of their own: each a Redis Cluster hash tag
 * (`{…}`), so the keys one script touches share a slot.
 */
/**
 * The queue of one tool pack of a lane: the lane's queue name (its hash tag, so every pack of a lane stays in
 * the lane's Cluster slot and under its Redis user's key pattern) followed by the pack id.
 */
export function packQueueName(laneQueue: string, pack: string): string {
  return `${laneQueue}.${pack}`;
}

/** Keys of the fleet's own state (BullMQ keeps its keys under `<prefix>:<queue name>:…`). */
export function fleetKeys(prefix: string) {
  return Object.freeze({
    /** The fleet prefix these keys were made from. */
    prefix,
    /** Hash: one call's record (status, envelope, result), in its lane. */
    call: (lane: string, id: string) => `${prefix}:call:${lane}:{${id}}`,
    /** Set: dispatchers (other than the submitter) waiting for a call's result. */
    watchers: (lane: string, id: string) => `${prefix}:call:${lane}:{${id}}:watchers`,
    /** String: which lane holds a call's record, for lookups by id alone. Dispatchers only; same slot as the record. */
    callLane: (id: string) => `${prefix}:lane:{${id}}`,
    /** List: results of one lane's calls for one dispatcher instance, drained by its reply loop (all its lanes share a slot). */
    replies: (lane: string, dispatcherId: string) => `${prefix}:replies:${lane}:{${dispatcherId}}`,
    /**
     * Hash per lane: tool name → definition JSON, as announced by that lane's workers. Split by lane so a
     * worker's Redis user can write only its own lane's entries: a sandbox worker cannot claim a Host tool.
     */
    catalogDefinitions: (lane: string) => `${prefix}:{${prefix}.catalog}:${lane}:definitions`,
    /** Sorted set per tool: worker id → lease expiry (epoch ms). Same slot as the definitions. */
    catalogLeases: (lane: string, tool: string) => `${prefix}:{${prefix}.catalog}:${lane}:leases:${tool}`,
    /**
     * String per lane: a counter its announcements bump whenever they change its definitions or packs, so a
     * dispatcher reads those two hashes again only when they changed (a large catalog is megabytes). Same slot.
     */
    catalogVersion: (lane: string) => `${prefix}:{${prefix}.catalog}:${lane}:version`,
    /** Hash per lane: tool pack id → its tools and their definitions' hashes (see packages/store packs.ts). Same slot. */
    catalogPacks: (lane: string) => `${prefix}:{${prefix}.catalog}:${lane}:packs`,
    /** Sorted set per pack: worker id → lease expiry (epoch ms) of the workers serving that pack. Same slot. */
    catalogPackLeases: (lane: string, pack: string) => `${prefix}:{${prefix}.catalog}:${lane}:pack-leases:${pack}`,
    /**
     * Hash: lane → the key-check value of that lane's call key, written by dispatchers (they hold the signing
     * secret), read by workers at start so a worker with a wrong FORGE_CALL_KEY refuses to start. Same slot.
     */
    keyChecks: `${prefix}:{${prefix}.catalog}:keychecks`,
    /** Set: the lanes that have announced tools (dispatchers read each lane's definitions). Same slot. */
    catalogLanes: `${prefix}:{${prefix}.catalog}:lanes`,
    /** Sorted set: ids of calls waiting for a person, scored by their approval deadline (epoch ms). Dispatchers only. */
    approvals: `${prefix}:{${prefix}.approvals}`,
    /**
     * Stream: audit entries (decisions, outcomes, refused calls) and risk signals, each with the writer it came
     * from. Only the audit keeper's user writes it (see AuditArchivist); dispatchers read it.
     */
    audit: `${prefix}:{${prefix}.audit}`,
    /**
     * List per writer (`dispatcher`, or a worker's lane): entries on their way to the audit stream. A writer's
     * Redis user may only RPUSH to its own — no trim, no delete — so what it wrote stays written. Same slot as the stream.
     */
    auditInbox: (writer: string) => `${prefix}:{${prefix}.audit}:inbox:${writer}`,
    /**
     * Hash per signed envelope (by its MAC): the runs that lane's workers started of it — the replay barrier. Only
     * that lane's workers may touch it, not the dispatchers, so Redis state a dispatcher's user controls (the
     * record, the queue) cannot make a worker run a call again. Counted by the start step (same slot as the call
     * record); expires a while after the envelope's signature.
     */
    executions: (lane: string, id: string, mac: string) => `${prefix}:executions:${lane}:{${id}}:${mac}`,
    /**
     * String per MCP server and caller: which worker holds the caller's session (`session: perCaller`) — its process
     * id and its own queue, `<process>|<queue>` — under a lease its worker renews. Workers only, in their lane's part
     * of the catalog (same slot).
     */
    callerSession: (lane: string, server: string, caller: string) => `${prefix}:{${prefix}.catalog}:${lane}:sessions:${encodeURIComponent(server)}:${encodeURIComponent(caller)}`,
    /** Pub/sub channel: a worker joined or left; dispatchers re-read the catalog at once. */
    catalogChannel: `${prefix}:catalog-changed`,
    /** Pub/sub channel: MCP cancellations a dispatcher could not match, for the one holding the request. Dispatchers only. */
    mcpCancelChannel: `${prefix}:mcp-cancel`,
    /** Pub/sub channel per lane: ids of calls to cancel, heard by that lane's workers. */
    cancelChannel: (lane: string) => `${prefix}:cancel:${lane}`,
  });
}
export type FleetKeys = ReturnType<typeof fleetKeys>;
