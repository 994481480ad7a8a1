/**
 * The fuzz tier: schemathesis against the OpenAPI document of a real `berth up`, once with
 * the test key and once with the live key (real gVisor sandboxes, so a smaller budget), the two
 * side by side, then
 * against the management document (`/api/openapi.json`) with the owner's sign-in cookie and
 * CSRF token (signed in with the one-time link the first start prints).
 *
 * The server is kept off the internet: model vendors point at local fake servers, and a
 * preloaded module (offline.mjs) refuses every connection that leaves this machine, so a
 * fuzzed webhook URL or BYOI endpoint cannot reach anything. Real ids (a session, an agent,
 * a task, a snapshot, ...) seeded before each pass are handed to schemathesis as
 * dictionaries: about half the generated path ids are real ones, the rest random.
 *
 * Usage: tsx test/fuzz/run.ts [--st <path of schemathesis' st>] [--keys test,live,management]
 * Environment: FUZZ_TEST_EXAMPLES, FUZZ_LIVE_EXAMPLES, FUZZ_MANAGEMENT_EXAMPLES (cases per operation and phase),
 * FUZZ_SEED, FUZZ_REPORT_DIR (kept; default a temporary directory, removed on success),
 * FUZZ_OPERATIONS (comma-separated operation ids: only those, for working on a few routes).
 */
import { createHmac } from 'node:crypto';
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { ROOT, startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { startFakeAnthropic, startFakeOpenAI } from '../helpers/fake-models.js';
import { Browser } from '../helpers/browser.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { removeDataDir } from '../helpers/runsc.js';

type KeyName = 'test' | 'live';
/** A data-plane key, or `management`: the /api document with a sign-in cookie. */
type PassName = KeyName | 'management';

interface Pass {
  key: PassName;
  /** Cases per operation in each generating phase. */
  examples: number;
  /** Whether to seed resources that need a sandbox of their own (a snapshot: pause and checkpoint). */
  snapshots: boolean;
  /** The seeded session's agent limit, which bounds the sandboxes the cases create. */
  maxAgents: number;
}

const { values: args } = parseArgs({
  options: {
    st: { type: 'string' },
    keys: { type: 'string', default: 'test,live,management' },
  },
});

const PASSES: Pass[] = [
  { key: 'test' as const, examples: Number(process.env.FUZZ_TEST_EXAMPLES ?? 40), snapshots: true, maxAgents: 5 },
  // Live: each agent is a gVisor sandbox. The seeded session holds two and allows one more,
  // so all but one positive `createAgent` case answer 402; exec and run reach a real sandbox.
  { key: 'live' as const, examples: Number(process.env.FUZZ_LIVE_EXAMPLES ?? 12), snapshots: false, maxAgents: 3 },
  { key: 'management' as const, examples: Number(process.env.FUZZ_MANAGEMENT_EXAMPLES ?? 30), snapshots: false, maxAgents: 0 },
].filter((pass) => args.keys!.split(',').includes(pass.key));

// unsupported_method: every path answers a method it does not take with 405 and Allow (OPTIONS too).
const CHECKS = ['not_a_server_error', 'status_code_conformance', 'content_type_conformance', 'response_schema_conformance', 'unsupported_method'];

/**
 * Which path parameter of which operations takes ids of which dictionary. Operations that
 * change what the others rely on get resources of their own: `updateSession` could lift the
 * seeded session's agent limit, `endSession`, pause and terminate would leave no ready agent to exec in.
 */
const DISRUPTIVE_SESSION_OPERATIONS = ['updateSession', 'endSession'];
const DISRUPTIVE_AGENT_OPERATIONS = ['pauseAgent', 'resumeAgent', 'forkAgent', 'terminateAgent'];
const ID_BINDINGS: { dictionary: string; pathRegex?: string; operationIds?: string[]; excludeOperationIds?: string[]; parameter: string }[] = [
  { dictionary: 'sessions', pathRegex: '^/v1/sessions/\\{id\\}', excludeOperationIds: DISRUPTIVE_SESSION_OPERATIONS, parameter: 'path.id' },
  { dictionary: 'spareSessions', operationIds: DISRUPTIVE_SESSION_OPERATIONS, parameter: 'path.id' },
  { dictionary: 'agents', pathRegex: '^/v1/agents/\\{id\\}', excludeOperationIds: DISRUPTIVE_AGENT_OPERATIONS, parameter: 'path.id' },
  { dictionary: 'disposableAgents', operationIds: DISRUPTIVE_AGENT_OPERATIONS, parameter: 'path.id' },
  { dictionary: 'tasks', pathRegex: '^/v1/tasks/\\{id\\}', parameter: 'path.id' },
  { dictionary: 'snapshots', pathRegex: '^/v1/snapshots/\\{id\\}', parameter: 'path.id' },
  { dictionary: 'definitions', pathRegex: '^/v1/agent-definitions/\\{id\\}', parameter: 'path.id' },
  { dictionary: 'webhooks', pathRegex: '^/v1/webhooks/\\{id\\}', parameter: 'path.id' },
  { dictionary: 'schedules', pathRegex: '^/v1/schedules/\\{id\\}', excludeOperationIds: ['deleteSchedule'], parameter: 'path.id' },
  { dictionary: 'spareSchedules', operationIds: ['deleteSchedule'], parameter: 'path.id' },
  { dictionary: 'triggers', pathRegex: '^(/v1)?/triggers/\\{id\\}', parameter: 'path.id' },
  { dictionary: 'fleets', pathRegex: '^/v1/fleets/\\{id\\}', parameter: 'path.id' },
  { dictionary: 'jobs', pathRegex: '^/v1/jobs/\\{id\\}', parameter: 'path.id' },
  { dictionary: 'workflows', pathRegex: '^/v1/workflows/\\{id\\}', excludeOperationIds: ['deleteWorkflow', 'runWorkflow'], parameter: 'path.id' },
  { dictionary: 'spareWorkflows', operationIds: ['deleteWorkflow'], parameter: 'path.id' },
  { dictionary: 'runnableWorkflows', operationIds: ['runWorkflow'], parameter: 'path.id' },
  { dictionary: 'workflowRuns', pathRegex: '^/v1/workflow-runs/\\{runId\\}', parameter: 'path.runId' },
  { dictionary: 'channels', pathRegex: '^/v1/channels/\\{id\\}', excludeOperationIds: ['deleteChannel'], parameter: 'path.id' },
  { dictionary: 'spareChannels', operationIds: ['deleteChannel'], parameter: 'path.id' },
  { dictionary: 'channels', operationIds: ['getChannelConfig', 'postChannelMessage', 'listChannelMessages', 'streamChannel'], parameter: 'path.channelId' },
  { dictionary: 'slackChannels', operationIds: ['slackEvents'], parameter: 'path.channelId' },
  { dictionary: 'emailChannels', operationIds: ['inboundEmail'], parameter: 'path.channelId' },
  { dictionary: 'phoneChannels', operationIds: ['inboundCall'], parameter: 'path.channelId' },
  { dictionary: 'secrets', pathRegex: '^/v1/(sessions/\\{id\\}/)?secrets/\\{name\\}', parameter: 'path.name' },
  { dictionary: 'users', pathRegex: '^/v1/(sessions/by-user|usage/users)/\\{userId\\}', parameter: 'path.userId' },
  { dictionary: 'providers', pathRegex: '^/v1/providers/\\{provider\\}', parameter: 'path.provider' },
  { dictionary: 'sessions', operationIds: ['listSnapshots'], parameter: 'query.sessionId' },
  { dictionary: 'agents', operationIds: ['listSnapshots'], parameter: 'query.agentId' },
];

/**
 * Parameters given one value instead of generated ones. `waitSeconds` of `getAgent` and
 * `createAgent`: a `waitFor` status the agents never reach (most of them) holds the call for the
 * whole wait, and the coverage phase sends its boundary, 60 s; those waits were three quarters of
 * the live pass's time. The wait and its bounds (0 and 61 refused) are tested in
 * test/integration/warm-pools.test.ts (the GET) and test/integration/agents.test.ts (the create).
 */
const FIXED_PARAMETERS: Record<string, Record<string, string | number>> = {
  getAgent: { 'query.waitSeconds': 1 },
  createAgent: { 'query.waitSeconds': 1 },
};

/** The dictionary of each bound parameter of each operation: schemathesis takes one `parameters` table per operation. */
function bindings(document: { paths: Record<string, Record<string, { operationId: string }>> }): Map<string, Record<string, string>> {
  const byOperation = new Map<string, Record<string, string>>();
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const { operationId } of Object.values(methods)) {
      for (const binding of ID_BINDINGS) {
        if (binding.pathRegex && !new RegExp(binding.pathRegex).test(path)) continue;
        if (binding.operationIds && !binding.operationIds.includes(operationId)) continue;
        if (binding.excludeOperationIds?.includes(operationId)) continue;
        byOperation.set(operationId, { ...byOperation.get(operationId), [binding.parameter]: binding.dictionary });
      }
    }
  }
  return byOperation;
}

interface Summary {
  key: PassName;
  cases: number;
  statuses: Record<string, number>;
  failures: string[];
  exitCode: number | null;
  seconds: number;
}

async function main(): Promise<number> {
  const st = args.st ?? execFileSync(join(ROOT, 'test', 'fuzz', 'install.sh'), { encoding: 'utf8' }).trim();
  const reportRoot = process.env.FUZZ_REPORT_DIR ?? tempDir('berth-fuzz-');
  mkdirSync(reportRoot, { recursive: true });

  const reply = () => ({ text: 'Done: nothing else to do.' });
  const openai = await startFakeOpenAI(reply);
  const anthropic = await startFakeAnthropic(reply);
  let berth: BerthProcess | undefined;
  const summaries: Summary[] = [];
  let serverErrors: string[] = [];
  let serverLog = '';
  try {
    berth = await startBerth({
      env: {
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${pathToFileURL(join(ROOT, 'test', 'fuzz', 'offline.mjs')).href}`.trim(),
        BERTH_LOG_LEVEL: 'warn',
        BERTH_MODEL_PROVIDERS: JSON.stringify({
          openai: { api: 'openai', baseUrl: openai.baseUrl, apiKeyEnv: 'FUZZ_OPENAI_KEY' },
          anthropic: { api: 'anthropic', baseUrl: anthropic.baseUrl, apiKeyEnv: 'FUZZ_ANTHROPIC_KEY' },
        }),
        FUZZ_OPENAI_KEY: 'sk-fuzz',
        FUZZ_ANTHROPIC_KEY: 'sk-fuzz',
        BERTH_DEFAULT_MODEL: 'openai/gpt-4o-mini',
        BERTH_EXEC_TIMEOUT: '10s',
        BERTH_RUN_MAX_STEPS: '2',
        BERTH_RUNNER_WORKERS: '1',
        BERTH_CONTROLLER_WORKERS: '2',
        BERTH_STREAM_HEARTBEAT: '1s',
        BERTH_SANDBOX_NETWORK: 'none',
        BERTH_SANDBOX_MEMORY: '256Mi',
        // Warm pools the fuzzer makes keep at most two sandboxes started.
        BERTH_WARM_SANDBOXES_MAX: '2',
        // Refused at registration: private and plain-http URLs (the defaults, stated for the reader).
        BERTH_WEBHOOK_ALLOW_HTTP: 'false',
        BERTH_WEBHOOK_ALLOW_PRIVATE: 'false',
        BERTH_BYOI_ALLOW_HTTP: 'false',
        BERTH_BYOI_ALLOW_PRIVATE: 'false',
      },
    });
    const server = berth;
    // The two keys' passes run side by side: each is mostly schemathesis generating cases (one
    // Python process, one core) and waiting on answers, and they share nothing but the server
    // (their own key, mode, seeded resources and limits). Their output lines carry the key.
    const dataPlane = PASSES.filter((pass) => pass.key !== 'management');
    const concurrent = dataPlane.length > 1;
    const settled = await Promise.allSettled(
      dataPlane.map(async (pass) => {
        const key = pass.key === 'live' ? server.liveKey : server.testKey;
        if (!key) throw new Error(`berth up printed no ${pass.key} key`);
        const dictionaries = await seed(server.api(key), pass);
        const dir = join(reportRoot, pass.key);
        mkdirSync(dir, { recursive: true });
        // The operations that pause, end or change the seeded resources go last, so the others meet them ready.
        const disruptive = [...DISRUPTIVE_SESSION_OPERATIONS, ...DISRUPTIVE_AGENT_OPERATIONS];
        const target = { document: '/v1/openapi.json', headers: [`Authorization: Bearer ${key}`] };
        const label = concurrent ? `[${pass.key}] ` : '';
        const first = await runSchemathesis(st, server.baseUrl, target, pass, dictionaries, join(dir, 'most'), disruptive.flatMap((id) => ['--exclude-operation-id', id]), label);
        const last = await runSchemathesis(st, server.baseUrl, target, pass, dictionaries, join(dir, 'disruptive'), disruptive.flatMap((id) => ['--include-operation-id', id]), label);
        return merge(first, last);
      }),
    );
    // Both end before the server stops, a pass that threw or not.
    for (const result of settled) {
      if (result.status === 'rejected') throw result.reason;
      summaries.push(result.value);
    }
    const management = PASSES.find((pass) => pass.key === 'management');
    if (management) summaries.push(await managementPass(st, berth, management, join(reportRoot, 'management')));
  } finally {
    serverLog = berth ? berth.stdout() + berth.stderr() : '';
    serverErrors = unhandledErrors(serverLog);
    if (berth) {
      await berth.stop();
      removeDataDir(berth.dataDir);
    }
    await Promise.all([openai.close(), anthropic.close()]);
    printSummary(summaries, serverErrors);
  }
  const failed =
    summaries.length < PASSES.length || serverErrors.length > 0 || summaries.some((summary) => summary.exitCode !== 0 || summary.failures.length > 0);
  // A failed check, an unhandled server error, or a pass that ended badly or never ran is one failure each.
  const failures =
    summaries.reduce((sum, summary) => sum + Math.max(summary.failures.length, summary.exitCode === 0 ? 0 : 1), 0) +
    new Set(serverErrors).size +
    (PASSES.length - summaries.length);
  const cases = summaries.reduce((sum, summary) => sum + summary.cases, 0);
  const counts = { passed: Math.max(0, cases - failures), failed: failures };
  if (process.env.BERTH_TEST_RESULTS) writeFileSync(join(process.env.BERTH_TEST_RESULTS, 'fuzz.json'), JSON.stringify(counts));
  console.log(`fuzz: ${counts.passed} passed, ${counts.failed} failed`);
  if (failed) {
    // What the server said is what explains a failure that does not come back (the CI log shows this).
    writeFileSync(join(reportRoot, 'server.log'), serverLog);
    printServerWarnings(serverLog);
    console.log(`\nreports and the server's log kept in ${reportRoot}`);
  }
  else if (!process.env.FUZZ_REPORT_DIR) rmSync(reportRoot, { recursive: true, force: true });
  return failed ? 1 : 0;
}

/**
 * The management document, as the owner signed in with the first start's link: every /api
 * route with the cookie and the CSRF token. Sign-out ends the session the cases share, so it
 * runs last, alone.
 */
async function managementPass(st: string, berth: BerthProcess, pass: Pass, dir: string): Promise<Summary> {
  const link = /sign-in link: (\S+)/.exec(berth.stdout())?.[1];
  if (!link) throw new Error('berth up printed no sign-in link');
  const browser = new Browser(berth.baseUrl);
  if ((await browser.get(link)).status !== 200) throw new Error('the sign-in link did not sign in');
  await browser.loadCsrfToken();
  const target = {
    document: '/api/openapi.json',
    headers: [`Cookie: berth_session=${browser.cookie('berth_session')!.value}`, `X-CSRF-Token: ${browser.csrfToken}`],
  };
  const first = await runSchemathesis(st, berth.baseUrl, target, pass, {}, join(dir, 'most'), ['--exclude-operation-id', 'signOut']);
  const last = await runSchemathesis(st, berth.baseUrl, target, pass, {}, join(dir, 'sign-out'), ['--include-operation-id', 'signOut']);
  return merge(first, last);
}

/** Real resources of the key, whose ids the cases use half of the time. */
async function seed(api: ApiClient, pass: Pass): Promise<Record<string, (string | number)[]>> {
  const must = async (what: string, call: Promise<{ status: number; body: any }>, expected: number[]) => {
    const response = await call;
    if (!expected.includes(response.status)) throw new Error(`seeding ${what}: ${response.status} ${JSON.stringify(response.body)}`);
    return response.body;
  };
  const session = await must('a session', api.post('/v1/sessions', { userId: `fuzz-${pass.key}`, limits: { maxAgents: pass.maxAgents } }), [201]);
  const spare = await must('a spare session', api.post('/v1/sessions', { userId: `fuzz-${pass.key}-spare` }), [201]);
  const readyAgent = async (what: string) => {
    // Alive for the whole pass: with 10m, a live pass that ran 12 minutes (on a busy machine) saw its
    // agent end at its timeout between two cases, and the case in flight answered 502.
    const agent = await must(what, api.post(`/v1/sessions/${session.id}/agents`, { compute: 'python', timeout: '2h', tools: ['exec'] }), [201]);
    await eventually(async () => ((await api.get(`/v1/agents/${agent.id}`)).body.status === 'idle' ? true : undefined), {
      timeoutMs: 120_000,
      intervalMs: 250,
      what: `agent ${agent.id} to be idle`,
    });
    return agent as { id: string };
  };
  const agent = await readyAgent('an agent');
  const disposable = await readyAgent('an agent to pause and terminate');
  const task = await must('a task', api.post(`/v1/agents/${agent.id}/run`, { task: 'Say done.' }), [202]);
  await must('secrets', api.post('/v1/secrets', { FUZZ_TOKEN: 'not-a-real-token' }), [200]);
  await must('session secrets', api.post(`/v1/sessions/${session.id}/secrets`, { FUZZ_SESSION_TOKEN: 'not-a-real-token' }), [200]);
  const definition = await must('a definition', api.post('/v1/agent-definitions', { name: `fuzz ${pass.key}`, compute: 'python' }), [201]);
  // Registered, never delivered: its host does not resolve here, and offline.mjs refuses the rest.
  const webhook = await must('a webhook', api.post('/v1/webhooks', { url: 'https://hooks.fuzz.invalid/berth', events: ['agent.completed'] }), [201]);
  // Yearly, so that the cases meet a real schedule that does not fire during the run (unless a PUT makes it).
  const schedule = await must('a schedule', api.post('/v1/schedules', { agent: definition.id, userId: `fuzz-${pass.key}`, cron: '0 0 1 1 *', input: 'Say done.' }), [201]);
  const spareSchedule = await must('a schedule to delete', api.post('/v1/schedules', { agent: definition.id, userId: `fuzz-${pass.key}`, cron: '0 0 1 1 *' }), [201]);
  // A fleet of one item, in the spare session (the seeded one's agent limit is for the cases).
  const fleet = await must('a fleet', api.post('/v1/fleets', { agent: definition.id, sessionId: spare.id, items: ['Say done.'] }), [201]);
  // A trigger and the job of one correctly signed fire (for a user of its own: its agent is not in the seeded session);
  // the fuzzed fires are unsigned or wrongly signed (401).
  const trigger = await must('a trigger', api.post('/v1/triggers', { agent: definition.id, userId: `fuzz-${pass.key}-trigger`, type: 'webhook' }), [201]);
  const fireBody = JSON.stringify({ fuzz: true });
  const fired = await must(
    'a fire',
    api.raw(`/triggers/${trigger.id}/fire`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-trigger-signature': createHmac('sha256', trigger.secret).update(fireBody).digest('hex') },
      body: fireBody,
    }),
    [202],
  );
  // A workflow and one run of it (its user has a session of its own). Runs of the live key each
  // start a gVisor sandbox, so the live pass runs an archived workflow (409) rather than the real one.
  const workflow = await must('a workflow', api.post('/v1/workflows', { name: `fuzz-${pass.key}`, steps: [{ name: 'only', agent: definition.id, input: 'Say {{input}}.' }] }), [201]);
  const spareWorkflow = await must('a workflow to delete', api.post('/v1/workflows', { name: `fuzz-${pass.key}-spare`, steps: [{ name: 'only', agent: definition.id }] }), [201]);
  const archivedWorkflow = await must('an archived workflow', api.post('/v1/workflows', { name: `fuzz-${pass.key}-archived`, steps: [{ name: 'only', agent: definition.id }] }), [201]);
  await must('its archive', api.raw(`/v1/workflows/${archivedWorkflow.id}`, { method: 'DELETE' }), [200]);
  const workflowRun = await must('a workflow run', api.post(`/v1/workflows/${workflow.id}/runs`, { userId: `fuzz-${pass.key}-workflow`, input: 'done' }), [201]);
  // Channels of each type: the public routes' cases meet a real one half the time (their webhooks' cases are unsigned: 401).
  const channel = (what: string, body: Record<string, unknown>) => must(what, api.post('/v1/channels', { agent: definition.id, ...body }), [201]);
  const chat = await channel('a chat channel', { type: 'chat_embed', theme: { title: 'Fuzz' } });
  const spareChat = await channel('a chat channel to delete', { type: 'chat_embed' });
  const slack = await channel('a slack channel', { type: 'slack', workspace: 'T0FUZZ', signingSecret: 'fuzz-signing-secret', botToken: 'xoxb-fuzz' });
  const email = await channel('an email channel', { type: 'email', address: 'fuzz@example.com', apiKey: 'SG.fuzz' });
  const phone = await channel('a phone channel', { type: 'phone', phoneNumber: '+15550000000', authToken: 'fuzz-auth-token' });
  const dictionaries: Record<string, (string | number)[]> = {
    workflows: [workflow.id],
    spareWorkflows: [spareWorkflow.id],
    runnableWorkflows: [pass.key === 'live' ? archivedWorkflow.id : workflow.id],
    workflowRuns: [workflowRun.id],
    sessions: [session.id],
    spareSessions: [spare.id],
    agents: [agent.id],
    disposableAgents: [disposable.id],
    tasks: [task.taskId],
    definitions: [definition.id, definition.name],
    webhooks: [webhook.id],
    schedules: [schedule.id],
    spareSchedules: [spareSchedule.id],
    triggers: [trigger.id],
    jobs: [fired.jobId],
    fleets: [fleet.id],
    channels: [chat.id],
    spareChannels: [spareChat.id],
    slackChannels: [slack.id],
    emailChannels: [email.id],
    phoneChannels: [phone.id],
    secrets: ['FUZZ_TOKEN', 'FUZZ_SESSION_TOKEN'],
    users: [`fuzz-${pass.key}`],
    providers: ['openai', 'remote', 'kubernetes'],
    snapshots: ['snap_00000000000000000000000000'],
  };
  if (pass.snapshots) {
    const paused = await readyAgent('an agent to snapshot');
    await must('a pause', api.post(`/v1/agents/${paused.id}/pause`, {}), [200]);
    const snapshots = await must('the snapshot list', api.get(`/v1/snapshots?agentId=${paused.id}`), [200]);
    dictionaries.snapshots = snapshots.data.map((snapshot: { id: string }) => snapshot.id);
    dictionaries.disposableAgents!.push(paused.id);
  }
  return dictionaries;
}

function schemathesisConfig(pass: Pass, dictionaries: Record<string, (string | number)[]>, operations: Map<string, Record<string, string>>): string {
  const lines = [
    // One worker: Hypothesis reads its strategies' source with the ast module, whose recursion
    // counter Python 3.11 (Debian 12's) keeps per interpreter, not per thread. Two workers
    // generating at once fail it now and then ("AST constructor recursion depth mismatch", or a
    // KeyError from Hypothesis's source cache): an error of the tool, reported as the operation's.
    `workers = 1`,
    `request-timeout = 150`,
    `max-stream-events = 2`,
    // Its cache would land in the working directory, the repository.
    `cache = { enabled = false }`,
    `seed = ${Number(process.env.FUZZ_SEED ?? 20_260_301)}`,
    ``,
    `[generation]`,
    `max-examples = ${pass.examples}`,
    // NUL bytes in generated strings: the HTTP layer refuses them with 422 naming the field.
    `allow-x00 = true`,
    ``,
    `[phases]`,
    `stateful.enabled = false`,
    ``,
  ];
  for (const [name, values] of Object.entries(dictionaries)) {
    lines.push(`[dictionaries.${name}]`, `values = ${JSON.stringify(values)}`, ``);
  }
  for (const operationId of Object.keys(FIXED_PARAMETERS)) if (!operations.has(operationId)) operations.set(operationId, {});
  for (const [operationId, parameters] of operations) {
    const table = [
      ...Object.entries(parameters).map(([parameter, dictionary]) => `${JSON.stringify(parameter)} = { dictionary = "${dictionary}", probability = 0.5 }`),
      ...Object.entries(FIXED_PARAMETERS[operationId] ?? {}).map(([parameter, value]) => `${JSON.stringify(parameter)} = ${JSON.stringify(value)}`),
    ];
    lines.push(`[[operations]]`, `include-operation-id = "${operationId}"`, `parameters = { ${table.join(', ')} }`, ``);
  }
  // The spec's answer to `lifecycle` on agent creation: documented, deliberate, not a crash.
  lines.push(`[[operations]]`, `include-operation-id = "createAgent"`, `checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", 501]`, ``);
  // Triggers of type "event": documented as not available yet (501).
  lines.push(`[[operations]]`, `include-operation-id = "createTrigger"`, `checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", 501]`, ``);
  // The port proxy: 502 `port_closed` for an exposed port nothing listens on (no program runs in a fuzzed sandbox), documented.
  for (const method of ['Get', 'Post', 'Put', 'Patch', 'Delete']) {
    lines.push(`[[operations]]`, `include-operation-id = "proxyPort${method}"`, `checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", 501, 502]`, ``);
  }
  return lines.join('\n');
}

async function runSchemathesis(
  st: string,
  baseUrl: string,
  /** The document to fuzz and the credentials every request carries. */
  target: { document: string; headers: string[] },
  pass: Pass,
  dictionaries: Record<string, (string | number)[]>,
  dir: string,
  filters: string[],
  /** Put before each line of its output (the pass's key, while two passes run at once). */
  label = '',
): Promise<Summary> {
  mkdirSync(dir, { recursive: true });
  const config = join(dir, 'schemathesis.toml');
  const document = (await (await fetch(`${baseUrl}${target.document}`)).json()) as Parameters<typeof bindings>[0];
  writeFileSync(config, schemathesisConfig(pass, dictionaries, bindings(document)));
  const started = Date.now();
  console.log(`\n${label}=== fuzz: ${passLabel(pass.key)}, ${pass.examples} cases per operation and phase, ${filters.join(' ')} ===`);
  const exitCode = await new Promise<number | null>((resolve) => {
    const child = spawn(
      st,
      [
        '--config-file',
        config,
        'run',
        `${baseUrl}${target.document}`,
        '--checks',
        CHECKS.join(','),
        ...target.headers.flatMap((header) => ['--header', header]),
        '--phases',
        'examples,coverage,fuzzing',
        '--report',
        'ndjson,junit',
        '--report-dir',
        dir,
        '--no-shrink',
        '--output-truncate',
        'true',
        ...filters,
        ...(process.env.FUZZ_OPERATIONS ?? '')
          .split(',')
          .filter(Boolean)
          .flatMap((id) => ['--include-operation-id', id.trim()]),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1', SCHEMATHESIS_TELEMETRY: 'false', SCHEMATHESIS_HOOKS: join(ROOT, 'test', 'fuzz', 'hooks.py') } },
    );
    relay(child.stdout, process.stdout, label);
    relay(child.stderr, process.stderr, label);
    child.on('close', resolve);
  });
  return { key: pass.key, exitCode, seconds: Math.round((Date.now() - started) / 1000), ...readEvents(dir) };
}

/**
 * Copies schemathesis's output line by line, with its section rules in dashes: its closing
 * line (`=== 2 warnings in 3.1s ===`) has pytest's shape, and a reader of the run's last lines
 * would take it for a test run that ran nothing. The counts that matter are the summary's.
 */
function relay(from: NodeJS.ReadableStream, to: NodeJS.WritableStream, label: string): void {
  createInterface({ input: from, crlfDelay: Infinity }).on('line', (line) => {
    to.write(`${label}${line.replace(/^=+( .* )=+$/, '---$1---')}\n`);
  });
}

function merge(a: Summary, b: Summary): Summary {
  const statuses = { ...a.statuses };
  for (const [status, count] of Object.entries(b.statuses)) statuses[status] = (statuses[status] ?? 0) + count;
  return {
    key: a.key,
    cases: a.cases + b.cases,
    statuses,
    failures: [...a.failures, ...b.failures],
    exitCode: a.exitCode === 0 ? b.exitCode : a.exitCode,
    seconds: a.seconds + b.seconds,
  };
}

/** Cases and statuses from the ndjson event log of a run. */
function readEvents(dir: string): Pick<Summary, 'cases' | 'statuses' | 'failures'> {
  const statuses: Record<string, number> = {};
  const failures = new Set<string>();
  let cases = 0;
  const file = readdirSync(dir).find((name) => name.endsWith('.ndjson'));
  if (!file) return { cases, statuses, failures: ['no event log written'] };
  for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const event = JSON.parse(line) as Record<string, any>;
    const scenario = event.ScenarioFinished;
    if (!scenario) continue;
    for (const item of Object.values((scenario.recorder?.interactions ?? {}) as Record<string, any>)) {
      const status = item?.response?.status_code;
      cases += 1;
      const bucket = status === undefined ? 'no response' : String(status);
      statuses[bucket] = (statuses[bucket] ?? 0) + 1;
    }
    for (const checks of Object.values((scenario.recorder?.checks ?? {}) as Record<string, any[]>)) {
      for (const check of checks) {
        if (check.status === 'failure') failures.add(`${scenario.recorder.label}: ${check.name}: ${check.failure_info?.failure?.title ?? ''}`.trim());
      }
    }
  }
  return { cases, statuses, failures: [...failures].sort() };
}

/** Errors the server logged as unhandled: each is a 500 somewhere, whatever the checks said. */
function unhandledErrors(output: string): string[] {
  return output
    .split('\n')
    .filter((line) => line.includes('"unhandled error"'))
    .map((line) => {
      try {
        const entry = JSON.parse(line) as { err?: { message?: string }; method?: string; path?: string };
        return `${entry.method ?? ''} ${entry.path ?? ''} ${entry.err?.message ?? ''}`.trim();
      } catch {
        return line;
      }
    });
}

/**
 * The server's warnings and errors (its log is at `warn` in the fuzz), grouped by what they say
 * (message and error), most frequent first, each with its count and its latest line.
 */
function printServerWarnings(output: string, maxGroups = 20): void {
  const groups = new Map<string, { count: number; latest: string }>();
  for (const line of output.split('\n')) {
    if (!/"level":"(warn|error|fatal)"/.test(line)) continue;
    let key = line;
    try {
      const entry = JSON.parse(line) as { msg?: string; err?: { message?: string }; error?: string };
      key = `${entry.msg ?? ''}: ${(entry.err?.message ?? entry.error ?? '').replace(/\b[a-z]{2,6}[-_][0-9a-z]{26}\b/g, '…')}`;
    } catch {
      // Not JSON: the line is its own group.
    }
    const group = groups.get(key) ?? { count: 0, latest: '' };
    groups.set(key, { count: group.count + 1, latest: line });
  }
  if (groups.size === 0) return;
  const sorted = [...groups.values()].sort((a, b) => b.count - a.count);
  console.log(`\nthe server's warnings and errors, by what they say (${groups.size} kinds${groups.size > maxGroups ? `, the ${maxGroups} most frequent` : ''}):`);
  for (const { count, latest } of sorted.slice(0, maxGroups)) console.log(`  ${count}× ${latest.length > 600 ? `${latest.slice(0, 600)}…` : latest}`);
}

function passLabel(key: PassName): string {
  return key === 'management' ? 'management API (sign-in cookie)' : `${key} key`;
}

function printSummary(summaries: Summary[], serverErrors: string[]): void {
  console.log('\n=== fuzz summary ===');
  for (const summary of summaries) {
    const statuses = Object.entries(summary.statuses)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([status, count]) => `${status}×${count}`)
      .join(' ');
    console.log(`${passLabel(summary.key)}: ${summary.cases} cases in ${summary.seconds} s, schemathesis exit ${summary.exitCode}; statuses ${statuses}`);
    for (const failure of summary.failures) console.log(`  FAIL ${failure}`);
  }
  console.log(`total: ${summaries.reduce((sum, summary) => sum + summary.cases, 0)} cases`);
  if (serverErrors.length) {
    console.log(`the server logged ${serverErrors.length} unhandled errors, e.g.:`);
    for (const error of [...new Set(serverErrors)].slice(0, 20)) console.log(`  ${error}`);
  }
}

process.exitCode = await main();
