import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

/**
 * A local MCP server built with the official SDK (streamable HTTP, stateless): what an
 * organization's MCP server is to Berth's runner, at the network boundary. Its tools:
 * `lookup_customer` (answers from a small table), `export_all` (a result far over the size
 * limit), `explode` (a tool error). It keeps the headers of every request.
 */
export interface FakeMcpServer {
  url: string;
  headers: IncomingHttpHeaders[];
  calls: { tool: string; arguments: unknown }[];
  close(): Promise<void>;
}

const CUSTOMERS: Record<string, string> = { c42: 'Ada Lovelace, plan: enterprise, since 2019', c7: 'Alan Turing, plan: free, since 2024' };

function buildServer(calls: FakeMcpServer['calls']): McpServer {
  const server = new McpServer({ name: 'fake-crm', version: '1.0.0' });
  server.registerTool(
    'lookup_customer',
    { description: 'Find a customer by id', inputSchema: { id: z.string().describe('customer id') } },
    async ({ id }) => {
      calls.push({ tool: 'lookup_customer', arguments: { id } });
      const customer = CUSTOMERS[id];
      return customer ? { content: [{ type: 'text', text: customer }] } : { content: [{ type: 'text', text: `no customer ${id}` }], isError: true };
    },
  );
  server.registerTool('export_all', { description: 'Export every record', inputSchema: {} }, async () => {
    calls.push({ tool: 'export_all', arguments: {} });
    return { content: [{ type: 'text', text: 'row;'.repeat(25_000) }] };
  });
  server.registerTool('explode', { description: 'Always fails', inputSchema: {} }, async () => {
    calls.push({ tool: 'explode', arguments: {} });
    throw new Error('the CRM is on fire');
  });
  return server;
}

export async function startFakeMcpServer(options: { token?: string } = {}): Promise<FakeMcpServer> {
  const headers: IncomingHttpHeaders[] = [];
  const calls: FakeMcpServer['calls'] = [];
  const http = createServer(async (req, res) => {
    headers.push(req.headers);
    if (options.token && req.headers.authorization !== `Bearer ${options.token}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'unauthorized' }));
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
    // Stateless: a server and transport per request, as the SDK's examples do.
    const server = buildServer(calls);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    headers,
    calls,
    async close() {
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}
