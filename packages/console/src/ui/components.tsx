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

export function Pager({ offset, limit, total, onChange }: { offset: number; limit: number; total: number; onChange: (offset: number) => void }) {
  if (total <= limit && offset === 0) return null;
  return (
    <div class="toolbar">
      <button disabled={offset === 0} onClick={() => onChange(Math.max(0, offset - limit))}>
        Previous
      </button>
      <span class="muted">
        {total === 0 ? 0 : offset + 1}–{Math.min(offset + limit, total)} of {total}
      </span>
      <button disabled={offset + limit >= total} onClick={() => onChange(offset + limit)}>
        Next
      </button>
    </div>
  );
}

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
