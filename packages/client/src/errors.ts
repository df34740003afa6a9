import { BadRequestError, type FleetError, fromWireError, InternalError, WireError } from '@forge-fleet/shared';

/** The FleetError a dispatcher's error body (`{ error: { code, message, retryable, …details } }`) names; a plain HTTP error without one. */
export function errorFrom(status: number, json: unknown): FleetError {
  const raw = (json as { error?: Record<string, unknown> } | undefined)?.error;
  if (raw === undefined) return status < 500 ? new BadRequestError(`HTTP ${status}`) : new InternalError(`HTTP ${status}`);
  const { code, message, retryable, ...details } = raw;
  const wire = WireError.safeParse({ code, message, retryable: retryable ?? false, details });
  return wire.success ? fromWireError(wire.data) : new InternalError(`HTTP ${status}: ${JSON.stringify(raw).slice(0, 200)}`);
}

/** Reads an error answer (status ≥ 400) to the FleetError its body names; a body that is not JSON counts as none. */
export async function errorOfAnswer(statusCode: number, body: { text(): Promise<string> }): Promise<FleetError> {
  const text = await body.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return errorFrom(statusCode, json);
}
