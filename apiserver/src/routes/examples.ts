/**
 * Realistic requests and answers for the OpenAPI document, one set shared by the routes.
 * The unit tests parse each one with the schema it illustrates, so they cannot drift.
 */

const SESSION_ID = 'ses_01jq3v9k2m8x7c4d5e6f7g8h9j';
const AGENT_ID = 'agt_01jq3va0c4n6p8r0t2v4x6z8b1';
const TASK_ID = 'task_01jq3vb7e9g1j3m5p7r9t1v3x5';
const SNAPSHOT_ID = 'snap_01jq3vc2f4h6k8n0q2s4u6w8y0';
const DEFINITION_ID = 'adef_01jq3vd5g7j9m1p3r5t7v9x1z3';
const WEBHOOK_ID = 'wh_01jq3ve8h0k2n4q6s8u0w2y4a6';
const CREATED = '2026-03-01T09:30:00.000Z';
const STARTED = '2026-03-01T09:30:02.412Z';
const usd = (amount: number) => ({ amount, currency: 'usd' });

export const sessionExample = {
  id: SESSION_ID,
  userId: 'user_4711',
  environment: 'production',
  limits: { maxCost: { amount: 500, currency: 'usd', period: 'day' }, maxAgents: 3 },
  metadata: { plan: 'pro' },
  createdAt: CREATED,
};

export const createSessionExample = {
  userId: 'user_4711',
  environment: 'production' as const,
  limits: { maxCost: { amount: 500, currency: 'usd', period: 'day' as const }, maxAgents: 3 },
  metadata: { plan: 'pro' },
};

export const agentExample = {
  id: AGENT_ID,
  status: 'idle',
  sessionId: SESSION_ID,
  compute: 'python',
  browser: false,
  model: 'openai/gpt-4o-mini',
  instructions: 'You are a data analyst. Answer with a short summary.',
  tools: ['exec'],
  timeout: '15m',
  provider: 'local',
  createdAt: CREATED,
  startedAt: STARTED,
  expiresAt: '2026-03-01T09:45:02.412Z',
  cost: usd(3),
  conditions: [
    { type: 'SandboxReady', status: 'True', reason: 'Provisioned', message: 'the sandbox is running', lastTransitionTime: STARTED, observedGeneration: 1 },
    { type: 'Running', status: 'False', reason: 'NoRun', message: 'no run in progress', lastTransitionTime: STARTED, observedGeneration: 1 },
    { type: 'Paused', status: 'False', reason: 'Active', message: 'not paused', lastTransitionTime: STARTED, observedGeneration: 1 },
    { type: 'BudgetOK', status: 'True', reason: 'WithinBudget', message: 'within its costCap and its session limits', lastTransitionTime: STARTED, observedGeneration: 1 },
  ],
};

const { startedAt: _startedAt, expiresAt: _expiresAt, cost: _cost, ...unstarted } = agentExample;
export const bootingAgentExample = { ...unstarted, status: 'booting', conditions: [] };

export const createAgentExample = {
  compute: 'python' as const,
  model: 'openai/gpt-4o-mini',
  instructions: 'You are a data analyst. Answer with a short summary.',
  tools: ['exec'],
  timeout: '15m',
  costCap: usd(200),
};

export const execExample = { language: 'python' as const, code: 'print(6 * 7)' };
export const execResultExample = { stdout: '42\n', stderr: '', exitCode: 0, durationMs: 87 };

export const runExample = { task: 'Load /workspace/sales.csv and report the three best months.' };
export const runAcceptedExample = { taskId: TASK_ID, agentId: AGENT_ID };

export const taskExample = {
  id: TASK_ID,
  agentId: AGENT_ID,
  sessionId: SESSION_ID,
  status: 'completed',
  task: runExample.task,
  output: 'March, July and November, with 41k, 39k and 37k in sales.',
  steps: 3,
  guardrails: [{ rule: 'pii', action: 'redact', where: 'output', kind: 'email', count: 1, source: 'answer' }],
  usage: { inputTokens: 1840, outputTokens: 212 },
  cost: usd(1),
  createdAt: CREATED,
  startedAt: STARTED,
  finishedAt: '2026-03-01T09:30:09.120Z',
};

/** One event of a stream (`id: 13`, `event: output`, `data: {...}` on the wire). */
export const streamExample = {
  id: '13',
  event: 'output',
  data: '{"taskId":"task_01jq3vb7e9g1j3m5p7r9t1v3x5","text":"March, July and November.","cost":{"amount":1,"currency":"usd"}}',
};

export const snapshotExample = {
  id: SNAPSHOT_ID,
  agentId: AGENT_ID,
  sessionId: SESSION_ID,
  provider: 'local',
  type: 'pause',
  sizeBytes: 18_874_368,
  state: 'ready',
  level: 'native',
  createdAt: CREATED,
};

export const snapshotResumedExample = {
  agentId: 'agt_01jq3vf1j3m5p7r9t1v3x5z7c9',
  provider: 'local',
  region: 'us-east-1',
  resumeLevel: 'native',
  status: 'booting',
};

export const definitionExample = {
  id: DEFINITION_ID,
  name: 'sales analyst',
  description: 'Summarises sales exports',
  version: 2,
  compute: 'python',
  model: 'openai/gpt-4o-mini',
  systemPrompt: 'You are a data analyst. Answer with a short summary.',
  tools: ['exec'],
  browser: false,
  timeout: '15m',
  config: { temperature: 0.2 },
  archived: false,
  createdAt: CREATED,
  updatedAt: '2026-03-02T14:00:00.000Z',
};

export const createDefinitionExample = {
  name: 'sales analyst',
  description: 'Summarises sales exports',
  compute: 'python' as const,
  model: 'openai/gpt-4o-mini',
  systemPrompt: 'You are a data analyst. Answer with a short summary.',
  tools: ['exec'],
  config: { temperature: 0.2 },
};

/** Version 1 of the definition above, before its temperature was lowered. */
export const definitionVersionExample = {
  id: DEFINITION_ID,
  name: 'sales analyst',
  description: 'Summarises sales exports',
  version: 1,
  compute: 'python',
  model: 'openai/gpt-4o-mini',
  systemPrompt: 'You are a data analyst. Answer with a short summary.',
  tools: ['exec'],
  browser: false,
  timeout: '15m',
  config: {},
  current: false,
  changelog: 'created',
  createdBy: 'key_01jq3v8x0z2b4d6f8h0k2m4p6r',
  createdAt: CREATED,
};

export const definitionVersionsExample = {
  data: [
    { version: 2, createdAt: '2026-03-02T14:00:00.000Z', changelog: 'lower temperature', createdBy: 'key_01jq3v8x0z2b4d6f8h0k2m4p6r' },
    { version: 1, createdAt: CREATED, changelog: 'created', createdBy: 'key_01jq3v8x0z2b4d6f8h0k2m4p6r' },
  ],
};

export const webhookExample = {
  id: WEBHOOK_ID,
  url: 'https://hooks.example.com/berth',
  events: ['agent.completed', 'agent.failed'],
  secret: 'whsec_3f…',
  createdAt: CREATED,
};

export const deliveryExample = {
  id: 'del_01jq3vg4k6n8q0s2u4w6y8a0c2',
  eventId: 'evt_01jq3vh7m9p1r3t5v7x9z1b3d5',
  event: 'agent.completed',
  state: 'succeeded',
  attempts: 1,
  lastStatus: 200,
  lastError: null,
  lastAttemptAt: STARTED,
  nextAttemptAt: null,
  createdAt: CREATED,
  history: [{ attempt: 1, at: STARTED, durationMs: 143, status: 200, error: null }],
};

export const webhookTestExample = {
  deliveryId: 'del_01jq3vg4k6n8q0s2u4w6y8a0c2',
  delivered: true,
  status: 200,
  error: null,
  durationMs: 143,
};

export const providerConfigExample = {
  provider: 'openai',
  enabled: true,
  credentialRef: 'OPENAI_API_KEY',
  config: { baseUrl: 'https://llm.example.com/v1' },
  createdAt: CREATED,
};

export const secretsExample = { OPENAI_API_KEY: 'sk-…', DATABASE_URL: 'postgres://reader@db.example.com/sales' };
export const secretListExample = { data: [{ name: 'DATABASE_URL', createdAt: CREATED }] };

export const rangeSummaryExample = {
  period: { from: '2026-03-01T00:00:00.000Z', until: '2026-03-15T12:00:00.000Z' },
  compute: { minutes: 412.5, cost: usd(206) },
  models: { inputTokens: 1_204_000, outputTokens: 98_500, cost: usd(412) },
  storage: { gb: 1.25, cost: usd(4) },
  total: usd(622),
};

export const periodSummaryExample = {
  totalCost: usd(622),
  activeSessions: 14,
  runningAgents: 2,
  topUser: { userId: 'user_4711', cost: usd(180) },
  environment: 'all',
  berthBilled: { compute: usd(206), model: usd(300), storage: usd(4), primitives: usd(0), total: usd(510) },
  providerDirect: { compute: usd(0), model: usd(112), total: usd(112) },
};

export const dailyUsageExample = [
  { date: '2026-03-14', cost: usd(41), computeMinutes: 30.25, modelCalls: 64, tokens: 88_200 },
  { date: '2026-03-15', cost: usd(0), computeMinutes: 0, modelCalls: 0, tokens: 0 },
];

export const userUsageExample = {
  compute: { minutes: 96.5, cost: usd(48) },
  models: { calls: 120, tokens: { input: 240_000, output: 18_000 }, cost: usd(130) },
  storage: { gbHours: 2.5, cost: usd(2) },
  total: usd(180),
  breakdown: [
    { date: '2026-03-01', total: usd(100) },
    { date: '2026-03-02', total: usd(80) },
  ],
};

export const modelUsageExample = {
  data: [{ model: 'openai/gpt-4o-mini', calls: 640, tokens: { input: 1_204_000, output: 98_500 }, cost: usd(412) }],
};

export const ids = { SESSION_ID, AGENT_ID, TASK_ID, SNAPSHOT_ID, DEFINITION_ID, WEBHOOK_ID };

const TRIGGER_ID = 'trg_01jq3vf3j5m7p9s1u3w5y7a9c1';
const JOB_ID = 'job_01jq3vg6k8n0q2s4u6w8y0b2d4';

export const triggerExample = {
  id: TRIGGER_ID,
  name: 'new-ticket',
  type: 'webhook',
  agent: DEFINITION_ID,
  userId: 'user_4711',
  url: `https://berth.example.com/triggers/${TRIGGER_ID}/fire`,
  secret: 'trgsec_Q…',
  createdAt: CREATED,
  lastFiredAt: null,
};

export const createTriggerExample = { agent: 'support-bot', userId: 'user_4711', name: 'new-ticket', type: 'webhook' as const };

export const fireBodyExample = { ticket: 4711, subject: 'Cannot log in', body: 'Since this morning the login page loops.' };

export const fireExample = { ok: true, jobId: JOB_ID };

export const jobExample = {
  id: JOB_ID,
  state: 'completed',
  source: { type: 'trigger', id: TRIGGER_ID },
  agent: DEFINITION_ID,
  userId: 'user_4711',
  input: fireBodyExample,
  sessionId: SESSION_ID,
  agentId: AGENT_ID,
  taskId: TASK_ID,
  output: 'Ticket 4711: the login loop comes from an expired session cookie; answered with the steps to clear it.',
  error: null,
  cost: usd(3),
  createdAt: CREATED,
  startedAt: STARTED,
  finishedAt: '2026-03-01T09:30:19.870Z',
};
