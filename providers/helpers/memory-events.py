"""Tells Berth when a sandbox's host memory cgroup (cgroup v1) is out of memory.

One process per Berth process, on the host. Berth writes one JSON object a line to stdin:
  {"watch": "<sandbox>", "cgroup": "/sys/fs/cgroup/memory/berth/<sandbox>", "limit": <bytes>, "headroom": <bytes>}
  {"relieved": "<sandbox>"}  Berth freed memory and set the limit back: the headroom may be used again
  {"unwatch": "<sandbox>"}
and reads one a line from stdout:
  {"watching": "<sandbox>"}                the kernel's OOM killer is off for it from now on
  {"oom": "<sandbox>"}                      it ran out of memory: it has a headroom more now; free some
  {"fallback": "<sandbox>"}                 out of memory a third time before Berth freed some: the
                                            kernel's OOM killer is on again for it, and ends it
  {"gone": "<sandbox>"}                     its cgroup was removed
  {"error": "<sandbox>", "message": "..."}  it could not be watched; the kernel's OOM killer stays

The kernel's OOM killer would take gVisor's sentry, the largest process in the cgroup, and with it
the whole sandbox: while a sandbox is watched, it is off (memory.oom_control), so that at the
limit the sandbox's programs wait for memory, and Berth chooses the program to kill inside. It is
switched on again when the sandbox is no longer watched, and for every sandbox when stdin closes
(Berth has gone), so that no sandbox waits for an answer that will not come.
At the limit the sandbox's programs wait, and so does anything in gVisor's sentry and gofer that
needs memory: the sentry's control server is not to be relied on then (a new connection's kernel
memory cannot be charged, and fails). So the helper raises the limit by the headroom at once, and
Berth kills a program while the sandbox can answer. Out of memory again before Berth set the limit
back (a second program, or the next one started at once), it gets one more headroom; a third time,
the kernel decides as it did before.
Registering on a cgroup that is already out of memory reports it at once (the kernel signals a
new eventfd then).
"""
import json
import os
import selectors
import sys

selector = selectors.DefaultSelector()
# sandbox -> (cgroup, eventfd, memory.oom_control descriptor)
watched = {}
MAX_HEADROOMS = 2
# sandbox -> (its limit, the headroom)
limits = {}
# sandbox -> headrooms given since Berth last relieved it
raised = {}


def send(**message):
    sys.stdout.write(json.dumps(message) + '\n')
    sys.stdout.flush()


def write(path, text):
    with open(path, 'w') as file:
        file.write(text)


def under_oom(control):
    for line in os.pread(control, 4096, 0).decode().splitlines():
        name, _, value = line.partition(' ')
        if name == 'under_oom':
            return value.strip() == '1'
    return False


def watch(sandbox, cgroup, limit, headroom):
    unwatch(sandbox)
    limits[sandbox] = (limit, headroom)
    event = control = None
    try:
        control = os.open(os.path.join(cgroup, 'memory.oom_control'), os.O_RDONLY | os.O_CLOEXEC)
        event = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        write(os.path.join(cgroup, 'cgroup.event_control'), f'{event} {control}')
        write(os.path.join(cgroup, 'memory.oom_control'), '1')
    except OSError as error:
        for fd in (event, control):
            if fd is not None:
                os.close(fd)
        return send(error=sandbox, message=str(error))
    watched[sandbox] = (cgroup, event, control)
    selector.register(event, selectors.EVENT_READ, sandbox)
    send(watching=sandbox)


def unwatch(sandbox, restore=True):
    entry = watched.pop(sandbox, None)
    raised.pop(sandbox, None)
    if entry is None:
        return
    cgroup, event, control = entry
    selector.unregister(event)
    if restore:
        try:
            write(os.path.join(cgroup, 'memory.oom_control'), '0')
        except OSError:
            pass  # the cgroup is gone
    os.close(event)
    os.close(control)


def notified(sandbox):
    cgroup, event, control = watched[sandbox]
    try:
        os.read(event, 8)
    except BlockingIOError:
        return
    try:
        oom = under_oom(control)
        os.stat(cgroup)
    except OSError:
        unwatch(sandbox, restore=False)
        return send(gone=sandbox)
    if not oom:
        return
    try:
        given = raised.get(sandbox, 0)
        if given >= MAX_HEADROOMS:
            write(os.path.join(cgroup, 'memory.oom_control'), '0')
            unwatch(sandbox, restore=False)
            return send(fallback=sandbox)
        limit, headroom = limits[sandbox]
        write(os.path.join(cgroup, 'memory.limit_in_bytes'), str(limit + (given + 1) * headroom))
        raised[sandbox] = given + 1
    except OSError:
        unwatch(sandbox, restore=False)
        return send(gone=sandbox)
    send(oom=sandbox)


def command(line):
    request = json.loads(line)
    if 'watch' in request:
        watch(request['watch'], request['cgroup'], int(request['limit']), int(request['headroom']))
    elif 'relieved' in request:
        raised.pop(request['relieved'], None)
    elif 'unwatch' in request:
        unwatch(request['unwatch'])


def main():
    os.set_blocking(sys.stdin.fileno(), False)
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, None)
    pending = b''
    while True:
        for key, _ in selector.select():
            if key.data is not None:
                notified(key.data)
                continue
            chunk = os.read(sys.stdin.fileno(), 65536)
            if not chunk:
                for sandbox in list(watched):
                    unwatch(sandbox)
                return
            *lines, pending = (pending + chunk).split(b'\n')
            for line in lines:
                if line.strip():
                    try:
                        command(line)
                    except (ValueError, KeyError, TypeError) as error:
                        send(error='', message=f'bad request {line[:200]!r}: {error}')


if __name__ == '__main__':
    main()
