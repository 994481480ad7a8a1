import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiFailure } from './api.js';

export interface Loaded<T> {
  data: T | undefined;
  error: ApiFailure | Error | undefined;
  loading: boolean;
  reload: () => void;
}

/** Loads `load()` when `key` changes (and on `reload`); the last answer stays shown while a new one loads. */
export function useLoad<T>(load: () => Promise<T>, key: string): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: Error; loading: boolean }>({ loading: true });
  const [serial, setSerial] = useState(0);
  useEffect(() => {
    let current = true;
    setState((previous) => ({ ...previous, loading: true }));
    load().then(
      (data) => current && setState({ data, loading: false }),
      (error: Error) => current && setState({ error, loading: false }),
    );
    return () => {
      current = false;
    };
  }, [key, serial]);
  const reload = useCallback(() => setSerial((value) => value + 1), []);
  return { data: state.data, error: state.error, loading: state.loading, reload };
}

export function PageHeader(props: { title: string; intro?: ComponentChildren; children?: ComponentChildren }) {
  return (
    <header class="page-header">
      <div>
        <h1 id="page-title" tabIndex={-1}>
          {props.title}
        </h1>
        {props.intro && <p class="intro">{props.intro}</p>}
      </div>
      {props.children && <div class="actions">{props.children}</div>}
    </header>
  );
}

export function ErrorNote(props: { error: Error | undefined }) {
  if (!props.error) return null;
  const failure = props.error instanceof ApiFailure ? props.error : undefined;
  return (
    <p class="error" role="alert">
      {failure ? `${failure.message} (${failure.code}, ${failure.status})` : props.error.message}
    </p>
  );
}

export function Loading(props: { loaded: Loaded<unknown>; children: () => ComponentChildren }) {
  if (props.loaded.error) return <ErrorNote error={props.loaded.error} />;
  if (props.loaded.data === undefined)
    return (
      <p class="muted" role="status">
        Loading…
      </p>
    );
  return <>{props.children()}</>;
}

/** What a new user sees instead of an empty table: what this is and what to do next. */
export function Empty(props: { title: string; children: ComponentChildren }) {
  return (
    <div class="empty">
      <h2>{props.title}</h2>
      <div>{props.children}</div>
    </div>
  );
}

/** A table that scrolls sideways on a phone rather than overflowing the page. */
export function Table(props: { caption: string; head: string[]; children: ComponentChildren; captionHidden?: boolean }) {
  return (
    <div class="table-wrap" tabIndex={0} role="region" aria-label={props.caption}>
      <table>
        <caption class={props.captionHidden ? 'visually-hidden' : undefined}>{props.caption}</caption>
        <thead>
          <tr>
            {props.head.map((cell) => (
              <th scope="col">{cell || <span class="visually-hidden">Actions</span>}</th>
            ))}
          </tr>
        </thead>
        <tbody>{props.children}</tbody>
      </table>
    </div>
  );
}

export function Stat(props: { label: string; value: ComponentChildren; note?: ComponentChildren; id?: string }) {
  return (
    <div class="stat" id={props.id}>
      <div class="stat-label">{props.label}</div>
      <div class="stat-value">{props.value}</div>
      {props.note && <div class="stat-note">{props.note}</div>}
    </div>
  );
}

export function Code(props: { children: ComponentChildren }) {
  return <code class="code">{props.children}</code>;
}

/** Reloads every `intervalMs` while `active` and the tab is visible: what the API has no stream for. */
export function usePolling(loaded: Loaded<unknown>, active: boolean, intervalMs = 3000): void {
  useEffect(() => {
    if (!active) return;
    const timer = setInterval(() => document.visibilityState === 'visible' && loaded.reload(), intervalMs);
    return () => clearInterval(timer);
  }, [active, intervalMs]);
}

/** How far something went, as a bar and in words (the words are what assistive technology and the tests read). */
export function Progress(props: { label: string; value: number; max: number; unit: string }) {
  return (
    <span class="progress">
      <progress max={props.max} value={props.value} aria-label={props.label} />
      <span class="progress-text">
        {props.value} of {props.max} {props.unit}
      </span>
    </span>
  );
}
