/** An answer of the public routes that is not a success, read from the error envelope. */
export class ChatError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    /** Seconds to wait, from a 429's `details.retryAfter` or `Retry-After`. */
    readonly retryAfter: number | undefined,
  ) {
    super(message);
  }
}

/** What the visitor reads when a request failed: the cause in their terms, and what to do. */
export function describeFailure(error: unknown, fallback: string): string {
  if (error instanceof ChatError) {
    if (error.status === 429) {
      if (error.retryAfter === undefined) return 'Too many messages. Try again in a moment.';
      const seconds = Math.max(1, Math.ceil(error.retryAfter));
      return `Too many messages. Try again in ${seconds} second${seconds === 1 ? '' : 's'}.`;
    }
    if (error.status === 404) return 'This chat is not available.';
    if (error.status === 504) return 'The reply is taking longer than usual; it will appear here.';
    if (error.status === 502) return 'No reply could be made. Please try again.';
    return `${fallback} ${error.message}`;
  }
  return `${fallback} Check your connection and try again.`;
}
