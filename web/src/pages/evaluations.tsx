import { useState, type FormEvent } from 'react';
import { Link, useLocation } from 'wouter';
import { useAuth } from '../auth.tsx';
import { Badge, ChoiceField, ErrorNote, Field, Loading, Page, TableWrap, Time, VIEWER_NOTE, useApi, useCursorPages } from '../ui.tsx';

/** The built-in agent with its default template: a revision id every project has. */
const BUILTIN_AGENT = 'agenta:builtin:agent:v0';

/** Evaluation runs, newest first; a new run; two runs picked to compare. */
export function EvaluationsPage() {
  const { client, canAct } = useAuth();
  const [, navigate] = useLocation();
  const { cursor, pager } = useCursorPages();
  const runs = useApi(['evaluations', cursor], () => client.evaluations.list({ limit: 25, ...(cursor ? { cursor } : {}) }), {
    refreshInterval: (data) => (data?.evaluations.some((e) => e.data.status === 'running' || e.data.status === 'pending') ? 2000 : 0),
  });
  const [picked, setPicked] = useState<string[]>([]);
  const toggle = (id: string) => setPicked(picked.includes(id) ? picked.filter((p) => p !== id) : [...picked.slice(-1), id]);

  return (
    <Page
      title="Evaluations"
      actions={
        <button type="button" disabled={picked.length !== 2} onClick={() => navigate(`/evaluations/compare/${encodeURIComponent(picked[0]!)}/${encodeURIComponent(picked[1]!)}`)}>
          Compare the two picked
        </button>
      }
    >
      {canAct ? <NewRun onCreated={(id) => navigate(`/evaluations/${encodeURIComponent(id)}`)} /> : <p className="hint">{VIEWER_NOTE}</p>}
      <ErrorNote error={runs.error} />
      {!runs.data && !runs.error ? <Loading /> : null}
      {runs.data?.evaluations.length === 0 ? <p className="muted">No evaluation runs yet.</p> : null}
      {runs.data?.evaluations.length ? (
        <TableWrap label="Evaluation runs, newest first">
          <table>
            <caption className="visually-hidden">Evaluation runs, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Compare</th>
                <th scope="col">Run</th>
                <th scope="col">Status</th>
                <th scope="col">Progress</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {runs.data.evaluations.map((run) => {
                const p = run.data.progress;
                const label = run.name ?? run.id;
                return (
                  <tr key={run.id}>
                    <td>
                      <input type="checkbox" checked={picked.includes(run.id)} onChange={() => toggle(run.id)} aria-label={`Pick ${label} to compare`} />
                    </td>
                    <th scope="row" className="wrap">
                      <Link href={`/evaluations/${encodeURIComponent(run.id)}`}>{label}</Link>
                    </th>
                    <td>
                      <Badge value={run.data.status} />
                    </td>
                    <td>
                      <progress max={p.total || 1} value={p.success + p.failure + p.cancelled} aria-label={`${label} progress`} /> {p.success + p.failure + p.cancelled}/{p.total}
                      {p.failure ? <span className="bad-text"> · {p.failure} failed</span> : null}
                    </td>
                    <td>
                      <Time iso={run.created_at} />
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      {pager(runs.data?.next)}
    </Page>
  );
}

type EvaluatorKind = 'exact_match' | 'contains' | 'json_valid';

function NewRun({ onCreated }: { onCreated: (id: string) => void }) {
  const { client } = useAuth();
  const testsets = useApi(['testsets'], () => client.testsets.list());
  const workflows = useApi(['workflows'], () => client.workflows.list());
  const [name, setName] = useState('');
  const [testset, setTestset] = useState('');
  const [workflow, setWorkflow] = useState('');
  const [revision, setRevision] = useState('');
  const revisions = useApi(workflow ? ['revisions', workflow] : null, () => client.workflows.revisions(workflow, { limit: 50 }));
  const [evaluator, setEvaluator] = useState<EvaluatorKind | ''>('exact_match');
  const [column, setColumn] = useState('expected');
  const [batchSize, setBatchSize] = useState(10);
  const [retries, setRetries] = useState(0);
  const [retryDelay, setRetryDelay] = useState(0);
  const [repeats, setRepeats] = useState(1);
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<unknown>();

  async function submit(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    setFailure(undefined);
    try {
      const application = workflow ? revision || revisions.data?.revisions[0]?.id : BUILTIN_AGENT;
      if (!application) throw new Error('that workflow has no revision to run');
      const evaluators = evaluator === '' ? [] : [evaluator === 'json_valid' ? { kind: evaluator } : { kind: evaluator, column }];
      const reply = await client.evaluations.create({
        ...(name.trim() ? { name: name.trim() } : {}),
        data: {
          testset_steps: { [testset]: 'auto' },
          application_steps: { [application]: 'auto' },
          evaluators,
          repeats,
          concurrency: { batch_size: batchSize, max_retries: retries, retry_delay: retryDelay },
        },
      } as never);
      onCreated(reply.evaluation.id);
    } catch (e) {
      setFailure(e);
    } finally {
      setBusy(false);
    }
  }

  const number = (set: (n: number) => void) => (e: { target: { value: string } }) => set(Number(e.target.value));
  return (
    <form className="card" onSubmit={submit} aria-labelledby="new-run-title">
      <h2 id="new-run-title">New evaluation run</h2>
      <ErrorNote error={testsets.error ?? workflows.error} />
      <div className="row">
        <Field label="Name">{(id) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} placeholder="optional" />}</Field>
        <ChoiceField
          label="Test set"
          value={testset}
          onChange={setTestset}
          required
          options={(testsets.data?.testsets ?? []).map((t) => ({ value: t.revision_id, label: `${t.name ?? t.slug} (v${t.version}, ${t.data.testcase_ids.length} rows)` }))}
        />
        <Field label="Agent">
          {(id) => (
            <select
              id={id}
              value={workflow}
              onChange={(e) => {
                setWorkflow(e.target.value);
                setRevision('');
              }}
            >
              <option value="">The built-in agent (default template)</option>
              {workflows.data?.workflows.map((w) => (
                <option key={w.id} value={w.id}>
                  {w.name ?? w.slug}
                </option>
              ))}
            </select>
          )}
        </Field>
        {workflow ? (
          <Field label="Revision">
            {(id) => (
              <select id={id} value={revision} onChange={(e) => setRevision(e.target.value)}>
                <option value="">Newest</option>
                {revisions.data?.revisions.map((r) => (
                  <option key={r.id} value={r.id}>
                    {r.variant.slug} v{r.version}
                    {r.message ? ` — ${r.message}` : ''}
                  </option>
                ))}
              </select>
            )}
          </Field>
        ) : null}
      </div>
      <div className="row">
        <Field label="Evaluator">
          {(id) => (
            <select id={id} value={evaluator} onChange={(e) => setEvaluator(e.target.value as EvaluatorKind | '')}>
              <option value="exact_match">Exact match with a column</option>
              <option value="contains">Contains a column's text</option>
              <option value="json_valid">Answer is valid JSON</option>
              <option value="">None</option>
            </select>
          )}
        </Field>
        {evaluator === 'exact_match' || evaluator === 'contains' ? <Field label="Column">{(id) => <input id={id} value={column} onChange={(e) => setColumn(e.target.value)} required />}</Field> : null}
        <Field label="Batch size" hint="cases in flight at once">
          {(id) => <input id={id} type="number" min={1} max={1000} value={batchSize} onChange={number(setBatchSize)} />}
        </Field>
        <Field label="Retries">{(id) => <input id={id} type="number" min={0} max={20} value={retries} onChange={number(setRetries)} />}</Field>
        <Field label="Retry delay (s)">{(id) => <input id={id} type="number" min={0} step={1} value={retryDelay} onChange={number(setRetryDelay)} />}</Field>
        <Field label="Repeats">{(id) => <input id={id} type="number" min={1} max={100} value={repeats} onChange={number(setRepeats)} />}</Field>
      </div>
      <button type="submit" className="primary" disabled={busy || !testset}>
        {busy ? 'Starting…' : 'Start the run'}
      </button>
      <ErrorNote error={failure} />
    </form>
  );
}
