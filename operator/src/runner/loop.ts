import { approvalRuleFor, checksOutput, screenText, type ApprovalPolicy, type GuardrailHit, type GuardrailWhere, type Guardrails, type Logger, type Resource, type Task } from '@berth/common';
import type { SandboxProvider } from '@berth/common';
import type { SandboxRef } from '@berth/crds';
import { ModelError, type Message, type ModelResponse, type ToolCall } from './models/types.js';
import { callModel, type ModelRoute } from './models/router.js';
import { TOOLS, ToolInputError, limitToolOutput, type ToolOutcome } from './tools.js';

export type LoopEnd = (
  | { state: 'completed'; output: string }
  | { state: 'failed' | 'cancelled'; error: { code: string; message: string; details?: Record<string, unknown> } }
) & { usage?: { inputTokens: number; outputTokens: number } };

export interface LoopProgress {
  conversation: Message[];
  steps: number;
  inputTokens: number;
  outputTokens: number;
  /** What the agent's guardrails found so far in the run. */
  guardrailHits: GuardrailHit[];
}

export type LoopEventType = 'thinking' | 'tool_call' | 'tool_result' | 'guardrail';

export interface LoopEvent {
  type: LoopEventType;
  data: Record<string, unknown>;
}

/** What a checkpoint writes with the progress: the step's stream events and its charge. */
export interface StepWrites {
  /** Stream events since the last write, in order. */
  events: LoopEvent[];
  /** The model call to charge (the runner writes the ledger row), after a model answer. */
  charge?: { step: number; response: ModelResponse };
  /** A tool call whose `tool_call` event this step writes and that waits for a decision (approvals). */
  approval?: { call: ToolCall; rule: number };
}

/** The agent's policies, parsed: they decide what the loop does around tool calls and model text. */
export interface LoopPolicies {
  approvals?: ApprovalPolicy;
  guardrails?: Guardrails;
}

/** What became of a tool call that waited for a decision. */
export type Decision =
  | { decision: 'approved' }
  | { decision: 'denied'; reason: string }
  /** The call was approved and started by a runner that stopped: it may or may not have run. */
  | { decision: 'interrupted' }
  | { stop: NonNullable<Stop> };

/** What the loop needs from the runner around it. */
export interface LoopIo {
  /** Streams text while the model is still answering. */
  emit(type: 'thinking', data: Record<string, unknown>): Promise<void>;
  /**
   * Saves progress with the step's events and charge, all or none (one transaction); throws
   * when this runner lost the task, and then writes only the charge (the call was made).
   */
  checkpoint(progress: LoopProgress, writes: StepWrites): Promise<void>;
  /**
   * Why the loop must stop now (agent paused, terminated, over budget), or undefined. Before a
   * model call, `next` estimates that call's tokens, so that a cost cap stops the loop before
   * the call that would cross it.
   */
  stopReason(
    where: 'before_model_call' | 'after_tool_call',
    next?: TokenEstimate,
  ): Promise<{ code: string; message: string; state: 'failed' | 'cancelled' } | undefined>;
  /**
   * Waits for the decision on a call whose approval request a checkpoint wrote (or, after a
   * takeover, on one that a previous runner's checkpoint wrote); undefined when there is none.
   */
  awaitDecision(call: ToolCall): Promise<Decision | undefined>;
  signal: AbortSignal;
}

/** The agent's model settings, as the adapters take them. */
function modelSettingsOf(agent: Resource<'Agent'>): { temperature?: number; maxOutputTokens?: number; topP?: number } {
  const settings = agent.spec.modelSettings ?? {};
  return {
    ...(settings.temperature !== undefined ? { temperature: settings.temperature } : {}),
    ...(settings.maxTokens !== undefined ? { maxOutputTokens: settings.maxTokens } : {}),
    ...(settings.topP !== undefined ? { topP: settings.topP } : {}),
  };
}

export interface TokenEstimate {
  inputTokens: number;
  outputTokens: number;
}

/** Characters per token, roughly, for text the model has not counted yet. */
const CHARS_PER_TOKEN = 4;

function messageChars(message: Message): number {
  if (message.role === 'assistant') return message.content.length + JSON.stringify(message.toolCalls).length;
  return message.content.length;
}

/**
 * The next model call's tokens, estimated: the last call's input plus what was added since
 * (about four characters a token) and its output again; before the first call, the
 * conversation's and system prompt's characters, and no output.
 */
export function estimateNextCall(progress: LoopProgress, system: string | undefined, last: TokenEstimate | undefined, addedSince: number): TokenEstimate {
  if (!last) {
    const chars = (system?.length ?? 0) + progress.conversation.reduce((sum, message) => sum + messageChars(message), 0);
    return { inputTokens: Math.ceil(chars / CHARS_PER_TOKEN), outputTokens: 0 };
  }
  const added = progress.conversation.slice(progress.conversation.length - addedSince).reduce((sum, message) => sum + messageChars(message), 0);
  return { inputTokens: last.inputTokens + Math.ceil(added / CHARS_PER_TOKEN), outputTokens: last.outputTokens };
}

export interface LoopSettings {
  maxSteps: number;
  modelTimeoutMs: number;
  toolTimeoutMs: number;
  log: Logger;
  onModelRetry?: (error: ModelError, attempt: number, delayMs: number) => void;
  onModelCall?: (seconds: number, result: string) => void;
  onToolCall?: (tool: string, seconds: number, isError: boolean) => void;
}

/** Streamed text becomes `thinking` events of a readable size, not one event per token. */
class ThinkingBuffer {
  private text = '';
  private lastFlush = Date.now();
  private pending: Promise<void>;
  /** `after`: a write whose events come before this answer's (it is waited for, not its outcome). */
  constructor(
    private readonly emit: (text: string) => Promise<void>,
    after: Promise<void> = Promise.resolve(),
  ) {
    this.pending = after.catch(() => undefined);
  }
  push(piece: string): void {
    this.text += piece;
    if (this.text.length >= 200 || Date.now() - this.lastFlush >= 100) this.flush();
  }
  flush(): Promise<void> {
    if (this.text) {
      const text = this.text;
      this.text = '';
      this.lastFlush = Date.now();
      this.pending = this.pending.then(() => this.emit(text));
    }
    return this.pending;
  }
  /**
   * Once the answer is complete: waits for what was streamed, and returns the text not streamed
   * yet, for the step's checkpoint to write with the rest of the step.
   */
  async rest(): Promise<LoopEvent[]> {
    await this.pending;
    const text = this.text;
    this.text = '';
    return text ? [{ type: 'thinking', data: { text } }] : [];
  }
}

function toolCallEvent(call: ToolCall): LoopEvent {
  return { type: 'tool_call', data: { id: call.id, tool: call.name, input: call.input } };
}

/** The calls of the last answer that have no result yet: after a takeover, what was left. */
function unansweredCalls(conversation: Message[]): ToolCall[] {
  const last = [...conversation].reverse().find((message) => message.role === 'assistant');
  if (!last || last.role !== 'assistant') return [];
  const answered = new Set(conversation.filter((message) => message.role === 'tool').map((message) => message.toolCallId));
  return last.toolCalls.filter((call) => !answered.has(call.id));
}

/**
 * After a takeover, a tool call the previous runner started may or may not have run: the model
 * is told so rather than the call being run a second time.
 */
function closeInterruptedCalls(conversation: Message[]): void {
  for (const call of unansweredCalls(conversation)) {
    conversation.push({
      role: 'tool',
      toolCallId: call.id,
      name: call.name,
      content: 'interrupted: the runner executing this call stopped before it reported a result; it may or may not have run',
      isError: true,
    });
  }
}

/**
 * The agent loop: model, then the tools it asks for, then model, until it answers without a
 * tool call. Progress is checkpointed after every model answer and every tool result, so a
 * runner that takes the task over continues where the last one stopped.
 */
export async function runLoop(
  task: Task,
  agent: Resource<'Agent'>,
  context: LoopContext,
  io: LoopIo,
  settings: LoopSettings,
): Promise<LoopEnd> {
  const progress: LoopProgress = {
    conversation: task.conversation as Message[],
    steps: task.steps,
    inputTokens: task.inputTokens,
    outputTokens: task.outputTokens,
    guardrailHits: [...task.guardrailHits],
  };
  const end = await loop(progress, task.input, agent, context, io, settings);
  return { ...end, usage: { inputTokens: progress.inputTokens, outputTokens: progress.outputTokens } };
}

export interface LoopContext {
  route: ModelRoute;
  provider: SandboxProvider;
  sandbox: SandboxRef;
  policies: LoopPolicies;
}

/** The code a run ends with when a guardrail whose action is block fired. */
export const GUARDRAIL_BLOCKED = 'guardrail_blocked';

/**
 * Applies the guardrails to one text: records what fired (in the progress and as `guardrail`
 * events), and returns the text to go on with, or the end of the run when a rule blocks.
 */
function screen(policies: LoopPolicies, progress: LoopProgress, events: LoopEvent[], text: string, where: GuardrailWhere, source: string): { text: string } | { end: LoopEnd } {
  const result = screenText(policies.guardrails, text, where, source);
  for (const hit of result.hits) {
    progress.guardrailHits.push(hit);
    events.push({ type: 'guardrail', data: { ...hit } });
  }
  if (!result.blocked) return { text: result.text };
  const { rule, kind, where: side, source: from } = result.blocked;
  return {
    end: {
      state: 'failed',
      error: { code: GUARDRAIL_BLOCKED, message: `the ${rule} guardrail blocked the ${side} (${kind} in ${from})`, details: { rule, kind, where: side, source: from } },
    },
  };
}

async function loop(
  progress: LoopProgress,
  input: string,
  agent: Resource<'Agent'>,
  context: LoopContext,
  io: LoopIo,
  settings: LoopSettings,
): Promise<LoopEnd> {
  const { policies } = context;
  /** What the guardrails found in the task's own text: written before the first model call. */
  const carried: LoopEvent[] = [];
  if (progress.conversation.length === 0) {
    const checked = screen(policies, progress, carried, input, 'input', 'task');
    if ('end' in checked) {
      await io.checkpoint(progress, { events: carried });
      return checked.end;
    }
    progress.conversation.push({ role: 'user', content: checked.text });
  }
  if (carried.length > 0) await io.checkpoint(progress, { events: carried });
  const tools = agent.spec.tools.map((name) => TOOLS.get(name)).filter((tool) => tool !== undefined);

  let last: TokenEstimate | undefined;
  let addedSince = 0;
  /**
   * Runs the calls of the last answer from `from`: each waits for a decision first when the
   * approval policy names it, its result goes through the guardrails, and each is checkpointed
   * with the next call's `tool_call` event (and that call's approval request).
   */
  const runCalls = async (calls: ToolCall[], from: number, waited?: Decision): Promise<LoopEnd | undefined> => {
    for (let index = from; index < calls.length; index++) {
      const call = calls[index]!;
      const events: LoopEvent[] = [];
      let ran: { outcome: ToolOutcome; result: LoopEvent };
      const needsDecision = approvalRuleFor(policies.approvals, call) !== undefined;
      // A call the policy names never runs without a decision, even one whose request is missing.
      const decision = !needsDecision ? undefined : ((index === from ? waited : undefined) ?? (await io.awaitDecision(call)) ?? { decision: 'denied', reason: 'no approval request was recorded for this call' });
      if (decision && 'stop' in decision) return { state: decision.stop.state, error: { code: decision.stop.code, message: decision.stop.message } };
      if (decision?.decision === 'denied') ran = deniedCall(call, decision.reason);
      else if (decision?.decision === 'interrupted') ran = interruptedCall(call);
      else ran = await runTool(call, agent, context, settings);
      const checked = screen(policies, progress, events, ran.outcome.output, 'input', `tool:${call.name}`);
      const output = 'end' in checked ? `[the tool result was blocked by a guardrail]` : checked.text;
      progress.conversation.push({ role: 'tool', toolCallId: call.id, name: call.name, content: limitToolOutput(output), isError: ran.outcome.isError });
      addedSince++;
      const result: LoopEvent = { type: 'tool_result', data: { ...ran.result.data, output: limitToolOutput(output) } };
      if ('end' in checked) {
        await io.checkpoint(progress, { events: [result, ...events] });
        return checked.end;
      }
      // A pause or terminate waits for the tool call in flight, then stops the loop.
      const next = calls[index + 1];
      if (!next) {
        lastStep = await checkpointBeside(io, progress, [result, ...events], estimateNextCall(progress, agent.spec.instructions, last, addedSince));
        return undefined;
      }
      const after = await io.stopReason('after_tool_call');
      await io.checkpoint(progress, after ? { events: [result, ...events] } : { events: [result, ...events, toolCallEvent(next)], ...approvalOf(policies, next) });
      if (after) return { state: after.state, error: { code: after.code, message: after.message } };
    }
    return undefined;
  };
  /**
   * After the last tool call of an answer: the stop check before the next model call, read while
   * that call's checkpoint is written, and the checkpoint, which the model call does not wait for.
   */
  let lastStep: { stop: Stop; written: Promise<void> } | undefined;

  // A run taken over while a call waited for its decision goes on from that call; any other
  // call left without a result may or may not have run, and the model is told so.
  const left = unansweredCalls(progress.conversation);
  const waiting = left[0] && approvalRuleFor(policies.approvals, left[0]) !== undefined ? await io.awaitDecision(left[0]) : undefined;
  if (waiting && left[0]) {
    const answer = progress.conversation.findLast((message) => message.role === 'assistant');
    const calls = answer?.role === 'assistant' ? answer.toolCalls : [];
    const end = await runCalls(calls, calls.indexOf(left[0]), waiting);
    if (end) return end;
  } else {
    closeInterruptedCalls(progress.conversation);
  }
  // Resolved once a run: what every model call sends besides the conversation.
  const toolDefinitions = tools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema }));
  const modelSettings = modelSettingsOf(agent);
  const holdsText = checksOutput(policies.guardrails);
  for (;;) {
    const written = lastStep?.written;
    const stop = lastStep ? lastStep.stop : await io.stopReason('before_model_call', estimateNextCall(progress, agent.spec.instructions, last, addedSince));
    lastStep = undefined;
    if (stop || progress.steps >= settings.maxSteps) {
      await written;
      if (stop) return { state: stop.state, error: { code: stop.code, message: stop.message } };
      return { state: 'failed', error: { code: 'step_limit', message: `the run made ${settings.maxSteps} model calls without finishing` } };
    }

    // The answer's streamed text is stored after the last checkpoint's events.
    const thinking = new ThinkingBuffer((text) => io.emit('thinking', { text }), written);
    const modelCall = callSignal(io.signal, written);
    const started = performance.now();
    let response: ModelResponse;
    try {
      response = await callModel(
        context.route,
        {
          model: context.route.model,
          ...(agent.spec.instructions ? { system: agent.spec.instructions } : {}),
          messages: progress.conversation,
          tools: toolDefinitions,
          ...modelSettings,
          // Text the guardrails check is streamed once the answer is complete and checked.
          ...(holdsText ? {} : { onText: (text: string) => thinking.push(text) }),
        },
        { timeoutMs: settings.modelTimeoutMs, signal: modelCall.signal, ...(settings.onModelRetry ? { onRetry: settings.onModelRetry } : {}) },
      );
      settings.onModelCall?.((performance.now() - started) / 1000, 'ok');
    } catch (error) {
      settings.onModelCall?.((performance.now() - started) / 1000, 'error');
      modelCall.dispose();
      // A checkpoint that failed (this runner lost the task) stopped the call: its error is the one.
      await written;
      await thinking.flush();
      if (error instanceof ModelError) {
        return {
          state: 'failed',
          error: {
            code: 'provider_error',
            message: `model ${context.route.vendor}/${context.route.model}: ${error.message}`,
            details: { upstreamStatus: error.status },
          },
        };
      }
      throw error;
    }
    modelCall.dispose();
    // The last checkpoint failed after the answer came: the call is charged all the same (a
    // runner that lost the task writes only the charge), without this answer's events, whose
    // place in the stream is after the events that were not written.
    const unwritten = written ? await written.then(() => undefined, (error: unknown) => error ?? new Error('the checkpoint failed')) : undefined;
    // The answer, its charge, the rest of its text and the first tool call it asks for are
    // written together: one transaction after the model call, one after each tool call.
    const events = holdsText ? [] : await thinking.rest();
    progress.steps += 1;
    progress.inputTokens += response.usage.inputTokens;
    progress.outputTokens += response.usage.outputTokens;
    last = response.usage;
    addedSince = 1;
    const checked = screen(policies, progress, events, response.text, 'output', 'answer');
    const text = 'end' in checked ? '' : checked.text;
    if (holdsText && text) events.unshift({ type: 'thinking', data: { text } });
    progress.conversation.push({ role: 'assistant', content: text, toolCalls: 'end' in checked ? [] : response.toolCalls });
    const [first] = 'end' in checked ? [] : response.toolCalls;
    if (first) events.push(toolCallEvent(first));
    await io.checkpoint(progress, { events: unwritten ? [] : events, charge: { step: progress.steps, response }, ...(first ? approvalOf(policies, first) : {}) });
    if (unwritten) throw unwritten;
    if ('end' in checked) return checked.end;
    if (response.toolCalls.length === 0) return { state: 'completed', output: text };
    const end = await runCalls(response.toolCalls, 0);
    if (end) return end;
  }
}

/** What a checkpoint that writes the `tool_call` event of `call` also writes: its approval request. */
function approvalOf(policies: LoopPolicies, call: ToolCall): Pick<StepWrites, 'approval'> {
  const rule = approvalRuleFor(policies.approvals, call);
  return rule === undefined ? {} : { approval: { call, rule } };
}

function deniedCall(call: ToolCall, reason: string): { outcome: ToolOutcome; result: LoopEvent } {
  const outcome: ToolOutcome = { output: `denied: a reviewer did not approve this call. Reason: ${reason}`, isError: true };
  return { outcome, result: { type: 'tool_result', data: { id: call.id, tool: call.name, output: outcome.output, exitCode: null, durationMs: 0, isError: true } } };
}

function interruptedCall(call: ToolCall): { outcome: ToolOutcome; result: LoopEvent } {
  const outcome: ToolOutcome = {
    output: 'interrupted: the runner executing this call stopped before it reported a result; it may or may not have run',
    isError: true,
  };
  return { outcome, result: { type: 'tool_result', data: { id: call.id, tool: call.name, output: outcome.output, exitCode: null, durationMs: 0, isError: true } } };
}

type Stop = Awaited<ReturnType<LoopIo['stopReason']>>;

/**
 * Starts writing the checkpoint and reads the stop check meanwhile; returns once the check is
 * read, with the write, which may still be under way: the next model call is made while it
 * commits (one round trip's wait a step instead of two). The write's conversation is copied
 * when it starts, so what the loop adds afterwards is not in it.
 */
async function checkpointBeside(io: LoopIo, progress: LoopProgress, events: LoopEvent[], next: TokenEstimate): Promise<{ stop: Stop; written: Promise<void> }> {
  const written = io.checkpoint({ ...progress, conversation: [...progress.conversation] }, { events });
  // Observed by whoever awaits it; until then, a failure is not an unhandled rejection.
  written.catch(() => undefined);
  let stop: Stop;
  try {
    stop = await io.stopReason('before_model_call', next);
  } catch (error) {
    await written.catch(() => undefined);
    throw error;
  }
  return { stop, written };
}

/**
 * The model call's signal: the run's, and also aborted when the checkpoint written beside the
 * call fails (this runner lost the task): the call is then not waited for.
 */
function callSignal(run: AbortSignal, written: Promise<void> | undefined): { signal: AbortSignal; dispose(): void } {
  if (!written) return { signal: run, dispose: () => undefined };
  const controller = new AbortController();
  const onAbort = () => controller.abort(run.reason);
  if (run.aborted) onAbort();
  else run.addEventListener('abort', onAbort, { once: true });
  written.catch((error: unknown) => controller.abort(error));
  return { signal: controller.signal, dispose: () => run.removeEventListener('abort', onAbort) };
}

/** Runs one tool call (its `tool_call` event is written before); returns its outcome and `tool_result` event. */
async function runTool(
  call: ToolCall,
  agent: Resource<'Agent'>,
  context: { provider: SandboxProvider; sandbox: SandboxRef },
  settings: LoopSettings,
): Promise<{ outcome: ToolOutcome; result: LoopEvent }> {
  const started = performance.now();
  let outcome: ToolOutcome;
  const tool = TOOLS.get(call.name);
  try {
    if (!tool || !agent.spec.tools.includes(call.name)) {
      outcome = { output: `there is no tool "${call.name}"; the tools are ${agent.spec.tools.join(', ') || 'none'}`, isError: true };
    } else if (call.invalidInput !== undefined) {
      outcome = { output: `invalid input: the arguments are not a JSON object: ${call.invalidInput.slice(0, 500)}`, isError: true };
    } else {
      outcome = await tool.run(call.input, { provider: context.provider, sandbox: context.sandbox, timeoutMs: settings.toolTimeoutMs });
    }
  } catch (error) {
    const message = error instanceof ToolInputError ? `invalid input: ${error.message}` : (error as Error).message;
    outcome = { output: message, isError: true };
    if (!(error instanceof ToolInputError)) settings.log.warn({ err: error, tool: call.name }, 'tool call failed');
  }
  const durationMs = Math.round(performance.now() - started);
  settings.onToolCall?.(call.name, durationMs / 1000, outcome.isError);
  const result: LoopEvent = {
    type: 'tool_result',
    data: { id: call.id, tool: call.name, output: limitToolOutput(outcome.output), exitCode: outcome.exitCode ?? null, durationMs, isError: outcome.isError },
  };
  return { outcome, result };
}
