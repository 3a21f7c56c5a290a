import { useEffect, useRef, useState, type FormEvent } from 'react';
import type { UIMessage } from 'ai';
import type { InteractionState } from './interactions.ts';
import { Badge, Json, Revealed, VIEWER_NOTE } from './ui.tsx';

/**
 * How a conversation reads: UI messages as the chat holds them (the AI SDK's parts), and the
 * native messages a stored turn holds. Text stays text: a model that writes `<script>` gets those
 * characters on the screen, nothing more.
 */

type Part = UIMessage['parts'][number];
type ToolPart = Extract<Part, { toolCallId: string }>;

export interface Decide {
  (approvalId: string, approved: boolean, reason?: string): void;
}

const isToolPart = (part: Part): part is ToolPart => 'toolCallId' in part;

/** The SDK's part states, as a person reads them, with the badge tone of each. */
const STATES: Record<ToolPart['state'], [label: string, tone: string]> = {
  'input-streaming': ['preparing', 'running'],
  'input-available': ['running', 'running'],
  'approval-requested': ['awaiting approval', 'pending'],
  'approval-responded': ['answered', 'running'],
  'output-available': ['done', 'completed'],
  'output-error': ['failed', 'failed'],
  'output-denied': ['denied', 'failed'],
};
/** How a turn that ended short reads under its message; the other ends need no words. */
const ENDINGS: Partial<Record<string, string>> = {
  cancelled: 'Stopped: the turn was cancelled before it finished.',
  interrupted: 'Interrupted: the server stopped before the turn finished.',
  error: 'The turn failed.',
};
/** Part states of a call still in flight: in a message whose turn ended short, it never finished. */
const UNSETTLED = new Set<ToolPart['state']>(['input-streaming', 'input-available', 'approval-responded']);

const toolName = (part: ToolPart) => ('toolName' in part && typeof part.toolName === 'string' ? part.toolName : part.type.replace(/^tool-/, ''));

/** The tools a message's calls wait on an approval for. */
export const awaitingApproval = (message: UIMessage): string[] => message.parts.filter(isToolPart).filter((part) => part.state === 'approval-requested').map(toolName);

/** Approve, or deny with a reason the model is told. */
export function ApprovalButtons({ label, decide, canAct }: { label: string; decide: (approved: boolean, reason?: string) => void; canAct: boolean }) {
  const [denying, setDenying] = useState(false);
  const [reason, setReason] = useState('');
  // Back from the reason (its button, or Escape) puts the focus on Deny… again, not on the page's body.
  const deny = useRef<HTMLButtonElement>(null);
  const cameBack = useRef(false);
  useEffect(() => {
    if (denying || !cameBack.current) return;
    cameBack.current = false;
    deny.current?.focus();
  }, [denying]);
  const back = () => {
    cameBack.current = true;
    setDenying(false);
  };
  if (!canAct) return <p className="hint">{VIEWER_NOTE}</p>;
  if (denying) {
    const submit = (event: FormEvent) => {
      event.preventDefault();
      decide(false, reason.trim() || undefined);
    };
    return (
      <form className="approval" onSubmit={submit} onKeyDown={(e) => e.key === 'Escape' && back()}>
        <label>
          Why deny {label}? <span className="muted">(the agent is told)</span>
          <input value={reason} onChange={(e) => setReason(e.target.value)} autoFocus />
        </label>
        <button type="submit" className="danger">
          Deny
        </button>
        <button type="button" onClick={back}>
          Back
        </button>
      </form>
    );
  }
  return (
    <div className="approval" role="group" aria-label={`Approval for ${label}`}>
      <button type="button" className="primary" onClick={() => decide(true)}>
        Approve
      </button>
      <button type="button" ref={deny} onClick={() => setDenying(true)}>
        Deny…
      </button>
    </div>
  );
}

function ToolCall({ part, decide, canAct, ended, interactions }: { part: ToolPart; decide?: Decide; canAct: boolean; ended: boolean; interactions?: ReadonlyMap<string, InteractionState> | undefined }) {
  const name = toolName(part);
  const approval = 'approval' in part ? part.approval : undefined;
  const stopped = ended && UNSETTLED.has(part.state);
  // A pause the server gave up on (a new message was sent instead of an answer): answering it here would do nothing.
  const withdrawn = part.state === 'approval-requested' && !!approval && interactions?.get(approval.id)?.status === 'cancelled';
  return (
    <div className={`tool-call state-${part.state}`} role="group" aria-label={`Tool call ${name}`}>
      <div className="tool-head">
        <span className="tool-name">{name}</span>
        {withdrawn ? <Badge value="cancelled" label="approval cancelled" /> : stopped ? <Badge value="cancelled" label="stopped" /> : <Badge value={STATES[part.state]?.[1] ?? 'running'} label={STATES[part.state]?.[0] ?? part.state} />}
      </div>
      <details open={part.state !== 'output-available'}>
        <summary>Input</summary>
        <Json value={part.input ?? null} label={`Input of ${name}`} />
      </details>
      {part.state === 'output-available' ? (
        <details open>
          <summary>Result</summary>
          <Json value={part.output ?? null} label={`Result of ${name}`} />
        </details>
      ) : null}
      {part.state === 'output-error' ? (
        <p className="error-note">
          <Revealed text={part.errorText} />
        </p>
      ) : null}
      {part.state === 'approval-requested' && approval && decide && !withdrawn ? (
        <ApprovalButtons label={name} canAct={canAct} decide={(approved, reason) => decide(approval.id, approved, reason)} />
      ) : null}
      {approval && 'approved' in approval && approval.approved !== undefined ? (
        <p className="muted">{approval.approved ? 'Approved' : `Denied${approval.reason ? `: ${approval.reason}` : ''}`}</p>
      ) : null}
    </div>
  );
}

/** The part a file's data left out of a saved conversation becomes (chat.tsx, `save`): which file it was. */
export const FILE_LEFT_OUT = 'data-file-left-out';
export interface FileLeftOut {
  mediaType: string;
  filename?: string;
}

/**
 * A file that went with a message: its name and media type, and an image as a small picture of
 * itself. Only an image's own data: URL is ever a source, in an <img>, where nothing in it runs; no
 * other file becomes a link or a frame.
 */
function AttachedFile({ filename, mediaType, url }: { filename: string | undefined; mediaType: string; url: string | undefined }) {
  const image = url !== undefined && /^image\//i.test(mediaType) && /^data:image\//i.test(url);
  // A browser's File.type is '' for a file it has no type for; the server then takes the data URL's, octet-stream.
  const type = mediaType || 'application/octet-stream';
  return (
    <p className="attached-file">
      {image ? <img src={url} alt="" /> : null}
      <span>
        <Revealed text={filename || 'a file without a name'} /> <span className="muted">{type}</span>
        {url === undefined ? <span className="muted"> (not kept in this browser)</span> : null}
      </span>
    </p>
  );
}

/** What a person or a model wrote, as it wrote it, its run-reordering controls shown (ui.tsx, Revealed). */
function Prose({ text }: { text: string }) {
  return (
    <div className="text">
      <Revealed text={text} prose />
    </div>
  );
}

export function UiMessageView({ message, decide, canAct, interactions }: { message: UIMessage; decide?: Decide; canAct: boolean; interactions?: ReadonlyMap<string, InteractionState> | undefined }) {
  const metadata = message.metadata as { usage?: { total?: number; cost?: number }; stop_reason?: string } | undefined;
  const ending = metadata?.stop_reason ? ENDINGS[metadata.stop_reason] : undefined;
  return (
    <article className={`message ${message.role}`} aria-label={message.role === 'user' ? 'You' : 'Agent'}>
      <p className="who">{message.role === 'user' ? 'You' : 'Agent'}</p>
      {message.parts.map((part, index) => {
        if (part.type === 'text') return <Prose key={index} text={part.text} />;
        if (part.type === 'reasoning')
          return (
            <details key={index} className="thought">
              <summary>Thought</summary>
              <Prose text={part.text} />
            </details>
          );
        if (isToolPart(part)) return <ToolCall key={index} part={part} canAct={canAct} ended={!!ending} interactions={interactions} {...(decide ? { decide } : {})} />;
        if (part.type === 'step-start') return null;
        if (part.type === 'file') return <AttachedFile key={index} filename={part.filename} mediaType={part.mediaType} url={part.url} />;
        if (part.type === FILE_LEFT_OUT) {
          const left = part.data as FileLeftOut;
          return <AttachedFile key={index} filename={left.filename} mediaType={left.mediaType} url={undefined} />;
        }
        return <Json key={index} value={part} />;
      })}
      {metadata?.stop_reason && metadata.stop_reason !== 'end_turn' ? <Badge value={metadata.stop_reason} /> : null}
      {ending ? <p className="muted ending">{ending}</p> : null}
      {metadata?.usage?.total !== undefined ? (
        <p className="usage muted">
          {metadata.usage.total} tokens{metadata.usage.cost !== undefined ? ` · $${metadata.usage.cost.toFixed(4)}` : ''}
        </p>
      ) : null}
    </article>
  );
}

/** A native message as a stored turn keeps it (docs/api.md, "Native messages"). */
export interface NativeMessage {
  role: string;
  content: string;
  tool_call_id?: string;
  tool_name?: string;
  input?: unknown;
  is_error?: boolean;
  approval?: { id: string; approved?: boolean; reason?: string };
}

/** A stored call's approval: as the turn recorded it, or, still open there, as its interaction stands now. */
function approvalBadge(approval: NonNullable<NativeMessage['approval']>, interaction: InteractionState | undefined) {
  const approved = approval.approved ?? (typeof interaction?.answer?.approved === 'boolean' ? interaction.answer.approved : undefined);
  if (approved !== undefined) return <Badge value={approved ? 'completed' : 'failed'} label={approved ? 'approved' : 'denied'} />;
  if (interaction?.status === 'pending') return <Badge value="pending" label="awaiting approval" />;
  if (interaction?.status === 'cancelled') return <Badge value="cancelled" label="approval cancelled" />;
  // Not known to be waiting (answered, or its interaction not read): it must not look like it waits.
  return <Badge value="asked" label="asked for approval" />;
}

export function NativeMessagesView({ messages, interactions }: { messages: readonly unknown[]; interactions?: ReadonlyMap<string, InteractionState> | undefined }) {
  return (
    <div className="native-messages">
      {(messages as NativeMessage[]).map((m, index) => {
        if (m.tool_name !== undefined) {
          return (
            <div key={index} className="tool-call" role="group" aria-label={`Tool call ${m.tool_name}`}>
              <div className="tool-head">
                <span className="tool-name">{m.tool_name}</span>
                {m.approval ? approvalBadge(m.approval, interactions?.get(m.approval.id)) : null}
              </div>
              <Json value={m.input ?? null} label={`Input of ${m.tool_name}`} />
            </div>
          );
        }
        if (m.role === 'tool') {
          return (
            <div key={index} className={`tool-result${m.is_error ? ' is-error' : ''}`}>
              <span className="muted">{m.is_error ? 'Tool error' : 'Tool result'}</span>
              <Json value={m.content} />
            </div>
          );
        }
        return (
          <article key={index} className={`message ${m.role}`}>
            <p className="who">{m.role === 'user' ? 'User' : m.role === 'assistant' ? 'Agent' : m.role}</p>
            <Prose text={m.content} />
          </article>
        );
      })}
    </div>
  );
}
