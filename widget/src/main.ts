/**
 * The widget's entry: `<script src="<base>/widget/v1/berth-chat.js" data-channel-id="<channel id>"
 * async></script>`. It reads its own tag and the channel's theme (`GET /channels/{id}/config`),
 * then adds one element to the page; it talks only to the server it was loaded from.
 */
import { createChatClient } from './client.js';
import { WIDGET_PATH, readScriptTag } from './script-tag.js';
import { readTheme } from './theme.js';
import { visitorId } from './visitor.js';
import { ChatWidget } from './widget.js';

const HOST_ID = 'berth-chat';

function ownScript(): HTMLScriptElement | undefined {
  const current = document.currentScript;
  if (current instanceof HTMLScriptElement) return current;
  // Loaded as a module or injected by another script: find the tag by its URL.
  return [...document.querySelectorAll<HTMLScriptElement>('script[data-channel-id]')].find((script) => script.src.includes(WIDGET_PATH));
}

function storage(): Storage | undefined {
  try {
    return window.localStorage;
  } catch {
    return undefined; // a sandboxed frame or blocked site data
  }
}

async function start(script: HTMLScriptElement): Promise<void> {
  // The tag twice on a page (a template and a tag manager both adding it): one widget.
  if (document.getElementById(HOST_ID)) return;
  const tag = readScriptTag(script.src, script.dataset.channelId);
  if ('error' in tag) {
    console.error(`berth-chat: ${tag.error}`);
    return;
  }
  const visitor = visitorId(storage(), tag.channelId, (bytes) => crypto.getRandomValues(bytes));
  const client = createChatClient(tag.apiBase, tag.channelId, visitor);
  let config;
  try {
    config = await client.config();
  } catch (error) {
    // A deleted or unknown channel, or a page whose origin the channel does not allow: no button.
    console.error(`berth-chat: channel ${tag.channelId} is not available: ${(error as Error).message}`);
    return;
  }
  const { theme, problems } = readTheme(config.theme);
  for (const problem of problems) console.warn(`berth-chat: ${problem}`);
  if (document.getElementById(HOST_ID)) return;
  const host = document.createElement('div');
  host.id = HOST_ID;
  document.body.append(host);
  new ChatWidget(host, client, theme);
}

const script = ownScript();
if (!script) console.error('berth-chat: the script tag that loaded the widget was not found');
else if (document.body) void start(script);
else document.addEventListener('DOMContentLoaded', () => void start(script), { once: true });
