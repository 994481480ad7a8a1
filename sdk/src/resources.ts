import type { DailyUsage, ModelUsage, Session, SessionPage, Snapshot, SnapshotResumed, Task, UsagePeriodSummary, UsageRangeSummary, UserUsage, Webhook, WebhookDelivery } from './generated/openapi.js';
import type { Query, RequestOptions, Transport } from './http.js';
import type { CreateSessionBody, CreateWebhookBody, ListSessionsQuery, ListSnapshotsQuery, QueryOf, ResumeSnapshotBody, SessionForUserBody, UpdateSessionBody, UsagePeriodQuery, UsageSummaryQuery } from './types.js';

const id = (value: string) => encodeURIComponent(value);
/** Page sizes are numbers to the caller, digits in the URL. */
type Paged<Q> = Omit<Q, 'limit'> & { limit?: number | string };

export class Sessions {
  constructor(private readonly transport: Transport) {}

  create(body: CreateSessionBody, options: RequestOptions = {}): Promise<Session> {
    return this.transport.request({ method: 'POST', path: '/v1/sessions', body, ...options });
  }

  /** The session of a user, created on first use; idempotent, so it is retried like a GET. */
  forUser(userId: string, body: SessionForUserBody = {}, options: RequestOptions = {}): Promise<Session> {
    return this.transport.request({ method: 'POST', path: `/v1/sessions/by-user/${id(userId)}`, body, idempotent: true, ...options });
  }

  get(sessionId: string, options: RequestOptions = {}): Promise<Session> {
    return this.transport.request({ method: 'GET', path: `/v1/sessions/${id(sessionId)}`, ...options });
  }

  list(query: Paged<ListSessionsQuery> = {}, options: RequestOptions = {}): Promise<SessionPage> {
    return this.transport.request({ method: 'GET', path: '/v1/sessions', query: query as Query, ...options });
  }

  async *all(query: Omit<Paged<ListSessionsQuery>, 'cursor'> = {}, options: RequestOptions = {}): AsyncGenerator<Session> {
    let cursor: string | undefined;
    do {
      const page = await this.list({ ...query, ...(cursor ? { cursor } : {}) }, options);
      yield* page.data;
      cursor = page.hasMore ? page.cursor : undefined;
    } while (cursor);
  }

  update(sessionId: string, body: UpdateSessionBody, options: RequestOptions = {}): Promise<Session> {
    return this.transport.request({ method: 'PATCH', path: `/v1/sessions/${id(sessionId)}`, body, ...options });
  }

  /** Terminates every agent of the session that has not ended; the session and its usage stay. */
  end(sessionId: string, options: RequestOptions = {}): Promise<{ ok: true; terminated: string[] }> {
    return this.transport.request({ method: 'DELETE', path: `/v1/sessions/${id(sessionId)}`, ...options });
  }
}

export class Snapshots {
  constructor(private readonly transport: Transport) {}

  async list(query: ListSnapshotsQuery = {}, options: RequestOptions = {}): Promise<Snapshot[]> {
    return (await this.transport.request<{ data: Snapshot[] }>({ method: 'GET', path: '/v1/snapshots', query: query as Query, ...options })).data;
  }

  get(snapshotId: string, options: RequestOptions = {}): Promise<Snapshot> {
    return this.transport.request({ method: 'GET', path: `/v1/snapshots/${id(snapshotId)}`, ...options });
  }

  /** A new agent from a ready snapshot (`booting`; `berth.agents.get(agentId)` then `waitFor(['idle'])`). */
  resume(snapshotId: string, body: ResumeSnapshotBody = {}, options: RequestOptions = {}): Promise<SnapshotResumed> {
    return this.transport.request({ method: 'POST', path: `/v1/snapshots/${id(snapshotId)}/resume`, body, ...options });
  }

  async delete(snapshotId: string, options: RequestOptions = {}): Promise<void> {
    await this.transport.request({ method: 'DELETE', path: `/v1/snapshots/${id(snapshotId)}`, ...options });
  }
}

/** Organization secrets, or one session's with `{ sessionId }`. */
export class Secrets {
  constructor(private readonly transport: Transport) {}

  private base(sessionId: string | undefined): string {
    return sessionId ? `/v1/sessions/${id(sessionId)}/secrets` : '/v1/secrets';
  }

  /** Writes the values (existing names are overwritten, so it is safe to repeat). */
  set(values: Record<string, string>, scope: { sessionId?: string } & RequestOptions = {}): Promise<{ ok: true; count: number }> {
    const { sessionId, ...options } = scope;
    return this.transport.request({ method: 'POST', path: this.base(sessionId), body: values, idempotent: true, ...options });
  }

  /** Names and creation times; values are never returned. */
  async list(scope: { sessionId?: string } & RequestOptions = {}): Promise<{ name: string; createdAt: string }[]> {
    const { sessionId, ...options } = scope;
    return (await this.transport.request<{ data: { name: string; createdAt: string }[] }>({ method: 'GET', path: this.base(sessionId), ...options })).data;
  }

  async delete(name: string, scope: { sessionId?: string } & RequestOptions = {}): Promise<void> {
    const { sessionId, ...options } = scope;
    await this.transport.request({ method: 'DELETE', path: `${this.base(sessionId)}/${id(name)}`, ...options });
  }
}

/** Registered outbound webhooks. Verify what they deliver with `verifyWebhookSignature`. */
export class Webhooks {
  constructor(private readonly transport: Transport) {}

  /** The answer carries the signing `secret` in full, this once. */
  create(body: CreateWebhookBody, options: RequestOptions = {}): Promise<Webhook> {
    return this.transport.request({ method: 'POST', path: '/v1/webhooks', body, ...options });
  }

  async list(options: RequestOptions = {}): Promise<Webhook[]> {
    return (await this.transport.request<{ data: Webhook[] }>({ method: 'GET', path: '/v1/webhooks', ...options })).data;
  }

  get(webhookId: string, options: RequestOptions = {}): Promise<Webhook> {
    return this.transport.request({ method: 'GET', path: `/v1/webhooks/${id(webhookId)}`, ...options });
  }

  async delete(webhookId: string, options: RequestOptions = {}): Promise<void> {
    await this.transport.request({ method: 'DELETE', path: `/v1/webhooks/${id(webhookId)}`, ...options });
  }

  /** Sends a sample `agent.completed` to the webhook's URL now. */
  test(webhookId: string, options: RequestOptions = {}): Promise<{ deliveryId: string; [field: string]: unknown }> {
    return this.transport.request({ method: 'POST', path: `/v1/webhooks/${id(webhookId)}/test`, ...options });
  }

  async deliveries(webhookId: string, query: Paged<QueryOf<'/v1/webhooks/{id}/deliveries', 'get'>> = {}, options: RequestOptions = {}): Promise<WebhookDelivery[]> {
    return (await this.transport.request<{ data: WebhookDelivery[] }>({ method: 'GET', path: `/v1/webhooks/${id(webhookId)}/deliveries`, query: query as Query, ...options })).data;
  }
}

/** Usage and costs (every amount in integer cents). */
export class Usage {
  constructor(private readonly transport: Transport) {}

  /** The range form (`from`, `until`) or the period form (`period`, `environment`). */
  summary(query: UsageSummaryQuery = {}, options: RequestOptions = {}): Promise<UsageRangeSummary | UsagePeriodSummary> {
    return this.transport.request({ method: 'GET', path: '/v1/usage/summary', query: query as Query, ...options });
  }

  daily(query: UsagePeriodQuery = {}, options: RequestOptions = {}): Promise<DailyUsage[]> {
    return this.transport.request({ method: 'GET', path: '/v1/usage/daily', query: query as Query, ...options });
  }

  user(userId: string, query: QueryOf<'/v1/usage/users/{userId}', 'get'> = {}, options: RequestOptions = {}): Promise<UserUsage> {
    return this.transport.request({ method: 'GET', path: `/v1/usage/users/${id(userId)}`, query: query as Query, ...options });
  }

  async models(query: QueryOf<'/v1/usage/models', 'get'> = {}, options: RequestOptions = {}): Promise<ModelUsage[]> {
    return (await this.transport.request<{ data: ModelUsage[] }>({ method: 'GET', path: '/v1/usage/models', query: query as Query, ...options })).data;
  }
}

export class Tasks {
  constructor(private readonly transport: Transport) {}

  get(taskId: string, options: RequestOptions = {}): Promise<Task> {
    return this.transport.request({ method: 'GET', path: `/v1/tasks/${id(taskId)}`, ...options });
  }
}
