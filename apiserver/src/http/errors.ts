import { ApiError, ERROR_STATUS, ProviderError, ExecTimeoutError, type ErrorCode, type Logger, ProcessNotFoundError } from '@berth/common';
import type { ErrorRequestHandler, Request, RequestHandler } from 'express';
import { z } from 'zod';

export interface ErrorEnvelope {
  error: { code: string; message: string; details: Record<string, unknown>; requestId: string };
}

/** Field path → messages, the `details.fields` of a 422. */
export function fieldErrors(error: z.ZodError, location?: 'body' | 'query' | 'params'): Record<string, string[]> {
  const fields: Record<string, string[]> = {};
  for (const issue of error.issues) {
    const path = issue.path.length > 0 ? issue.path.join('.') : (location ?? 'body');
    const message =
      issue.code === 'unrecognized_keys' ? `unknown field${issue.keys.length > 1 ? 's' : ''}: ${issue.keys.join(', ')}` : issue.message;
    (fields[path] ??= []).push(message);
  }
  return fields;
}

export function validationError(error: z.ZodError, location: 'body' | 'query' | 'params'): ApiError {
  const fields = fieldErrors(error, location);
  const summary = Object.entries(fields)
    .map(([field, messages]) => `${field}: ${messages.join('; ')}`)
    .join(', ');
  return new ApiError('unprocessable_entity', `invalid ${location === 'params' ? 'path' : location}: ${summary}`, { fields });
}

/** Turns anything thrown into the spec's error envelope; unknown errors are logged and hidden. */
export function toApiError(error: unknown, log: Logger): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof z.ZodError) return validationError(error, 'body');
  if (error instanceof ExecTimeoutError) {
    return new ApiError('timeout', error.message, { timeoutMs: error.timeoutMs });
  }
  if (error instanceof ProcessNotFoundError) return new ApiError('not_found', error.message, { pid: error.pid });
  if (error instanceof ProviderError) {
    return new ApiError('provider_error', `provider ${error.provider}: ${error.message}`, { provider: error.provider, ...error.details });
  }
  const requestError = error as { type?: string; status?: number; expose?: boolean; message?: string; charset?: string; encoding?: string; limit?: number };
  switch (requestError.type) {
    case 'entity.parse.failed': {
      // The parser's message quotes the body, which may hold secrets: only the position is repeated.
      const position = /position (\d+)/.exec(requestError.message ?? '')?.[1];
      return new ApiError('unprocessable_entity', `the request body is not valid JSON${position ? ` (at character ${position})` : ''}`, {
        fields: { body: ['not valid JSON'] },
      });
    }
    case 'entity.too.large':
      return new ApiError('payload_too_large', `the request body is larger than the ${sizeText(requestError.limit ?? 2 * 1024 * 1024)} limit of this route`, {
        limitBytes: requestError.limit ?? null,
      });
    case 'charset.unsupported':
      return new ApiError('unsupported_media_type', `charset "${requestError.charset}" is not supported: send JSON in UTF-8`, {
        charset: requestError.charset,
      });
    case 'encoding.unsupported':
      return new ApiError('unsupported_media_type', `content-encoding "${requestError.encoding}" is not supported: send identity, gzip, deflate or br`, {
        encoding: requestError.encoding,
      });
  }
  if (error instanceof URIError) {
    // The router could not percent-decode a path segment (`/v1/sessions/%`).
    return new ApiError('bad_request', 'the path holds malformed percent-encoding');
  }
  if (typeof requestError.status === 'number' && requestError.status >= 400 && requestError.status < 500) {
    // Any other request the body reader refused (a gzip body that is not gzip, an aborted upload): the client's fault.
    return new ApiError('bad_request', `the request body could not be read${requestError.expose && requestError.message ? `: ${requestError.message.slice(0, 200)}` : ''}`);
  }
  log.error({ err: error }, 'unhandled error');
  return new ApiError('internal_error', 'an unexpected error occurred; quote the requestId when reporting it');
}

/** 2 MiB, 256 KiB: the body limits as people write them. */
function sizeText(bytes: number): string {
  return bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} byte`;
}

export function sendError(req: Request, res: Parameters<RequestHandler>[1], apiError: ApiError): void {
  const envelope: ErrorEnvelope = {
    error: { code: apiError.code, message: apiError.message, details: apiError.details, requestId: req.requestId },
  };
  if (apiError.code === 'rate_limited' && typeof apiError.details.retryAfter === 'number') {
    res.setHeader('Retry-After', String(apiError.details.retryAfter));
  }
  res.status(apiError.status).json(envelope);
}

export const errorHandler: ErrorRequestHandler = (error, req, res, _next) => {
  const apiError = toApiError(error, req.log);
  if (res.headersSent) {
    res.end();
    return;
  }
  sendError(req, res, apiError);
};

export const notFoundHandler: RequestHandler = (req, res) => {
  sendError(req, res, new ApiError('not_found', `no route for ${req.method} ${req.path}`, { method: req.method, path: req.path }));
};

export const errorEnvelopeSchema = z
  .object({
    error: z.object({
      code: z.enum(Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]]).describe('machine-readable error code; clients branch on it'),
      message: z.string().describe('what went wrong, for people'),
      details: z.record(z.string(), z.unknown()).describe('structured details; `fields` holds field-level errors of a 422'),
      requestId: z.string().describe('quote it in support requests'),
    }),
  })
  .meta({ id: 'Error', description: 'the body of every error response' });
