/**
 * The console's one way to the server: same-origin `fetch` to `/api` with the sign-in cookie,
 * the CSRF token (from `GET /api/me`) on every state-changing request, and the spec's error
 * envelope turned into an `ApiFailure` the pages show.
 */

export type Mode = 'live' | 'test';

export interface Me {
  user: { id: string; email: string | null; name: string | null };
  organization: { id: string; name: string; role: string } | null;
  organizations: { id: string; name: string; role: string }[];
  csrfToken: string;
  permissions: string[];
}

export interface Money {
  amount: number;
  currency: string;
}

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> | undefined,
  ) {
    super(message);
  }
}

let csrfToken = '';

export function useCsrfToken(token: string): void {
  csrfToken = token;
}

/** A path with its query; `undefined` values are left out. */
export function withQuery(path: string, query: Record<string, string | number | undefined>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== '') params.set(name, String(value));
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

export async function api<T>(path: string, init: { method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'; body?: unknown } = {}): Promise<T> {
  const method = init.method ?? 'GET';
  const headers: Record<string, string> = { accept: 'application/json' };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  const response = await fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await response.text();
  const parsed = text ? (JSON.parse(text) as unknown) : undefined;
  if (!response.ok) {
    const error = (parsed as { error?: { code?: string; message?: string; details?: Record<string, unknown> } } | undefined)?.error;
    throw new ApiFailure(response.status, error?.code ?? 'unknown', error?.message ?? `${response.status} ${response.statusText}`, error?.details);
  }
  return parsed as T;
}

export function formatMoney(money: Money | undefined | null): string {
  if (!money) return '—';
  const value = money.amount / 100;
  try {
    return new Intl.NumberFormat('en-US', { style: 'currency', currency: money.currency.toUpperCase() }).format(value);
  } catch {
    return `${value.toFixed(2)} ${money.currency}`;
  }
}

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toISOString().replace('T', ' ').slice(0, 16) + ' UTC';
}
