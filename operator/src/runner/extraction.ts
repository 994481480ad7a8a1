import { validateExtraction, type ExtractionRules, type TaskExtraction } from '@berth/common';
import { callModel, type ModelRoute } from './models/router.js';
import { ModelError, type Message, type ModelResponse } from './models/types.js';

/**
 * Metadata extraction at the end of a completed run: the final answer is validated against the
 * agent's extraction schema; when it does not hold such an object, the model is asked once more,
 * for JSON only (no tools), and that answer is validated. The run stays completed either way;
 * the task records the metadata or why there is none.
 */
export async function extractMetadata(
  rules: ExtractionRules,
  run: { route: ModelRoute; system?: string | undefined; conversation: Message[]; output: string },
  call: {
    timeoutMs: number;
    signal: AbortSignal;
    /** Charges and checkpoints the extra model call (the conversation with the request and answer). */
    record(conversation: Message[], response: ModelResponse): Promise<void>;
  },
): Promise<TaskExtraction> {
  const first = validateExtraction(rules, run.output);
  if ('metadata' in first) return first;
  const request: Message = {
    role: 'user',
    content:
      'Give the result of your work as one JSON object, and nothing else (no prose, no code fence), matching this JSON schema:\n' +
      JSON.stringify(rules.schema) +
      (rules.instructions ? `\n${rules.instructions}` : ''),
  };
  const conversation = [...run.conversation, request];
  let response: ModelResponse;
  try {
    response = await callModel(
      run.route,
      { model: run.route.model, ...(run.system ? { system: run.system } : {}), messages: conversation, tools: [] },
      { timeoutMs: call.timeoutMs, signal: call.signal },
    );
  } catch (error) {
    if (!(error instanceof ModelError)) throw error;
    return { error: { code: 'extraction_failed', message: `the request for JSON failed: ${error.message}`, issues: first.issues } };
  }
  await call.record([...conversation, { role: 'assistant', content: response.text, toolCalls: [] }], response);
  const second = validateExtraction(rules, response.text);
  if ('metadata' in second) return second;
  return { error: { code: 'extraction_failed', message: 'the answer did not match the extraction schema, also when asked for JSON', issues: second.issues } };
}
