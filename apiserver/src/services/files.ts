import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ApiError, SandboxFileError, type FileChange, type Resource, type FileErrorCode, type FileInfo, type FileWatch, type SandboxFiles, type SandboxProvider } from '@berth/common';
import type { SandboxRef } from '@berth/crds';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Principal } from '../http/context.js';
import type { AgentService } from './agents.js';

/** How a provider's file refusal is answered: status by what the client can do about it. */
const FILE_ERRORS: Record<FileErrorCode, { code: 'unprocessable_entity' | 'not_found' | 'conflict' | 'payload_too_large' | 'forbidden' | 'provider_error'; hint: string }> = {
  outside: { code: 'unprocessable_entity', hint: 'paths must stay inside /workspace once symlinks are resolved' },
  bad_request: { code: 'unprocessable_entity', hint: 'check the path' },
  not_directory: { code: 'unprocessable_entity', hint: 'the path is not a directory' },
  is_directory: { code: 'unprocessable_entity', hint: 'the path is a directory (download it with /files/archive)' },
  not_found: { code: 'not_found', hint: 'no such file or directory' },
  exists: { code: 'conflict', hint: 'something exists there already' },
  not_empty: { code: 'conflict', hint: 'the directory is not empty (remove it with recursive=true)' },
  no_space: { code: 'payload_too_large', hint: "the agent's workspace is full" },
  forbidden: { code: 'forbidden', hint: 'the sandbox does not allow it' },
  io_error: { code: 'provider_error', hint: 'the sandbox could not do it' },
};

function fileError(error: unknown): unknown {
  if (!(error instanceof SandboxFileError)) return error;
  const { code, hint } = FILE_ERRORS[error.code];
  return new ApiError(code, `${error.message} (${hint})`, code === 'unprocessable_entity' ? { fields: { path: [error.message] }, reason: error.code } : { path: error.path, reason: error.code });
}

/**
 * Files of an agent's sandbox (ADR 40): the agent must be ready (one paused by its idle policy is
 * woken first, ADR 45; otherwise 409), its provider must have files (501 naming `files`), and bodies
 * stream both ways with only a window of them in this process. A transfer counts as the agent's
 * traffic for as long as it lasts, so a long upload or download keeps an idle policy from pausing it.
 */
export function createFileService(deps: { agents: AgentService; metrics: Registry }) {
  const bytes = new Counter({
    name: 'berth_file_bytes_total',
    help: 'Bytes of files moved between clients and sandboxes',
    labelNames: ['provider', 'direction'],
    registers: [deps.metrics],
  });
  const watchesOpen = new Gauge({ name: 'berth_file_watches_open', help: 'Directory watches open now in sandboxes (ADR 51)', labelNames: ['provider'], registers: [deps.metrics] });
  const watchChanges = new Counter({ name: 'berth_file_watch_changes_total', help: 'Changes directory watches passed on from sandboxes', labelNames: ['provider', 'type'], registers: [deps.metrics] });

  interface Access {
    agent: Resource<'Agent'>;
    files: SandboxFiles;
    sandbox: SandboxRef;
    provider: SandboxProvider;
    /** The operation's lease on its agent (ADR 45), taken by `ready`: answers the function that ends it, called when the operation ends. */
    hold: () => () => void;
  }

  async function filesOf(principal: Principal, id: string): Promise<Access> {
    const { agent, sandbox, provider, release } = await deps.agents.ready(principal, id, 'files');
    if (!provider.files) {
      release();
      throw new ApiError('not_implemented', `files: provider "${provider.name}" has no file access`, { field: 'files', provider: provider.name });
    }
    return { agent, files: provider.files, sandbox, provider, hold: () => release };
  }

  /** Every operation calls `hold()` at once and ends the lease it answers; one that throws first ends it here. */
  async function run<T>(principal: Principal, id: string, operation: (access: Access) => Promise<T>): Promise<T> {
    const access = await filesOf(principal, id);
    try {
      return await operation(access);
    } catch (error) {
      access.hold()();
      throw fileError(await deps.agents.callError(access.agent, id, 'a file call', error));
    }
  }

  /** A call that answers at once, traffic while it lasts. */
  function held<T>(principal: Principal, id: string, operation: (files: SandboxFiles, sandbox: SandboxRef) => Promise<T>): Promise<T> {
    return run(principal, id, async ({ files, sandbox, hold }) => {
      const release = hold();
      try {
        return await operation(files, sandbox);
      } finally {
        release();
      }
    });
  }

  /**
   * `body` with its bytes counted as they pass (read at the pace of whoever reads the result), and
   * `release` called when it ends either way.
   */
  function counted(body: Readable, provider: string, direction: 'upload' | 'download' | 'archive', release?: () => void): Readable {
    const counter = bytes.labels({ provider, direction });
    const counting = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        counter.inc(chunk.length);
        done(null, chunk);
      },
    });
    if (release) counting.once('close', release);
    pipeline(body, counting).catch((error: unknown) => counting.destroy(error as Error));
    return counting;
  }

  /** A download whose body outlives the call: the hold is released when the body closes, or now when there is none. */
  async function streamed(principal: Principal, id: string, direction: 'download' | 'archive', open: (files: SandboxFiles, sandbox: SandboxRef) => Promise<{ info: FileInfo; body: Readable }>) {
    return run(principal, id, async ({ files, sandbox, provider, hold }) => {
      const release = hold();
      try {
        const { info, body } = await open(files, sandbox);
        return { info, body: counted(body, provider.name, direction, release) };
      } catch (error) {
        release();
        throw error;
      }
    });
  }

  return {
    stat: (principal: Principal, id: string, path: string): Promise<FileInfo> => held(principal, id, (files, sandbox) => files.stat(sandbox, path)),
    list: (principal: Principal, id: string, path: string) => held(principal, id, (files, sandbox) => files.list(sandbox, path)),
    /** The file's bytes, counted as they go out. */
    read: (principal: Principal, id: string, path: string) => streamed(principal, id, 'download', (files, sandbox) => files.read(sandbox, path)),
    archive: (principal: Principal, id: string, path: string) => streamed(principal, id, 'archive', (files, sandbox) => files.archive(sandbox, path)),
    write: (principal: Principal, id: string, path: string, body: Readable, options: { mode?: number; parents?: boolean }): Promise<FileInfo> =>
      run(principal, id, async ({ files, sandbox, provider, hold }) => {
        const release = hold();
        try {
          return await files.write(sandbox, path, counted(body, provider.name, 'upload'), options);
        } finally {
          release();
        }
      }),
    mkdir: (principal: Principal, id: string, path: string, parents: boolean) => held(principal, id, (files, sandbox) => files.mkdir(sandbox, path, { parents })),
    remove: (principal: Principal, id: string, path: string, recursive: boolean) => held(principal, id, (files, sandbox) => files.remove(sandbox, path, { recursive })),
    move: (principal: Principal, id: string, from: string, to: string, overwrite: boolean) => held(principal, id, (files, sandbox) => files.move(sandbox, from, to, { overwrite })),
    /**
     * A directory's changes as they happen (ADR 51). Opening it is the agent's traffic; watching is
     * not (a watch alone does not keep an idle policy from pausing the agent, and a pause ends it).
     * Its changes are counted as they are read; a refusal comes as the other operations' do.
     */
    watch: (principal: Principal, id: string, path: string, recursive: boolean): Promise<FileWatch> =>
      run(principal, id, async ({ files, sandbox, provider: { name: provider }, hold }) => {
        const release = hold();
        let watch: FileWatch;
        try {
          if (!files.watch) throw new ApiError('not_implemented', `files.watch: provider "${provider}" cannot watch directories`, { field: 'files.watch', provider });
          watch = await files.watch(sandbox, path, { recursive });
        } finally {
          release();
        }
        watchesOpen.inc({ provider });
        let open = true;
        const ended = () => {
          if (open) watchesOpen.dec({ provider });
          open = false;
        };
        async function* changes(): AsyncGenerator<FileChange> {
          try {
            for await (const change of watch.changes) {
              watchChanges.inc({ provider, type: change.type });
              yield change;
            }
          } catch (error) {
            throw fileError(error);
          } finally {
            ended();
            watch.close();
          }
        }
        return {
          info: watch.info,
          changes: changes(),
          close: () => {
            ended();
            watch.close();
          },
        };
      }),
  };
}
export type FileService = ReturnType<typeof createFileService>;
