/**
 * A program for checkpoint tests: a Python process that counts in memory and writes the count to
 * /workspace/counter every 100 ms, its pid to /workspace/counter.pid. `holdMiB` of random bytes
 * held in memory make its checkpoint large (they do not compress). The command prints `started`
 * once the first count is written.
 */
export function counterProgram(holdMiB = 0): string {
  return `nohup python3 -c '
import os, time
block = os.urandom(${holdMiB} * 1024 * 1024)
open("/workspace/counter.pid", "w").write(str(os.getpid()))
n = 0
while True:
    n += 1
    open("/workspace/counter.tmp", "w").write(str(n))
    os.replace("/workspace/counter.tmp", "/workspace/counter")
    time.sleep(0.1)
' >/dev/null 2>&1 &
while [ ! -f /workspace/counter ]; do sleep 0.1; done; echo started`;
}

/**
 * Prints the counter's pid, its last count and whether a process running the counting program is
 * alive (pids repeat across sandboxes in gVisor, so the pid alone does not tell), a line each.
 */
export const COUNTER_STATE = "cat /workspace/counter.pid; echo; cat /workspace/counter; echo; pgrep -f 'counter\\.tm[p]' >/dev/null && echo alive || echo dead";

/** The lines COUNTER_STATE printed. */
export function parseCounterState(stdout: string): { pid: string; count: number; alive: boolean } {
  const [pid, count, alive] = stdout.trim().split('\n');
  return { pid: pid!, count: Number(count), alive: alive === 'alive' };
}
