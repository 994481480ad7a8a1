import type { Logger, Resource, Task } from '@berth/common';
import type { SandboxProvider } from '@berth/common';
import type { SandboxRef } from '@berth/crds';
import { ModelError, type Message, type ModelResponse, type ToolCall } from './models/types.js';
import { callModel, type ModelRoute } from './models/router.js';
import { TOOLS, ToolInputError, limitToolOutput, type ToolOutcome, type ToolSpec } from './tools.js';

export type LoopEnd = (
  | { state: 'completed'; output: string }
  | { state: 'failed' | 'cancelled'; error: { code: string; message: string; details?: Record<string, unknown> } }
) & { usage?: { inputTokens: number; outputTokens: number }; progress?: LoopProgress };

export interface LoopProgress {
  conversation: Message[];
  steps: number;
  inputTokens: number;
  outputTokens: number;
}

export type LoopEventType = 'thinking' | 'tool_call' | 'tool_result';

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
}

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

/** What a run works with: the model, the sandbox, and the tools the agent's fields offer besides its `tools` (knowledge_search). */
export interface RunContext {
  route: ModelRoute;
  provider: SandboxProvider;
  sandbox: SandboxRef;
  fieldTools?: ToolSpec[];
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

/**
 * After a takeover, a tool call the previous runner started may or may not have run: the model
 * is told so rather than the call being run a second time.
 */
function closeInterruptedCalls(conversation: Message[]): void {
  const last = [...conversation].reverse().find((message) => message.role === 'assistant');
  if (!last || last.role !== 'assistant') return;
  const answered = new Set(conversation.filter((message) => message.role === 'tool').map((message) => message.toolCallId));
  for (const call of last.toolCalls) {
    if (answered.has(call.id)) continue;
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
  context: RunContext,
  io: LoopIo,
  settings: LoopSettings,
): Promise<LoopEnd> {
  const progress: LoopProgress = {
    conversation: task.conversation.length > 0 ? (task.conversation as Message[]) : [{ role: 'user', content: task.input }],
    steps: task.steps,
    inputTokens: task.inputTokens,
    outputTokens: task.outputTokens,
  };
  const end = await loop(progress, agent, context, io, settings);
  return { ...end, usage: { inputTokens: progress.inputTokens, outputTokens: progress.outputTokens }, progress };
}

async function loop(
  progress: LoopProgress,
  agent: Resource<'Agent'>,
  context: RunContext,
  io: LoopIo,
  settings: LoopSettings,
): Promise<LoopEnd> {
  closeInterruptedCalls(progress.conversation);
  const tools = [...agent.spec.tools.map((name) => TOOLS.get(name)).filter((tool) => tool !== undefined), ...(context.fieldTools ?? [])];
  const offered: ReadonlyMap<string, ToolSpec> = new Map(tools.map((tool) => [tool.name, tool]));

  let last: TokenEstimate | undefined;
  let addedSince = 0;
  // Resolved once a run: what every model call sends besides the conversation.
  const toolDefinitions = tools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema }));
  const modelSettings = modelSettingsOf(agent);
  /**
   * After the last tool call of an answer: the stop check before the next model call, read while
   * that call's checkpoint is written, and the checkpoint, which the model call does not wait for.
   */
  let checked: { stop: Stop; written: Promise<void> } | undefined;
  for (;;) {
    const written = checked?.written;
    const stop = checked ? checked.stop : await io.stopReason('before_model_call', estimateNextCall(progress, agent.spec.instructions, last, addedSince));
    checked = undefined;
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
          onText: (text) => thinking.push(text),
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
    const events = await thinking.rest();
    progress.steps += 1;
    progress.inputTokens += response.usage.inputTokens;
    progress.outputTokens += response.usage.outputTokens;
    progress.conversation.push({ role: 'assistant', content: response.text, toolCalls: response.toolCalls });
    last = response.usage;
    addedSince = 1;
    const [first] = response.toolCalls;
    if (first) events.push(toolCallEvent(first));
    await io.checkpoint(progress, { events: unwritten ? [] : events, charge: { step: progress.steps, response } });
    if (unwritten) throw unwritten;
    if (response.toolCalls.length === 0) return { state: 'completed', output: response.text };

    for (const [index, call] of response.toolCalls.entries()) {
      const { outcome, result } = await runTool(call, offered, context, settings);
      progress.conversation.push({
        role: 'tool',
        toolCallId: call.id,
        name: call.name,
        content: limitToolOutput(outcome.output),
        isError: outcome.isError,
      });
      addedSince++;
      // A pause or terminate waits for the tool call in flight, then stops the loop.
      const next = response.toolCalls[index + 1];
      if (!next) {
        checked = await checkpointBeside(io, progress, [result], estimateNextCall(progress, agent.spec.instructions, last, addedSince));
        break;
      }
      const after = await io.stopReason('after_tool_call');
      await io.checkpoint(progress, { events: after ? [result] : [result, toolCallEvent(next)] });
      if (after) return { state: after.state, error: { code: after.code, message: after.message } };
    }
  }
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
  offered: ReadonlyMap<string, ToolSpec>,
  context: { provider: SandboxProvider; sandbox: SandboxRef },
  settings: LoopSettings,
): Promise<{ outcome: ToolOutcome; result: LoopEvent }> {
  const started = performance.now();
  let outcome: ToolOutcome;
  const tool = offered.get(call.name);
  try {
    if (!tool) {
      outcome = { output: `there is no tool "${call.name}"; the tools are ${[...offered.keys()].join(', ') || 'none'}`, isError: true };
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
