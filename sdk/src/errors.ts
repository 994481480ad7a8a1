import type { Error as ErrorEnvelope } from './generated/openapi.js';

/** The error codes the API answers with (`error.code` of the envelope). */
export type ErrorCode = ErrorEnvelope['error']['code'];

/** Every error the SDK throws is one of these. */
export class BerthError extends Error {
  override name = 'BerthError';
}

/** The API answered with its error envelope: `{ error: { code, message, details, requestId } }`. */
export class BerthApiError extends BerthError {
  override name = 'BerthApiError';
  /** The HTTP status. */
  readonly status: number;
  /** Machine-readable; branch on it. */
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;
  /** Quote it in support requests. */
  readonly requestId: string;
  /** Seconds the server asked to wait (`Retry-After`), when it did. */
  readonly retryAfter: number | undefined;
  /** The envelope's `error` as the server sent it (its `message` without the code before it). */
  readonly envelope: ErrorEnvelope['error'];

  constructor(status: number, envelope: ErrorEnvelope['error'], retryAfter?: number) {
    super(`${envelope.code}: ${envelope.message}`);
    this.envelope = envelope;
    this.status = status;
    this.code = envelope.code;
    this.details = envelope.details;
    this.requestId = envelope.requestId;
    this.retryAfter = retryAfter;
  }
}

/** The request did not get an answer: refused connection, reset, DNS. */
export class BerthConnectionError extends BerthError {
  override name = 'BerthConnectionError';
}

/** No answer within the request's time limit (`timeoutMs`). */
export class BerthTimeoutError extends BerthError {
  override name = 'BerthTimeoutError';
}

/** A stream that had started failed: the server sent an `error` event (`{ code, message }`). */
export class BerthStreamError extends BerthError {
  override name = 'BerthStreamError';
  constructor(
    readonly code: string,
    message: string,
    readonly data: Record<string, unknown> = {},
  ) {
    super(`${code}: ${message}`);
  }
}

/** True when `error` is an API error, and of `code` when one is given. */
export function isApiError(error: unknown, code?: ErrorCode): error is BerthApiError {
  return error instanceof BerthApiError && (code === undefined || error.code === code);
}

/** The envelope from an error answer's body; a body that is not one (a proxy's page) gets a code by its status. */
export function envelopeOf(status: number, body: string, requestId: string | null): ErrorEnvelope['error'] {
  try {
    const parsed = JSON.parse(body) as Partial<ErrorEnvelope>;
    if (parsed.error && typeof parsed.error.code === 'string' && typeof parsed.error.message === 'string') {
      return { ...parsed.error, details: parsed.error.details ?? {}, requestId: parsed.error.requestId ?? requestId ?? '' } as ErrorEnvelope['error'];
    }
  } catch {
    // not JSON: described below
  }
  const code: ErrorCode =
    status === 429 ? 'rate_limited' : status === 404 ? 'not_found' : status === 401 ? 'unauthorized' : status === 504 ? 'timeout' : status >= 500 ? (status === 502 ? 'provider_error' : 'internal_error') : 'bad_request';
  return { code, message: `HTTP ${status}${body ? `: ${body.slice(0, 200)}` : ''}`, details: {}, requestId: requestId ?? '' };
}
