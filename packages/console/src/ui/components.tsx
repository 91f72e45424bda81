import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.js';

interface Polled<T> {
  data: T | undefined;
  error: ApiError | Error | undefined;
  reload: () => void;
}

/**
 * Runs `load` now and every `everyMs` (0 = once), again when `deps` change.
 * A slow answer never overwrites a newer one; the last good data stays on
 * screen while a refresh fails.
 */
export function usePoll<T>(load: () => Promise<T>, deps: unknown[], everyMs = 0): Polled<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<Error | undefined>(undefined);
  const [tick, setTick] = useState(0);
  const seq = useRef(0);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      const mine = ++seq.current;
      try {
        const value = await load();
        if (!stopped && mine === seq.current) {
          setData(value);
          setError(undefined);
        }
      } catch (err) {
        if (!stopped && mine === seq.current) setError(err as Error);
      }
      if (!stopped && everyMs > 0) timer = setTimeout(run, everyMs);
    };
    void run();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, reload };
}

export function ErrorBox({ error }: { error: Error | undefined }) {
  if (!error) return null;
  const code = error instanceof ApiError ? `${error.code}: ` : '';
  return (
    <div class="error" role="alert">
      {code}
      {error.message}
    </div>
  );
}

export function Json({ value, class: cls }: { value: unknown; class?: string }) {
  return <pre class={cls}>{JSON.stringify(value, null, 2)}</pre>;
}

/** A one-line JSON preview, cut at `max` characters. */
export function preview(value: unknown, max = 80): string {
  const text = JSON.stringify(value) ?? 'undefined';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** An event-time watermark (epoch ms; null: none yet): the time it has reached, and how far that is behind this browser's clock. */
export function Watermark({ ms }: { ms: number | null }) {
  if (ms === null) return <>—</>;
  return (
    <>
      {time(new Date(ms).toISOString())}
      <span class="muted"> ({duration(Math.max(0, Date.now() - ms) / 1000)} behind)</span>
    </>
  );
}

/** `95` → `1m 35s`; `0` → `0s`. */
export function duration(seconds: number): string {
  let s = Math.max(0, Math.round(seconds));
  const parts: string[] = [];
  for (const [unit, size] of [
    ['d', 86400],
    ['h', 3600],
    ['m', 60],
  ] as const) {
    if (s >= size) {
      parts.push(`${Math.floor(s / size)}${unit}`);
      s %= size;
    }
  }
  if (s > 0 || parts.length === 0) parts.push(`${s}s`);
  return parts.slice(0, 2).join(' ');
}

export function time(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/**
 * Previous/next over a server-side paged list: by `total` when the route
 * counts its rows, else by `more` (the route answered a row past the page).
 */
export function Pager({ offset, limit, shown, total, more, onChange }: { offset: number; limit: number; shown: number; total?: number; more?: boolean; onChange: (offset: number) => void }) {
  const hasNext = total === undefined ? Boolean(more) : offset + limit < total;
  if (!hasNext && offset === 0) return null;
  return (
    <div class="toolbar" data-testid="pager">
      <button disabled={offset === 0} onClick={() => onChange(Math.max(0, offset - limit))}>
        Previous
      </button>
      <span class="muted" data-testid="pager-range">
        {shown === 0 ? 0 : offset + 1}–{offset + shown}
        {total === undefined ? '' : ` of ${total}`}
      </span>
      <button disabled={!hasNext} onClick={() => onChange(offset + limit)}>
        Next
      </button>
    </div>
  );
}

/** A name filter for a server-side listing: reports its text once typing pauses, so each keystroke is not a request. */
export function SearchBox({ placeholder, onChange }: { placeholder: string; onChange: (text: string) => void }) {
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(timer.current), []);
  return (
    <div class="toolbar">
      <input
        type="search"
        name="search"
        placeholder={placeholder}
        onInput={(e) => {
          const text = (e.target as HTMLInputElement).value.trim();
          clearTimeout(timer.current);
          timer.current = setTimeout(() => onChange(text), SEARCH_PAUSE_MS);
        }}
      />
    </div>
  );
}

const SEARCH_PAUSE_MS = 250;

export function Section({ title, children }: { title: string; children: ComponentChildren }) {
  return (
    <section>
      <h3>{title}</h3>
      {children}
    </section>
  );
}

/** Asks before an action that changes the broker. */
export function confirmed(question: string): boolean {
  return window.confirm(question);
}
