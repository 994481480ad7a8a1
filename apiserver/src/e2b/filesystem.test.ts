import { Readable } from 'node:stream';
import { ApiError } from '@berth/common';
import { describe, expect, it } from 'vitest';
import { ConnectError } from './connect.js';
import { boundaryOf, camelCased, e2bPathOf, entryInfoOf, fileConnectError, filesystemEventOf, permissionsOf, readMultipart, sandboxPathOf } from './filesystem.js';

describe("E2B paths and the sandbox's /workspace", () => {
  it.each([
    ['/home/user', '/workspace'],
    ['/home/user/a.txt', '/workspace/a.txt'],
    ['a/b.txt', '/workspace/a/b.txt'],
    ['.', '/workspace'],
    ['/workspace/x', '/workspace/x'],
    ['/home/user/a/../b', '/workspace/b'],
  ])('maps %s to %s', (e2bPath, sandboxPath) => {
    expect(sandboxPathOf(e2bPath)).toBe(sandboxPath);
  });

  it.each(['/etc/passwd', '../etc/passwd', '/home/user/../../etc', '/home/userx', '/', '/tmp/a'])('refuses %s', (e2bPath) => {
    expect(() => sandboxPathOf(e2bPath)).toThrow(ConnectError);
    try {
      sandboxPathOf(e2bPath);
    } catch (error) {
      expect((error as ConnectError).code).toBe('permission_denied');
    }
  });

  it('answers /workspace paths under /home/user', () => {
    expect(e2bPathOf('/workspace')).toBe('/home/user');
    expect(e2bPathOf('/workspace/d/f')).toBe('/home/user/d/f');
  });

  it("describes an entry in envd's proto3 JSON", () => {
    const entry = entryInfoOf({ name: 'f', path: '/workspace/d/f', type: 'file', size: 12, mode: 0o644, modifiedAt: '2026-11-23T17:02:11.000Z' });
    expect(entry).toEqual({
      name: 'f',
      type: 'FILE_TYPE_FILE',
      path: '/home/user/d/f',
      size: '12',
      mode: 0o644,
      permissions: '-rw-r--r--',
      owner: 'root',
      group: 'root',
      modifiedTime: '2026-11-23T17:02:11.000Z',
    });
    expect(permissionsOf({ type: 'directory', mode: 0o755 })).toBe('drwxr-xr-x');
  });

  it("gives the files capability's refusals envd's codes", () => {
    expect((fileConnectError(new ApiError('conflict', 'x', { reason: 'exists' })) as ConnectError).code).toBe('already_exists');
    expect((fileConnectError(new ApiError('unprocessable_entity', 'x', { reason: 'outside' })) as ConnectError).code).toBe('permission_denied');
    expect((fileConnectError(new ApiError('not_found', 'x', { reason: 'not_found' })) as ConnectError).code).toBe('not_found');
  });
});

describe('directory watches in envd terms', () => {
  it('names each change by its EventType, the name as the sandbox gave it (relative to the directory)', () => {
    expect(filesystemEventOf({ name: 'sub/a.txt', type: 'create' })).toEqual({ name: 'sub/a.txt', type: 'EVENT_TYPE_CREATE' });
    expect(['write', 'remove', 'rename', 'chmod'].map((type) => filesystemEventOf({ name: 'a', type: type as 'write' }).type)).toEqual([
      'EVENT_TYPE_WRITE',
      'EVENT_TYPE_REMOVE',
      'EVENT_TYPE_RENAME',
      'EVENT_TYPE_CHMOD',
    ]);
  });

  it("takes a request's snake_case fields as proto3 JSON parsers do", () => {
    expect(camelCased({ watcher_id: 'w', include_entry: false, allow_network_mounts: true, path: '/home/user' })).toEqual({
      watcherId: 'w',
      includeEntry: false,
      allowNetworkMounts: true,
      path: '/home/user',
    });
    expect(camelCased('text')).toBe('text');
    expect(camelCased(null)).toBe(null);
  });
});

describe('multipart uploads', () => {
  const boundary = '----berth42';
  function body(parts: { filename: string; data: string }[]): string {
    return (
      parts.map((part) => `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${part.filename}"\r\nContent-Type: application/octet-stream\r\n\r\n${part.data}\r\n`).join('') +
      `--${boundary}--\r\n`
    );
  }
  async function parse(text: string, chunkSize: number): Promise<{ headers: string; data: string }[]> {
    const bytes = Buffer.from(text);
    const chunks: Buffer[] = [];
    for (let i = 0; i < bytes.length; i += chunkSize) chunks.push(bytes.subarray(i, i + chunkSize));
    const parts: { headers: string; data: string }[] = [];
    await readMultipart(Readable.from(chunks), boundary, async (headers, data) => {
      let text = '';
      for await (const chunk of data) text += (chunk as Buffer).toString();
      parts.push({ headers, data: text });
    });
    return parts;
  }

  it('reads the boundary of the content type', () => {
    expect(boundaryOf('multipart/form-data; boundary=----berth42')).toBe('----berth42');
    expect(boundaryOf('multipart/form-data; boundary="a b"')).toBe('a b');
    expect(boundaryOf('application/octet-stream')).toBeUndefined();
  });

  it.each([1, 3, 7, 64, 100_000])('splits parts whatever the chunks (%i bytes)', async (chunkSize) => {
    const data = 'line one\r\n--not-the-boundary\r\n\r\nend';
    const parts = await parse(body([{ filename: 'a.txt', data }, { filename: 'd/b.txt', data: '' }]), chunkSize);
    expect(parts.map((part) => part.data)).toEqual([data, '']);
    expect(parts[1]!.headers).toContain('filename="d/b.txt"');
  });

  it('ends with the refusal of a part that was never read, leaving no stream erroring unheard', async () => {
    const text = body([{ filename: '/etc/evil', data: 'x'.repeat(200_000) }]);
    const chunks = [Buffer.from(text.slice(0, 100)), Buffer.from(text.slice(100, 150_000)), Buffer.from(text.slice(150_000))];
    await expect(
      readMultipart(Readable.from(chunks), boundary, async () => {
        throw new ConnectError('permission_denied', 'outside');
      }),
    ).rejects.toThrow('outside');
  });

  it('refuses a body that ends before its closing boundary', async () => {
    await expect(parse(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nhalf`, 5)).rejects.toThrow(/closing boundary/);
  });
});
