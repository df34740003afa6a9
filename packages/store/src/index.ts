/**
 * @module @forge-fleet/store
 *
 * The fleet's state in Redis, shared by the dispatcher and the workers (which
 * never import each other): call records and their transitions, reply lists,
 * the live tool catalog and the tier queues.
 */
export { connectRedis, closeRedis, type ConnectionLog, type RedisConnection } from './redis.js';
export { CallStore, viewOf, requestHash, type EndOptions, type CallRecord, type NewCall, type RunClaim, type StartOutcome } from './call-store.js';
export { publishReply, ReplyPublisher, ReplyInbox, REPLY_LIST_TTL_MS } from './replies.js';
export { Catalog, type CatalogEntry, type CatalogSnapshot, type PackEntry } from './catalog.js';
export { TierQueues, callsOfJob, openQueue, MAX_BATCH, ENQUEUE_OUTAGE_MS, type Route, type Submitted } from './queues.js';
export { idleFetch, EMPTY_QUEUE } from './idle-fetch.js';
export { QueueStatsReader, type QueueStatsReaderOptions } from './queue-stats.js';
export { stableStringify } from '@forge-fleet/shared';
export { AUDIT_MAX_ENTRIES, AuditReader, RedisAuditLogger, RedisRiskSignalQueue, type AuditFilter, type StoredAuditEntry } from './audit.js';
export { AuditArchivist, type AuditArchivistOptions } from './audit-archivist.js';
export { parseLane, laneQueueName } from './lanes.js';
export { packOf, definitionHash, directPackOf, isDirectPack, type ToolPack } from './packs.js';
export { CallerSessions, type SessionHolder, type SessionPlace } from './caller-sessions.js';
export { isRedisAway } from './redis.js';
export { KeyChecks } from './key-checks.js';
export { McpCancel, McpCancelRelay } from './mcp-cancel-relay.js';
export { fleetKeys, packQueueName, type FleetKeys } from './keys.js';
