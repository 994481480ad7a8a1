/**
 * The channel's theme, as `GET /channels/{id}/config` gives it (`theme` of a `chat_embed`
 * channel, every field optional): `{ primaryColor: "#rrggbb", mode: "light" | "dark", position:
 * "bottom-right" | "bottom-left", title, greeting, placeholder }`. The server validated it; a
 * field the widget cannot use anyway (an older widget, a newer server) is reported on the
 * console and left at its default.
 */

/** `auto` (no mode set) follows the visitor's own light or dark preference. */
export type ColorMode = 'light' | 'dark' | 'auto';

export interface Theme {
  /** The launcher, the header, the visitor's messages and the send button. */
  primaryColor: string;
  /** Text on the primary color: whichever of near-black and white contrasts more with it. */
  onPrimaryColor: string;
  mode: ColorMode;
  position: 'bottom-right' | 'bottom-left';
  /** The panel's heading and the launcher's accessible name. */
  title: string;
  /** Shown above an empty conversation. */
  greeting: string | undefined;
  /** The input's placeholder. */
  placeholder: string;
}

export const DEFAULT_THEME: Theme = {
  primaryColor: '#1f5fd1',
  onPrimaryColor: '#ffffff',
  mode: 'auto',
  position: 'bottom-right',
  title: 'Chat',
  greeting: undefined,
  placeholder: 'Write a message…',
};

const HEX = /^#(?:[0-9a-f]{3}|[0-9a-f]{6})$/i;

export function readTheme(input: unknown): { theme: Theme; problems: string[] } {
  const problems: string[] = [];
  const theme: Theme = { ...DEFAULT_THEME };
  if (input === undefined || input === null) return { theme, problems };
  if (typeof input !== 'object' || Array.isArray(input)) return { theme, problems: ['theme: not an object; the default theme is used'] };
  const { primaryColor, mode, position, title, greeting, placeholder } = input as Record<string, unknown>;
  if (primaryColor !== undefined) {
    if (typeof primaryColor === 'string' && HEX.test(primaryColor)) {
      theme.primaryColor = primaryColor.toLowerCase();
      theme.onPrimaryColor = textColorOn(theme.primaryColor);
    } else problems.push('theme: primaryColor must be a hex color such as "#1f5fd1"');
  }
  if (mode !== undefined) {
    if (mode === 'light' || mode === 'dark') theme.mode = mode;
    else problems.push('theme: mode must be "light" or "dark"');
  }
  if (position !== undefined) {
    if (position === 'bottom-right' || position === 'bottom-left') theme.position = position;
    else problems.push('theme: position must be "bottom-right" or "bottom-left"');
  }
  if (title !== undefined) {
    if (typeof title === 'string' && title.trim() !== '') theme.title = title.trim();
    else problems.push('theme: title must be a non-empty string');
  }
  if (greeting !== undefined) {
    if (typeof greeting === 'string') theme.greeting = greeting.trim() || undefined;
    else problems.push('theme: greeting must be a string');
  }
  if (placeholder !== undefined) {
    if (typeof placeholder === 'string') theme.placeholder = placeholder;
    else problems.push('theme: placeholder must be a string');
  }
  return { theme, problems };
}

/** WCAG 2 relative luminance of a `#rgb` or `#rrggbb` color. */
export function luminance(hex: string): number {
  const digits = hex.length === 4 ? [...hex.slice(1)].map((d) => d + d).join('') : hex.slice(1);
  const [r, g, b] = [0, 2, 4].map((at) => {
    const channel = parseInt(digits.slice(at, at + 2), 16) / 255;
    return channel <= 0.03928 ? channel / 12.92 : ((channel + 0.055) / 1.055) ** 2.4;
  }) as [number, number, number];
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** WCAG 2 contrast ratio of two colors, from 1 to 21. */
export function contrastRatio(a: string, b: string): number {
  const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (light + 0.05) / (dark + 0.05);
}

/** The text color that reads best on `background`. */
export function textColorOn(background: string): string {
  return contrastRatio(background, '#ffffff') >= contrastRatio(background, '#111111') ? '#ffffff' : '#111111';
}
