/**
 * The launcher: the init (PID 1) of each sandbox, which starts the programs Berth execs, so that
 * they belong to the container's own process tree rather than to a `runsc exec`.
 *
 * Why: when runsc restores a checkpoint it kills every process that a `runsc exec` started, and
 * their descendants ("the caller is no longer connected"): gVisor marks a process's origin at
 * `runsc exec` and a fork inherits the mark. A background process an agent starts
 * (`nohup python3 server.py &`) would not survive a native checkpoint. Started by the launcher,
 * it does.
 *
 * An exec: the host runs `runsc exec … perl -e <client> -- <program…>`. The client connects to
 * the launcher's abstract unix socket, makes a pipe for each of the program's stdout and stderr
 * and sends their descriptor numbers. The launcher reads the client's argv (after `--`),
 * environment and working directory from /proc, opens the two pipes through /proc/<pid>/fd,
 * starts the program in a session of its own with stdin from /dev/null (execs never get input),
 * says `started`, and later sends its exit status. The client copies the pipes to its own stdout
 * and stderr (runsc's connections to the host, which are sockets: /proc cannot open those) until
 * the status comes, then takes what is already in the pipes (a background child may keep them
 * open for hours) and exits with the status. If the client goes away (the host gave up on it),
 * the launcher kills the program's process group.
 *
 * As PID 1 it also reaps orphans (what tini did). It must never exit, or the sandbox ends. Unlike
 * Linux, gVisor delivers to init the signals it has no handler for when they come from its own
 * descendants (as every program now is), so it ignores every signal that would end it (programs
 * get them back at their defaults); its command line does not say
 * python, so that an agent's `pkill -9 -f python` passes it by (SIGKILL cannot be ignored); and
 * every event is handled under a catch-all that logs to the console. `/proc/self/comm` gets its
 * name too, so that `ps` in the sandbox says what it is.
 *
 * Cost: about 20 ms a call, measured: one more process (the client), and each process started
 * in gVisor costs ~10 ms. The client is perl without modules (perl-base is in every Debian
 * system): it starts as fast as bash and can use sockets and pipes, where python takes 20 ms
 * more. The launcher is python because every image has python3, run with -I -S (no site
 * packages, no PYTHON* variables: a fast start), and it spawns with vfork.
 */

/** The launcher's socket, in the abstract namespace: there is no file in the sandbox to delete. */
const SOCKET_NAME = 'berth-launcher';

/** Exit status of the client when the launcher could not run the program at all. */
const LAUNCHER_FAILED = 255;

const LAUNCHER_SOURCE = String.raw`
import os, selectors, signal, socket, struct, sys, time
with open('/proc/self/comm', 'w') as comm:
    comm.write('${SOCKET_NAME}')
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
server.bind('\0${SOCKET_NAME}')
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
        print(f'${SOCKET_NAME}: {error!r}', file=sys.stderr, flush=True)
    for key, _ in ready:
        try:
            if key.fileobj is server:
                accept()
            elif key.fileobj == wake_read:
                reap()
            else:
                hang_up(key.fileobj, key.data)
        except Exception as error:
            print(f'${SOCKET_NAME}: {error!r}', file=sys.stderr, flush=True)
`;

// Perl without modules: AF_UNIX and SOCK_STREAM are 1 on Linux. It retries for two seconds while
// the launcher of a sandbox that has just started is not listening yet. `relay` maps each pipe's
// descriptor to the pipe and where its data goes; select waits for pipes and the launcher's
// answers until the status came, and after it only takes what is there already.
const CLIENT_SOURCE = String.raw`
socket(S, 1, 1, 0);
my $connected; for (1 .. 200) { last if $connected = connect(S, pack("S a*", 1, "\0${SOCKET_NAME}")); select(undef, undef, undef, 0.01) }
unless ($connected) { print STDERR "berth: the sandbox's launcher is not running ($!)\n"; exit ${LAUNCHER_FAILED} }
pipe(OUT, OUT_W); pipe(ERR, ERR_W);
syswrite(S, fileno(OUT_W) . " " . fileno(ERR_W) . "\n");
my %relay = (fileno(OUT) => [\*OUT, \*STDOUT], fileno(ERR) => [\*ERR, \*STDERR]);
my ($reply, $status) = ("");
while (!defined $status || %relay) {
  my $want = "";
  vec($want, $_, 1) = 1 for keys %relay;
  vec($want, fileno(S), 1) = 1 unless defined $status;
  last unless select(my $ready = $want, undef, undef, defined $status ? 0 : undef);
  for my $fd (keys %relay) {
    next unless vec($ready, $fd, 1);
    my ($from, $to) = @{$relay{$fd}};
    if (sysread($from, my $data, 65536)) { while (length $data) { my $n = syswrite($to, $data) // last; substr($data, 0, $n) = "" } }
    else { delete $relay{$fd} }
  }
  next unless vec($ready, fileno(S), 1);
  sysread(S, $reply, 4096, length $reply) or $reply .= "error: it stopped answering\n";
  if ($reply =~ s/^started\n//) { close OUT_W; close ERR_W }
  $status = $1 if $reply =~ /^(.*)\n/;
}
exit $status if $status =~ /^\d+$/;
if ($status =~ /^timeout (\d+)$/) { print STDERR "timeout: sending signal TERM to command '$ARGV[0]'\n"; exit($1 == 137 ? 137 : 124) }
$status =~ s/^error: //;
print STDERR "berth: the sandbox's launcher could not run it: $status\n";
exit ${LAUNCHER_FAILED};
`;

/**
 * The container's main process: the launcher, under its own name (see above). With `tasksLimit`
 * it puts itself, and so every program it starts, in a pids cgroup of gVisor's own with that
 * limit (the sandbox must mount cgroupfs at /sys/fs/cgroup).
 */
export function launcherArgs(tasksLimit?: number): string[] {
  const args = ['/bin/bash', '-c', `exec -a ${SOCKET_NAME} python3 -I -S -c "$0" "$@"`, LAUNCHER_SOURCE];
  return tasksLimit === undefined ? args : [...args, String(tasksLimit)];
}

/** The argv that `runsc exec` runs to have the launcher start `argv` inside the sandbox. */
export function viaLauncher(argv: readonly string[]): string[] {
  return ['perl', '-e', CLIENT_SOURCE, '--', ...argv];
}

/**
 * The exec's environment entry that has the launcher stop the program after `timeoutMs`: TERM
 * to its process group, KILL two seconds later, and the client then exits as timeout(1) would
 * (124, or 137 after KILL, with its notice last on stderr). A launcher from before this ignores
 * it and leaves the limit to the host-side timer.
 */
export function launcherLimit(timeoutMs: number): Record<string, string> {
  return { BERTH_EXEC_LIMIT_MS: String(Math.max(1, Math.ceil(timeoutMs))) };
}

/** What the client said when the launcher could not run the program, or undefined when it ran. */
export function launcherFailure(result: { exitCode: number; stderr: string }): string | undefined {
  if (result.exitCode !== LAUNCHER_FAILED) return undefined;
  const last = result.stderr.trimEnd().split('\n').at(-1) ?? '';
  return /^berth: (the sandbox's launcher .*)$/.exec(last)?.[1];
}
