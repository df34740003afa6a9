import { ErrorCode } from './codes.js';
import { FleetError } from './fleet-error.js';

/**
 * Refusals of the dispatcher's HTTP doors: requests turned away from their
 * headers alone, before any body is read (see docs/http-api.md, "Connections and requests").
 */

/** The `Host` header names a host the dispatcher does not serve (a DNS-rebinding page sends such a request). */
export class HostNotAllowedError extends FleetError {
  readonly code = ErrorCode.HOST_NOT_ALLOWED;
  constructor(host: string, allowed: string) {
    super(`the Host '${host}' is not one this dispatcher serves (${allowed}); call it by a name it serves, or add the name to FORGE_ALLOWED_HOSTS`, { host });
  }
}

/** A browser sent the request from a page of another origin than the dispatcher's own or an allowed one. */
export class OriginNotAllowedError extends FleetError {
  readonly code = ErrorCode.ORIGIN_NOT_ALLOWED;
  constructor(origin: string) {
    super(`requests from pages of origin '${origin}' are refused; serve the page from this dispatcher (/ui) or add its origin to FORGE_ALLOWED_ORIGINS`, { origin });
  }
}

/** A path segment is longer than the dispatcher reads. */
export class UriTooLongError extends FleetError {
  readonly code = ErrorCode.URI_TOO_LONG;
  constructor(maxSegmentChars: number) {
    super(`a path segment of the URL is longer than ${maxSegmentChars} characters; ids are at most 128 characters of [A-Za-z0-9_.:-] — send the id the dispatcher answered with`, { maxSegmentChars });
  }
}

/** The request's headers are larger than the server reads. */
export class HeadersTooLargeError extends FleetError {
  readonly code = ErrorCode.HEADERS_TOO_LARGE;
  constructor(maxBytes: number) {
    super(`the request headers are larger than ${maxBytes} bytes in all; send a smaller token or fewer headers`, { maxBytes });
  }
}

/** The body's content type is not one the route reads. */
export class UnsupportedMediaTypeError extends FleetError {
  readonly code = ErrorCode.UNSUPPORTED_MEDIA_TYPE;
  constructor(contentType: string, remedy: string) {
    super(`a body of content-type '${contentType}' is not read here; ${remedy}`, { contentType });
  }
}

/** The request (its headers or its body) did not arrive in time. */
export class RequestTimeoutError extends FleetError {
  readonly code = ErrorCode.REQUEST_TIMEOUT;
  constructor(part: 'headers' | 'body', timeoutMs: number) {
    super(
      `the request ${part} did not arrive within ${timeoutMs} ms (${part === 'headers' ? 'FORGE_HEADERS_TIMEOUT_MS' : 'FORGE_BODY_TIMEOUT_MS'}); the connection is closed — send the request again`,
      { part, timeoutMs },
    );
  }
}
