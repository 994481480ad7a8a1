"""The launcher: PID 1 of a local sandbox, which starts the programs Berth execs (ADRs 5 and 20).

Run as `python3 -I -S launcher.py [tasks limit]` under the name berth-launcher. Why it exists, and
why it ignores signals, is told in providers/src/local/launcher.ts.

It takes execs two ways:
- The channel (ADR 20): it connects out to the host's unix socket at CHANNEL (mounted from the
  sandbox's directory; runsc's --host-uds=open lets it) and keeps that one connection, with many
  execs on it at once. Frames both ways: a header (`FRAME`: payload length, exec id, kind) and the
  payload. The host sends EXEC ({argv, env, cwd, limitMs, maxOutputBytes}) and CANCEL; the
  launcher sends HELLO once connected, STDOUT and STDERR chunks, and one OUTCOME per exec (see
  `outcome`, with what it dropped past maxOutputBytes). When the connection ends (the host went
  away, or the sandbox was restored from a checkpoint: its host end is gone then) the channel's
  programs are killed and the launcher connects again, sooner at first.
- The client (launcher-client.pl), run by a `runsc exec` per call, over an abstract unix socket:
  the client sends one line, the descriptor numbers of its two output pipes (`<stdout fd> <stderr
  fd>`); the launcher answers `started` once the program runs, then the program's outcome as one
  line of JSON, and closes. The client passes the outcome on to the host, never in the program's
  output. The host uses it for sandboxes whose launcher has no channel.
"""
import base64
import ctypes
import fcntl
import json
import os
import errno
import selectors
import shutil
import signal
import socket
import stat
import struct
import sys
import termios
import time

NAME = 'berth-launcher'
# Tests run a launcher of their own on the host, where the abstract namespace is shared.
SOCKET = os.environ.get('BERTH_LAUNCHER_SOCKET', NAME)
# What the launcher ignores (gVisor gives init its descendants' unhandled signals) and programs get
# back at their defaults.
DEFAULTS = [getattr(signal, name) for name in (
    'SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGTERM', 'SIGUSR1', 'SIGUSR2', 'SIGALRM', 'SIGTSTP', 'SIGTTIN',
    'SIGTTOU', 'SIGVTALRM', 'SIGPROF', 'SIGXCPU', 'SIGXFSZ', 'SIGIO', 'SIGPWR', 'SIGPIPE')]
DEFAULTS += range(signal.SIGRTMIN, signal.SIGRTMAX + 1)
# Exit status of a program that could not be started, as a shell gives it.
NOT_STARTED = 127
# After TERM at its limit, a program has this long before KILL.
KILL_AFTER_S = 2
# The host's end of the channel, in the sandbox (tests on the host give a path of their own).
CHANNEL = os.environ.get('BERTH_LAUNCHER_CHANNEL', '/run/berth/channel/launcher.sock')
# A frame's header: payload length, exec id, kind (big-endian).
FRAME = struct.Struct('>IIB')
HELLO, EXEC, STDOUT, STDERR, OUTCOME, CANCEL = 1, 2, 3, 4, 5, 6
# ADR 39: INPUT (host: bytes for a terminal exec's input), RESIZE (host: {rows, cols}), CONTROL (host:
# a request about background processes) and REPLY (launcher: its answer, or a background exec's pid).
INPUT, RESIZE, CONTROL, REPLY = 7, 8, 9, 10
# ADR 40: FILE (host: {op, path, ...}, answered by REPLY; a read, a tar or a write is then a stream),
# TUNNEL (host: {port}: a TCP connection to 127.0.0.1:port inside the sandbox, answered by REPLY, then
# a stream), and for streams both ways DATA (bytes), END (the end: {} or {error, message}, or a written
# file's {info}) and WINDOW (u32: bytes the receiver consumed, which the sender may send again).
FILE, TUNNEL, DATA, END, WINDOW = 11, 12, 13, 14, 15
# 2: the frames and EXEC fields of ADR 39 (stdin, pty, background; INPUT, RESIZE, CONTROL, REPLY).
# 3: files and tunnels (ADR 40).
# 4: a background process's output pushed to followers, and its stdin kept open (ADR 50): EXEC's
# keepStdin, CONTROL's follow (answered by REPLY, then STDOUT and STDERR chunks and END), input and
# closeStdin, and CANCEL of a follow; and directory watches (FILE {op: watch}: a stream of change
# events, ADR 51), and CANCEL of a stream.
PROTOCOL = 4
# Where files may be read and written: paths resolve (symlinks followed, in the sandbox) under it.
WORKSPACE = os.environ.get('BERTH_WORKSPACE', '/workspace')
# Bytes of a stream a side may send before the other's WINDOW: what either side buffers at most.
STREAM_WINDOW = 4 << 20
# A DATA frame's payload at most.
DATA_CHUNK = 1 << 18
# A directory listing's entries at most (the rest are counted, not listed).
MAX_LIST_ENTRIES = 5000
# Largest frame the host may send (an exec's argv and environment).
MAX_REQUEST = 1 << 20
# Between attempts to connect: from the first to the last, doubling.
RECONNECT_S = (0.005, 1.0)
# How long a send to the host may block the launcher before it drops the connection.
SEND_TIMEOUT_S = 10
# What the launcher keeps of each of a background process's stdout and stderr: the last bytes.
BACKGROUND_KEEP_BYTES = 1 << 20
# Ended background processes remembered (their outcome and output), the oldest forgotten first.
BACKGROUND_ENDED_KEPT = 64
# Runs of one stream (the order stdout and stderr came in) kept per background process; a follow
# from further back gets the older bytes stream by stream.
BACKGROUND_RUNS_KEPT = 4096
# Bytes of input a background process's stdin may hold that it has not read yet.
BACKGROUND_STDIN_PENDING = 4 << 20
# Terminal sizes a RESIZE may ask for.
MAX_TERMINAL_SIDE = 1000
# The egress relay (egress-relay.py, beside this file), started at the first connection to its
# loopback port (ADR 49): a sandbox that never makes one never pays for its start.
EGRESS_RELAY = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'egress-relay.py')
EGRESS_RELAY_NAME = 'berth-egress-relay'
EGRESS_PORT = int(os.environ.get('BERTH_EGRESS_PORT', '3128'))
# The descriptor under which the relay finds the listening socket it takes over.
EGRESS_LISTEN_FD = 3
# What an upload is written to beside its path before it is renamed over it (open_write); `-new`
# at its end when nothing was at the path. A watch tells the rename as the path's own change.
UPLOAD_PREFIX = '.berth-upload-'
# Directories one recursive watch follows at most (each is an inotify watch of the sandbox's kernel).
MAX_WATCHED_DIRS = 8192
# Spare interpreters (ADR 56): after an exec of `bash FILE` or `python3 -u FILE`, one process of that
# interpreter is started ahead of need, past its start-up, blocked on its descriptor 3 until the
# next such exec hands it FILE's path; that exec skips the interpreter's start (most of its cost in
# gVisor). The argv prefixes that have one, and how each spare is started: bash from a one-line
# script given with -c (a script file would be in the program's BASH_SOURCE), python from spare.py.
SPARE_PYTHON = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'spare.py').encode()
# SECONDS counts from the shell's start; BASH_EXECUTION_STRING would say this script.
SPARE_BASH = (b'IFS= read -r BERTH_SPARE_FILE <&3 || exit 0; exec 3<&-; BASH_ARGV0=$BERTH_SPARE_FILE; '
              b'unset BERTH_SPARE_FILE BASH_EXECUTION_STRING; SECONDS=0; . "$0"')
SPARES = {
    (b'bash',): [b'bash', b'-c', SPARE_BASH],
    (b'python3', b'-u'): [b'python3', b'-u', SPARE_PYTHON],
}
# The variable that turns spares off for an exec (in the sandbox's or the exec's environment): `0`.
SPARES_SETTING = b'BERTH_SPARE_INTERPRETERS'
# A spare taken sooner than this after its start was likely still starting: execs of its kind come
# faster than one spare is refilled (a tight loop), so two are kept, the next one started an exec
# earlier. A spare that waited longer than SPARE_IDLE_S brings its kind back to one.
SPARE_YOUNG_S = 0.1
SPARE_IDLE_S = 1.0
MAX_SPARES = 2


def outcome(status, stopped_with=None):
    """The record the client passes on: how the program ended, from its wait status.

    exited: it exited with exitCode. signaled: a signal ended it (exitCode 128 + signal, as a
    shell says). timedOut: the launcher stopped it at its limit, the last signal sent being
    `signal`. failed (see `failure`): the launcher could not run it.
    """
    code = os.waitstatus_to_exitcode(status)
    exit_code = code if code >= 0 else 128 - code
    if stopped_with is not None:
        return {'outcome': 'timedOut', 'signal': int(stopped_with), 'exitCode': exit_code}
    if code < 0:
        return {'outcome': 'signaled', 'signal': -code, 'exitCode': exit_code}
    return {'outcome': 'exited', 'exitCode': exit_code}


def failure(message):
    return {'outcome': 'failed', 'error': message}


def parse_request(line):
    """The client's output pipes, by descriptor number in the client."""
    fds = [int(fd) for fd in line.split()]
    if len(fds) != 2:
        raise ValueError(f'expected two descriptors, got {len(fds)}')
    return fds


def frame(exec_id, kind, payload=b''):
    return FRAME.pack(len(payload), exec_id, kind) + payload


def read_frames(buffer):
    """The whole frames at the start of `buffer` as (id, kind, payload), and the bytes left over."""
    frames = []
    offset = 0
    while len(buffer) - offset >= FRAME.size:
        length, exec_id, kind = FRAME.unpack_from(buffer, offset)
        if length > MAX_REQUEST:
            raise ValueError(f'a frame of {length} bytes')
        end = offset + FRAME.size + length
        if len(buffer) < end:
            break
        frames.append((exec_id, kind, bytes(buffer[offset + FRAME.size:end])))
        offset = end
    return frames, buffer[offset:]


def parse_exec(payload):
    """An EXEC frame's request: argv, env (under the sandbox's own), cwd, limit (s), output cap."""
    request = json.loads(payload)
    argv = request.get('argv')
    if not isinstance(argv, list) or not argv or not all(isinstance(arg, str) for arg in argv):
        raise ValueError('argv must be a non-empty list of strings')
    env = request.get('env', {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ValueError('env must map strings to strings')
    cwd = request.get('cwd', '/')
    limit_ms = request.get('limitMs')
    cap = request.get('maxOutputBytes')
    if not isinstance(cwd, str) or not (limit_ms is None or isinstance(limit_ms, int) and limit_ms > 0) or not (isinstance(cap, int) and cap >= 0):
        raise ValueError('cwd must be a string, limitMs a positive integer and maxOutputBytes a count')
    stdin = request.get('stdin')
    if stdin is not None and not isinstance(stdin, str):
        raise ValueError('stdin must be base64 text')
    terminal = request.get('pty')
    if terminal is not None:
        terminal = parse_size(terminal)
    background = request.get('background', False)
    if not isinstance(background, bool) or (background and terminal is not None):
        raise ValueError('background must be a boolean, and a terminal exec cannot be one')
    keep_stdin = request.get('keepStdin', False)
    if not isinstance(keep_stdin, bool) or (keep_stdin and not background):
        raise ValueError('keepStdin must be a boolean, and only a background exec keeps its stdin open')
    return {
        'argv': [arg.encode() for arg in argv],
        'env': {k.encode(): v.encode() for k, v in env.items()},
        'cwd': cwd,
        'limit': None if limit_ms is None else limit_ms / 1000,
        'cap': cap,
        'stdin': None if stdin is None else base64.b64decode(stdin, validate=True),
        'pty': terminal,
        'background': background,
        'keep_stdin': keep_stdin,
    }


def spare_key(request, env):
    """What a spare must have been started with to serve this exec, or None when none may: the
    argv's interpreter (a prefix of SPARES, then one absolute file), the whole environment (the
    interpreters read variables at their start: PYTHON*, LC_*, BASH_ENV, ...; equal in every one,
    none can differ) and the working directory. Never for a terminal, stdin, or a background exec."""
    argv = request['argv']
    prefix = tuple(argv[:-1])
    if (prefix not in SPARES or not argv[-1].startswith(b'/') or b'\n' in argv[-1] or request['pty'] is not None
            or request['stdin'] is not None or request['keep_stdin'] or request['background'] or env.get(SPARES_SETTING) == b'0'):
        return None
    return prefix, env, request['cwd']


def parse_size(value):
    """A terminal's size ({rows, cols}) as (rows, cols)."""
    if not isinstance(value, dict):
        raise ValueError('a terminal size is {rows, cols}')
    rows, cols = value.get('rows'), value.get('cols')
    if not all(isinstance(n, int) and 0 < n <= MAX_TERMINAL_SIDE for n in (rows, cols)):
        raise ValueError(f'rows and cols must be integers from 1 to {MAX_TERMINAL_SIDE}')
    return rows, cols


def set_size(fd, size):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', size[0], size[1], 0, 0))


def parse_control(payload):
    """A CONTROL frame's request: {op: list|largest}, {op: environment, env} or
    {op: signal|output|wait|kill|follow|input|closeStdin, pid, ...}."""
    request = json.loads(payload)
    op = request.get('op') if isinstance(request, dict) else None
    if op == 'environment':
        return parse_environment(request)
    if op not in ('list', 'signal', 'output', 'wait', 'largest', 'kill', 'follow', 'input', 'closeStdin'):
        raise ValueError(f'unknown op {op!r}')
    if op not in ('list', 'largest') and not isinstance(request.get('pid'), int):
        raise ValueError('pid must be an integer')
    if op == 'signal' and request.get('signal') not in SIGNALS:
        raise ValueError(f'signal must be one of {", ".join(sorted(SIGNALS))}')
    if op == 'wait' and not (isinstance(request.get('timeoutMs'), int) and request['timeoutMs'] >= 0):
        raise ValueError('timeoutMs must be a count of milliseconds')
    offsets = request.get('from')
    if op == 'follow' and offsets is not None and not (isinstance(offsets, list) and len(offsets) == 2
                                                        and all(isinstance(n, int) and n >= 0 for n in offsets)):
        raise ValueError('from must be [stdout offset, stderr offset] in bytes')
    if op == 'input':
        if not isinstance(request.get('data'), str):
            raise ValueError('data must be base64 text')
        request['data'] = base64.b64decode(request['data'], validate=True)
    return request


def parse_environment(request):
    """{op: environment, env}: variables for every program started from then on (ADR 53)."""
    env = request.get('env')
    if not isinstance(env, dict) or not all(isinstance(k, str) and k and '=' not in k and '\0' not in k and isinstance(v, str) and '\0' not in v
                                            for k, v in env.items()):
        raise ValueError('env must map variable names to strings')
    return request


def largest_program(proc='/proc', skip=()):
    """The program with the most resident memory, as the host's memory guard asks when the sandbox
    is out of memory (Linux's choice): {pid, command, residentBytes}, or None. Zombies and `skip`
    (the launcher) are left out; a process that ends meanwhile is passed over."""
    largest = None
    for name in os.listdir(proc):
        if not name.isdigit() or int(name) in skip:
            continue
        try:
            with open(f'{proc}/{name}/stat', 'rb') as file:
                stat = file.read().decode(errors='replace')
        except OSError:
            continue
        open_at, close_at = stat.find('('), stat.rfind(')')
        fields = stat[close_at + 2:].split()
        if open_at < 0 or close_at < open_at or len(fields) < 22 or fields[0] in ('Z', 'X'):
            continue
        resident = int(fields[21]) * PAGE_BYTES
        if largest is None or resident > largest['residentBytes']:
            largest = {'pid': int(name), 'command': stat[open_at + 1:close_at], 'residentBytes': resident}
    return largest


PAGE_BYTES = os.sysconf('SC_PAGE_SIZE')

# The signals a background process may be sent, by the names the API takes.
SIGNALS = {name: getattr(signal, 'SIG' + name) for name in ('TERM', 'KILL', 'INT', 'HUP', 'QUIT', 'USR1', 'USR2', 'STOP', 'CONT')}


class Ring:
    """One output pipe of a background process: the last `keep` bytes of it, and how many before them were dropped.

    `process` (the Background it belongs to) is told each chunk: it keeps the order of its streams
    and has the chunk sent to its followers.
    """

    def __init__(self, fd, kind, keep):
        self.fd, self.kind, self.keep, self.data, self.dropped = fd, kind, keep, bytearray(), 0
        self.process = None

    def total(self):
        """Bytes the stream printed so far (dropped or kept)."""
        return self.dropped + len(self.data)

    def take(self, data):
        """Keeps `data`; the (exec id, bytes) to send: the chunk to each follower."""
        start = self.total()
        self.data += data
        over = len(self.data) - self.keep
        if over > 0:
            del self.data[:over]
            self.dropped += over
        if self.process is None or not data:
            return []
        return self.process.took(self, start, data)

    def between(self, start, end):
        """The bytes from offset `start` to `end` that are still kept."""
        start = max(start, self.dropped)
        return bytes(self.data[start - self.dropped:max(start, end) - self.dropped])


class Input:
    """Bytes on their way to a program's stdin (a pipe, or a terminal), written as it takes them."""

    def __init__(self, fd, data=b'', close_after=False):
        self.fd, self.pending, self.close_after = fd, bytearray(data), close_after
        os.set_blocking(fd, False)


class Output:
    """One output pipe of a channel exec: what is forwarded, up to the cap, and what is dropped."""

    def __init__(self, exec_id, fd, kind, cap):
        self.exec_id, self.fd, self.kind, self.room, self.dropped = exec_id, fd, kind, cap, 0

    def take(self, data):
        """Counts `data`; the (exec id, bytes) to send: what fits under the cap."""
        part = data[:self.room]
        self.room -= len(part)
        self.dropped += len(data) - len(part)
        return [(self.exec_id, part)] if part else []


class Exec:
    def __init__(self, exec_id, pid, outputs, stdin=None, terminal=None, spare_key=None):
        self.id, self.pid, self.outputs, self.stdin, self.terminal = exec_id, pid, outputs, stdin, terminal
        # What a spare for the next exec of its kind is started with once it ends (spare_key).
        self.spare_key = spare_key


class Spare:
    """An interpreter started ahead of need: its pid (a session of its own), the pipe it waits on
    for a program's path, the read ends of its stdout and stderr, and what it was started with."""

    def __init__(self, key, pid, control, stdout, stderr):
        self.key, self.pid, self.control, self.stdout, self.stderr = key, pid, control, stdout, stderr
        self.started = time.monotonic()

    def close(self):
        for fd in (self.control, self.stdout, self.stderr):
            os.close(fd)


class Background:
    """A process started with `background`: it outlives the channel, and its output is kept here.

    `runs` is the order its output came in: [stream index (0 stdout, 1 stderr), start offset, end
    offset], a run per switch from one stream to the other. `followers` are the exec ids of the
    host's follows (CONTROL follow), each sent every chunk as it comes.
    """

    def __init__(self, pid, argv, outputs, stdin):
        self.pid, self.argv, self.outputs, self.stdin = pid, argv, outputs, stdin
        self.started_at = int(time.time() * 1000)
        self.result = None
        self.ended_at = None
        self.runs = []
        self.followers = []
        for ring in outputs:
            ring.process = self

    def took(self, ring, start, data):
        index = self.outputs.index(ring)
        if self.runs and self.runs[-1][0] == index:
            self.runs[-1][2] = start + len(data)
        else:
            self.runs.append([index, start, start + len(data)])
            if len(self.runs) > BACKGROUND_RUNS_KEPT:
                del self.runs[:len(self.runs) - BACKGROUND_RUNS_KEPT]
        return [(follower, data) for follower in self.followers]

    def since(self, offsets):
        """What each stream printed past `offsets` (bytes) and is still kept, as [(stream index, bytes)]
        in the order it came; bytes older than the runs kept come first, stream by stream."""
        first = [ring.total() for ring in self.outputs]
        for index, start, _ in reversed(self.runs):
            first[index] = start
        pieces = [(index, self.outputs[index].between(offsets[index], first[index])) for index in (0, 1)]
        pieces += [(index, self.outputs[index].between(max(start, offsets[index]), end)) for index, start, end in self.runs]
        return [(index, data) for index, data in pieces if data]

    def record(self):
        return {
            'pid': self.pid,
            'argv': [arg.decode(errors='replace') for arg in self.argv],
            'startedAt': self.started_at,
            'running': self.result is None,
            'endedAt': self.ended_at,
            'outcome': self.result,
        }


# Files and tunnels (ADR 40).

class FileError(Exception):
    """A file request refused: `code` is what the host answers with (outside, not_found, exists, ...)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message


# OSError numbers as the codes the host knows.
ERRNO_CODES = {
    errno.ENOENT: 'not_found', errno.EEXIST: 'exists', errno.ENOTDIR: 'not_directory', errno.EISDIR: 'is_directory',
    errno.ENOTEMPTY: 'not_empty', errno.ENOSPC: 'no_space', errno.EDQUOT: 'no_space', errno.EFBIG: 'no_space',
    errno.EACCES: 'forbidden', errno.EPERM: 'forbidden', errno.ELOOP: 'outside', errno.ENAMETOOLONG: 'bad_request',
}


def file_failure(error, path=None):
    """A REPLY or END payload for a failed file request."""
    if isinstance(error, FileError):
        return {'error': error.code, 'message': error.message}
    if isinstance(error, OSError):
        return {'error': ERRNO_CODES.get(error.errno, 'io_error'), 'message': f'{path}: {error.strerror or error}'}
    if isinstance(error, (ValueError, TypeError)):
        return {'error': 'bad_request', 'message': str(error)}
    # Any other failure (RecursionError in a deep tree's rmtree...) is answered all the same.
    return {'error': 'io_error', 'message': f'{type(error).__name__}: {error}'[:300]}


def confine(path, follow=True):
    """The real path of `path`, refused (outside) unless it is in WORKSPACE once symlinks are resolved.

    follow=False resolves the directory it is in but not its last part: the request is about a
    symlink itself (remove, move, mkdir), never about where it points.
    """
    if not isinstance(path, str) or not path.startswith('/') or '\0' in path:
        raise FileError('bad_request', 'path must be an absolute path')
    if follow:
        real = os.path.realpath(path)
    else:
        parent, name = os.path.split(os.path.normpath(path))
        real = os.path.join(os.path.realpath(parent), name) if name else os.path.realpath(parent)
    root = os.path.realpath(WORKSPACE)
    if real != root and not real.startswith(root + '/'):
        raise FileError('outside', f'{path} is outside {WORKSPACE} (symlinks resolved)')
    return real


def file_info(path):
    """What a listing says of one entry (the entry itself: a symlink is not followed)."""
    st = os.lstat(path)
    kind = ('directory' if stat.S_ISDIR(st.st_mode) else 'file' if stat.S_ISREG(st.st_mode)
            else 'symlink' if stat.S_ISLNK(st.st_mode) else 'other')
    info = {'name': os.path.basename(path), 'path': path, 'type': kind, 'size': st.st_size,
            'mode': stat.S_IMODE(st.st_mode), 'modifiedAt': int(st.st_mtime * 1000)}
    if kind == 'symlink':
        info['target'] = os.readlink(path)
    return info


def string_field(request, name):
    value = request.get(name)
    if not isinstance(value, str):
        raise FileError('bad_request', f'{name} must be a string')
    return value


def file_op(request):
    """The answer to a FILE request that is not a stream: stat, list, mkdir, remove, move."""
    op = request.get('op')
    path = string_field(request, 'path')
    if op == 'stat':
        return {'info': file_info(confine(path))}
    if op == 'list':
        real = confine(path)
        if not stat.S_ISDIR(os.stat(real).st_mode):
            raise FileError('not_directory', f'{path} is not a directory')
        names = sorted(os.listdir(real))
        entries = []
        for name in names[:MAX_LIST_ENTRIES]:
            try:
                entries.append(file_info(os.path.join(real, name)))
            except FileNotFoundError:  # gone while listed
                pass
        return {'entries': entries, 'omitted': max(0, len(names) - MAX_LIST_ENTRIES)}
    if op == 'mkdir':
        real = confine(path, follow=False)
        if request.get('parents'):
            make_directories(real)
        else:
            os.mkdir(real)
        return {'info': file_info(confine(real))}
    if op == 'remove':
        real = confine(path, follow=False)
        if real == os.path.realpath(WORKSPACE):
            raise FileError('bad_request', f'{WORKSPACE} itself cannot be removed')
        if os.path.isdir(real) and not os.path.islink(real):
            if request.get('recursive'):
                shutil.rmtree(real)
            else:
                os.rmdir(real)
        else:
            os.unlink(real)
        return {}
    if op == 'move':
        source, target = confine(path, follow=False), confine(string_field(request, 'to'), follow=False)
        if os.path.lexists(target) and not request.get('overwrite'):
            raise FileError('exists', f'{request["to"]} exists')
        os.replace(source, target)
        return {'info': file_info(target)}
    raise FileError('bad_request', f'unknown op {op!r}')


def make_directories(real):
    """`mkdir -p`: os.makedirs recurses once per missing directory, and a path of a few thousand
    short parts (a 4096-character path can hold 2048) would end it with RecursionError."""
    missing = []
    while not os.path.isdir(real):
        missing.append(real)
        real = os.path.dirname(real)
    for directory in reversed(missing):
        try:
            os.mkdir(directory)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise


class Stream:
    """A file read or written, a directory's tar, a tunnel, or a directory watch: bytes under windows both ways.

    `source` is read and sent as DATA while `credit` lasts (a WINDOW adds to it); `sink` takes the
    host's DATA. A regular file cannot be polled, so a file source is read whenever it has credit.
    """

    def __init__(self, stream_id, kind):
        self.id, self.kind = stream_id, kind
        self.source = self.sink = None
        self.pollable = True
        self.credit = STREAM_WINDOW
        self.pending = bytearray()
        # Bytes of the host's DATA consumed and not yet told in a WINDOW.
        self.consumed = 0
        self.source_ended = self.sink_ended = False
        self.connecting = False
        self.process = None
        self.exit_status = None
        self.target = self.temp = None
        # A watch's DirectoryWatch (its source is the watch's inotify descriptor).
        self.watch = None


def parse_window(payload):
    return struct.unpack('>I', payload)[0] if len(payload) == 4 else 0


# Directory watches (ADR 51): inotify through libc, which Python's standard library does not wrap.
IN_MODIFY, IN_ATTRIB, IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x2, 0x4, 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_Q_OVERFLOW, IN_IGNORED, IN_ISDIR = 0x400, 0x800, 0x4000, 0x8000, 0x40000000
IN_ONLYDIR, IN_DONT_FOLLOW, IN_EXCL_UNLINK = 0x01000000, 0x02000000, 0x04000000
WATCH_MASK = IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
# struct inotify_event: wd, mask, cookie, len, then len bytes of NUL-padded name.
INOTIFY_EVENT = struct.Struct('=iIII')
# What each change is told as, by envd's names (fsnotify's): a rename is its old name's `rename`
# and its new name's `create`.
WATCH_EVENTS = ((IN_CREATE | IN_MOVED_TO, 'create'), (IN_MODIFY, 'write'), (IN_DELETE, 'remove'), (IN_MOVED_FROM, 'rename'), (IN_ATTRIB, 'chmod'))

_libc = []


def libc():
    """libc, for inotify; loaded at the first watch, so a launcher that never watches never needs ctypes."""
    if not _libc:
        library = ctypes.CDLL(None, use_errno=True)
        library.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        _libc.append(library)
    return _libc[0]


def checked(result, path):
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number), path)
    return result


class DirectoryWatch:
    """A directory's changes through inotify: `read` answers them as {name, type}, names relative to it.

    Recursive, each directory under it is watched too, a new one as it appears; what was made in a
    new directory before its watch was added is told as created. The launcher's upload files are not
    told: an upload's rename into place is its path's `write` (after its `create` when it is new).
    """

    def __init__(self, root, recursive):
        self.root, self.recursive = root, recursive
        self.fd = checked(libc().inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC), root)
        # watch descriptor -> the directory it watches, relative to root ('' for root itself).
        self.dirs = {}
        # The cookie of an upload's move (its MOVED_FROM) -> whether its path was new.
        self.uploads = {}
        try:
            self.root_wd = self.add('')
            if recursive:
                self.follow_below('', None)
        except BaseException:
            os.close(self.fd)
            raise

    def add(self, relative):
        if len(self.dirs) >= MAX_WATCHED_DIRS:
            raise FileError('no_space', f'more than {MAX_WATCHED_DIRS} directories under {self.root}: watch a smaller tree')
        path = os.path.join(self.root, relative)
        wd = checked(libc().inotify_add_watch(self.fd, os.fsencode(path), WATCH_MASK | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK), path)
        self.dirs[wd] = relative
        return wd

    def follow_below(self, relative, told):
        """Watches the directories under `relative`; with `told`, appends what is in them to it as created."""
        pending = [relative]
        while pending:
            directory = pending.pop()
            try:
                entries = list(os.scandir(os.path.join(self.root, directory)))
            except OSError:  # gone meanwhile
                continue
            for entry in entries:
                name = os.path.join(directory, entry.name)
                if entry.name.startswith(UPLOAD_PREFIX):
                    continue
                if told is not None:
                    told.append({'name': name, 'type': 'create'})
                try:
                    if entry.is_dir(follow_symlinks=False):
                        self.add(name)
                        pending.append(name)
                except FileNotFoundError:
                    pass

    def forget(self, relative):
        """Stops watching `relative` and what is under it (removed, or moved: by another name now)."""
        for wd, where in list(self.dirs.items()):
            if where == relative or where.startswith(relative + '/'):
                del self.dirs[wd]
                libc().inotify_rm_watch(self.fd, wd)

    def read(self):
        """The changes inotify holds now, and whether the watched directory itself is gone (or moved)."""
        try:
            data = os.read(self.fd, 65536)
        except (BlockingIOError, InterruptedError):
            return [], False
        events, ended, offset = [], False, 0
        while offset + INOTIFY_EVENT.size <= len(data):
            wd, mask, cookie, length = INOTIFY_EVENT.unpack_from(data, offset)
            raw = data[offset + INOTIFY_EVENT.size:offset + INOTIFY_EVENT.size + length].rstrip(b'\0')
            offset += INOTIFY_EVENT.size + length
            if mask & IN_Q_OVERFLOW:
                raise FileError('io_error', f'changes under {self.root} were lost: more came than the sandbox queues')
            if wd == self.root_wd and mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED):
                ended = True
                continue
            where = self.dirs.get(wd)
            if mask & IN_IGNORED:
                self.dirs.pop(wd, None)
            # A directory's own removal or move is told by its parent's watch, by name.
            if where is None or not raw:
                continue
            self.interpret(mask, cookie, os.path.join(where, os.fsdecode(raw)), events)
        return events, ended

    def interpret(self, mask, cookie, name, events):
        base = os.path.basename(name)
        if base.startswith(UPLOAD_PREFIX):
            if mask & IN_MOVED_FROM:
                if len(self.uploads) > 64:  # moves whose other half never came here
                    self.uploads.clear()
                self.uploads[cookie] = base.endswith('-new')
            return
        if mask & IN_MOVED_TO and cookie in self.uploads:
            if self.uploads.pop(cookie):
                events.append({'name': name, 'type': 'create'})
            events.append({'name': name, 'type': 'write'})
            return
        events.extend({'name': name, 'type': kind} for bit, kind in WATCH_EVENTS if mask & bit)
        if self.recursive and mask & IN_ISDIR:
            if mask & (IN_MOVED_FROM | IN_DELETE):
                self.forget(name)
            if mask & (IN_CREATE | IN_MOVED_TO):
                try:
                    self.add(name)
                except (OSError, FileError) as error:  # gone meanwhile, or too many: not followed
                    log(f'a watch of {self.root} does not follow {name}: {error}')
                    return
                # A new directory's entries may have come before its watch; a moved one's are not news.
                self.follow_below(name, events if mask & IN_CREATE else None)


def strings(path):
    with open(path, 'rb') as file:
        return file.read().split(b'\0')[:-1]


def egress_listener():
    """The relay's loopback port, listened on until its first connection starts the relay."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(('127.0.0.1', EGRESS_PORT))
    listener.listen(128)
    return listener


class Launcher:
    def __init__(self, server, egress=None):
        self.server = server
        self.wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.selector = selectors.DefaultSelector()
        self.selector.register(server, selectors.EVENT_READ)
        self.selector.register(self.wake_read, selectors.EVENT_READ)
        self.clients = {}
        # program pid -> [when (monotonic), signal to send then]: the limits of execs that have one.
        self.deadlines = {}
        # program pid -> the last signal sent to it at its limit.
        self.stopped = {}
        # The channel: its connection, the bytes of a frame not whole yet, its execs by program
        # pid and by id, and when to try connecting next.
        self.channel = None
        self.received = b''
        self.execs = {}
        self.exec_ids = {}
        # Background processes by pid (running and recently ended), and the channel's WAITs on them:
        # [when to answer anyway (monotonic), exec id, pid].
        self.background = {}
        self.waiters = []
        # The host's follows of background processes: exec id -> the process.
        self.followed = {}
        # File and tunnel streams by id, and the tar processes of streams by pid.
        self.streams = {}
        self.stream_pids = {}
        self.reconnect_at = time.monotonic()
        self.reconnect_wait = RECONNECT_S[0]
        # Spare interpreters by argv prefix (ADR 56), oldest first, all started alike: one for each
        # prefix that was execed, two while its execs come faster than a spare starts (spare_depth).
        self.spares = {}
        self.spare_depth = {}
        # The egress relay's port while no relay has taken it (start_egress_relay).
        self.egress = egress
        self.egress_relay = None
        if egress is not None:
            self.selector.register(egress, selectors.EVENT_READ, 'egress')

    def request(self, conn):
        line = b''
        while not line.endswith(b'\n'):
            chunk = conn.recv(64)
            if not chunk:
                raise ValueError('the client went away')
            line += chunk
        return parse_request(line)

    def start(self, argv, env, cwd, stdio, limit):
        """Starts argv in a session of its own; None (with a shell's message on its stderr) if it cannot."""
        try:
            os.chdir(cwd)
            pid = os.posix_spawnp(argv[0], argv, env, setsid=True, setsigdef=DEFAULTS,
                                  file_actions=[(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate(stdio)])
            if limit is not None:
                self.deadlines[pid] = [time.monotonic() + limit, signal.SIGTERM]
            return pid
        except OSError as error:
            # What a shell would say, where the program's own errors go.
            os.write(stdio[2], argv[0] + b': ' + (error.strerror or str(error)).encode() + b'\n')
            return None
        finally:
            os.chdir('/')

    def spawn(self, client, outputs):
        args = strings(f'/proc/{client}/cmdline')
        argv = args[args.index(b'--') + 1:]
        if not argv:
            raise ValueError('no program after --')
        # The sandbox's own environment (its secrets among it, given to PID 1 by the OCI spec,
        # never on a command line), under what the exec asked for.
        env = dict(os.environb)
        env.update(entry.split(b'=', 1) for entry in strings(f'/proc/{client}/environ') if b'=' in entry)
        # The exec's time limit, for the launcher: the program does not see it.
        limit = env.pop(b'BERTH_EXEC_LIMIT_MS', None)
        limit = int(limit) / 1000 if limit else None
        env.pop(b'BERTH_LAUNCHER_SOCKET', None)
        stdio = [os.open('/dev/null', os.O_RDONLY)] + [os.open(f'/proc/{client}/fd/{fd}', os.O_WRONLY) for fd in outputs]
        try:
            return self.start(argv, env, os.readlink(f'/proc/{client}/cwd'), stdio, limit)
        finally:
            for fd in stdio:
                os.close(fd)

    def answer(self, conn, record):
        try:
            conn.sendall(json.dumps(record).encode() + b'\n')
        except OSError:
            pass
        conn.close()

    def accept(self):
        conn, _ = self.server.accept()
        conn.settimeout(5)
        client = struct.unpack('3i', conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
        try:
            program = self.spawn(client, self.request(conn))
        except Exception as error:
            return self.answer(conn, failure(str(error)))
        if program is None:
            return self.answer(conn, {'outcome': 'exited', 'exitCode': NOT_STARTED})
        conn.sendall(b'started\n')
        self.clients[conn] = program
        self.selector.register(conn, selectors.EVENT_READ, program)

    def reap(self):
        os.read(self.wake_read, 4096)
        finished = {}
        statuses = {}
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            statuses[pid] = status
            if pid == self.egress_relay:
                self.egress_relay_ended(status)
            finished[pid] = outcome(status, self.stopped.pop(pid, None))
            self.deadlines.pop(pid, None)
        for conn, program in list(self.clients.items()):
            if program in finished:
                self.selector.unregister(conn)
                del self.clients[conn]
                self.answer(conn, finished[program])
        for spares in self.spares.values():
            for spare in [spare for spare in spares if spare.pid in finished]:
                spares.remove(spare)  # killed before any exec took it: the next fitting exec starts cold
                spare.close()
        for pid, record in finished.items():
            if pid in self.execs:
                self.finish(self.execs[pid], record)
            elif pid in self.background:
                self.end_background(self.background[pid], record)
        for pid, status in statuses.items():
            stream = self.stream_pids.pop(pid, None)
            if stream is not None:
                stream.exit_status = status
                if stream.id in self.streams:
                    self.end_tar(stream)

    def enforce_limits(self):
        # Over its limit: the program's whole process group gets TERM, and KILL two seconds later.
        now = time.monotonic()
        for pid, limit in list(self.deadlines.items()):
            if now < limit[0]:
                continue
            self.stopped[pid] = limit[1]
            try:
                os.killpg(pid, limit[1])
            except OSError:
                pass
            if limit[1] == signal.SIGTERM:
                self.deadlines[pid] = [now + KILL_AFTER_S, signal.SIGKILL]
            else:
                del self.deadlines[pid]

    def hang_up(self, conn, program):
        # The client went away (the host gave up on it): its program goes too.
        self.selector.unregister(conn)
        del self.clients[conn]
        conn.close()
        try:
            os.killpg(program, signal.SIGKILL)
        except OSError:
            pass

    # The channel.

    def connect(self):
        """One attempt to connect to the host; the next is due later and later while they fail."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(CHANNEL)
        except OSError:
            conn.close()
            self.reconnect_at = time.monotonic() + self.reconnect_wait
            self.reconnect_wait = min(self.reconnect_wait * 2, RECONNECT_S[1])
            return
        conn.settimeout(SEND_TIMEOUT_S)
        self.channel, self.received, self.reconnect_wait = conn, b'', RECONNECT_S[0]
        self.selector.register(conn, selectors.EVENT_READ, 'channel')
        self.send(0, HELLO, json.dumps({'protocol': PROTOCOL, 'pid': os.getpid()}).encode())

    def disconnect(self):
        # The host's end is gone: it gave up on the channel's programs, and they go too.
        if self.channel is None:
            return
        self.selector.unregister(self.channel)
        self.channel.close()
        self.channel = None
        self.reconnect_at = time.monotonic()
        for running in list(self.execs.values()):
            self.kill(running.pid)
            self.close_outputs(running)
            self.close_input(running.stdin)
        self.execs.clear()
        self.exec_ids.clear()
        # Background processes stay (they outlive the channel, and a checkpoint); their waiters and followers do not.
        self.waiters.clear()
        for follower in list(self.followed):
            self.unfollow(follower)
        # Streams go: an upload not finished leaves nothing behind.
        for stream in list(self.streams.values()):
            self.drop_stream(stream)

    def send(self, exec_id, kind, payload=b''):
        if self.channel is None:
            return
        try:
            self.channel.sendall(frame(exec_id, kind, payload))
        except OSError as error:
            log(f'the channel failed: {error!r}')
            self.disconnect()

    def receive(self):
        try:
            data = self.channel.recv(262144)
        except OSError:
            data = b''
        if not data:
            return self.disconnect()
        try:
            frames, self.received = read_frames(self.received + data)
        except ValueError as error:
            log(f'the channel sent {error}')
            return self.disconnect()
        for exec_id, kind, payload in frames:
            if kind == EXEC:
                self.channel_exec(exec_id, payload)
            elif kind == CANCEL and exec_id in self.exec_ids:
                self.kill(self.exec_ids[exec_id].pid)
            elif kind == CANCEL and exec_id in self.streams:  # pod-channel.py's, for a client gone
                self.drop_stream(self.streams[exec_id])
            elif kind == CANCEL:  # a follow's
                self.unfollow(exec_id)
            elif kind == INPUT and exec_id in self.exec_ids:
                self.input(self.exec_ids[exec_id], payload)
            elif kind == RESIZE and exec_id in self.exec_ids:
                self.resize(self.exec_ids[exec_id], payload)
            elif kind == CONTROL:
                self.control(exec_id, payload)
            elif kind == FILE:
                self.file_request(exec_id, payload)
            elif kind == TUNNEL:
                self.tunnel(exec_id, payload)
            elif kind == DATA:
                self.stream_data(exec_id, payload)
            elif kind == END:
                self.stream_end(exec_id, payload)
            elif kind == WINDOW:
                self.stream_window(exec_id, payload)

    def channel_exec(self, exec_id, payload):
        if exec_id in self.exec_ids:
            return self.send(exec_id, OUTCOME, json.dumps(failure(f'exec {exec_id} is running already')).encode())
        try:
            request = parse_exec(payload)
        except (ValueError, TypeError) as error:
            return self.send(exec_id, OUTCOME, json.dumps(failure(f'a bad exec request: {error}')).encode())
        env = dict(os.environb)
        env.update(request['env'])
        if request['pty'] is not None:
            return self.terminal_exec(exec_id, request, env)
        key = spare_key(request, env)
        spare = None if key is None else self.take_spare(key, request['argv'][-1])
        if spare is not None:
            pid, out_read, err_read, stdin_write = spare.pid, spare.stdout, spare.stderr, None
            if request['limit'] is not None:
                self.deadlines[pid] = [time.monotonic() + request['limit'], signal.SIGTERM]
        else:
            out_read, out_write = os.pipe()
            err_read, err_write = os.pipe()
            if request['stdin'] is None and not request['keep_stdin']:
                stdin, stdin_write = os.open('/dev/null', os.O_RDONLY), None
            else:
                stdin, stdin_write = os.pipe()
            try:
                pid = self.start(request['argv'], env, request['cwd'], [stdin, out_write, err_write], request['limit'])
            finally:
                for fd in (stdin, out_write, err_write):
                    os.close(fd)
        feed = None if stdin_write is None else Input(stdin_write, request['stdin'] or b'', close_after=not request['keep_stdin'])
        if request['background']:
            outputs = [Ring(out_read, STDOUT, BACKGROUND_KEEP_BYTES), Ring(err_read, STDERR, BACKGROUND_KEEP_BYTES)]
        else:
            outputs = [Output(exec_id, out_read, STDOUT, request['cap']), Output(exec_id, err_read, STDERR, request['cap'])]
        if pid is None:
            self.close_input(feed)
            return self.finish(Exec(exec_id, None, outputs), {'outcome': 'exited', 'exitCode': NOT_STARTED})
        for output in outputs:
            os.set_blocking(output.fd, False)
            self.selector.register(output.fd, selectors.EVENT_READ, output)
        if request['background']:
            process = Background(pid, request['argv'], outputs, feed)
            self.background[pid] = process
            self.send(exec_id, REPLY, json.dumps(process.record()).encode())
        else:
            running = Exec(exec_id, pid, outputs, feed, spare_key=key)
            self.execs[pid] = running
            self.exec_ids[exec_id] = running
        if feed is not None:
            self.write_input(feed)

    # Spare interpreters (ADR 56).

    def take_spare(self, key, path):
        """The spare for `key`, handed the program at `path`, or None: none was started, it was
        started for another environment or directory, or it died (its pipe is broken then)."""
        spares = self.spares.get(key[0])
        if not spares or spares[0].key != key:
            return None
        spare = spares.pop(0)
        waited = time.monotonic() - spare.started
        if waited < SPARE_YOUNG_S:
            self.spare_depth[key[0]] = MAX_SPARES
        elif waited > SPARE_IDLE_S:
            self.spare_depth[key[0]] = 1
        try:
            os.write(spare.control, path + b'\n')
        except OSError:
            self.discard_spare(spare)
            return None
        os.close(spare.control)
        return spare

    def start_spare(self, key):
        """After an exec that fits a spare: spares like it are started for the next execs, up to its
        kind's depth; spares started alike for another environment or directory are ended."""
        prefix = key[0]
        spares = self.spares.setdefault(prefix, [])
        if spares and spares[0].key != key:
            for spare in spares:
                self.discard_spare(spare)
            spares.clear()
        while len(spares) < self.spare_depth.get(prefix, 1):
            spare = self.spawn_spare(key)
            if spare is None:
                return
            spares.append(spare)

    def spawn_spare(self, key):
        prefix, env, cwd = key
        control, control_write = os.pipe()
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        stdin = os.open('/dev/null', os.O_RDONLY)
        try:
            os.chdir(cwd)
            argv = SPARES[prefix]
            pid = os.posix_spawnp(argv[0], argv, env, setsid=True, setsigdef=DEFAULTS,
                                  file_actions=[(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate((stdin, out_write, err_write, control))])
        except OSError as error:
            log(f'no spare {prefix[0].decode()}: {error!r}')
            for fd in (control_write, out_read, err_read):
                os.close(fd)
            return None
        finally:
            os.chdir('/')
            for fd in (stdin, out_write, err_write, control):
                os.close(fd)
        return Spare(key, pid, control_write, out_read, err_read)

    def discard_spare(self, spare):
        self.kill(spare.pid)
        spare.close()

    def discard_spares(self):
        for spares in self.spares.values():
            for spare in spares:
                self.discard_spare(spare)
        self.spares.clear()

    def terminal_exec(self, exec_id, request, env):
        """Starts argv on a terminal of its own (a pty): its output comes as STDOUT, INPUT goes to it."""
        master, slave = os.openpty()
        set_size(slave, request['pty'])
        env.setdefault(b'TERM', b'xterm-256color')
        pid = os.fork()
        if pid == 0:  # the child: the terminal becomes its controlling one, in a session of its own
            try:
                os.close(master)
                signal.set_wakeup_fd(-1)
                for number in DEFAULTS + [signal.SIGCHLD]:
                    signal.signal(number, signal.SIG_DFL)
                os.login_tty(slave)
                os.chdir(request['cwd'])
                os.execvpe(request['argv'][0], request['argv'], env)
            except BaseException as error:
                os.write(2, request['argv'][0] + b': ' + str(error).encode() + b'\n')
            os._exit(NOT_STARTED)
        os.close(slave)
        os.set_blocking(master, False)
        output = Output(exec_id, master, STDOUT, request['cap'])
        running = Exec(exec_id, pid, [output], Input(os.dup(master)), terminal=master)
        self.execs[pid] = running
        self.exec_ids[exec_id] = running
        self.selector.register(master, selectors.EVENT_READ, output)
        if request['limit'] is not None:
            self.deadlines[pid] = [time.monotonic() + request['limit'], signal.SIGTERM]

    def input(self, running, payload):
        # An empty INPUT is the end of input: a pipe is closed (a terminal's input ends with ^D, as typed).
        feed = running.stdin
        if feed is None or feed.fd is None:
            return
        if payload:
            feed.pending += payload
        elif running.terminal is None:
            feed.close_after = True
        self.write_input(feed)

    def write_input(self, feed):
        """Writes what the program takes now; the rest when its pipe has room (EVENT_WRITE)."""
        try:
            while feed.pending:
                del feed.pending[:os.write(feed.fd, feed.pending)]
        except BlockingIOError:
            pass
        except OSError:  # the program closed its input
            feed.pending.clear()
            feed.close_after = True
        waiting = feed.fd in self.selector.get_map()
        if feed.pending and not waiting:
            self.selector.register(feed.fd, selectors.EVENT_WRITE, feed)
        elif not feed.pending:
            if waiting:
                self.selector.unregister(feed.fd)
            if feed.close_after:
                self.close_input(feed)

    def close_input(self, feed):
        if feed is None or feed.fd is None:
            return
        if feed.fd in self.selector.get_map():
            self.selector.unregister(feed.fd)
        os.close(feed.fd)
        feed.fd = None

    def resize(self, running, payload):
        if running.terminal is None:
            return
        try:
            set_size(running.terminal, parse_size(json.loads(payload)))
            os.killpg(running.pid, signal.SIGWINCH)
        except (ValueError, TypeError, OSError) as error:
            log(f'a bad resize: {error}')

    # Files and tunnels (ADR 40).

    def file_request(self, stream_id, payload):
        request = {}
        try:
            request = json.loads(payload)
            if not isinstance(request, dict):
                raise FileError('bad_request', 'a file request is a JSON object')
            op = request.get('op')
            if op == 'read':
                return self.open_read(stream_id, request)
            if op == 'tar':
                return self.open_tar(stream_id, request)
            if op == 'write':
                return self.open_write(stream_id, request)
            if op == 'watch':
                return self.open_watch(stream_id, request)
            self.reply(stream_id, file_op(request))
        except Exception as error:
            if not isinstance(error, (FileError, OSError, ValueError, TypeError)):
                log(f'a file request failed: {error!r}')
            self.reply(stream_id, file_failure(error, request.get('path') if isinstance(request, dict) else None))

    def add_stream(self, stream):
        if stream.id in self.streams:
            raise FileError('bad_request', f'stream {stream.id} is open already')
        self.streams[stream.id] = stream
        return stream

    def open_read(self, stream_id, request):
        real = confine(string_field(request, 'path'))
        if os.path.isdir(real):
            raise FileError('is_directory', f'{request["path"]} is a directory (ask for its tar)')
        fd = os.open(real, os.O_RDONLY)
        stream = self.add_stream(Stream(stream_id, 'read'))
        stream.source, stream.pollable, stream.sink_ended = fd, False, True
        self.reply(stream_id, {'info': file_info(real)})

    def open_tar(self, stream_id, request):
        real = confine(string_field(request, 'path'))
        if not stat.S_ISDIR(os.stat(real).st_mode):
            raise FileError('not_directory', f'{request["path"]} is not a directory')
        out_read, out_write = os.pipe()
        null = os.open('/dev/null', os.O_RDWR)
        try:
            # A file that goes away while the tar is made (an upload renamed into place, a program's
            # temporary file) is left out, not the end of the archive.
            pid = os.posix_spawnp('tar', [b'tar', b'-c', b'-f', b'-', b'--ignore-failed-read', b'-C', real.encode(), b'.'], dict(os.environb), setsid=True,
                                  setsigdef=DEFAULTS, file_actions=[(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate((null, out_write, null))])
        except OSError:
            os.close(out_read)
            raise
        finally:
            os.close(out_write)
            os.close(null)
        stream = self.add_stream(Stream(stream_id, 'tar'))
        stream.source, stream.process, stream.sink_ended = out_read, pid, True
        os.set_blocking(out_read, False)
        self.stream_pids[pid] = stream
        self.update_stream(stream)
        self.reply(stream_id, {'info': file_info(real)})

    def open_write(self, stream_id, request):
        real = confine(string_field(request, 'path'))
        if os.path.isdir(real):
            raise FileError('is_directory', f'{request["path"]} is a directory')
        mode = request.get('mode', 0o644)
        if not isinstance(mode, int) or not 0 <= mode <= 0o7777:
            raise FileError('bad_request', 'mode must be a permission number from 0 to 0o7777')
        parent = os.path.dirname(real)
        if request.get('parents'):
            os.makedirs(parent, exist_ok=True)
        # Written beside the target and renamed over it at the end: nothing half-written is ever seen there.
        temp = os.path.join(parent, f'{UPLOAD_PREFIX}{os.getpid()}-{stream_id}{"" if os.path.lexists(real) else "-new"}')
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        os.fchmod(fd, mode)
        stream = self.add_stream(Stream(stream_id, 'write'))
        stream.sink, stream.target, stream.temp, stream.source_ended = fd, real, temp, True
        self.reply(stream_id, {'ready': True})

    def open_watch(self, stream_id, request):
        """A directory's changes as a stream: JSON lines {name, type} as DATA while the host gives room."""
        real = confine(string_field(request, 'path'))
        recursive = request.get('recursive', False)
        if not isinstance(recursive, bool):
            raise FileError('bad_request', 'recursive must be a boolean')
        if not stat.S_ISDIR(os.stat(real).st_mode):
            raise FileError('not_directory', f'{request["path"]} is not a directory')
        if stream_id in self.streams:
            raise FileError('bad_request', f'stream {stream_id} is open already')
        watch = DirectoryWatch(real, recursive)
        stream = self.add_stream(Stream(stream_id, 'watch'))
        stream.source, stream.watch, stream.sink_ended = watch.fd, watch, True
        self.reply(stream_id, {'info': file_info(real)})
        self.update_stream(stream)

    def pump_watch(self, stream):
        """Sends the changes the watch holds; its END once the watched directory itself went."""
        try:
            events, ended = stream.watch.read()
        except (FileError, OSError) as error:
            return self.fail_stream(stream, file_failure(error, stream.watch.root))
        chunk = b''
        for event in events:
            chunk += json.dumps(event).encode() + b'\n'
            if len(chunk) >= DATA_CHUNK:
                self.send(stream.id, DATA, chunk)
                stream.credit, chunk = stream.credit - len(chunk), b''
        if chunk:
            self.send(stream.id, DATA, chunk)
            stream.credit -= len(chunk)
        if ended and stream.id in self.streams:
            self.fail_stream(stream, {'error': 'not_found', 'message': f'{stream.watch.root} was removed or moved: its watch ended'})

    def tunnel(self, stream_id, payload):
        try:
            request = json.loads(payload)
            port = request.get('port') if isinstance(request, dict) else None
            if not isinstance(port, int) or not 0 < port < 65536:
                raise FileError('bad_request', 'port must be from 1 to 65535')
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            stream = self.add_stream(Stream(stream_id, 'tunnel'))
            stream.source = stream.sink = sock
            stream.port = port
            result = sock.connect_ex(('127.0.0.1', port))
            if result in (errno.EINPROGRESS, errno.EAGAIN):
                stream.connecting = True
                self.update_stream(stream)
            else:
                self.connected(stream, result)
        except (FileError, OSError, ValueError, TypeError) as error:
            self.reply(stream_id, file_failure(error))

    def connected(self, stream, result):
        stream.connecting = False
        if result != 0:
            self.drop_stream(stream)
            return self.reply(stream.id, {'error': 'refused', 'message': f'nothing accepts connections on port {stream.port} in the sandbox: {os.strerror(result)}'})
        self.reply(stream.id, {'connected': True})
        self.update_stream(stream)

    def update_stream(self, stream):
        """Polls a stream's socket or pipe for what it can do now: read while it has credit, write what waits."""
        if stream.source is None and stream.sink is None:
            return
        fd = stream.source if stream.pollable and stream.source is not None else stream.sink
        if fd is None or (stream.kind in ('read', 'write')):
            return
        events = 0
        if stream.connecting or stream.pending:
            events |= selectors.EVENT_WRITE
        if not stream.connecting and not stream.source_ended and stream.credit > 0:
            events |= selectors.EVENT_READ
        registered = fd in self.selector.get_map()
        if events and registered:
            self.selector.modify(fd, events, stream)
        elif events:
            self.selector.register(fd, events, stream)
        elif registered:
            self.selector.unregister(fd)

    def stream_event(self, stream, mask):
        sock = stream.sink if stream.kind == 'tunnel' else None
        if stream.connecting:
            return self.connected(stream, sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
        if mask & selectors.EVENT_WRITE:
            self.flush_sink(stream)
        if stream.id in self.streams and mask & selectors.EVENT_READ:
            self.pump(stream)
        if stream.id in self.streams:
            self.update_stream(stream)

    def pump(self, stream):
        """Sends what the source holds now, as the credit allows; END once it is done."""
        if stream.kind == 'watch':
            return self.pump_watch(stream)
        try:
            if stream.kind == 'tunnel':
                data = stream.source.recv(min(stream.credit, DATA_CHUNK))
            else:
                data = os.read(stream.source, min(stream.credit, DATA_CHUNK))
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            return self.fail_stream(stream, file_failure(error, stream.kind))
        if data:
            stream.credit -= len(data)
            return self.send(stream.id, DATA, data)
        stream.source_ended = True
        if stream.kind == 'tunnel':
            self.send(stream.id, END, b'{}')
            if stream.sink_ended and not stream.pending:
                self.drop_stream(stream)
        elif stream.kind == 'read':
            self.send(stream.id, END, b'{}')
            self.drop_stream(stream)
        else:  # tar: its end is told once it exited too
            self.end_tar(stream)

    def end_tar(self, stream):
        if not stream.source_ended or stream.exit_status is None:
            return
        code = os.waitstatus_to_exitcode(stream.exit_status)
        # 1: a file changed while it was read (a program still writing it); the archive is whole.
        self.send(stream.id, END, json.dumps({} if code in (0, 1) else {'error': 'io_error', 'message': f'tar ended with {code}'}).encode())
        self.drop_stream(stream)

    def pump_files(self):
        for stream in [s for s in self.streams.values() if s.kind == 'read' and s.credit > 0]:
            self.pump(stream)

    def stream_data(self, stream_id, payload):
        stream = self.streams.get(stream_id)
        if stream is None or stream.sink is None or stream.sink_ended:
            return
        stream.pending += payload
        self.flush_sink(stream)
        if stream.id in self.streams:
            self.update_stream(stream)

    def flush_sink(self, stream):
        """Writes what waits for the sink (all of it for a file), and gives the host its room back."""
        written = 0
        try:
            while stream.pending:
                if stream.kind == 'tunnel':
                    count = stream.sink.send(stream.pending)
                else:
                    count = os.write(stream.sink, stream.pending)
                del stream.pending[:count]
                written += count
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as error:
            return self.fail_stream(stream, file_failure(error, stream.target or 'the tunnel'))
        stream.consumed += written
        if stream.consumed >= STREAM_WINDOW // 4 or (stream.consumed and not stream.pending):
            self.send(stream.id, WINDOW, struct.pack('>I', stream.consumed))
            stream.consumed = 0
        if not stream.pending and stream.sink_ended and stream.kind == 'tunnel':
            self.half_close(stream)

    def stream_end(self, stream_id, payload):
        stream = self.streams.get(stream_id)
        if stream is None:
            return
        try:
            ended = json.loads(payload) if payload else {}
        except ValueError:
            ended = {'error': 'bad_request'}
        if not isinstance(ended, dict) or ended.get('error'):  # the host gave up on it
            return self.drop_stream(stream)
        stream.sink_ended = True
        if stream.kind == 'write':
            self.finish_write(stream)
        elif stream.kind == 'tunnel' and not stream.pending:
            self.half_close(stream)

    def half_close(self, stream):
        try:
            stream.sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        if stream.source_ended:
            self.drop_stream(stream)

    def finish_write(self, stream):
        try:
            os.close(stream.sink)
            stream.sink = None
            os.replace(stream.temp, stream.target)
            stream.temp = None
            info = file_info(stream.target)
        except OSError as error:
            return self.fail_stream(stream, file_failure(error, stream.target))
        self.send(stream.id, END, json.dumps({'info': info}).encode())
        self.drop_stream(stream)

    def stream_window(self, stream_id, payload):
        stream = self.streams.get(stream_id)
        if stream is not None:
            stream.credit += parse_window(payload)
            self.update_stream(stream)

    def fail_stream(self, stream, record):
        self.send(stream.id, END, json.dumps(record).encode())
        self.drop_stream(stream)

    def drop_stream(self, stream):
        """Closes what the stream holds; a write not finished leaves nothing behind, a tar not finished is killed."""
        self.streams.pop(stream.id, None)
        for fd in {stream.source, stream.sink} - {None}:
            number = fd.fileno() if isinstance(fd, socket.socket) else fd
            if number in self.selector.get_map():
                self.selector.unregister(number)
            if isinstance(fd, socket.socket):
                fd.close()
            else:
                os.close(fd)
        stream.source = stream.sink = None
        if stream.temp is not None:
            try:
                os.unlink(stream.temp)
            except OSError:
                pass
        if stream.process is not None and stream.exit_status is None:
            self.kill(stream.process)

    # Background processes.

    def reply(self, exec_id, record):
        self.send(exec_id, REPLY, json.dumps(record).encode())

    def control(self, exec_id, payload):
        try:
            request = parse_control(payload)
        except (ValueError, TypeError) as error:
            return self.reply(exec_id, {'error': 'bad_request', 'message': str(error)})
        if request['op'] == 'list':
            return self.reply(exec_id, {'processes': [process.record() for process in self.background.values()]})
        # A warm pod claimed by an agent (ADR 53): the agent's environment joins the launcher's own,
        # which every program it starts from now on gets; it lives in this process's memory only.
        if request['op'] == 'environment':
            os.environb.update((name.encode(), value.encode()) for name, value in request['env'].items())
            # Spares were started with the environment before.
            self.discard_spares()
            return self.reply(exec_id, {'environment': len(request['env'])})
        # Out of memory: the host's memory guard asks which program is largest, then has it killed
        # (one program, as Linux's OOM killer does), without starting a process in the sandbox.
        if request['op'] == 'largest':
            return self.reply(exec_id, {'program': largest_program(skip=(1, os.getpid()))})
        if request['op'] == 'kill':
            if request['pid'] in (1, os.getpid()):
                return self.reply(exec_id, {'error': 'bad_request', 'message': 'the launcher is not killed'})
            try:
                os.kill(request['pid'], signal.SIGKILL)
            except OSError as error:
                return self.reply(exec_id, {'error': 'not_found', 'message': f'process {request["pid"]}: {error.strerror}'})
            return self.reply(exec_id, {'killed': request['pid']})
        process = self.background.get(request['pid'])
        if process is None:
            return self.reply(exec_id, {'error': 'not_found', 'message': f'no background process {request["pid"]}'})
        if request['op'] == 'signal':
            if process.result is None:
                try:
                    os.killpg(process.pid, SIGNALS[request['signal']])
                except OSError:
                    pass
            return self.reply(exec_id, process.record())
        if request['op'] == 'follow':
            return self.follow(exec_id, process, request.get('from'))
        if request['op'] in ('input', 'closeStdin'):
            return self.background_input(exec_id, process, request)
        if request['op'] == 'output':
            self.drain(process.outputs)
            rings = process.outputs
            return self.reply(exec_id, dict(process.record(), stdout=base64.b64encode(rings[0].data).decode(),
                                            stderr=base64.b64encode(rings[1].data).decode(), dropped=[ring.dropped for ring in rings]))
        if process.result is not None or request['timeoutMs'] == 0:
            return self.reply(exec_id, process.record())
        self.waiters.append([time.monotonic() + request['timeoutMs'] / 1000, exec_id, process.pid])

    def follow(self, exec_id, process, offsets):
        """Answers the process's record, then sends what it printed past `offsets` (none: from now),
        then each chunk as it comes (STDOUT, STDERR), then END with its record once it ended."""
        self.drain(process.outputs)
        rings = process.outputs
        self.reply(exec_id, dict(process.record(), offsets=[ring.total() for ring in rings]))
        for index, data in process.since(offsets or [ring.total() for ring in rings]):
            for at in range(0, len(data), DATA_CHUNK):
                self.send(exec_id, rings[index].kind, data[at:at + DATA_CHUNK])
        if process.result is not None:
            return self.send(exec_id, END, json.dumps(process.record()).encode())
        if self.channel is None:  # a send failed: the follow went with the connection
            return
        process.followers.append(exec_id)
        self.followed[exec_id] = process

    def unfollow(self, exec_id):
        process = self.followed.pop(exec_id, None)
        if process is not None:
            process.followers.remove(exec_id)

    def background_input(self, exec_id, process, request):
        """Input for a process started with keepStdin, or the end of it (closeStdin)."""
        feed = process.stdin
        if feed is None or feed.fd is None or feed.close_after:
            return self.reply(exec_id, {'error': 'closed', 'message': f'the stdin of process {process.pid} is closed'
                                        + ('' if process.result is None else ': it ended')})
        if request['op'] == 'closeStdin':
            feed.close_after = True
        elif len(feed.pending) + len(request['data']) > BACKGROUND_STDIN_PENDING:
            return self.reply(exec_id, {'error': 'full', 'message': f'process {process.pid} has not read the {len(feed.pending)} bytes of input before'})
        else:
            feed.pending += request['data']
        self.write_input(feed)
        self.reply(exec_id, process.record())

    def answer_waiters(self, ended=None):
        """Answers the WAITs on `ended`, and those whose time is up."""
        now = time.monotonic()
        for waiter in list(self.waiters):
            if waiter[2] == ended or waiter[0] <= now:
                self.waiters.remove(waiter)
                process = self.background.get(waiter[2])
                if process is not None:
                    self.reply(waiter[1], process.record())

    def end_background(self, process, record):
        self.drain(process.outputs)
        for ring in process.outputs:
            if ring.fd is not None:
                if ring.fd in self.selector.get_map():
                    self.selector.unregister(ring.fd)
                os.close(ring.fd)
                ring.fd = None
        self.close_input(process.stdin)
        process.result, process.ended_at = record, int(time.time() * 1000)
        self.answer_waiters(process.pid)
        for follower in list(process.followers):  # a failed send disconnects, which unfollows
            self.followed.pop(follower, None)
            self.send(follower, END, json.dumps(process.record()).encode())
        process.followers.clear()
        ended = sorted((p for p in self.background.values() if p.result is not None), key=lambda p: p.ended_at)
        for old in ended[:max(0, len(ended) - BACKGROUND_ENDED_KEPT)]:
            del self.background[old.pid]

    def drain(self, outputs):
        """Takes what the pipes hold now (a terminal's says EIO once its program is gone)."""
        for output in outputs:
            try:
                while output.fd is not None:
                    data = os.read(output.fd, 65536)
                    if not data:
                        break
                    for exec_id, part in output.take(data):
                        self.send(exec_id, output.kind, part)
            except OSError:
                pass

    def forward(self, output):
        """Sends what the pipe holds, up to the exec's cap; False once every writer closed it."""
        try:
            data = os.read(output.fd, 65536)
        except BlockingIOError:
            return True
        except OSError:  # a terminal whose program is gone
            data = b''
        for exec_id, part in output.take(data):
            self.send(exec_id, output.kind, part)
        return bool(data)

    def finish(self, running, record):
        # The program ended: what is in its pipes already goes first (a background child of it
        # may hold them open for hours), then its outcome.
        self.drain(running.outputs)
        self.close_outputs(running)
        self.close_input(running.stdin)
        self.execs.pop(running.pid, None)
        self.exec_ids.pop(running.id, None)
        dropped = [output.dropped for output in running.outputs]
        record = dict(record, dropped=dropped + [0] * (2 - len(dropped)))
        self.send(running.id, OUTCOME, json.dumps(record).encode())
        # After the outcome is sent, so that its start does not delay this exec's answer.
        if running.spare_key is not None and running.pid is not None:
            self.start_spare(running.spare_key)

    def close_outputs(self, running):
        for output in running.outputs:
            if output.fd is None:
                continue
            try:
                self.selector.unregister(output.fd)
            except KeyError:
                pass
            os.close(output.fd)
            output.fd = None

    def start_egress_relay(self):
        """A first connection waits on the relay's port: the relay starts and takes the socket over,
        connection and all (it accepts it), so no connection is lost."""
        listener, self.egress = self.egress, None
        self.selector.unregister(listener)
        stdin = os.open('/dev/null', os.O_RDONLY)
        env = dict(os.environb, BERTH_EGRESS_LISTEN_FD=str(EGRESS_LISTEN_FD).encode())
        try:
            self.egress_relay = os.posix_spawnp('python3', [EGRESS_RELAY_NAME, '-I', '-S', EGRESS_RELAY], env, setsid=True, setsigdef=DEFAULTS,
                            file_actions=[(os.POSIX_SPAWN_DUP2, stdin, 0), (os.POSIX_SPAWN_DUP2, listener.fileno(), EGRESS_LISTEN_FD)])
        except OSError as error:
            log(f'the egress relay did not start: {error!r}')
        finally:
            os.close(stdin)
            listener.close()

    def egress_relay_ended(self, status):
        # Its port closed with it: the next connection starts another.
        log(f'the egress relay ended ({json.dumps(outcome(status))})')
        self.egress_relay = None
        try:
            self.egress = egress_listener()
            self.selector.register(self.egress, selectors.EVENT_READ, 'egress')
        except OSError as error:
            log(f'the egress port cannot be listened on again: {error!r}')

    def kill(self, pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass

    def serve(self):
        while True:
            due = [limit[0] for limit in self.deadlines.values()] + [waiter[0] for waiter in self.waiters]
            if self.channel is None:
                due.append(self.reconnect_at)
            wait = max(0, min(due) - time.monotonic()) if due else None
            # A file being read cannot be polled: while one has credit, the loop does not sleep.
            if any(s.kind == 'read' and s.credit > 0 for s in self.streams.values()):
                wait = 0
            ready = self.selector.select(wait)
            try:
                self.enforce_limits()
                self.answer_waiters()
                if self.channel is None and time.monotonic() >= self.reconnect_at:
                    self.connect()
            except Exception as error:
                log(repr(error))
            try:
                self.pump_files()
            except Exception as error:
                log(repr(error))
            for key, mask in ready:
                # PID 1 must never exit: every event is handled under a catch-all.
                try:
                    if key.fileobj is self.server:
                        self.accept()
                    elif key.fileobj == self.wake_read:
                        self.reap()
                    elif key.data == 'egress':
                        self.start_egress_relay()
                    elif key.data == 'channel':
                        if self.channel is not None:
                            self.receive()
                    elif isinstance(key.data, Input):
                        if key.data.fd is not None:
                            self.write_input(key.data)
                    elif isinstance(key.data, Stream):
                        self.stream_event(key.data, mask)
                    elif isinstance(key.data, (Output, Ring)):
                        if key.data.fd is not None and not self.forward(key.data) and key.data.fd is not None:
                            self.selector.unregister(key.data.fd)
                    else:
                        self.hang_up(key.fileobj, key.data)
                except Exception as error:
                    log(repr(error))


def log(message):
    print(f'{NAME}: {message}', file=sys.stderr, flush=True)


def limit_tasks(limit):
    # A task limit inside gVisor: the programs get EAGAIN from fork at the limit, where the host's
    # pids cgroup (counting the sentry's threads) would end the whole sandbox.
    try:
        os.makedirs('/sys/fs/cgroup/pids/berth', exist_ok=True)
        with open('/sys/fs/cgroup/pids/berth/pids.max', 'w') as file:
            file.write(limit)
        with open('/sys/fs/cgroup/pids/berth/cgroup.procs', 'w') as procs:
            procs.write(str(os.getpid()))
    except OSError as error:
        log(f'no task limit: {error}')


def main(argv):
    with open('/proc/self/comm', 'w') as comm:
        comm.write(NAME)
    for number in DEFAULTS:
        signal.signal(number, signal.SIG_IGN)
    # Arguments: [--egress-relay] [task limit].
    args = argv[1:]
    relay = '--egress-relay' in args
    args = [arg for arg in args if arg != '--egress-relay']
    if args:
        limit_tasks(args[0])
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind('\0' + SOCKET)
    server.listen(128)
    Launcher(server, egress_listener() if relay else None).serve()


if __name__ == '__main__':
    main(sys.argv)
