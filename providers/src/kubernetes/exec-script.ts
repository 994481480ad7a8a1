import { randomBytes } from 'node:crypto';

/**
 * How a pod runs an exec'd program, and how the host learns that the limit stopped it.
 *
 * The program arrives on stdin after one line, a nonce of the host's; it goes to a file in /tmp
 * and runs under coreutils' `timeout`, which stops it and its process group when its time is up.
 * Pods have no host mount to hand the file over through, and a shell there costs little.
 *
 * The exec API carries stdout, stderr and the exit status only, and the program owns all three:
 * a program may print `timeout: sending signal TERM …` and exit 124 itself. So `timeout`'s own
 * notice goes to a file of the script's (the program's stderr is handed to it on descriptor 3),
 * and when the notice says it sent a signal, the script writes `berth-timeout:<nonce>` as the last
 * line of stderr. The nonce came on stdin, which the program never sees (its stdin is /dev/null):
 * a program cannot print the line by chance. The host finds it in the stream's last bytes
 * (`OutputLimit.tail`), kept whatever the output limit cut, and takes it out of what it returns.
 *
 * Arguments: the file's extension, the limit in whole seconds, then the interpreter's argv.
 */
export const EXEC_SCRIPT = `IFS= read -r nonce || exit 125
cd "\${BERTH_WORKSPACE:-/workspace}" 2>/dev/null
dir=$(mktemp -d "\${TMPDIR:-/tmp}/berth-exec.XXXXXX") || exit 125
trap 'rm -rf "$dir"' EXIT
file="$dir/main.$1"
limit=$2
shift 2
cat >"$file" || exit 125
timeout --verbose --kill-after=2 "$limit" sh -c 'exec "$@" 2>&3 3>&-' berth-program "$@" "$file" </dev/null 3>&2 2>"$dir/notice"
status=$?
if grep -q '^timeout: sending signal' "$dir/notice"; then printf '\\n%s\\n' "berth-timeout:$nonce" >&2; else cat "$dir/notice" >&2; fi
exit $status`;

/** A fresh nonce for one exec. */
export function execNonce(): string {
  return randomBytes(16).toString('hex');
}

/** What goes to the script's stdin: the nonce's line, then the program. */
export function execStdin(nonce: string, code: string): string {
  return `${nonce}\n${code}`;
}

/**
 * Whether the script reported that the limit stopped the program (its line in the last bytes of
 * stderr), and stderr without that line.
 */
export function takeTimeoutLine(stderr: string, tail: string, nonce: string): { timedOut: boolean; stderr: string } {
  const line = `\nberth-timeout:${nonce}\n`;
  if (!tail.includes(line)) return { timedOut: false, stderr };
  const at = stderr.lastIndexOf(line);
  return { timedOut: true, stderr: at < 0 ? stderr : stderr.slice(0, at) + stderr.slice(at + line.length) };
}
