import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';

/**
 * The operator's side of the node agents (`berth node`, ADR 38): HTTP to a node's InternalIP on
 * the agents' port, with the shared bearer token.
 */
export interface NodeAgentSettings {
  port: number;
  /** Absent in the API server, which only needs to know that pods checkpoint natively, never calls an agent. */
  token?: string | undefined;
}

export interface NodeAgentInfo {
  node: string;
  runscVersion: string;
}

/** The node agent answered with an error status (`status`, and its envelope's code). */
export class NodeAgentRefusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export class NodeAgentClient {
  constructor(private readonly settings: NodeAgentSettings) {}

  private url(address: string, path: string): string {
    return `http://${address.includes(':') ? `[${address}]` : address}:${this.settings.port}${path}`;
  }

  private async call(address: string, path: string, init: RequestInit & { timeoutMs?: number }): Promise<Response> {
    const response = await fetch(this.url(address, path), {
      ...init,
      headers: { ...(init.headers as Record<string, string> | undefined), authorization: `Bearer ${this.settings.token}` },
      ...(init.timeoutMs ? { signal: AbortSignal.timeout(init.timeoutMs) } : {}),
    });
    if (!response.ok) {
      const body = (await response.json().catch(() => undefined)) as { error?: { code?: string; message?: string } } | undefined;
      throw new NodeAgentRefusal(response.status, body?.error?.code ?? 'error', body?.error?.message ?? `node agent answered ${response.status}`);
    }
    return response;
  }

  /** The agent's node and runsc version; rejects when no agent answers there within `timeoutMs`. */
  async info(address: string, timeoutMs = 3_000): Promise<NodeAgentInfo> {
    return (await (await this.call(address, '/v1/node', { timeoutMs })).json()) as NodeAgentInfo;
  }

  /** Checkpoints the pod's sandbox (which stops it) and streams the archive (gzipped tar). */
  async checkpoint(address: string, podUid: string): Promise<Readable> {
    const response = await this.call(address, `/v1/pods/${podUid}/checkpoint`, { method: 'POST' });
    return Readable.fromWeb(response.body! as Parameters<typeof Readable.fromWeb>[0]);
  }

  /** Stages `archive` for the pod of `podUid` on that node. */
  async stage(address: string, podUid: string, archive: Readable): Promise<void> {
    await this.call(address, `/v1/restores/${podUid}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/gzip' },
      body: Readable.toWeb(archive) as ReadableStream,
      duplex: 'half',
    } as RequestInit);
  }

  async unstage(address: string, podUid: string): Promise<void> {
    await this.call(address, `/v1/restores/${podUid}`, { method: 'DELETE', timeoutMs: 10_000 });
  }
}

/**
 * The manifest at the head of a native archive (the node agent writes it first), read from the
 * first tar entry of the gzipped stream without reading the rest; undefined when the archive has
 * none (a filesystem-level archive starts with `workspace/`).
 */
export async function readArchiveManifest(archive: Readable): Promise<{ level?: string; node?: string; runscVersion?: string } | undefined> {
  const gunzip = createGunzip();
  archive.pipe(gunzip);
  let buffered = Buffer.alloc(0);
  try {
    for await (const chunk of gunzip) {
      buffered = Buffer.concat([buffered, chunk as Buffer]);
      if (buffered.length < 512) continue;
      const name = buffered.subarray(0, 100).toString('utf8').replace(/\0.*$/s, '');
      if (name !== 'manifest.json' && name !== './manifest.json') return undefined;
      const size = parseInt(buffered.subarray(124, 136).toString('utf8').replace(/\0.*$/s, '').trim(), 8);
      if (!(size > 0 && size < 64 * 1024)) return undefined;
      if (buffered.length < 512 + size) continue;
      return JSON.parse(buffered.subarray(512, 512 + size).toString('utf8')) as { level?: string; node?: string; runscVersion?: string };
    }
    return undefined;
  } catch {
    return undefined;
  } finally {
    archive.unpipe(gunzip);
    gunzip.destroy();
    archive.destroy();
  }
}
