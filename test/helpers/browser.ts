/**
 * A browser, as far as the management plane needs one: it keeps cookies per host (honouring
 * Path, Max-Age and deletion), follows redirects itself across hosts (to an identity provider
 * and back), and sends the CSRF token a signed-in page would send.
 */
export interface BrowserResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  /** Every URL visited, the first request's included, when redirects were followed. */
  visited: string[];
}

interface StoredCookie {
  value: string;
  path: string;
  expiresAt: number | undefined;
  httpOnly: boolean;
  secure: boolean;
  sameSite: string | undefined;
}

export class Browser {
  /** host → name → cookie */
  readonly cookies = new Map<string, Map<string, StoredCookie>>();
  /** Sent in `X-CSRF-Token` on unsafe methods when set (what the dashboard's script does). */
  csrfToken: string | undefined;

  constructor(readonly baseUrl: string) {}

  cookie(name: string, url: string = this.baseUrl): StoredCookie | undefined {
    return this.cookies.get(new URL(url).host)?.get(name);
  }

  private cookieHeader(url: URL): string | undefined {
    const jar = this.cookies.get(url.host);
    if (!jar) return undefined;
    const now = Date.now();
    const pairs = [...jar]
      .filter(([, cookie]) => (cookie.expiresAt === undefined || cookie.expiresAt > now) && url.pathname.startsWith(cookie.path))
      .map(([name, cookie]) => `${name}=${cookie.value}`);
    return pairs.length ? pairs.join('; ') : undefined;
  }

  private keep(url: URL, response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(';').map((part) => part.trim());
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq);
      const value = pair!.slice(eq + 1);
      const cookie: StoredCookie = { value, path: '/', expiresAt: undefined, httpOnly: false, secure: false, sameSite: undefined };
      for (const attribute of attributes) {
        const [key, val] = attribute.split('=') as [string, string | undefined];
        switch (key.toLowerCase()) {
          case 'path':
            cookie.path = val ?? '/';
            break;
          case 'max-age':
            cookie.expiresAt = Date.now() + Number(val) * 1000;
            break;
          case 'expires':
            cookie.expiresAt ??= new Date(val!).getTime();
            break;
          case 'httponly':
            cookie.httpOnly = true;
            break;
          case 'secure':
            cookie.secure = true;
            break;
          case 'samesite':
            cookie.sameSite = val;
            break;
        }
      }
      const jar = this.cookies.get(url.host) ?? new Map<string, StoredCookie>();
      if (cookie.expiresAt !== undefined && cookie.expiresAt <= Date.now()) jar.delete(name);
      else jar.set(name, cookie);
      this.cookies.set(url.host, jar);
    }
  }

  async request(method: string, pathOrUrl: string, body?: unknown, options: { followRedirects?: boolean; headers?: Record<string, string> } = {}): Promise<BrowserResponse> {
    let url = new URL(pathOrUrl, this.baseUrl);
    const visited: string[] = [];
    let currentMethod = method;
    let currentBody = body;
    for (let hops = 0; hops < 20; hops++) {
      visited.push(url.href);
      const headers: Record<string, string> = { ...options.headers };
      const cookie = this.cookieHeader(url);
      if (cookie) headers.cookie = cookie;
      if (currentBody !== undefined) headers['content-type'] = 'application/json';
      if (this.csrfToken && !['GET', 'HEAD'].includes(currentMethod) && url.origin === new URL(this.baseUrl).origin && !('x-csrf-token' in headers)) {
        headers['x-csrf-token'] = this.csrfToken;
      }
      const response = await fetch(url, {
        method: currentMethod,
        headers,
        redirect: 'manual',
        ...(currentBody === undefined ? {} : { body: JSON.stringify(currentBody) }),
      });
      this.keep(url, response);
      const location = response.headers.get('location');
      if (options.followRedirects !== false && response.status >= 300 && response.status < 400 && location) {
        await response.arrayBuffer();
        url = new URL(location, url);
        // 302 and 303 turn into GET, as browsers do.
        if (response.status === 302 || response.status === 303) {
          currentMethod = 'GET';
          currentBody = undefined;
        }
        continue;
      }
      const text = await response.text();
      let parsed: unknown = text;
      if ((response.headers.get('content-type') ?? '').includes('json') && text) parsed = JSON.parse(text);
      return { status: response.status, headers: response.headers, body: parsed, visited };
    }
    throw new Error(`too many redirects from ${pathOrUrl}`);
  }

  get(path: string, options?: { followRedirects?: boolean }) {
    return this.request('GET', path, undefined, options);
  }
  post(path: string, body?: unknown, options?: { headers?: Record<string, string> }) {
    return this.request('POST', path, body ?? {}, options);
  }
  patch(path: string, body: unknown) {
    return this.request('PATCH', path, body);
  }
  put(path: string, body: unknown) {
    return this.request('PUT', path, body);
  }
  delete(path: string) {
    return this.request('DELETE', path);
  }

  /** Reads the CSRF token of the signed-in session from /api/me, as the dashboard does after sign-in. */
  async loadCsrfToken(): Promise<void> {
    const me = await this.get('/api/me');
    if (me.status !== 200) throw new Error(`GET /api/me: ${me.status} ${JSON.stringify(me.body)}`);
    this.csrfToken = me.body.csrfToken;
  }
}
