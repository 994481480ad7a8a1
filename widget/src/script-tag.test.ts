import { describe, expect, it } from 'vitest';
import { readScriptTag } from './script-tag.js';

describe('the script tag', () => {
  it('gives the API base and the channel', () => {
    expect(readScriptTag('https://berth.example.com/widget/v1/berth-chat.js', 'chn_01abc')).toEqual({
      apiBase: 'https://berth.example.com',
      channelId: 'chn_01abc',
    });
  });

  it('keeps a path prefix of a server behind a proxy', () => {
    expect(readScriptTag('https://example.com/berth/widget/v1/berth-chat.js?x=1', 'chn_1')).toMatchObject({ apiBase: 'https://example.com/berth' });
  });

  it('says what is missing', () => {
    const missing = { error: 'the script tag needs data-channel-id="<channel id>"' };
    expect(readScriptTag('https://example.com/widget/v1/berth-chat.js', undefined)).toEqual(missing);
    expect(readScriptTag('https://example.com/widget/v1/berth-chat.js', 'chn 1"/>')).toEqual(missing);
    expect(readScriptTag('not a url', 'chn_1')).toEqual({ error: "the script's src is not a URL: not a url" });
  });
});
