import { useEffect, useId, useRef, useState, type ReactNode } from 'react';
import useSWR, { type SWRConfiguration } from 'swr';
import { AgentdError } from '../../src/client/errors.ts';
import { useAuth } from './auth.tsx';

/**
 * The console's small shared pieces. Everything a model or a user wrote is rendered as React text
 * (escaped by React), never as HTML.
 */

/**
 * A read from the API, cached per project by `key` (null: not yet), kept fresh by SWR. Every page
 * that opens reads anew (no deduping window): what another tab or an API client changed a moment
 * ago shows, and the cache only makes the page appear at once.
 */
export function useApi<T>(key: readonly unknown[] | null, load: () => Promise<T>, options: SWRConfiguration<T> = {}) {
  const { signed } = useAuth();
  return useSWR<T>(key && [signed.projectId, ...key], load, { revalidateOnFocus: false, dedupingInterval: 0, ...options });
}

export function errorText(error: unknown): string {
  if (error instanceof AgentdError) return `${error.status.code ? `${error.status.code} ` : ''}${error.status.type ?? 'error'}: ${error.status.message}`;
  return error instanceof Error ? error.message : String(error);
}

export function ErrorNote({ error, what }: { error: unknown; what?: string }) {
  const { signOut } = useAuth();
  if (!error) return null;
  const expired = error instanceof AgentdError && error.status.code === 401;
  return (
    <div role="alert" className="error-note">
      {what ? <strong>{what}: </strong> : null}
      {errorText(error)}
      {expired ? (
        <>
          {' '}
          <button type="button" onClick={signOut}>
            Sign in again
          </button>
        </>
      ) : null}
    </div>
  );
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p className="muted" role="status" aria-live="polite">
      {what}…
    </p>
  );
}

export function Page({ title, actions, children }: { title: ReactNode; actions?: ReactNode; children: ReactNode }) {
  return (
    <section className="page" aria-labelledby="page-title">
      <header className="page-head">
        <h1 id="page-title">{title}</h1>
        {actions ? <div className="actions">{actions}</div> : null}
      </header>
      {children}
    </section>
  );
}

const TONE: Record<string, string> = {
  completed: 'good',
  success: 'good',
  end_turn: 'good',
  resolved: 'good',
  running: 'busy',
  pending: 'wait',
  paused: 'wait',
  responded: 'busy',
  failed: 'bad',
  failure: 'bad',
  errors: 'bad',
  error: 'bad',
  interrupted: 'bad',
  cancelled: 'muted',
};

export function Badge({ value, label }: { value: string; label?: string }) {
  return <span className={`badge ${TONE[value] ?? 'muted'}`}>{label ?? value}</span>;
}

/** A time as the server sent it, shown in the reader's locale; the exact value on hover. */
export function Time({ iso }: { iso: string | undefined }) {
  if (!iso) return null;
  return (
    <time dateTime={iso} title={iso}>
      {new Date(iso).toLocaleString()}
    </time>
  );
}

/**
 * A table's box, which scrolls sideways when the table is wider than the screen (a phone). While
 * it does, it is a named region in the tab order: a table of text alone holds nothing else the
 * keyboard could reach to scroll it. While it does not, it is no tab stop.
 */
export function TableWrap({ label, children }: { label: string; children: ReactNode }) {
  const box = useRef<HTMLDivElement>(null);
  const [scrolls, setScrolls] = useState(false);
  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const observer = new ResizeObserver(() => setScrolls(element.scrollWidth > element.clientWidth));
    // The box resizes with the window; the table inside it, with its rows.
    observer.observe(element);
    if (element.firstElementChild) observer.observe(element.firstElementChild);
    return () => observer.disconnect();
  }, []);
  return (
    <div ref={box} className="table-wrap" {...(scrolls ? { tabIndex: 0, role: 'region', 'aria-label': `${label} (scrolls sideways)` } : {})}>
      {children}
    </div>
  );
}

export function Json({ value, label }: { value: unknown; label?: string }) {
  return (
    <pre className="json" aria-label={label} tabIndex={0}>
      {/* A tool's input and result name files: their bidi controls are shown as a file list shows them. */}
      <Revealed text={typeof value === 'string' ? value : (JSON.stringify(value, null, 2) ?? '')} />
    </pre>
  );
}

/**
 * Bidirectional controls: invisible, yet they reorder the text around them ("Trojan Source"), so
 * a file named "invoice-\u202Efdp.exe" would read "invoice-exe.pdf". Isolating the text is not
 * enough against a control inside it; each one is shown as its code point instead, so what is
 * seen is the text's real order. In prose, the marks (U+200E, U+200F, U+061C) are how right-to-left
 * writing places its punctuation and stay as written; the embeddings, overrides and isolates,
 * which reorder whole runs of text and which nobody types, are shown there too.
 */
const BIDI_CONTROL = /([\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069])/;
const RUN_CONTROL = /([\u202A-\u202E\u2066-\u2069])/;
const codePoint = (char: string) => `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

/** `text` with its bidi controls written as code points, for where only a string goes (a label). */
export const revealControls = (text: string) =>
  text
    .split(BIDI_CONTROL)
    .map((piece, i) => (i % 2 ? codePoint(piece) : piece))
    .join('');

/**
 * `text` as written, in its real order: each bidi control (in `prose`, each that reorders a run)
 * a marked code point, the whole kept from reordering what surrounds it. Prose is a block of its
 * own and keeps the page's direction, as it had before any control was shown.
 */
export function Revealed({ text, prose = false }: { text: string; prose?: boolean }) {
  const pieces = text.split(prose ? RUN_CONTROL : BIDI_CONTROL).map((piece, i) =>
    i % 2 ? (
      <span key={i} className="control-char" title="A hidden character that reorders text, shown as its code point">
        {codePoint(piece)}
      </span>
    ) : (
      piece
    ),
  );
  return prose ? <>{pieces}</> : <bdi>{pieces}</bdi>;
}

export const formatNumber = (n: number | undefined, digits = 2) => (n === undefined ? '–' : Number.isInteger(n) ? n.toLocaleString() : n.toFixed(digits));
export const formatCost = (n: number | undefined) => (n === undefined ? '–' : `$${n.toFixed(n < 0.01 ? 5 : 4)}`);
export const formatSize = (n: number) => (n < 1000 ? `${n} ${n === 1 ? 'byte' : 'bytes'}` : n < 1e6 ? `${(n / 1e3).toFixed(1)} kB` : `${(n / 1e6).toFixed(1)} MB`);
export const formatMs = (n: number | undefined) => (n === undefined ? '–' : n < 1000 ? `${Math.round(n)} ms` : `${(n / 1000).toFixed(2)} s`);

/** A labelled form control: the label is tied to the control for screen readers and clicks. */
export function Field({ label, hint, children }: { label: string; hint?: string; children: (id: string) => ReactNode }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children(id)}
      {hint ? <p className="hint">{hint}</p> : null}
    </div>
  );
}

/** Why a viewer sees a control it cannot use. */
export const VIEWER_NOTE = 'Your key has the viewer role: it can read, not act.';

/** Keyset pages of a list: the cursor to read now, and the Newer / Older buttons that move it. */
export function useCursorPages() {
  // The cursors of the pages before this one, to go back.
  const [cursors, setCursors] = useState<string[]>([]);
  return {
    cursor: cursors.at(-1),
    reset: () => setCursors([]),
    pager: (next: string | undefined) => (
      <nav className="pager" aria-label="Pages">
        <button type="button" disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>
          Newer
        </button>
        <button type="button" disabled={!next} onClick={() => next && setCursors([...cursors, next])}>
          Older
        </button>
      </nav>
    ),
  };
}

/** A labelled choice among `options`, starting from "Choose…" until one is picked. */
export function ChoiceField({ label, value, onChange, options, required }: { label: string; value: string; onChange: (value: string) => void; options: { value: string; label: string }[]; required?: boolean }) {
  return (
    <Field label={label}>
      {(id) => (
        <select id={id} value={value} onChange={(e) => onChange(e.target.value)} required={required}>
          <option value="">Choose…</option>
          {options.map((option) => (
            <option key={option.value} value={option.value}>
              {option.label}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}
