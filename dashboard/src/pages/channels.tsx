import { useEffect, useRef, useState } from 'preact/hooks';
import { api, formatTime, withQuery, type Mode } from '../api.js';
import { href } from '../route.js';
import { Code, Empty, Loading, PageHeader, Table, useLoad } from '../ui.js';

interface Channel {
  id: string;
  type: 'chat_embed' | 'slack' | 'email' | 'phone';
  name: string | null;
  agent: string;
  theme?: { primaryColor?: string; mode?: string; position?: string; title?: string; greeting?: string; placeholder?: string };
  allowedOrigins?: string[];
  scriptTag?: string;
  workspace?: string;
  address?: string;
  phoneNumber?: string;
  inboundUrl?: string;
  createdAt: string;
  updatedAt: string;
}

/** The widget's script, served by this server (the channel's scriptTag names it with the public URL). */
const WIDGET_SCRIPT = '/widget/v1/berth-chat.js';
/** The element the widget adds to the page. */
const WIDGET_HOST = 'berth-chat';

/** Where a channel is reached: what people write to or dial. */
function reachedAt(channel: Channel): string {
  switch (channel.type) {
    case 'chat_embed':
      return channel.allowedOrigins?.length ? channel.allowedOrigins.join(', ') : 'any website';
    case 'slack':
      return `Slack team ${channel.workspace ?? ''}`;
    case 'email':
      return channel.address ?? '';
    case 'phone':
      return channel.phoneNumber ?? '';
  }
}

export function Channels(props: { mode: Mode }) {
  const loaded = useLoad(() => api<{ data: Channel[] }>(withQuery('/api/channels', { mode: props.mode })), props.mode);
  return (
    <>
      <PageHeader title="Channels" intro={`Where people talk to your agents: a chat widget on your site, Slack, email or a phone number (${props.mode} keys).`} />
      <Loading loaded={loaded}>
        {() =>
          loaded.data!.data.length === 0 ? (
            <Empty title="No channels yet">
              <p>
                Create one with <Code>POST /v1/channels</Code>: <Code>type: "chat_embed"</Code> and an agent definition gives you a script tag for your site; its
                widget can be tried here, live, before it goes on a page.
              </p>
            </Empty>
          ) : (
            <Table caption="Channels" head={['Name', 'Type', 'Agent', 'Reached at', 'Updated']} captionHidden>
              {loaded.data!.data.map((channel) => (
                <tr>
                  <td>
                    <a href={href('channels', channel.id)}>{channel.name ?? channel.id}</a>
                  </td>
                  <td>{channel.type}</td>
                  <td>
                    <a href={href('definitions', channel.agent)}>{channel.agent}</a>
                  </td>
                  <td>{reachedAt(channel)}</td>
                  <td>{formatTime(channel.updatedAt)}</td>
                </tr>
              ))}
            </Table>
          )
        }
      </Loading>
    </>
  );
}

export function ChannelPage(props: { mode: Mode; id: string }) {
  const loaded = useLoad(() => api<Channel>(withQuery(`/api/channels/${props.id}`, { mode: props.mode })), `${props.mode}/${props.id}`);
  return (
    <>
      <PageHeader title="Channel" intro={loaded.data ? (loaded.data.name ?? props.id) : props.id} />
      <p>
        <a href={href('channels')}>All channels</a>
      </p>
      <Loading loaded={loaded}>
        {() => {
          const channel = loaded.data!;
          return (
            <>
              <dl class="facts">
                <div>
                  <dt>Type</dt>
                  <dd>{channel.type}</dd>
                </div>
                <div>
                  <dt>Agent</dt>
                  <dd>
                    <a href={href('definitions', channel.agent)}>{channel.agent}</a>
                  </dd>
                </div>
                <div>
                  <dt>Reached at</dt>
                  <dd>{reachedAt(channel)}</dd>
                </div>
                {channel.inboundUrl && (
                  <div>
                    <dt>Inbound webhook URL</dt>
                    <dd>
                      <Code>{channel.inboundUrl}</Code>
                    </dd>
                  </div>
                )}
              </dl>
              {channel.type === 'chat_embed' && <WidgetPreview channel={channel} />}
            </>
          );
        }}
      </Loading>
    </>
  );
}

/**
 * The real widget, loaded from this server as a site loads it, talking to the channel through its
 * public routes. It puts itself at the corner of the window; moved into the preview box, whose
 * `transform` makes it the widget's containing block, it sits in the box's corner instead.
 */
function WidgetPreview(props: { channel: Channel }) {
  const box = useRef<HTMLDivElement>(null);
  const [shown, setShown] = useState(false);
  const origins = props.channel.allowedOrigins ?? [];
  const refused = origins.length > 0 && !origins.includes(location.origin);

  useEffect(() => {
    setShown(false);
    document.getElementById(WIDGET_HOST)?.remove();
    const adopt = () => {
      const host = document.getElementById(WIDGET_HOST);
      if (!host || !box.current) return false;
      if (host.parentElement !== box.current) box.current.append(host);
      setShown(true);
      return true;
    };
    const watcher = new MutationObserver(() => adopt() && watcher.disconnect());
    watcher.observe(document.body, { childList: true });
    const script = document.createElement('script');
    script.src = WIDGET_SCRIPT;
    script.async = true;
    script.dataset.channelId = props.channel.id;
    document.body.append(script);
    return () => {
      watcher.disconnect();
      script.remove();
      document.getElementById(WIDGET_HOST)?.remove();
    };
  }, [props.channel.id, props.channel.updatedAt]);

  return (
    <section aria-labelledby="preview-title">
      <h2 id="preview-title">Live preview</h2>
      <p>
        The chat widget as your site's visitors get it, with this channel's theme, answering through the channel's agent: messages sent here run it (and are
        charged) like any visitor's. Put this tag on your pages:
      </p>
      <pre class="output" id="channel-script-tag">
        {props.channel.scriptTag}
      </pre>
      {refused && (
        <p class="hint" role="note">
          This channel allows only {origins.join(', ')}: the preview shows its look, but messages from this console ({location.origin}) are refused until
          the origin is added to its <Code>allowedOrigins</Code>.
        </p>
      )}
      {!shown && (
        <p class="muted" role="status">
          Loading the widget…
        </p>
      )}
      {/* Preact renders nothing inside: the widget's element is the box's only child. */}
      <div class="widget-preview" ref={box} id="widget-preview" aria-label="Chat widget preview" role="region" />
    </section>
  );
}
