import { diffLines } from 'diff';
import { useState, type FormEvent } from 'react';
import { useAuth } from '../auth.tsx';
import { Badge, ChoiceField, ErrorNote, Field, Json, Loading, Page, TableWrap, Time, VIEWER_NOTE, useApi } from '../ui.tsx';

/** One workflow: its revisions (every variant, newest first), the diff of two, and deploying one. */
export function WorkflowPage({ id }: { id: string }) {
  const { client, canAct } = useAuth();
  const workflow = useApi(['workflow', id], () => client.workflows.get(id));
  const revisions = useApi(['revisions', id, 'all'], () => client.workflows.revisions(id, { limit: 200 }));
  const [left, setLeft] = useState('');
  const [right, setRight] = useState('');
  const list = revisions.data?.revisions ?? [];
  const label = (r: (typeof list)[number]) => `${r.variant.slug} v${r.version}${r.message ? ` — ${r.message}` : ''}`;
  const a = list.find((r) => r.id === left);
  const b = list.find((r) => r.id === right);

  return (
    <Page title={workflow.data ? (workflow.data.name ?? workflow.data.slug) : 'Workflow'}>
      <ErrorNote error={workflow.error ?? revisions.error} />
      {!revisions.data && !revisions.error ? <Loading /> : null}
      {workflow.data ? (
        <p className="muted wrap">
          <span className="mono">{workflow.data.slug}</span> · {workflow.data.family} · variants: {workflow.data.variants.map((v) => v.slug).join(', ')}
        </p>
      ) : null}
      <h2>Revisions</h2>
      <TableWrap label="Revisions, newest first">
        <table>
          <caption className="visually-hidden">Revisions, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Revision</th>
              <th scope="col">Slug</th>
              <th scope="col">Committed</th>
              <th scope="col">Diff</th>
            </tr>
          </thead>
          <tbody>
            {list.map((r) => (
              <tr key={r.id}>
                <th scope="row" className="wrap">
                  {label(r)}
                </th>
                <td className="mono wrap">{r.slug}</td>
                <td>
                  <Time iso={r.created_at} />
                </td>
                <td>
                  <label className="inline">
                    <input type="radio" name="diff-a" checked={left === r.id} onChange={() => setLeft(r.id)} aria-label={`A: compare from ${label(r)}`} /> A
                  </label>{' '}
                  <label className="inline">
                    <input type="radio" name="diff-b" checked={right === r.id} onChange={() => setRight(r.id)} aria-label={`B: compare to ${label(r)}`} /> B
                  </label>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
      {a && b ? <RevisionDiff a={a.data} b={b.data} title={`${label(a)} → ${label(b)}`} /> : <p className="hint">Pick A and B to see what changed between two revisions.</p>}
      {/* A workflow that could not be read has nothing to deploy, whoever reads it. */}
      {workflow.data ? (canAct ? <Deploy workflowSlug={workflow.data.slug} revisions={list.map((r) => ({ id: r.id, label: label(r) }))} /> : <p className="hint">{VIEWER_NOTE}</p>) : null}
      {list[0] ? (
        <details>
          <summary>The newest revision's configuration</summary>
          <Json value={list[0].data} />
        </details>
      ) : null}
    </Page>
  );
}

function RevisionDiff({ a, b, title }: { a: unknown; b: unknown; title: string }) {
  const parts = diffLines(JSON.stringify(a, null, 2), JSON.stringify(b, null, 2));
  const changed = parts.some((p) => p.added || p.removed);
  return (
    <figure className="diff">
      <figcaption>{title}</figcaption>
      {changed ? null : <p className="muted">The two revisions hold the same configuration.</p>}
      {/* It scrolls when long: in the tab order, the keyboard scrolls it too. */}
      <pre aria-label="Differences, removed lines marked -, added lines marked +" tabIndex={0}>
        {parts.map((part, i) => {
          const mark = part.added ? '+' : part.removed ? '-' : ' ';
          const lines = part.value.replace(/\n$/, '').split('\n');
          return (
            <span key={i} className={part.added ? 'added' : part.removed ? 'removed' : undefined}>
              {lines.map((line) => `${mark} ${line}\n`).join('')}
            </span>
          );
        })}
      </pre>
    </figure>
  );
}

function Deploy({ workflowSlug, revisions }: { workflowSlug: string; revisions: { id: string; label: string }[] }) {
  const { client } = useAuth();
  const environments = useApi(['environments'], () => client.environments.list());
  const [environment, setEnvironment] = useState('');
  const [revision, setRevision] = useState('');
  const [key, setKey] = useState('');
  const [failure, setFailure] = useState<unknown>();
  const [done, setDone] = useState<string>();

  async function submit(event: FormEvent) {
    event.preventDefault();
    setFailure(undefined);
    setDone(undefined);
    try {
      const env = await client.environments.deploy(environment, { references: { workflow_revision: { id: revision } }, ...(key.trim() ? { key: key.trim() } : {}) });
      setDone(`Deployed to ${env.slug} (its revision ${env.revision?.version ?? '?'}).`);
      await environments.mutate();
    } catch (e) {
      setFailure(e);
    }
  }

  return (
    <form className="card" onSubmit={submit} aria-labelledby="deploy-title">
      <h2 id="deploy-title">Deploy a revision</h2>
      <ErrorNote error={environments.error} />
      {environments.data?.environments.length === 0 ? <p className="hint">No environments yet: create one on the Workflows page.</p> : null}
      <div className="row">
        <ChoiceField label="Revision" value={revision} onChange={setRevision} required options={revisions.map((r) => ({ value: r.id, label: r.label }))} />
        <ChoiceField
          label="Environment"
          value={environment}
          onChange={setEnvironment}
          required
          options={(environments.data?.environments ?? []).map((env) => ({ value: env.slug, label: env.name ?? env.slug }))}
        />
        <Field label="Key" hint="What the environment calls it; a request picks it with selector.key">
          {(id) => <input id={id} value={key} onChange={(e) => setKey(e.target.value)} placeholder={workflowSlug} />}
        </Field>
      </div>
      <button type="submit" className="primary" disabled={!revision || !environment}>
        Deploy
      </button>
      {done ? (
        <p role="status">
          <Badge value="completed" label="deployed" /> {done}
        </p>
      ) : null}
      <ErrorNote error={failure} />
    </form>
  );
}
