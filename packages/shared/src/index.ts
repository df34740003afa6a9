/**
 * @module @forge-fleet/shared
 *
 * The tool model every part of Forge Fleet shares: how a tool is defined,
 * registered, scoped, validated, approved and executed, and the typed errors
 * each step raises. The dispatcher and the workers meet only through these
 * types (and Redis); neither imports the other.
 */

// errors
export { ErrorCode, ERROR_CODES, ERROR_TABLE, isErrorCode, isRetryable, httpStatusFor, type ErrorCodeFacts } from './errors/codes.js';
export { FleetError, isFleetError, type ErrorDetails } from './errors/fleet-error.js';
export {
  ToolNotFoundError,
  SchemaValidationError,
  ApprovalDeniedError,
  ApprovalPendingError,
  ExecutionFailedError,
  ExecutionTimeoutError,
  CancelledError,
  OutputValidationError,
  InvalidTierError,
  RegistryError,
  OutOfScopeError,
  InvalidDefinitionError,
  MalformedToolBlockError,
  ConfigInvalidError,
  InternalError,
  RemoteFleetError,
  BadRequestError,
  UnauthenticatedError,
  NoWorkerError,
  CallNotFoundError,
  PayloadTooLargeError,
  ExpiredError,
  ApprovalDeadlineSource,
  WorkerLostError,
  McpServerLostError,
  IdempotencyConflictError,
  RouteNotFoundError,
  WaitTimeoutError,
  ForgedCallError,
  ForbiddenError,
  ResourceLimitError,
  NotAwaitingApprovalError,
  NotSpeculatableError,
  UnavailableError,
  displayPath,
  type SchemaIssue,
  type ValidationStage,
  type WorkerLossReason,
  type WorkerLostOptions,
  type IdempotencyConflictKind,
} from './errors/errors.js';
export { WireError, toWireError, fromWireError } from './errors/wire.js';
export { HostNotAllowedError, OriginNotAllowedError, UriTooLongError, HeadersTooLargeError, UnsupportedMediaTypeError, RequestTimeoutError } from './errors/http-errors.js';

// tiers
export { Tier, TierInput, TIERS, tierNumber } from './tiers/tier.js';
export { classifyTier, requiresAuthorization, executionContextFor, type ExecutionContext, type TierClassification } from './tiers/classify.js';

// tools
export { ToolName, ToolCallId, ToolCall, ToolResult } from './tools/call.js';
export { ContentBlock, TextBlock, ImageBlock, AudioBlock, ResourceLinkBlock, EmbeddedResourceBlock, ResourceContents, textOfBlocks } from './tools/content-blocks.js';
export { toolContent, isToolContent, blocksResult, blocksOfResult, type ToolContent, type ToolContentOptions, type BlocksResult } from './tools/tool-content.js';
export { ToolDefinition, PoolName, ProcessIsolation, MAX_TIMEOUT_MS, parseToolDefinition, type ToolDefinitionInput } from './tools/definition.js';
export { CallProgress, MAX_PROGRESS_MESSAGE, ProgressThrottle, progressOf, type ProgressUpdate } from './tools/progress.js';
export { FnToolExecutor, resultFromOutput, type ToolExecutor, type ToolContext, type ToolHandler, type HandlerOutput } from './tools/executor.js';
export { defineTool, ToolBuilder, type Tool } from './tools/tool.js';
export { ToolRegistry, type RegisteredTool } from './tools/registry.js';

// schema
export { JsonSchema, DRAFT_2020_12, DRAFT_07, emptyObjectSchema, isJsonObject } from './schema/json-schema.js';
export { compileSchema, SUPPORTED_DIALECTS, type CompiledSchema, type SchemaDefinitionProblem } from './schema/compile.js';
export { MAX_SCHEMA_DEPTH, MAX_SUBSCHEMAS, measureSchema, type SchemaMeasure, type SchemaSizeExcess } from './schema/schema-size.js';

// approval
export { ApprovalDecision, Approval, Authorization, authorizationAllows, type ApprovalContext, type ApprovalHandler } from './approval/decision.js';
export { AutoApprove, DenyAll, TierBasedApproval, AllowList, TrustGate, allOf } from './approval/handlers.js';

// scope
export { ToolScope, toolMatcher, assertToolPattern } from './scope/tool-scope.js';
export { ScopeRegistry, DEFAULT_SCOPE_NAME, type NamedScope } from './scope/scopes.js';
export { MemoryAuditLogger, type AuditLogger, type AuditEntry, type AuditErrorCategory, type AuditDecision, type AuditRejectionCategory } from './scope/audit.js';
export { MemoryRiskSignalQueue, type RiskSignalQueue, type RiskSignal } from './scope/risk.js';
export { TrustLevel } from './scope/trust.js';

// pipeline
export { executeToolCall, admitToolCall, resultOf, type PipelineOptions, type AdmitOptions, type Admission, type CallContext, type ToolCallOutcome } from './pipeline/execute.js';
export { validateArguments } from './pipeline/validate.js';
export { runExecutor, errorResult, type RunOptions } from './pipeline/run.js';
export { ScopedToolExecutor, type ScopedToolExecutorOptions, type ModelTextOutcome, type ModelTextCallOutcome } from './pipeline/scoped-executor.js';

// model text
export { parseToolCalls, TOOL_CALL_FENCE, type ParsedModelText, type ParseOptions } from './model-text/parse.js';

// wire
export { CallStatus, FINAL_STATUSES, isFinalStatus, CallView, SubmitCallRequest, SubmitBatchRequest, MAX_BATCH_CALLS, MAX_WAIT_MS } from './wire/call-view.js';
export { PendingApproval, ApprovalList, ApprovalDecisionRequest, DEFAULT_APPROVAL_DEADLINE_MS } from './wire/approvals.js';
export { QueueStats, QueueStatsList } from './wire/queues.js';
export { CallEnvelope, CallBatch, ReplyMessage, ResultReply, ProgressReply, CallSignature, ApprovalRecord } from './wire/envelope.js';
export { stableStringify } from './wire/stable-json.js';
export { eachJsonValue } from './wire/json-walk.js';
export { argumentValueProblem, FORBIDDEN_ARGUMENT_KEYS } from './wire/argument-values.js';
export { lineReader } from './wire/lines.js';
export { deriveQueueKey, keyCheck, signEnvelope, envelopeForgery, SIGNATURE_ALGORITHM, MIN_KEY_BYTES } from './signing/call-signature.js';

// queues
export { queueName, laneOf, DEFAULT_FLEET_PREFIX, FLEET_PREFIX_PATTERN } from './queues/names.js';

// config
export { parseConfig, FleetEnv, envInt } from './config/parse.js';
export { RedisUrl, type RedisTarget, type RedisNode } from './config/redis-target.js';
export { secretFromEnv, textFromEnv } from './config/secrets.js';
export { lostKeyPaths, LOST_KEY_PROBLEM } from './config/lost-keys.js';
export { Role, TokenClaims, type MintOptions, mintToken, generateTokenKeys, TokenVerifier, DEFAULT_TOKEN_AUDIENCE } from './auth/tokens.js';

// process
export { runMain, lazyChild, type RunningProcess, type LifecycleLogger, type ChildCapableLogger } from './process/run-main.js';
export { FreshRun } from './process/fresh-run.js';
export { LoopSlice } from './process/loop-slice.js';
