import { useState } from 'react';
import { Link } from 'wouter';
import { useAuth } from '../auth.tsx';
import { Badge, ErrorNote, Field, Loading, Page, TableWrap, Time, formatCost, useApi, useCursorPages } from '../ui.tsx';

/** The project's sessions, newest first, a page at a time, searchable by id. */
export function SessionsPage() {
  const { client } = useAuth();
  const [prefix, setPrefix] = useState('');
  const [status, setStatus] = useState<'' | 'pending' | 'live'>('');
  const { cursor, reset, pager } = useCursorPages();
  const sessions = useApi(['sessions', prefix, status, cursor], () =>
    client.sessions.list({ limit: 25, ...(prefix ? { idPrefix: prefix } : {}), ...(status ? { status } : {}), ...(cursor ? { cursor } : {}) }),
  );

  return (
    <Page title="Sessions" actions={<button type="button" onClick={() => void sessions.mutate()}>Refresh</button>}>
      <form className="filters" role="search" onSubmit={(e) => e.preventDefault()}>
        <Field label="Session id starts with">
          {(id) => (
            <input
              id={id}
              value={prefix}
              onChange={(e) => {
                setPrefix(e.target.value.replace(/[^A-Za-z0-9._:-]/g, ''));
                reset();
              }}
              placeholder="chat-"
            />
          )}
        </Field>
        <Field label="Show">
          {(id) => (
            <select
              id={id}
              value={status}
              onChange={(e) => {
                setStatus(e.target.value as typeof status);
                reset();
              }}
            >
              <option value="">All sessions</option>
              <option value="pending">Waiting for an answer</option>
              <option value="live">Running a turn now</option>
            </select>
          )}
        </Field>
      </form>
      <ErrorNote error={sessions.error} />
      {!sessions.data && !sessions.error ? <Loading /> : null}
      {sessions.data ? (
        sessions.data.sessions.length === 0 ? (
          <p className="muted">No sessions{prefix || status ? ' match' : ' yet: start one in Chat'}.</p>
        ) : (
          <TableWrap label="Sessions, newest first">
            <table>
              <caption className="visually-hidden">Sessions, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Session</th>
                  <th scope="col">Last used</th>
                  <th scope="col">Latest turn</th>
                  <th scope="col">Waiting</th>
                  <th scope="col" className="num">
                    Tokens
                  </th>
                  <th scope="col" className="num">
                    Cost
                  </th>
                </tr>
              </thead>
              <tbody>
                {sessions.data.sessions.map((s) => (
                  <tr key={s.id}>
                    <th scope="row" className="wrap">
                      <Link href={`/sessions/${encodeURIComponent(s.id)}`} className="mono">
                        {s.id}
                      </Link>
                    </th>
                    <td>
                      <Time iso={s.updated_at} />
                    </td>
                    <td>
                      {s.live_turn ? <Badge value="running" /> : s.last_turn ? <Badge value={s.last_turn.stop_reason ?? s.last_turn.status} /> : <span className="muted">none</span>}
                    </td>
                    <td>{s.pending_interactions ? <Badge value="pending" label={`${s.pending_interactions} to answer`} /> : null}</td>
                    <td className="num">{s.last_turn?.usage?.total ?? '–'}</td>
                    <td className="num">{formatCost(s.last_turn?.usage?.cost)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        )
      ) : null}
      {pager(sessions.data?.next)}
    </Page>
  );
}
