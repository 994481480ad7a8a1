import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  privateHostProblem,
  resolveAgentMcp,
  resolveSecrets,
  type Logger,
  type McpServerRow,
  type Queryable,
  type Resource,
  type SecretBox,
  type UrlPolicy,
} from '@berth/common';
import { TOOL_OUTPUT_LIMIT, type ToolSpec } from './tools.js';

/** How long connecting to a server and listing its tools may take at the start of a run. */
const CONNECT_TIMEOUT_MS = 10_000;
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** An MCP result is cut below the loop's limit of tool output, so that its own marker is what the model reads. */
export const MCP_RESULT_LIMIT = TOOL_OUTPUT_LIMIT - 256;

export type McpCallResult = 'ok' | 'tool_error' | 'failed';

export interface McpSettings {
  box: SecretBox;
  policy: UrlPolicy;
}

/** `mcp__<server>__<tool>`: the server's name keeps tools of two servers apart. */
export function mcpToolName(server: string, tool: string): string {
  return `mcp__${server}__${tool}`;
}

/** The text of an MCP tool result: its text parts, other parts named by type, cut at the tool output limit. */
export function mcpResultText(content: unknown): string {
  const parts = Array.isArray(content) ? content : [];
  const text = parts
    .map((part: { type?: unknown; text?: unknown; mimeType?: unknown }) =>
      part?.type === 'text' && typeof part.text === 'string' ? part.text : `[${String(part?.type ?? 'unknown')} content${typeof part?.mimeType === 'string' ? ` (${part.mimeType})` : ''} not shown]`,
    )
    .join('\n');
  if (text.length <= MCP_RESULT_LIMIT) return text;
  return `${text.slice(0, MCP_RESULT_LIMIT)}\n[MCP result truncated: ${text.length - MCP_RESULT_LIMIT} more characters not shown]`;
}

/**
 * A fetch that refuses hosts resolving to private addresses (the SDK makes its own requests,
 * so the address cannot be pinned; it is checked before each one).
 */
function guardedFetch(allowPrivate: boolean): typeof fetch {
  return async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    const problem = await privateHostProblem(url, allowPrivate);
    if (problem) throw new Error(problem);
    return fetch(input, init);
  };
}

interface Connection {
  server: McpServerRow;
  client: Client;
}

async function connect(server: McpServerRow, headers: Record<string, string>, settings: McpSettings): Promise<Connection> {
  // Loaded when an agent has MCP servers: processes and tests that never connect do not load the SDK.
  const [{ Client }, { StreamableHTTPClientTransport }] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
  ]);
  const transport = new StreamableHTTPClientTransport(new URL(server.url), {
    requestInit: { headers },
    fetch: guardedFetch(settings.policy.allowPrivate),
  });
  const client = new Client({ name: 'berth-runner', version: '1' });
  await client.connect(transport, { timeout: CONNECT_TIMEOUT_MS });
  return { server, client };
}

/**
 * The tools of the MCP servers an agent's `mcp` names, for one run: each server is connected
 * (its secret sent as a header) and its tools listed; a server that cannot be reached offers no
 * tools this run, and is logged. `close` ends the connections at the end of the run.
 */
export async function mcpToolsFor(
  db: Queryable,
  agent: Resource<'Agent'>,
  settings: McpSettings,
  hooks: { log: Logger; toolTimeoutMs: number; onCall(server: string, result: McpCallResult): void; onConnect(server: string, ok: boolean): void },
): Promise<{ tools: ToolSpec[]; close(): Promise<void> }> {
  const { organizationId, mode, mcp } = agent.spec;
  if (mcp === undefined) return { tools: [], close: async () => undefined };
  const { servers } = await resolveAgentMcp(db, { organizationId, mode }, mcp);
  const secretNames = servers.flatMap((server) => (server.secretName ? [server.secretName] : []));
  // Organization secrets: a server is the organization's, not a session's.
  const secrets = await resolveSecrets(db, settings.box, { organizationId, mode, sessionId: '' }, secretNames);
  const connections: Connection[] = [];
  const tools: ToolSpec[] = [];
  await Promise.all(
    servers.map(async (server) => {
      const headers: Record<string, string> = {};
      if (server.secretName) {
        const value = secrets[server.secretName];
        if (value === undefined) {
          hooks.log.warn({ server: server.name, secret: server.secretName }, 'MCP server secret is gone; its tools are not offered');
          hooks.onConnect(server.name, false);
          return;
        }
        const header = server.header ?? 'Authorization';
        headers[header] = header.toLowerCase() === 'authorization' ? `Bearer ${value}` : value;
      }
      let connection: Connection;
      let listed: Awaited<ReturnType<Client['listTools']>>['tools'];
      try {
        connection = await connect(server, headers, settings);
        listed = (await connection.client.listTools(undefined, { timeout: CONNECT_TIMEOUT_MS })).tools;
      } catch (error) {
        hooks.log.warn({ server: server.name, err: error }, 'MCP server unreachable; its tools are not offered this run');
        hooks.onConnect(server.name, false);
        return;
      }
      hooks.onConnect(server.name, true);
      connections.push(connection);
      for (const tool of listed) {
        const name = mcpToolName(server.name, tool.name);
        if (!TOOL_NAME.test(name)) {
          hooks.log.warn({ server: server.name, tool: tool.name }, 'MCP tool name does not fit a model tool name; not offered');
          continue;
        }
        tools.push({
          name,
          description: `${tool.description ?? tool.name} (MCP server ${server.name})`,
          inputSchema: tool.inputSchema as Record<string, unknown>,
          needsBrowser: false,
          async run(input) {
            try {
              const result = await connection.client.callTool({ name: tool.name, arguments: input }, undefined, { timeout: hooks.toolTimeoutMs });
              const isError = result.isError === true;
              hooks.onCall(server.name, isError ? 'tool_error' : 'ok');
              return { output: mcpResultText(result.content), isError };
            } catch (error) {
              hooks.onCall(server.name, 'failed');
              return { output: `MCP server ${server.name} failed: ${(error as Error).message}`, isError: true };
            }
          },
        });
      }
    }),
  );
  tools.sort((a, b) => a.name.localeCompare(b.name));
  return {
    tools,
    close: async () => {
      await Promise.all(connections.map((connection) => connection.client.close().catch(() => undefined)));
    },
  };
}
