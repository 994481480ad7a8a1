import type { ModelAdapter, ModelRequest, ModelResponse } from './models/types.js';

/**
 * The model of test keys: a realistic run without any vendor. Its first answer calls `exec`
 * (when the agent may) so the stream shows a tool call and its result, its second answers;
 * token counts look real, and nothing is billed.
 */
export const mockModelAdapter: ModelAdapter = {
  async complete(_endpoint, request: ModelRequest): Promise<ModelResponse> {
    const task = request.messages.find((message) => message.role === 'user')?.content ?? '';
    const usedTool = request.messages.some((message) => message.role === 'tool');
    const inputTokens = Math.ceil(JSON.stringify(request.messages).length / 4);
    if (!usedTool && request.tools.some((tool) => tool.name === 'exec')) {
      const thought = 'Let me check the sandbox first.';
      request.onText?.(thought);
      return {
        text: thought,
        toolCalls: [{ id: 'call_mock_1', name: 'exec', input: { language: 'bash', code: 'echo "hello from the test sandbox"' } }],
        usage: { inputTokens, outputTokens: 24 },
        stopReason: 'tool_use',
      };
    }
    const answer = `[test mode] A live key would run "${task.slice(0, 200)}" on ${request.model}; test keys answer with this mock result.`;
    for (const word of answer.split(/(?<= )/)) request.onText?.(word);
    return { text: answer, toolCalls: [], usage: { inputTokens, outputTokens: Math.ceil(answer.length / 4) }, stopReason: 'end_turn' };
  },
};
