"""The file tools (read_file, write_file, list_files) and the discovery of a run's artifacts.

The host runs this file through the sandbox's provider with its request set before it as
`BERTH_REQUEST = "<JSON>"` (a JSON string is a valid Python string literal, so no argument is ever
spliced into code); run by hand, the request is the first argument. The request is
{"action": ..., "args": {...}}. The answer is one record on stdout, its JSON length in bytes, a
newline, then {"ok": true, "result": ...} with exit status 0, or {"ok": false, "error": "..."} with
exit status 1 when the tool failed for a reason the model can act on (no such file). Any other exit
status, without a record, is a crash: stderr says why.
"""
import json
import os
import sys

WORKSPACE = '/workspace'
EXIT_OK = 0
EXIT_TOOL_ERROR = 1


class ToolError(Exception):
    """A failure the model should read, as opposed to a bug here."""


def resolve(path):
    return path if os.path.isabs(path) else os.path.join(WORKSPACE, path)


def read_file(path, limit):
    with open(resolve(path), 'rb') as file:
        data = file.read(limit + 1)
    return {'text': data[:limit].decode('utf-8', 'replace'), 'truncated': len(data) > limit, 'limit': limit}


def write_file(path, content):
    path = resolve(path)
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    data = content.encode('utf-8')
    with open(path, 'wb') as file:
        file.write(data)
    return {'path': path, 'bytes': len(data)}


def list_files(path, recursive, limit):
    root = resolve(path)
    if not os.path.isdir(root):
        raise ToolError(f'not a directory: {root}')
    entries = []
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in dirs:
            entries.append({'path': os.path.relpath(os.path.join(directory, name), root) + '/'})
        for name in sorted(files):
            full = os.path.join(directory, name)
            try:
                size = os.path.getsize(full)
            except OSError:
                size = None  # gone meanwhile, or a dangling link
            entries.append({'path': os.path.relpath(full, root), 'bytes': size})
        if not recursive:
            break
    return {'entries': entries[:limit], 'more': max(0, len(entries) - limit)}


def changed_files(since, limit):
    """Files under /workspace modified at or after `since` (seconds), hidden directories left out."""
    found = []
    for directory, dirs, files in os.walk(WORKSPACE):
        dirs[:] = [name for name in dirs if not name.startswith('.')]
        for name in files:
            path = os.path.join(directory, name)
            try:
                if os.path.getmtime(path) >= since:
                    found.append(path)
            except OSError:
                pass
    return {'paths': sorted(found)[:limit]}


ACTIONS = {'read_file': read_file, 'write_file': write_file, 'list_files': list_files, 'changed_files': changed_files}


def answer(record, status):
    data = json.dumps(record, ensure_ascii=False).encode('utf-8', 'surrogatepass')
    out = sys.stdout.buffer
    out.write(str(len(data)).encode() + b'\n' + data)
    out.flush()
    return status


def run(request):
    action = ACTIONS.get(request.get('action'))
    if action is None:
        return answer({'ok': False, 'error': f"unknown action {request.get('action')!r}"}, EXIT_TOOL_ERROR)
    try:
        result = action(**request.get('args', {}))
    except (ToolError, OSError, UnicodeError) as error:
        return answer({'ok': False, 'error': str(error)}, EXIT_TOOL_ERROR)
    return answer({'ok': True, 'result': result}, EXIT_OK)


def request_from(namespace, argv):
    raw = namespace.get('BERTH_REQUEST')
    return json.loads(raw if raw is not None else argv[1])


if __name__ == '__main__':
    sys.exit(run(request_from(globals(), sys.argv)))
