import { useChat } from '@ai-sdk/react';
import { APICallError, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from 'ai';
import { useCallback, useEffect, useId, useMemo, useRef, useState, type ChangeEvent, type FormEvent, type KeyboardEvent } from 'react';
import { Link, useLocation } from 'wouter';
import { AgentdError } from '../../../src/client/index.ts';
import { CHAT_STORAGE_PREFIX, useAuth } from '../auth.tsx';
import { AgentPicker, bodyOf, describeChoice, type AgentChoice } from '../agent-picker.tsx';
import { reconcile, useServerState } from '../chat-sync.ts';
import { ApprovalButtons, FILE_LEFT_OUT, NativeMessagesView, UiMessageView, awaitingApproval, type FileLeftOut } from '../messages.tsx';
import { Badge, ErrorNote, Json, Page, Revealed, Time, VIEWER_NOTE, errorText, formatSize, revealControls } from '../ui.tsx';

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

/** A message with each file's data left out: its name and type, in a part the server ignores (a `data-` part). */
const withoutFileData = (message: UIMessage): UIMessage => ({
  ...message,
  parts: message.parts.map((part) => {
    if (part.type !== 'file') return part;
    const data: FileLeftOut = { mediaType: part.mediaType, ...(part.filename ? { filename: part.filename } : {}) };
    return { type: FILE_LEFT_OUT, data };
  }),
});

/**
 * Kept whole when it fits. An attached file is a data: URL in its message, and local storage holds
 * a few MB for the whole origin: when the whole conversation does not fit, it is kept with each
 * file's data left out, so a reload still shows every message and the names of the files that went
 * with it. Those messages are then posted without their files (the files are in the session folder
 * already; the model no longer reads their lines in those messages). When even that does not fit,
 * the save before stays. A full storage must not stop the chat: nothing here throws.
 */
function save(key: string, saved: Saved): void {
  try {
    localStorage.setItem(key, JSON.stringify(saved));
    return;
  } catch {
    // Over the quota, most likely: the files' data is what takes the room.
  }
  try {
    localStorage.setItem(key, JSON.stringify({ ...saved, messages: saved.messages.map(withoutFileData) }));
  } catch {
    // Not even the text fits.
  }
}

/** Files as `useChat`'s `sendMessage` takes them: a FileList, which only a DataTransfer makes. */
function fileList(files: readonly File[]): FileList {
  const transfer = new DataTransfer();
  for (const file of files) transfer.items.add(file);
  return transfer.files;
}

/** A file chosen for the next message; `id` keys it in the list it can be removed from. */
interface Chosen {
  id: number;
  file: File;
}

/** The part of a conversation a refusal names (`messages[2].parts[0]`), when it is a file: its name. */
function refusedFile(error: Error, messages: readonly UIMessage[]): string | undefined {
  const at = /\bmessages\[(\d+)\]\.parts\[(\d+)\]/.exec(error.message);
  const part = at ? messages[Number(at[1])]?.parts[Number(at[2])] : undefined;
  return part?.type === 'file' ? (part.filename ?? 'a file without a name') : undefined;
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

/**
 * What a screen reader is told of a turn, once each: that the agent answers, and how the turn
 * ended. The conversation itself is no live region: it would be read out again with every token
 * that streams in. The answer is not repeated here; it is the conversation's last message.
 */
function turnNews(status: string, messages: readonly UIMessage[]): string {
  if (status === 'streaming') return 'The agent is answering…';
  if (status !== 'ready') return '';
  const last = messages.at(-1);
  if (last?.role !== 'assistant') return '';
  const asking = awaitingApproval(last);
  if (asking.length) return `The agent asks to run ${asking.join(', ')}: approve or deny below.`;
  const stop = (last.metadata as { stop_reason?: string } | undefined)?.stop_reason;
  if (stop === 'cancelled') return 'The turn was stopped.';
  if (stop === 'error' || stop === 'interrupted') return 'The turn ended before the agent finished.';
  return 'The agent has answered.';
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
  const pickerId = useId();
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
  // Only a turn run while this page is open is news: a chat reopened is not announced as answered.
  const [ranHere, setRanHere] = useState(false);
  useEffect(() => {
    if (busy) setRanHere(true);
  }, [busy]);

  // Kept as it changes (at once when the chat settles, so a view opened right after a pause finds
  // it; while a turn streams, after a quiet 250 ms), and once more as the page goes away (a reload
  // mid-turn keeps what was sent).
  const latest = useRef<Saved>({ messages, choice });
  latest.current = { messages, choice };
  const persist = useCallback(() => {
    if (latest.current.messages.length) save(storageKey, latest.current);
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
  const [chosen, setChosen] = useState<Chosen[]>([]);
  const nextFileId = useRef(0);
  const messageBox = useRef<HTMLTextAreaElement>(null);
  function choose(event: ChangeEvent<HTMLInputElement>) {
    const files = Array.from(event.target.files ?? []);
    setChosen((now) => [...now, ...files.map((file) => ({ id: nextFileId.current++, file }))]);
    // Choosing the same file again is a change too.
    event.target.value = '';
  }
  // The buttons answered are gone with the answer: the focus goes on where the next message is written.
  const afterAnswer = () => messageBox.current?.focus();
  function unchoose(id: number) {
    setChosen((now) => now.filter((c) => c.id !== id));
    // The button pressed is gone: the focus goes on where the message is written.
    messageBox.current?.focus();
  }

  // A message the server refused (a file over AGENTD_MAX_UPLOAD, say) is taken back into the
  // composer when it carries files, text and files as they were: left in the conversation, it would
  // be posted, and refused, with every message after it, since useChat posts the whole conversation.
  const sent = useRef<{ text: string; files: Chosen[] }>(undefined);
  const [refused, setRefused] = useState<{ file: string | undefined }>();
  useEffect(() => {
    const draftSent = sent.current;
    const last = latest.current.messages.at(-1);
    if (!error || !APICallError.isInstance(error) || error.statusCode === undefined || error.statusCode < 400 || error.statusCode >= 500) return;
    if (!draftSent?.files.length || last?.role !== 'user' || !last.parts.some((p) => p.type === 'file')) return;
    sent.current = undefined;
    setRefused({ file: refusedFile(error, latest.current.messages) });
    setMessages((now) => (now.at(-1)?.id === last.id ? now.slice(0, -1) : now));
    setDraft((now) => (now.trim() ? now : draftSent.text));
    setChosen((now) => [...draftSent.files, ...now]);
  }, [error]);

  function send(event?: FormEvent) {
    event?.preventDefault();
    const text = draft.trim();
    if ((!text && !chosen.length) || busy || !canAct) return;
    clearError();
    setRefused(undefined);
    sent.current = { text: draft, files: chosen };
    // A message of files alone has no text part: the server takes it, the lines naming the files are its text.
    const files = chosen.length ? fileList(chosen.map((c) => c.file)) : undefined;
    void sendMessage(files ? (text ? { text, files } : { files }) : { text });
    setDraft('');
    setChosen([]);
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
          {/* Named only while open: a reference to nothing is an error to assistive technology. */}
          <button type="button" onClick={() => setPicking(!picking)} aria-expanded={picking} aria-controls={picking ? pickerId : undefined}>
            Agent: {describeChoice(choice)}
          </button>
          <Link href={`/sessions/${encodeURIComponent(sessionId)}`}>Session</Link>
          <Link href="/chat" className="button">
            New chat
          </Link>
        </>
      }
    >
      {picking ? <AgentPicker id={pickerId} choice={choice} onChange={setChoice} /> : null}
      <p className="visually-hidden" role="status">
        {ranHere ? turnNews(status, messages) : ''}
      </p>
      <section className="conversation" aria-label="Conversation" aria-busy={busy}>
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
            decide={(id, approved, reason) => {
              void addToolApprovalResponse({ id, approved, ...(reason ? { reason } : {}) });
              afterAnswer();
            }}
          />
        ))}
        {unseen.map((interaction) => (
          <div key={interaction.id} className="pending-card" role="group" aria-label={`Waiting for an answer: ${interaction.request.tool}`}>
            <p>
              <strong>Waiting for your answer:</strong> {interaction.kind === 'user_approval' ? `may the agent run ${interaction.request.tool}?` : `${interaction.kind} for ${interaction.request.tool}`}
            </p>
            <Json value={interaction.request.args} label={`Input of ${interaction.request.tool}`} />
            {interaction.kind === 'user_approval' ? (
              <ApprovalButtons
                label={interaction.request.tool}
                canAct={canAct}
                decide={(approved, reason) => {
                  void answerOutOfBand(interaction.id, approved, reason);
                  afterAnswer();
                }}
              />
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
            {refused ? (
              <>
                <br />
                The message was not sent: it is back in the message box with its files
                {refused.file ? (
                  <>
                    {' '}
                    (the file the server names is <Revealed text={refused.file} />)
                  </>
                ) : null}
                .
              </>
            ) : null}
          </p>
        ) : null}
        <ErrorNote error={answerError} />
        <ErrorNote error={server.error} what="Pending approvals" />
      </section>
      <form className="composer" onSubmit={send}>
        {chosen.length ? (
          <ul className="chosen-files" aria-label="Files to send">
            {chosen.map(({ id, file }) => (
              <li key={id}>
                <Revealed text={file.name} /> <span className="muted">{formatSize(file.size)}</span>{' '}
                <button type="button" className="link" onClick={() => unchoose(id)} aria-label={`Remove ${revealControls(file.name)}`}>
                  Remove
                </button>
              </li>
            ))}
          </ul>
        ) : null}
        <div className="composer-row">
          {/* The input itself takes the focus and the keys; its label is what shows, as a button. */}
          <input id="attach" type="file" multiple className="visually-hidden attach-input" onChange={choose} disabled={!canAct} />
          <label htmlFor="attach" className="button">
            Attach files
          </label>
          <label htmlFor="message" className="visually-hidden">
            Message
          </label>
          <textarea
            id="message"
            ref={messageBox}
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
            <button type="submit" className="primary" disabled={!canAct || (draft.trim() === '' && !chosen.length)}>
              Send
            </button>
          )}
        </div>
      </form>
      {/* Below the composer, which sticks to the bottom of the window: scrolled to here, the end of the conversation is not under it. */}
      <div ref={end} />
    </Page>
  );
}
