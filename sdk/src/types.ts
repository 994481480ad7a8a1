import type { paths } from './generated/openapi.js';

type Operation<P extends keyof paths, M extends keyof paths[P]> = paths[P][M];

/** The JSON body an operation takes. */
export type BodyOf<P extends keyof paths, M extends keyof paths[P]> = Operation<P, M> extends { body: infer B } ? B : never;
/** Its query parameters. */
export type QueryOf<P extends keyof paths, M extends keyof paths[P]> = Operation<P, M> extends { query: infer Q } ? Q : never;
/** The body of one of its answers, by status. */
export type ResponseOf<P extends keyof paths, M extends keyof paths[P], S extends number> = Operation<P, M> extends { responses: infer R } ? (S extends keyof R ? R[S] : never) : never;

export type CreateAgentBody = BodyOf<'/v1/sessions/{id}/agents', 'post'>;
export type ExecBody = BodyOf<'/v1/agents/{id}/exec', 'post'>;
export type ExecLanguage = ExecBody['language'];
/** Exec's options beside the language and the code. */
export type ExecOptions = Omit<ExecBody, 'language' | 'code' | 'background'>;
export type StreamExecBody = BodyOf<'/v1/agents/{id}/exec/stream', 'post'>;
export type ListAgentsQuery = QueryOf<'/v1/agents', 'get'>;
export type CreateSessionBody = BodyOf<'/v1/sessions', 'post'>;
export type UpdateSessionBody = BodyOf<'/v1/sessions/{id}', 'patch'>;
export type SessionForUserBody = BodyOf<'/v1/sessions/by-user/{userId}', 'post'>;
export type ListSessionsQuery = QueryOf<'/v1/sessions', 'get'>;
export type ListSnapshotsQuery = QueryOf<'/v1/snapshots', 'get'>;
export type ResumeSnapshotBody = BodyOf<'/v1/snapshots/{id}/resume', 'post'>;
export type CreateWebhookBody = BodyOf<'/v1/webhooks', 'post'>;
export type UsageSummaryQuery = QueryOf<'/v1/usage/summary', 'get'>;
export type UsagePeriodQuery = QueryOf<'/v1/usage/daily', 'get'>;
export type ProcessSignal = BodyOf<'/v1/agents/{id}/processes/{pid}/signal', 'post'>['signal'];
