/**
 * The error codes of the spec's table, with their HTTP status. Codes the spec leaves open
 * (`bad_request`, `method_not_allowed`, `payload_too_large`, `unsupported_media_type`,
 * `headers_too_large`, `request_timeout`, `not_implemented`) follow the same pattern: the status's name in snake case.
 */
export const ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  'auth/invalid_key': 401,
  'auth/key_revoked': 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  unprocessable_entity: 422,
  rate_limited: 429,
  headers_too_large: 431,
  session_limit_exceeded: 402,
  internal_error: 500,
  not_implemented: 501,
  provider_error: 502,
  timeout: 504,
  invalid_role: 400,
  already_member: 409,
  transfer_to_pending: 400,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = ERROR_STATUS[code];
  }
}
