import type { ChatClient } from './client.js';
import { ChatError, describeFailure } from './errors.js';
import { addPending, applyDelta, applyStreamed, confirmSent, dropPending, fromHistory, keepUnanswered, mergeHistory, type ShownMessage } from './messages.js';
import type { Theme } from './theme.js';

/** The longest message the public route takes (docs/channels.md). */
const MAX_TEXT = 4000;

/** The stylesheet (widget.css), minified and put here by the build. */
declare const BERTH_WIDGET_CSS: string;
// Named once: the build puts the text at each mention of BERTH_WIDGET_CSS.
const STYLES = BERTH_WIDGET_CSS;

/** The icons' paths (24 × 24), drawn in the text color. */
const CHAT_ICON =
  'M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2zm3 6a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3zm5 0a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3zm5 0a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3z';
const CLOSE_ICON = 'M6.4 5 12 10.6 17.6 5 19 6.4 13.4 12l5.6 5.6-1.4 1.4-5.6-5.6L6.4 19 5 17.6 10.6 12 5 6.4z';

/**
 * The chat button and its panel, in a shadow root so that neither the site's styles nor ours
 * leak across. The panel is a non-modal dialog: opening it moves focus to the input, Escape or
 * the close button closes it and gives focus back to the button. The message list is a `log`
 * region, so screen readers announce new messages; status (typing, errors) is a `status` region.
 */
export class ChatWidget {
  private readonly root: ShadowRoot;
  private readonly frame: HTMLElement;
  private readonly launcher: HTMLButtonElement;
  private readonly panel: HTMLElement;
  private readonly log: HTMLElement;
  private readonly greeting: HTMLElement;
  private readonly status: HTMLElement;
  private readonly form: HTMLFormElement;
  private readonly input: HTMLTextAreaElement;
  private readonly sendButton: HTMLButtonElement;
  private readonly elements = new Map<string, HTMLElement>();
  private messages: ShownMessage[] = [];
  private closeStream: (() => void) | undefined;
  private sending = false;
  private localKeys = 0;

  constructor(
    host: HTMLElement,
    private readonly client: ChatClient,
    private readonly theme: Theme,
  ) {
    this.root = host.attachShadow({ mode: 'open' });
    const frame = (this.frame = element('div', { class: `frame ${theme.position} mode-${theme.mode}` }));
    frame.style.setProperty('--berth-primary', theme.primaryColor);
    frame.style.setProperty('--berth-on-primary', theme.onPrimaryColor);

    this.launcher = element('button', { type: 'button', class: 'launcher', 'aria-expanded': 'false', 'aria-controls': 'berth-chat-panel', 'aria-label': theme.title });
    this.launcher.append(icon(CHAT_ICON, 28));

    this.panel = element('section', { id: 'berth-chat-panel', class: 'panel', role: 'dialog', 'aria-labelledby': 'berth-chat-title' });
    this.panel.hidden = true;
    // A div, not a header: a header here would be a second banner landmark beside the page's own.
    const header = element('div', { class: 'header' });
    const title = element('h2', { id: 'berth-chat-title' });
    title.textContent = theme.title;
    const close = element('button', { type: 'button', class: 'close', 'aria-label': 'Close chat' });
    close.append(icon(CLOSE_ICON, 20));
    header.append(title, close);

    this.log = element('div', { class: 'log', role: 'log', 'aria-label': 'Messages', tabindex: '0' });
    this.greeting = element('p', { class: 'greeting' });
    this.greeting.textContent = theme.greeting ?? '';
    this.greeting.hidden = theme.greeting === undefined;
    this.status = element('p', { class: 'status', role: 'status' });

    this.form = element('form', { class: 'composer' });
    const label = element('label', { for: 'berth-chat-input', class: 'visually-hidden' });
    label.textContent = 'Your message';
    this.input = element('textarea', { id: 'berth-chat-input', rows: '1', maxlength: String(MAX_TEXT), placeholder: theme.placeholder, autocomplete: 'off' });
    this.sendButton = element('button', { type: 'submit', class: 'send' });
    this.sendButton.textContent = 'Send';
    this.form.append(label, this.input, this.sendButton);

    this.panel.append(header, this.greeting, this.log, this.status, this.form);
    frame.append(this.panel, this.launcher);
    adoptStyles(this.root);
    this.root.append(frame);

    this.launcher.addEventListener('click', () => (this.panel.hidden ? this.open() : this.close()));
    close.addEventListener('click', () => this.close());
    this.panel.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') {
        event.preventDefault();
        this.close();
      }
    });
    this.input.addEventListener('input', () => this.fitInput());
    this.input.addEventListener('keydown', (event) => {
      // Enter sends; Shift+Enter is a new line; Enter that ends an IME composition is not a send.
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.form.requestSubmit();
      }
    });
    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.send(this.input.value);
    });
  }

  open(): void {
    if (!this.panel.hidden) return;
    this.panel.hidden = false;
    this.frame.classList.add('open');
    this.launcher.setAttribute('aria-expanded', 'true');
    this.input.focus();
    // Connected first, then the history: nothing said between the two is missed.
    this.closeStream = this.client.stream({
      onConnected: () => void this.loadHistory(),
      // Without the stream the panel still works: the history now, each reply in its send's answer.
      onRefused: () => void this.loadHistory(),
      onMessage: (event) => this.show(applyStreamed(this.messages, event)),
      onDelta: (event) => this.show(applyDelta(this.messages, event)),
    });
  }

  close(): void {
    if (this.panel.hidden) return;
    this.panel.hidden = true;
    this.frame.classList.remove('open');
    this.launcher.setAttribute('aria-expanded', 'false');
    this.closeStream?.();
    this.closeStream = undefined;
    this.launcher.focus();
  }

  private async loadHistory(): Promise<void> {
    try {
      const history = await this.client.history();
      this.show(this.messages.length === 0 ? fromHistory(history.messages) : mergeHistory(this.messages, history.messages));
    } catch (error) {
      this.setStatus(describeFailure(error, 'The conversation could not be loaded.'));
    }
  }

  private async send(raw: string): Promise<void> {
    const text = raw.trim();
    if (text === '' || this.sending) return;
    this.sending = true;
    this.sendButton.disabled = true;
    const localKey = `local:${++this.localKeys}`;
    this.input.value = '';
    this.fitInput();
    this.show(addPending(this.messages, localKey, text));
    this.setStatus(`${this.theme.title} is replying…`);
    try {
      const result = await this.client.send(text);
      this.show(confirmSent(this.messages, localKey, result.messageId, result.response));
      this.setStatus('');
    } catch (error) {
      if (error instanceof ChatError && (error.status === 502 || error.status === 504)) {
        // The message was stored; the reply failed (502) or is late (504) and will come by the stream.
        this.show(keepUnanswered(this.messages, localKey));
      } else {
        this.show(dropPending(this.messages, localKey));
        if (this.input.value === '') {
          this.input.value = text;
          this.fitInput();
        }
      }
      this.setStatus(describeFailure(error, 'Your message could not be sent.'));
    } finally {
      this.sending = false;
      this.sendButton.disabled = false;
    }
  }

  /** The input grows with its text, up to its CSS max-height, then scrolls. */
  private fitInput(): void {
    this.input.style.height = 'auto';
    this.input.style.height = `${this.input.scrollHeight + 2}px`;
  }

  private setStatus(text: string): void {
    this.status.textContent = text;
  }

  /** Puts the list on screen, touching only the elements that changed so the log announces only what is new. */
  private show(messages: ShownMessage[]): void {
    this.messages = messages;
    const keys = new Set(messages.map((message) => message.key));
    for (const [key, node] of this.elements) {
      if (!keys.has(key)) {
        node.remove();
        this.elements.delete(key);
      }
    }
    let previous: HTMLElement | null = null;
    for (const message of messages) {
      let node = this.elements.get(message.key);
      if (!node) {
        node = element('div', { class: 'message' });
        const who = element('span', { class: 'visually-hidden' });
        const text = element('span', { class: 'text' });
        node.append(who, text);
        this.elements.set(message.key, node);
      }
      const fromVisitor = message.role === 'user';
      node.className = `message ${fromVisitor ? 'visitor' : 'agent'}${message.pending ? ' pending' : ''}${message.writing ? ' writing' : ''}`;
      // A reply being written is announced once, whole, not piece by piece.
      if (message.writing) node.setAttribute('aria-busy', 'true');
      else node.removeAttribute('aria-busy');
      if (message.id !== undefined) node.dataset.messageId = message.id;
      node.firstElementChild!.textContent = fromVisitor ? 'You: ' : `${this.theme.title}: `;
      if (node.lastElementChild!.textContent !== message.content) node.lastElementChild!.textContent = message.content;
      const expected: ChildNode | null = previous ? previous.nextSibling : this.log.firstChild;
      if (expected !== node) this.log.insertBefore(node, expected);
      previous = node;
    }
    this.greeting.hidden = this.theme.greeting === undefined || messages.length > 0;
    this.log.scrollTop = this.log.scrollHeight;
  }
}

/**
 * The stylesheet, as a constructed sheet where the browser has them: a page whose Content
 * Security Policy refuses inline styles does not refuse those. A `style` element otherwise.
 */
function adoptStyles(root: ShadowRoot): void {
  if ('adoptedStyleSheets' in ShadowRoot.prototype && 'replaceSync' in CSSStyleSheet.prototype) {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(STYLES);
    root.adoptedStyleSheets = [sheet];
  } else {
    const style = document.createElement('style');
    style.textContent = STYLES;
    root.append(style);
  }
}

/** An icon made with DOM calls, not markup: pages that enforce Trusted Types refuse `innerHTML`. */
function icon(path: string, size: number): SVGSVGElement {
  const SVG = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(SVG, 'svg');
  for (const [name, value] of Object.entries({ 'aria-hidden': 'true', focusable: 'false', viewBox: '0 0 24 24', width: String(size), height: String(size) })) {
    svg.setAttribute(name, value);
  }
  const shape = document.createElementNS(SVG, 'path');
  shape.setAttribute('fill', 'currentColor');
  shape.setAttribute('d', path);
  svg.append(shape);
  return svg;
}

function element<K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Record<string, string> = {}): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  return node;
}
