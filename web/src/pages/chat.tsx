import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from 'ai';
import { useCallback, useEffect, useMemo, useRef, useState, type FormEvent, type KeyboardEvent } from 'react';
import { Link, useLocation } from 'wouter';
import { AgentdError } from '../../../src/client/index.ts';
import { CHAT_STORAGE_PREFIX, useAuth } from '../auth.tsx';
import { AgentPicker, bodyOf, describeChoice, type AgentChoice } from '../agent-picker.tsx';
import { reconcile, useServerState } from '../chat-sync.ts';
import { ApprovalButtons, NativeMessagesView, UiMessageView } from '../messages.tsx';
import { Badge, ErrorNote, Json, Page, Time, VIEWER_NOTE, errorText } from '../ui.tsx';

/**
 * A chat with an agent, through the AI SDK's own `useChat` on the invoke endpoint's Vercel stream:
 * the path any front end takes. The conversation is kept in this browser (the service is told the
 * whole conversation on every turn, as useChat does), so a reload restores it and `resume` picks
 * up a turn still running.
 */

interface Saved {
  messages: UIMessage[];
  choice: AgentChoice;
}

const newSessionId = () => `chat-${crypto.randomUUID().slice(0, 8)}`;
/** The history state of a chat this page started: kept through a reload, gone from any other link to the session. */
const NEW_CHAT = { newChat: true };

function load(key: string): Saved | undefined {
  try {
    const raw = localStorage.getItem(key);
    return raw ? (JSON.parse(raw) as Saved) : undefined;
  } catch {
    return undefined;
  }
}

/** The chat's requests, failing as the client's do when the server cannot be reached, so the chat says so as every page does. */
const reachingFetch: typeof fetch = async (input, init) => {
  try {
    return await fetch(input, init);
  } catch (error) {
    if (init?.signal?.aborted) throw error;
    throw new AgentdError({ code: 0, type: 'network', message: `could not reach ${window.location.origin}: ${(error as Error).message}; is agentd running there?` }, { cause: error });
  }
};

/** The server's envelope inside a transport error, as one line. */
function chatError(error: Error): string {
  if (error instanceof AgentdError) return errorText(error);
  // The stream began and then broke off (the server went away, the network dropped): the browser
  // says no more than "network error", which tells nobody what happened or what to do.
  if (error.name === 'TypeError')
    return `network: the connection to ${window.location.origin} broke off before the answer ended (${error.message}); is agentd still running there? Once it is, reload this page to see how the turn ended.`;
  try {
    const body = JSON.parse(error.message) as { status?: { code?: number; type?: string; message?: string } };
    if (body.status?.message) return `${body.status.code ?? ''} ${body.status.type ?? 'error'}: ${body.status.message}`.trim();
  } catch {
    // Not the envelope: the message as it is.
  }
  return error.message;
}

const approvalIds = (messages: UIMessage[]) =>
  new Set(messages.flatMap((m) => m.parts.flatMap((p) => ('approval' in p && p.approval ? [p.approval.id] : []))));

export function ChatPage({ sessionId }: { sessionId: string | undefined }) {
  const [, navigate] = useLocation();
  useEffect(() => {
    if (!sessionId) navigate(`/chat/${newSessionId()}`, { replace: true, state: NEW_CHAT });
  }, [sessionId, navigate]);
  return sessionId ? <Chat sessionId={sessionId} /> : null;
}

function Chat({ sessionId }: { sessionId: string }) {
  const { signed, client, canAct } = useAuth();
  const storageKey = `${CHAT_STORAGE_PREFIX}${signed.projectId}.${sessionId}`;
  const saved = useMemo(() => load(storageKey), [storageKey]);
  const [choice, setChoice] = useState<AgentChoice>(saved?.choice ?? { kind: 'default' });
  const [picking, setPicking] = useState(false);
  const choiceRef = useRef(choice);
  choiceRef.current = choice;

  const transport = useMemo(
    () =>
      new DefaultChatTransport<UIMessage>({
        api: `/services/agent/v0/invoke?project_id=${encodeURIComponent(signed.projectId)}`,
        headers: { authorization: `ApiKey ${signed.key}`, 'x-ag-messages-format': 'vercel' },
        body: () => bodyOf(choiceRef.current),
        fetch: reachingFetch,
      }),
    [signed],
  );
  const { messages, setMessages, sendMessage, status, stop, error, addToolApprovalResponse, resumeStream, clearError } = useChat({
    id: sessionId,
    transport,
    messages: saved?.messages ?? [],
    resume: true,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    throttle: 50,
  });
  const busy = status === 'submitted' || status === 'streaming';

  // Kept as it changes (at once when the chat settles, so a view opened right after a pause finds
  // it; while a turn streams, after a quiet 250 ms), and once more as the page goes away (a reload
  // mid-turn keeps what was sent).
  const latest = useRef<Saved>({ messages, choice });
  latest.current = { messages, choice };
  const persist = useCallback(() => {
    if (latest.current.messages.length) localStorage.setItem(storageKey, JSON.stringify(latest.current));
  }, [storageKey]);
  useEffect(() => {
    if (!busy) {
      persist();
      return;
    }
    const timer = setTimeout(persist, 250);
    return () => clearTimeout(timer);
  }, [messages, choice, persist, busy]);
  useEffect(() => {
    window.addEventListener('pagehide', persist);
    return () => window.removeEventListener('pagehide', persist);
  }, [persist]);

  const end = useRef<HTMLDivElement>(null);
  useEffect(() => {
    end.current?.scrollIntoView({ block: 'end' });
  }, [messages]);

  // A chat started here has no session on the server until its first message: reading it before
  // then would only earn a 404, which the browser logs as an error.
  const [started] = useState(() => (window.history.state as typeof NEW_CHAT | null)?.newChat === true);
  const unborn = started && messages.length === 0;

  // What the server kept, whenever no turn streams here: a turn answered elsewhere, stopped or
  // ended while this page was away goes into the conversation this browser holds. Only a new read
  // brings something to write in (a stream that started meanwhile is left alone).
  const server = useServerState(sessionId, !busy && !unborn);
  useEffect(() => {
    const next = server.state && !busy ? reconcile(latest.current.messages, server.state) : undefined;
    if (next) setMessages(next);
  }, [server.state]);

  // A session this browser holds no conversation of (it ran elsewhere, or this browser forgot it)
  // shows what the server kept of it: each turn's output. A pause among them is still answerable,
  // through the interactions API; the turn then goes on by itself, followed live when caught.
  const known = approvalIds(messages);
  const unseen = (server.state?.pending ?? []).filter((i) => !known.has(i.id));
  const [answerError, setAnswerError] = useState<unknown>();

  async function answerOutOfBand(id: string, approved: boolean, reason?: string) {
    setAnswerError(undefined);
    try {
      await client.interactions.respond(id, { approved, ...(reason ? { reason } : {}) });
    } catch (failure) {
      setAnswerError(failure);
      return;
    }
    // The continuation runs in the background: follow it while it runs, read it once it has ended.
    let caught = false;
    for (let attempt = 0; attempt < 40 && !caught; attempt++) {
      const before = latest.current.messages.length;
      await resumeStream();
      caught = latest.current.messages.length !== before;
      if (caught) break;
      const now = await client.interactions.get(id).catch(() => undefined);
      if (now?.status === 'resolved' || now?.status === 'cancelled') break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    server.refresh();
  }
  // A turn followed live here (its message is `msg-<turn id>`) is shown live, not twice, and so is
  // every later one: a continuation answered here goes on building the paused turn's message, and
  // the kept list, read again once it ended, would show it a second time as a turn of its own.
  const shownLive = new Set(messages.map((m) => m.id));
  const keptOldestFirst = saved ? [] : [...(server.state?.turns ?? [])].reverse();
  const firstLive = keptOldestFirst.findIndex((turn) => shownLive.has(`msg-${turn.id}`));
  const keptTurns = firstLive === -1 ? keptOldestFirst : keptOldestFirst.slice(0, firstLive);

  const [draft, setDraft] = useState('');
  function send(event?: FormEvent) {
    event?.preventDefault();
    const text = draft.trim();
    if (!text || busy || !canAct) return;
    clearError();
    void sendMessage({ text });
    setDraft('');
  }
  function onKeyDown(event: KeyboardEvent<HTMLTextAreaElement>) {
    if (event.key === 'Enter' && !event.shiftKey && !event.nativeEvent.isComposing) send(event);
  }
  async function stopTurn() {
    await stop();
    // The turn runs on the server whether or not anyone reads it: Stop ends it there too.
    await client.sessions.stop(sessionId).catch(() => undefined);
  }

  return (
    <Page
      title={
        <>
          Chat <span className="muted mono">{sessionId}</span>
        </>
      }
      actions={
        <>
          <button type="button" onClick={() => setPicking(!picking)} aria-expanded={picking}>
            Agent: {describeChoice(choice)}
          </button>
          <Link href={`/sessions/${encodeURIComponent(sessionId)}`}>Session</Link>
          <Link href="/chat" className="button">
            New chat
          </Link>
        </>
      }
    >
      {picking ? <AgentPicker choice={choice} onChange={setChoice} /> : null}
      <div className="conversation" aria-live="polite" aria-busy={busy}>
        {keptTurns.length ? (
          <section className="kept" aria-label="Earlier turns kept by the server">
            <p className="hint">
              This browser holds no conversation of this session. These are its latest turns as the server kept them (what each turn answered); a new message here starts
              from the conversation this browser holds.
            </p>
            {keptTurns.map((turn) => (
              <div key={turn.id} className="kept-turn">
                <p className="muted">
                  <Badge value={turn.status} /> <Time iso={turn.started_at} />
                </p>
                {turn.outputs ? <NativeMessagesView messages={turn.outputs.messages} interactions={server.state?.byId} /> : null}
              </div>
            ))}
          </section>
        ) : null}
        {messages.length === 0 && !busy && !keptTurns.length ? <p className="muted">Say something to start. The agent works in this session's own folder.</p> : null}
        {messages.map((message) => (
          <UiMessageView
            key={message.id}
            message={message}
            canAct={canAct}
            interactions={server.state?.byId}
            decide={(id, approved, reason) => void addToolApprovalResponse({ id, approved, ...(reason ? { reason } : {}) })}
          />
        ))}
        {unseen.map((interaction) => (
          <div key={interaction.id} className="pending-card" role="group" aria-label={`Waiting for an answer: ${interaction.request.tool}`}>
            <p>
              <strong>Waiting for your answer:</strong> {interaction.kind === 'user_approval' ? `may the agent run ${interaction.request.tool}?` : `${interaction.kind} for ${interaction.request.tool}`}
            </p>
            <Json value={interaction.request.args} label={`Input of ${interaction.request.tool}`} />
            {interaction.kind === 'user_approval' ? (
              <ApprovalButtons label={interaction.request.tool} canAct={canAct} decide={(approved, reason) => void answerOutOfBand(interaction.id, approved, reason)} />
            ) : (
              <p className="hint">Answer it with the interactions API (the session page links to it).</p>
            )}
          </div>
        ))}
        {status === 'submitted' ? (
          <p className="muted" role="status">
            Waiting for the agent…
          </p>
        ) : null}
        {error ? (
          <p role="alert" className="error-note">
            {chatError(error)}
          </p>
        ) : null}
        <ErrorNote error={answerError} />
        <ErrorNote error={server.error} what="Pending approvals" />
      </div>
      <form className="composer" onSubmit={send}>
        <label htmlFor="message" className="visually-hidden">
          Message
        </label>
        <textarea
          id="message"
          rows={3}
          placeholder={canAct ? 'Message the agent (Enter sends, Shift+Enter for a new line)' : VIEWER_NOTE}
          value={draft}
          onChange={(e) => setDraft(e.target.value)}
          onKeyDown={onKeyDown}
          disabled={!canAct}
        />
        {busy ? (
          <button type="button" onClick={stopTurn} className="danger">
            Stop
          </button>
        ) : (
          <button type="submit" className="primary" disabled={!canAct || draft.trim() === ''}>
            Send
          </button>
        )}
      </form>
      {/* Below the composer, which sticks to the bottom of the window: scrolled to here, the end of the conversation is not under it. */}
      <div ref={end} />
    </Page>
  );
}
