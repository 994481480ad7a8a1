"""The launcher: PID 1 of a local sandbox, which starts the programs Berth execs (ADR 5).

Run as `python3 -I -S launcher.py [tasks limit]` under the name berth-launcher. Why it exists, and
why it ignores signals, is told in operator/src/providers/local/launcher.ts.
"""
import os, selectors, signal, socket, struct, sys, time
with open('/proc/self/comm', 'w') as comm:
    comm.write('berth-launcher')
DEFAULTS = [getattr(signal, name) for name in ('SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGTERM', 'SIGUSR1', 'SIGUSR2',
    'SIGALRM', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU', 'SIGVTALRM', 'SIGPROF', 'SIGXCPU', 'SIGXFSZ', 'SIGIO', 'SIGPWR', 'SIGPIPE')]
DEFAULTS += range(signal.SIGRTMIN, signal.SIGRTMAX + 1)
for number in DEFAULTS:
    signal.signal(number, signal.SIG_IGN)
# A task limit inside gVisor: the programs get EAGAIN from fork at the limit, where the host's
# pids cgroup (counting the sentry's threads) would end the whole sandbox.
if len(sys.argv) > 1:
    try:
        os.makedirs('/sys/fs/cgroup/pids/berth', exist_ok=True)
        with open('/sys/fs/cgroup/pids/berth/pids.max', 'w') as limit:
            limit.write(sys.argv[1])
        with open('/sys/fs/cgroup/pids/berth/cgroup.procs', 'w') as procs:
            procs.write(str(os.getpid()))
    except OSError as error:
        print('berth-launcher: no task limit:', error, file=sys.stderr, flush=True)
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind('\0berth-launcher')
server.listen(128)
wake_read, wake_write = os.pipe()
os.set_blocking(wake_write, False)
signal.set_wakeup_fd(wake_write)
signal.signal(signal.SIGCHLD, lambda *_: None)
selector = selectors.DefaultSelector()
selector.register(server, selectors.EVENT_READ)
selector.register(wake_read, selectors.EVENT_READ)
clients = {}
# program pid -> [when (monotonic), signal to send then]: the time limits of execs that have one.
deadlines = {}
timed_out = set()

def strings(path):
    with open(path, 'rb') as file:
        return file.read().split(b'\0')[:-1]

def request(conn):
    line = b''
    while not line.endswith(b'\n'):
        chunk = conn.recv(64)
        if not chunk:
            raise ValueError('the client went away')
        line += chunk
    return [int(fd) for fd in line.split()]

def spawn(client, outputs):
    args = strings(f'/proc/{client}/cmdline')
    argv = args[args.index(b'--') + 1:]
    if not argv:
        raise ValueError('no program after --')
    # The sandbox's own environment (its secrets among it, given to PID 1 by the OCI spec, never
    # on a command line), under what the exec asked for.
    env = dict(os.environb)
    env.update(entry.split(b'=', 1) for entry in strings(f'/proc/{client}/environ') if b'=' in entry)
    # The exec's time limit, for the launcher: the program does not see it.
    limit = env.pop(b'BERTH_EXEC_LIMIT_MS', None)
    limit = int(limit) / 1000 if limit else None
    stdio = [os.open('/dev/null', os.O_RDONLY)] + [os.open(f'/proc/{client}/fd/{fd}', os.O_WRONLY) for fd in outputs]
    try:
        os.chdir(os.readlink(f'/proc/{client}/cwd'))
        pid = os.posix_spawnp(argv[0], argv, env, setsid=True, setsigdef=DEFAULTS,
            file_actions=[(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate(stdio)])
        if limit is not None:
            deadlines[pid] = [time.monotonic() + limit, signal.SIGTERM]
        return pid
    except OSError as error:
        os.write(stdio[2], argv[0] + b': ' + (error.strerror or str(error)).encode() + b'\n')
        return None
    finally:
        os.chdir('/')
        for fd in stdio:
            os.close(fd)

def answer(conn, line):
    try:
        conn.sendall(line.encode() + b'\n')
    except OSError:
        pass
    conn.close()

def accept():
    conn, _ = server.accept()
    conn.settimeout(5)
    client = struct.unpack('3i', conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    try:
        program = spawn(client, request(conn))
    except Exception as error:
        return answer(conn, f'error: {error}')
    if program is None:
        return answer(conn, '127')
    conn.sendall(b'started\n')
    clients[conn] = program
    selector.register(conn, selectors.EVENT_READ, program)

def reap():
    os.read(wake_read, 4096)
    finished = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        code = os.waitstatus_to_exitcode(status)
        finished[pid] = code if code >= 0 else 128 - code
    for pid in finished:
        deadlines.pop(pid, None)
    for conn, program in list(clients.items()):
        if program in finished:
            selector.unregister(conn)
            del clients[conn]
            if program in timed_out:
                timed_out.discard(program)
                answer(conn, f'timeout {finished[program]}')
            else:
                answer(conn, str(finished[program]))

def enforce_limits():
    # Over its limit: the program's whole process group gets TERM, and KILL two seconds later.
    now = time.monotonic()
    for pid, limit in list(deadlines.items()):
        if now < limit[0]:
            continue
        timed_out.add(pid)
        try:
            os.killpg(pid, limit[1])
        except OSError:
            pass
        if limit[1] == signal.SIGTERM:
            deadlines[pid] = [now + 2, signal.SIGKILL]
        else:
            del deadlines[pid]

def hang_up(conn, program):
    selector.unregister(conn)
    del clients[conn]
    conn.close()
    try:
        os.killpg(program, signal.SIGKILL)
    except OSError:
        pass

while True:
    wait = max(0, min(limit[0] for limit in deadlines.values()) - time.monotonic()) if deadlines else None
    ready = selector.select(wait)
    try:
        enforce_limits()
    except Exception as error:
        print(f'berth-launcher: {error!r}', file=sys.stderr, flush=True)
    for key, _ in ready:
        try:
            if key.fileobj is server:
                accept()
            elif key.fileobj == wake_read:
                reap()
            else:
                hang_up(key.fileobj, key.data)
        except Exception as error:
            print(f'berth-launcher: {error!r}', file=sys.stderr, flush=True)
