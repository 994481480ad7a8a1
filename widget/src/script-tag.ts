/** The path the API server serves the widget at; what precedes it in the script's URL is the API's base. */
export const WIDGET_PATH = '/widget/v1/berth-chat.js';

const CHANNEL_ID = /^[A-Za-z0-9_-]{1,128}$/;

export interface WidgetConfig {
  /** Where the public channel routes are: the script's origin and any path prefix before {@link WIDGET_PATH}. */
  apiBase: string;
  channelId: string;
}

/** Reads the tag `<script src="…/widget/v1/berth-chat.js" data-channel-id="chn_…">`, or says what is wrong with it. */
export function readScriptTag(src: string, channelId: string | undefined): WidgetConfig | { error: string } {
  let url: URL;
  try {
    url = new URL(src);
  } catch {
    return { error: `the script's src is not a URL: ${src}` };
  }
  const id = channelId?.trim() ?? '';
  if (!CHANNEL_ID.test(id)) return { error: 'the script tag needs data-channel-id="<channel id>"' };
  const prefix = url.pathname.endsWith(WIDGET_PATH) ? url.pathname.slice(0, -WIDGET_PATH.length) : '';
  return { apiBase: `${url.origin}${prefix}`, channelId: id };
}
