/** A small HTTP client for the API: every call returns status, headers and the parsed body. */
export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export interface ApiClient {
  get<T = any>(path: string): Promise<ApiResponse<T>>;
  post<T = any>(path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiResponse<T>>;
  patch<T = any>(path: string, body?: unknown): Promise<ApiResponse<T>>;
  raw(path: string, init: RequestInit): Promise<ApiResponse>;
}

export function apiClient(baseUrl: string, key?: string): ApiClient {
  const auth: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {};
  const raw = async (path: string, init: RequestInit): Promise<ApiResponse> => {
    const response = await fetch(`${baseUrl}${path}`, { ...init, headers: { ...auth, ...(init.headers as Record<string, string>) } });
    const text = await response.text();
    let body: unknown = text;
    if ((response.headers.get('content-type') ?? '').includes('json') && text) body = JSON.parse(text);
    return { status: response.status, headers: response.headers, body };
  };
  return {
    raw,
    get: (path) => raw(path, { method: 'GET' }),
    post: (path, body, headers = {}) =>
      raw(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    patch: (path, body) =>
      raw(path, { method: 'PATCH', headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }),
  };
}

/** Polls until `check` returns a value (not undefined) or the time is up. */
export async function eventually<T>(check: () => Promise<T | undefined>, options: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${options.what ?? 'a condition'}${last ? `: ${String(last)}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 50));
  }
}

/** The client, keeping every response body (as text) in `into`: to search them afterwards. */
export function recordingClient(client: ApiClient, into: string[]): ApiClient {
  const keep = async (response: Promise<ApiResponse>) => {
    const settled = await response;
    into.push(typeof settled.body === 'string' ? settled.body : JSON.stringify(settled.body));
    return settled;
  };
  return {
    get: (path) => keep(client.get(path)),
    post: (path, body, headers) => keep(client.post(path, body, headers)),
    patch: (path, body) => keep(client.patch(path, body)),
    raw: (path, init) => keep(client.raw(path, init)),
  };
}

/** Polls a task until it is completed, failed or cancelled, and returns it. */
export function taskFinished(client: ApiClient, taskId: string): Promise<any> {
  return eventually(
    async () => {
      const task = (await client.get(`/v1/tasks/${taskId}`)).body;
      return ['completed', 'failed', 'cancelled'].includes(task.status) ? task : undefined;
    },
    { timeoutMs: 60_000, what: `task ${taskId} to finish` },
  );
}
