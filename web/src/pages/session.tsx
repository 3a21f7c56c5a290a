import { useRef, useState, type ChangeEvent } from 'react';
import { Link } from 'wouter';
import { useAuth } from '../auth.tsx';
import { readInteractions } from '../interactions.ts';
import { ApprovalButtons, NativeMessagesView } from '../messages.tsx';
import { Badge, ErrorNote, Json, Loading, Page, Revealed, Time, VIEWER_NOTE, formatCost, formatSize, revealControls, useApi } from '../ui.tsx';

/** One session: its turns, what waits for an answer (answerable here), and its folder. */
export function SessionPage({ sessionId }: { sessionId: string }) {
  const { client } = useAuth();
  const session = useApi(['session', sessionId], () => client.sessions.get(sessionId, { limit: 50 }), { refreshInterval: (data) => (data?.live_turn ? 1000 : 0) });
  const turns = session.data?.turns ?? [];
  // Read again whenever the newest turn changes: turns write files, answer and raise interactions.
  const interactions = useApi(session.data ? ['interactions', sessionId, turns[0]?.id, turns[0]?.status] : null, () => readInteractions(client, sessionId), {
    keepPreviousData: true,
  });
  // Each turn is numbered here, not by <ol reversed> (Chromium counts items added after the first
  // render twice). With older turns left unread a turn's number is unknown: none beats a wrong one.
  const numbered = !session.data?.next;
  const refresh = () => Promise.all([session.mutate(), interactions.mutate()]);

  return (
    <Page
      title={
        <>
          Session <span className="mono">{sessionId}</span>
        </>
      }
      actions={
        <>
          <button type="button" onClick={() => void refresh()}>
            Refresh
          </button>
          <Link href={`/chat/${encodeURIComponent(sessionId)}`} className="button">
            Open in chat
          </Link>
        </>
      }
    >
      <ErrorNote error={session.error} />
      {session.data ? (
        <p className="muted">
          Created <Time iso={session.data.session.created_at} />, last used <Time iso={session.data.session.updated_at} />
          {session.data.live_turn ? (
            <>
              {' · '}
              <Badge value="running" label="a turn is running" />
            </>
          ) : null}
        </p>
      ) : null}
      <PendingInteractions interactions={interactions.data?.pending ?? []} error={interactions.error} onAnswered={refresh} />
      <h2>Turns</h2>
      {!session.data && !session.error ? <Loading /> : null}
      {session.data?.turns.length === 0 ? <p className="muted">No turns yet.</p> : null}
      <ol className={numbered ? 'turns' : 'turns unnumbered'}>
        {turns.map((turn, index) => (
          <li key={turn.id} className="turn" value={numbered ? turns.length - index : undefined}>
            <details open={turn.status === 'paused' || turn.status === 'running'}>
              <summary>
                <Badge value={turn.status} /> {turn.stop_reason && turn.stop_reason !== turn.status ? <Badge value={turn.stop_reason} /> : null} <Time iso={turn.started_at} />
                <span className="muted">
                  {' · '}
                  {turn.usage ? `${turn.usage.total} tokens · ${formatCost(turn.usage.cost)}` : 'no usage'}
                </span>
              </summary>
              <dl className="facts">
                <dt>Turn</dt>
                <dd className="mono">{turn.id}</dd>
                <dt>Trace</dt>
                <dd className="mono">{turn.trace_id}</dd>
                {turn.usage ? (
                  <>
                    <dt>Usage</dt>
                    <dd>
                      {turn.usage.input} in · {turn.usage.output} out · {turn.usage.total} total · {formatCost(turn.usage.cost)}
                    </dd>
                  </>
                ) : null}
                {turn.request?.revision ? (
                  <>
                    <dt>Revision</dt>
                    <dd>
                      <Json value={turn.request.revision} />
                    </dd>
                  </>
                ) : null}
              </dl>
              {turn.error ? <p className="error-note">{`${turn.error.code} ${turn.error.type ?? ''}: ${turn.error.message}`}</p> : null}
              {turn.outputs ? <NativeMessagesView messages={turn.outputs.messages} interactions={interactions.data?.byId} /> : null}
            </details>
          </li>
        ))}
      </ol>
      {session.data?.next ? <p className="muted">Older turns are not shown.</p> : null}
      <Files sessionId={sessionId} version={`${turns[0]?.id}:${turns[0]?.status}`} />
    </Page>
  );
}

function PendingInteractions({ interactions, error, onAnswered }: { interactions: { id: string; kind: string; request: { tool: string; args: unknown } }[]; error: unknown; onAnswered: () => unknown }) {
  const { client, canAct } = useAuth();
  const [failure, setFailure] = useState<unknown>();
  const [answered, setAnswered] = useState<string>();
  // The buttons answered are gone with the answer: the focus goes to the section's heading, just above what it says.
  const heading = useRef<HTMLHeadingElement>(null);
  if (!interactions.length && !error && !answered && !failure) return null;

  async function answer(id: string, approved: boolean, reason?: string) {
    setFailure(undefined);
    try {
      await client.interactions.respond(id, { approved, ...(reason ? { reason } : {}) });
      setAnswered(approved ? 'Approved: the turn goes on by itself.' : 'Denied: the agent is told, and the turn goes on.');
      heading.current?.focus();
      await onAnswered();
    } catch (e) {
      setFailure(e);
    }
  }

  return (
    <section aria-labelledby="pending-title" className="pending">
      <h2 id="pending-title" ref={heading} tabIndex={-1}>{interactions.length ? 'Waiting for an answer' : 'Answered'}</h2>
      <ErrorNote error={error} />
      {interactions.map((interaction) => (
        <div key={interaction.id} className="pending-card" role="group" aria-label={`Waiting for an answer: ${interaction.request.tool}`}>
          <p>
            <Badge value="pending" label={interaction.kind} /> <strong>{interaction.request.tool}</strong> <span className="mono muted">{interaction.id}</span>
          </p>
          <Json value={interaction.request.args} label={`Input of ${interaction.request.tool}`} />
          {interaction.kind === 'user_approval' ? (
            <ApprovalButtons label={interaction.request.tool} canAct={canAct} decide={(approved, reason) => void answer(interaction.id, approved, reason)} />
          ) : (
            <p className="hint">A client tool: answer it with POST /api/sessions/interactions/{'{id}'}/respond and its output.</p>
          )}
        </div>
      ))}
      {answered ? <p role="status">{answered}</p> : null}
      <ErrorNote error={failure} />
    </section>
  );
}

/** The session folder; read again whenever the session's latest turn (`version`) changes, since turns write files. */
function Files({ sessionId, version }: { sessionId: string; version: string }) {
  const { client, canAct } = useAuth();
  const [path, setPath] = useState('.');
  const listing = useApi(['files', sessionId, path, version], () => client.sessions.listFiles(sessionId, path));
  const [failure, setFailure] = useState<unknown>();
  const [note, setNote] = useState<string>();
  const input = useRef<HTMLInputElement>(null);
  const join = (name: string) => (path === '.' ? name : `${path}/${name}`);
  const up = path === '.' ? undefined : path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '.';

  async function download(name: string) {
    setFailure(undefined);
    try {
      const bytes = await client.sessions.readFile(sessionId, join(name));
      const url = URL.createObjectURL(new Blob([bytes], { type: 'application/octet-stream' }));
      const link = document.createElement('a');
      link.href = url;
      link.download = name;
      link.click();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    } catch (e) {
      setFailure(e);
    }
  }

  async function upload(event: ChangeEvent<HTMLInputElement>) {
    const file = event.target.files?.[0];
    if (!file) return;
    setFailure(undefined);
    try {
      const done = await client.sessions.writeFile(sessionId, join(file.name), file);
      setNote(`Uploaded ${done.path} (${formatSize(done.size)}).`);
      await listing.mutate();
    } catch (e) {
      setFailure(e);
    } finally {
      if (input.current) input.current.value = '';
    }
  }

  return (
    <section aria-labelledby="files-title">
      <h2 id="files-title">
        Files{' '}
        <span className="mono muted">
          <Revealed text={path === '.' ? '/' : `/${path}`} />
        </span>
      </h2>
      {up !== undefined ? (
        <button type="button" onClick={() => setPath(up)}>
          Up one folder
        </button>
      ) : null}
      <ErrorNote error={listing.error} />
      {listing.data?.entries.length === 0 ? <p className="muted">The folder is empty.</p> : null}
      <ul className="files">
        {listing.data?.entries.map((entry) => (
          <li key={entry.name}>
            {entry.type === 'directory' ? (
              <button type="button" className="link" onClick={() => setPath(join(entry.name))}>
                <Revealed text={`${entry.name}/`} />
              </button>
            ) : (
              <button type="button" className="link" onClick={() => void download(entry.name)} aria-label={`Download ${revealControls(entry.name)}`}>
                <Revealed text={entry.name} />
              </button>
            )}
            {entry.size !== undefined ? <span className="muted"> {formatSize(entry.size)}</span> : null}
          </li>
        ))}
      </ul>
      {canAct ? (
        <p>
          <label htmlFor="upload">Upload a file into this folder </label>
          <input id="upload" ref={input} type="file" onChange={(e) => void upload(e)} />
        </p>
      ) : (
        <p className="hint">{VIEWER_NOTE}</p>
      )}
      {note ? (
        <p role="status">
          <Revealed text={note} />
        </p>
      ) : null}
      <ErrorNote error={failure} />
    </section>
  );
}

