"""The launcher: PID 1 of a local sandbox, which starts the programs Berth execs (ADR 5).

Run as `python3 -I -S launcher.py [tasks limit]` under the name berth-launcher. Why it exists, and
why it ignores signals, is told in providers/src/local/launcher.ts.

Its protocol with the client (launcher-client.pl), over an abstract unix socket: the client sends
one line, the descriptor numbers of its two output pipes (`<stdout fd> <stderr fd>`); the launcher
answers `started` once the program runs, then the program's outcome as one line of JSON (see
`outcome`), and closes. The client passes the outcome on to the host, never in the program's output.
"""
import json
import os
import selectors
import signal
import socket
import struct
import sys
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


def strings(path):
    with open(path, 'rb') as file:
        return file.read().split(b'\0')[:-1]


class Launcher:
    def __init__(self, server):
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

    def request(self, conn):
        line = b''
        while not line.endswith(b'\n'):
            chunk = conn.recv(64)
            if not chunk:
                raise ValueError('the client went away')
            line += chunk
        return parse_request(line)

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
            os.chdir(os.readlink(f'/proc/{client}/cwd'))
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
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            finished[pid] = outcome(status, self.stopped.pop(pid, None))
            self.deadlines.pop(pid, None)
        for conn, program in list(self.clients.items()):
            if program in finished:
                self.selector.unregister(conn)
                del self.clients[conn]
                self.answer(conn, finished[program])

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

    def serve(self):
        while True:
            wait = max(0, min(limit[0] for limit in self.deadlines.values()) - time.monotonic()) if self.deadlines else None
            ready = self.selector.select(wait)
            try:
                self.enforce_limits()
            except Exception as error:
                log(repr(error))
            for key, _ in ready:
                # PID 1 must never exit: every event is handled under a catch-all.
                try:
                    if key.fileobj is self.server:
                        self.accept()
                    elif key.fileobj == self.wake_read:
                        self.reap()
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
    if len(argv) > 1:
        limit_tasks(argv[1])
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind('\0' + SOCKET)
    server.listen(128)
    Launcher(server).serve()


if __name__ == '__main__':
    main(sys.argv)
