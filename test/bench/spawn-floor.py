"""The in-sandbox spawn floor of test/bench/local-sandbox.ts: run inside a sandbox, it starts a
program the way the launcher does (posix_spawn in a session of its own, stdin from /dev/null,
stdout and stderr to pipes, then waitpid) and prints each start-to-exit time in milliseconds as
one JSON list. Usage: python3 spawn-floor.py RUNS PROGRAM [ARGS...]
"""
import json
import os
import sys
import time


def once(argv):
    stdin = os.open('/dev/null', os.O_RDONLY)
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    started = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ, setsid=True,
                          file_actions=[(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate((stdin, out_write, err_write))])
    for fd in (stdin, out_write, err_write):
        os.close(fd)
    os.waitpid(pid, 0)
    elapsed = (time.perf_counter() - started) * 1000
    for fd in (out_read, err_read):
        os.close(fd)
    return elapsed


def main(argv):
    runs, program = int(argv[1]), argv[2:]
    once(program)  # warms the page cache
    print(json.dumps([once(program) for _ in range(runs)]))


if __name__ == '__main__':
    main(sys.argv)
