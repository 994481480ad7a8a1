/** A mistake in how a command was called: printed without a stack, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

export interface Streams {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  env: NodeJS.ProcessEnv;
}

/** ANSI styles, or none: colours only on a terminal, and never when NO_COLOR is set (no-color.org). */
export interface Style {
  bold(text: string): string;
  dim(text: string): string;
  red(text: string): string;
  green(text: string): string;
  yellow(text: string): string;
  cyan(text: string): string;
}

export function styleFor(stream: NodeJS.WriteStream, env: NodeJS.ProcessEnv): Style {
  const on = stream.isTTY === true && !env.NO_COLOR && env.TERM !== 'dumb';
  const sgr = (open: number, close: number) => (text: string) => (on ? `\u001b[${open}m${text}\u001b[${close}m` : text);
  return { bold: sgr(1, 22), dim: sgr(2, 22), red: sgr(31, 39), green: sgr(32, 39), yellow: sgr(33, 39), cyan: sgr(36, 39) };
}

/** Rows as columns as wide as their widest cell. */
export function table(header: string[], rows: string[][], style: Style): string {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: string[]) => cells.map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  ').trimEnd();
  return [style.bold(line(header)), ...rows.map(line)].join('\n');
}

/** A status word coloured by what it means. */
export function statusText(status: string, style: Style): string {
  if (status === 'idle' || status === 'completed' || status === 'exited') return style.green(status);
  if (status === 'failed' || status === 'terminated') return style.red(status);
  if (status === 'running' || status === 'booting') return style.cyan(status);
  return style.yellow(status);
}
