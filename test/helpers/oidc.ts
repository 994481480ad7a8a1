import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider, { type KoaContextWithOIDC } from 'oidc-provider';

/**
 * A real OpenID Connect provider (the `oidc-provider` package) on a local port: discovery, the
 * authorization endpoint with PKCE required, the token endpoint, signed ID tokens. Its login
 * page signs in whoever the test names in `nextLogin` (as a person typing their name would), and
 * consent is given by default, so that a browser that follows redirects goes through the whole
 * flow without forms.
 */
export interface TestIdentityProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** The subject the next login signs in as. */
  nextLogin: string;
  /** Authorization requests as they arrived (their query parameters), to check PKCE and state. */
  authorizationRequests: URLSearchParams[];
  /** The client's registered redirect URLs. */
  redirectUris: string[];
  close(): Promise<void>;
}

export async function startIdentityProvider(): Promise<TestIdentityProvider> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clientId = 'berth';
  const clientSecret = 'berth-test-client-secret-0123456789';
  const state: TestIdentityProvider = {
    issuer,
    clientId,
    clientSecret,
    nextLogin: 'alice',
    authorizationRequests: [],
    redirectUris: [],
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const build = () => new Provider(issuer, {
    clients: [{ client_id: clientId, client_secret: clientSecret, redirect_uris: state.redirectUris, grant_types: ['authorization_code'], response_types: ['code'] }],
    pkce: { required: () => true, methods: ['S256'] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    scopes: ['openid', 'email', 'profile'],
    features: { devInteractions: { enabled: false } },
    cookies: { keys: ['test-cookie-key-0123456789abcdef'] },
    findAccount: async (_ctx: KoaContextWithOIDC, sub: string) => ({
      accountId: sub,
      claims: async () => ({ sub, email: `${sub}@example.com`, email_verified: true, name: sub[0]!.toUpperCase() + sub.slice(1) }),
    }),
    // Consent is given: the test is about Berth's side of the flow.
    loadExistingGrant: async (ctx: KoaContextWithOIDC) => {
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client!.clientId, accountId: ctx.oidc.session!.accountId! });
      grant.addOIDCScope('openid email profile');
      grant.addOIDCClaims(['email', 'email_verified', 'name']);
      await grant.save();
      return grant;
    },
    interactions: { url: (_ctx: KoaContextWithOIDC, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
  });
  let provider: Provider | undefined;
  let builtFor = '';
  server.on('request', (req, res) => {
    // Built again when a redirect URL was added (client registrations are fixed at construction).
    if (!provider || builtFor !== state.redirectUris.join(' ')) {
      provider = build();
      builtFor = state.redirectUris.join(' ');
    }
    const url = new URL(req.url!, issuer);
    if (url.pathname === '/auth') state.authorizationRequests.push(url.searchParams);
    if (url.pathname.startsWith('/interaction/')) {
      // The login page: the named person signs in.
      provider
        .interactionFinished(req, res, { login: { accountId: state.nextLogin } }, { mergeWithLastSubmission: false })
        .catch((error: Error) => {
          res.statusCode = 500;
          res.end(error.message);
        });
      return;
    }
    provider.callback()(req, res);
  });
  return state;
}
