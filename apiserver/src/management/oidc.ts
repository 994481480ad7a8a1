import * as client from 'openid-client';

export interface OidcSettings {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Accept an http:// issuer (development and tests only). */
  allowHttp: boolean;
}

/** What the browser carries (in a signed cookie) from the redirect to the provider back to the callback. */
export interface OidcTransaction {
  state: string;
  nonce: string;
  codeVerifier: string;
  redirectUri: string;
  returnTo: string;
}

export interface OidcIdentity {
  issuer: string;
  subject: string;
  email: string | null;
  name: string | null;
}

/**
 * Sign-in through an OpenID Connect provider: the authorization code flow with PKCE (S256),
 * state and nonce, by `openid-client`. The provider's metadata is discovered on first use and
 * kept; a failed discovery is tried again on the next sign-in.
 */
export class OidcClient {
  private configuration: Promise<client.Configuration> | undefined;

  constructor(readonly settings: OidcSettings) {}

  private configure(): Promise<client.Configuration> {
    this.configuration ??= client
      .discovery(new URL(this.settings.issuer), this.settings.clientId, this.settings.clientSecret, undefined, {
        ...(this.settings.allowHttp ? { execute: [client.allowInsecureRequests] } : {}),
      })
      .catch((error: unknown) => {
        this.configuration = undefined;
        throw error;
      });
    return this.configuration;
  }

  /** The provider's authorization URL and the transaction to keep until the callback. */
  async start(redirectUri: string, returnTo: string): Promise<{ url: string; transaction: OidcTransaction }> {
    const configuration = await this.configure();
    const codeVerifier = client.randomPKCECodeVerifier();
    const transaction: OidcTransaction = { state: client.randomState(), nonce: client.randomNonce(), codeVerifier, redirectUri, returnTo };
    const url = client.buildAuthorizationUrl(configuration, {
      redirect_uri: redirectUri,
      scope: 'openid email profile',
      response_type: 'code',
      code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
      state: transaction.state,
      nonce: transaction.nonce,
    });
    return { url: url.href, transaction };
  }

  /** Exchanges the callback's code (checking state, nonce, PKCE and the ID token) for the user's identity. */
  async finish(callbackUrl: URL, transaction: OidcTransaction): Promise<OidcIdentity> {
    const configuration = await this.configure();
    const tokens = await client.authorizationCodeGrant(configuration, callbackUrl, {
      pkceCodeVerifier: transaction.codeVerifier,
      expectedState: transaction.state,
      expectedNonce: transaction.nonce,
      idTokenExpected: true,
    });
    const claims = tokens.claims()!;
    let email = typeof claims.email === 'string' ? claims.email : null;
    let name = typeof claims.name === 'string' ? claims.name : null;
    // Many providers put profile claims only in the userinfo response, not in the ID token.
    if ((email === null || name === null) && configuration.serverMetadata().userinfo_endpoint) {
      const info = await client.fetchUserInfo(configuration, tokens.access_token, claims.sub);
      email ??= typeof info.email === 'string' ? info.email : null;
      name ??= typeof info.name === 'string' ? info.name : null;
    }
    return { issuer: claims.iss, subject: claims.sub, email, name };
  }
}
