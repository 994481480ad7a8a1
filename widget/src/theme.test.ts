import { describe, expect, it } from 'vitest';
import { DEFAULT_THEME, contrastRatio, readTheme, textColorOn } from './theme.js';

describe('the theme of the channel', () => {
  it('is the default when the channel has none', () => {
    expect(readTheme(undefined)).toEqual({ theme: DEFAULT_THEME, problems: [] });
    expect(readTheme(null)).toEqual({ theme: DEFAULT_THEME, problems: [] });
    expect(readTheme({})).toEqual({ theme: DEFAULT_THEME, problems: [] });
  });

  it('reads every field', () => {
    const { theme, problems } = readTheme({
      primaryColor: '#FFD400',
      mode: 'dark',
      position: 'bottom-left',
      title: ' Support ',
      greeting: 'Ask us anything',
      placeholder: 'Your question',
    });
    expect(problems).toEqual([]);
    expect(theme).toEqual({
      primaryColor: '#ffd400',
      onPrimaryColor: '#111111',
      mode: 'dark',
      position: 'bottom-left',
      title: 'Support',
      greeting: 'Ask us anything',
      placeholder: 'Your question',
    });
  });

  it('names each field it cannot use and keeps its default', () => {
    const { theme, problems } = readTheme({ primaryColor: 'red', mode: 'sepia', position: 'top', title: ' ', greeting: 5, placeholder: false });
    expect(theme).toEqual(DEFAULT_THEME);
    expect(problems).toEqual([
      'theme: primaryColor must be a hex color such as "#1f5fd1"',
      'theme: mode must be "light" or "dark"',
      'theme: position must be "bottom-right" or "bottom-left"',
      'theme: title must be a non-empty string',
      'theme: greeting must be a string',
      'theme: placeholder must be a string',
    ]);
    expect(readTheme('dark')).toEqual({ theme: DEFAULT_THEME, problems: ['theme: not an object; the default theme is used'] });
  });

  it('picks the text color that contrasts more with the primary color', () => {
    expect(contrastRatio('#ffffff', '#000000')).toBeCloseTo(21, 5);
    expect(contrastRatio('#777', '#777777')).toBeCloseTo(1, 5);
    expect(textColorOn('#1f5fd1')).toBe('#ffffff');
    expect(textColorOn('#ffd400')).toBe('#111111');
    expect(textColorOn('#000')).toBe('#ffffff');
    // The default pair passes WCAG AA for normal text.
    expect(contrastRatio(DEFAULT_THEME.primaryColor, DEFAULT_THEME.onPrimaryColor)).toBeGreaterThanOrEqual(4.5);
  });
});
