import { useState, type FormEvent } from 'react';
import { Link } from 'wouter';
import { useAuth } from '../auth.tsx';
import { ErrorNote, Field, Loading, Page, TableWrap, Time, VIEWER_NOTE, useApi } from '../ui.tsx';

/** Stored workflows with their variants, and the environments and what each deploys. */
export function WorkflowsPage() {
  const { client, canAct } = useAuth();
  const workflows = useApi(['workflows'], () => client.workflows.list());
  const environments = useApi(['environments'], () => client.environments.list());
  return (
    <Page title="Workflows">
      <ErrorNote error={workflows.error} />
      {!workflows.data && !workflows.error ? <Loading /> : null}
      {workflows.data?.workflows.length === 0 ? (
        <p className="muted">
          No workflows yet. Create one with <code>POST /api/workflows</code> (see the API reference).
        </p>
      ) : null}
      {workflows.data?.workflows.length ? (
        <TableWrap label="Workflows">
          <table>
            <caption className="visually-hidden">Workflows</caption>
            <thead>
              <tr>
                <th scope="col">Workflow</th>
                <th scope="col">Family</th>
                <th scope="col">Variants</th>
                <th scope="col">Updated</th>
              </tr>
            </thead>
            <tbody>
              {workflows.data.workflows.map((w) => (
                <tr key={w.id}>
                  <th scope="row" className="wrap">
                    <Link href={`/workflows/${encodeURIComponent(w.id)}`}>{w.name ?? w.slug}</Link> <span className="mono muted">{w.slug}</span>
                  </th>
                  <td>{w.family}</td>
                  <td className="wrap">{w.variants.map((v) => `${v.slug} (v${v.latest_version ?? 0})`).join(', ')}</td>
                  <td>
                    <Time iso={w.updated_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      <h2>Environments</h2>
      <ErrorNote error={environments.error} />
      {environments.data?.environments.length === 0 ? <p className="muted">No environments yet.</p> : null}
      <ul className="wrap">
        {environments.data?.environments.map((env) => {
          const deployed = ((env.revision?.data as { references?: Record<string, { workflow_revision?: { version?: number }; workflow_variant?: { slug?: string } }> } | undefined)?.references ?? {}) as Record<
            string,
            { workflow_revision?: { version?: number }; workflow_variant?: { slug?: string } }
          >;
          return (
            <li key={env.id}>
              <strong>{env.name ?? env.slug}</strong> <span className="mono muted">{env.slug}</span>:{' '}
              {Object.keys(deployed).length
                ? Object.entries(deployed)
                    .map(([key, ref]) => `${key} → ${ref.workflow_variant?.slug ?? ''} v${ref.workflow_revision?.version ?? '?'}`)
                    .join(', ')
                : 'nothing deployed'}
            </li>
          );
        })}
      </ul>
      {canAct ? <NewEnvironment onDone={() => void environments.mutate()} /> : <p className="hint">{VIEWER_NOTE}</p>}
    </Page>
  );
}

function NewEnvironment({ onDone }: { onDone: () => void }) {
  const { client } = useAuth();
  const [slug, setSlug] = useState('');
  const [failure, setFailure] = useState<unknown>();
  async function submit(event: FormEvent) {
    event.preventDefault();
    setFailure(undefined);
    try {
      await client.environments.create({ slug: slug.trim() });
      setSlug('');
      onDone();
    } catch (e) {
      setFailure(e);
    }
  }
  return (
    <form className="row" onSubmit={submit} aria-label="New environment">
      <Field label="New environment">{(id) => <input id={id} value={slug} onChange={(e) => setSlug(e.target.value)} placeholder="production" required />}</Field>
      <button type="submit">Create</button>
      <ErrorNote error={failure} />
    </form>
  );
}
