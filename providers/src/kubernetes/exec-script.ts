import { randomBytes } from 'node:crypto';

/**
 * How a pod without the launcher (one an older Berth started; ADR 47 has pods run the launcher)
 * runs an exec'd program, and how the host learns that the limit stopped it.
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
 * Arguments: the file's extension, the limit in whole seconds, then the interpreter's argv. On
 * stdin (execStdin): the nonce's line; the program's size in bytes; the count of environment
 * entries, then each (`NAME=value`, base64) on a line; the working directory (base64, empty for
 * the workspace); `1` when the program takes the rest of stdin as its own, else `0`; then the
 * program's bytes (read exactly, with dd), and after them the program's stdin (ADR 39's options).
 */
export const EXEC_SCRIPT = `IFS= read -r nonce || exit 125
IFS= read -r size || exit 125
IFS= read -r count || exit 125
i=0
while [ "$i" -lt "$count" ]; do
  IFS= read -r entry || exit 125
  export "$(printf %s "$entry" | base64 -d)" || exit 125
  i=$((i + 1))
done
IFS= read -r cwd || exit 125
IFS= read -r input || exit 125
cwd=$(printf %s "$cwd" | base64 -d)
cd "\${cwd:-\${BERTH_WORKSPACE:-/workspace}}" 2>/dev/null || { [ -n "$cwd" ] && { printf '%s\\n' "cd: $cwd: No such file or directory" >&2; exit 127; }; }
dir=$(mktemp -d "\${TMPDIR:-/tmp}/berth-exec.$nonce.XXXXXX") || exit 125
trap 'rm -rf "$dir"' EXIT
file="$dir/main.$1"
limit=$2
shift 2
if [ "$size" -gt 0 ]; then dd bs="$size" count=1 iflag=fullblock of="$file" 2>/dev/null || exit 125; else : >"$file"; fi
if [ "$input" = 1 ]; then exec 4<&0; else exec 4</dev/null; fi
timeout --verbose --kill-after=2 "$limit" sh -c 'exec "$@" 2>&3 3>&-' berth-program "$@" "$file" <&4 4<&- 3>&2 2>"$dir/notice" &
echo $! >"$dir/pid"
wait $!
status=$?
if grep -q '^timeout: sending signal' "$dir/notice"; then printf '\\n%s\\n' "berth-timeout:$nonce" >&2; else cat "$dir/notice" >&2; fi
exit $status`;

/**
 * Ends the program of the exec with nonce `$1` (its client went away): TERM to its `timeout`,
 * which passes it on to the program, as at the limit. Closing the exec's connection would not.
 */
export const CANCEL_SCRIPT = `for pid in "\${TMPDIR:-/tmp}"/berth-exec."$1".*/pid; do [ -f "$pid" ] && kill -TERM "$(cat "$pid")"; done; exit 0`;

/** A fresh nonce for one exec. */
export function execNonce(): string {
  return randomBytes(16).toString('hex');
}

/** What goes to the script's stdin: the header lines, the program, then the program's stdin. */
export function execStdin(nonce: string, code: string, options: { env?: Record<string, string>; cwd?: string; stdin?: Buffer } = {}): Buffer {
  const program = Buffer.from(code, 'utf8');
  const env = Object.entries(options.env ?? {}).map(([name, value]) => Buffer.from(`${name}=${value}`, 'utf8').toString('base64'));
  const header = [nonce, String(program.length), String(env.length), ...env, Buffer.from(options.cwd ?? '', 'utf8').toString('base64'), options.stdin === undefined ? '0' : '1'];
  return Buffer.concat([Buffer.from(`${header.join('\n')}\n`), program, options.stdin ?? Buffer.alloc(0)]);
}

/** The bytes of the script's timeout line, which a streamed exec holds back of stderr until the end. */
export function timeoutLineBytes(nonce: string): number {
  return Buffer.byteLength(`\nberth-timeout:${nonce}\n`);
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
