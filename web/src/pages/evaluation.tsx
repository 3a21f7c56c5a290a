import { useEffect, useMemo, useRef, useState } from 'react';
import { useAuth } from '../auth.tsx';
import { allResults, caseExpected, caseFailed, caseInput, caseOutput, type CaseResult } from '../../../src/client/index.ts';
import { Histogram } from '../histogram.tsx';
import { NativeMessagesView } from '../messages.tsx';
import { Badge, ErrorNote, Json, Loading, Page, TableWrap, Time, formatCost, formatMs, formatNumber, useApi } from '../ui.tsx';

const live = (status: string | undefined) => status === 'running' || status === 'pending';

/** One evaluation run: live progress, its metrics, and every case, each openable to its whole turn. */
export function EvaluationPage({ id }: { id: string }) {
  const { client, canAct } = useAuth();
  const run = useApi(['evaluation', id], () => client.evaluations.get(id), { refreshInterval: (data) => (live(data?.evaluation.data.status) ? 1000 : 0) });
  const view = run.data?.evaluation;
  const status = view?.data.status;
  const done = view ? view.data.progress.success + view.data.progress.failure + view.data.progress.cancelled : 0;
  // Reread as the run moves; the last read once it has ended is kept.
  const results = useApi(view ? ['results', id, status, done] : null, () => allResults(client, id));
  const metrics = useApi(view ? ['metrics', id, status, done] : null, () => client.evaluations.metrics({ metrics: { run_id: id } }));
  const [failuresOnly, setFailuresOnly] = useState(false);
  const [open, setOpen] = useState<string>();
  // Closing a case's view gives the focus back to what opened it, not to the page's body.
  const opener = useRef<HTMLElement>(null);
  const close = () => {
    setOpen(undefined);
    opener.current?.focus();
  };
  const [stopError, setStopError] = useState<unknown>();

  const shown = useMemo(() => (results.data ?? []).filter((r) => !failuresOnly || caseFailed(r)), [results.data, failuresOnly]);
  const opened = results.data?.find((r) => r.id === open);

  async function stop() {
    setStopError(undefined);
    try {
      await client.evaluations.stop(id);
      await run.mutate();
    } catch (e) {
      setStopError(e);
    }
  }

  return (
    <Page
      title={view ? (view.name ?? `Run ${view.id}`) : 'Evaluation run'}
      actions={
        canAct && live(status) ? (
          <button type="button" className="danger" onClick={() => void stop()}>
            Stop the run
          </button>
        ) : null
      }
    >
      <ErrorNote error={run.error ?? stopError} />
      {!view && !run.error ? <Loading /> : null}
      {view ? (
        <>
          <p>
            <Badge value={view.data.status} /> <progress max={view.data.progress.total || 1} value={done} aria-label="Progress" /> {done} of {view.data.progress.total} cases
            {view.data.progress.running ? ` · ${view.data.progress.running} running` : ''}
            {view.data.progress.failure ? <span className="bad-text"> · {view.data.progress.failure} failed</span> : null}
            <span className="muted">
              {' '}
              · batch {view.data.concurrency.batch_size} · retries {view.data.concurrency.max_retries} · repeats {view.data.repeats} · started <Time iso={view.data.started_at} />
            </span>
          </p>
          {view.data.error ? <p className="error-note">{view.data.error.message}</p> : null}
          <Metrics records={metrics.data?.metrics ?? []} error={metrics.error} results={results.data ?? []} />
          <h2 id="cases-title">Cases</h2>
          <label className="inline">
            <input type="checkbox" checked={failuresOnly} onChange={(e) => setFailuresOnly(e.target.checked)} /> Failures only
          </label>
          <ErrorNote error={results.error} />
          <TableWrap label="Cases">
            <table aria-labelledby="cases-title">
              <thead>
                <tr>
                  <th scope="col">Case</th>
                  <th scope="col">Input</th>
                  <th scope="col">Expected</th>
                  <th scope="col">Output</th>
                  <th scope="col">Scores</th>
                  <th scope="col" className="num">
                    Attempts
                  </th>
                  <th scope="col" className="num">
                    Duration
                  </th>
                  <th scope="col" className="num">
                    Tokens
                  </th>
                  <th scope="col" className="num">
                    Cost
                  </th>
                </tr>
              </thead>
              <tbody>
                {shown.map((result, index) => {
                  return (
                    <tr key={result.id} className={caseFailed(result) ? 'failed' : undefined}>
                      <th scope="row">
                        <button
                          type="button"
                          className="link"
                          onClick={(e) => {
                            opener.current = e.currentTarget;
                            setOpen(result.id);
                          }}
                          aria-label={`Open case ${index + 1}`}
                        >
                          {index + 1}
                          {result.repeat_idx ? `.${result.repeat_idx}` : ''}
                        </button>{' '}
                        <Badge value={result.status} />
                      </th>
                      <td className="cell">{caseInput(result)}</td>
                      <td className="cell">{caseExpected(result)}</td>
                      <td className="cell">{result.error ? <span className="bad-text">{caseOutput(result)}</span> : caseOutput(result)}</td>
                      <td>
                        {(result.scores ?? []).map((s) => (
                          <Badge key={s.name} value={s.error ? 'error' : s.pass === false ? 'failed' : 'completed'} label={`${s.name} ${s.score !== undefined ? formatNumber(s.score) : s.error ? 'error' : ''}`} />
                        ))}
                      </td>
                      <td className="num">{result.attempts.length}</td>
                      <td className="num">{formatMs(result.duration_ms)}</td>
                      <td className="num">{formatNumber(result.tokens)}</td>
                      <td className="num">{formatCost(result.cost)}</td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </TableWrap>
          {results.data && shown.length === 0 ? <p className="muted">{failuresOnly ? 'No failed cases.' : 'No cases have run yet.'}</p> : null}
          {opened ? <CaseDetail result={opened} onClose={close} /> : null}
        </>
      ) : null}
    </Page>
  );
}

function Metrics({ records, error, results }: { records: { data: Record<string, Record<string, { count: number; mean?: number; p50?: number; p90?: number; p95?: number; p99?: number; min?: number; max?: number }>> }[]; error: unknown; results: CaseResult[] }) {
  const [metric, setMetric] = useState<'duration_ms' | 'tokens' | 'cost' | 'score'>('duration_ms');
  const values = results.flatMap((r) => {
    const value = metric === 'score' ? (r.scores ?? []).map((s) => s.score).find((s) => s !== undefined) : r[metric];
    return value === undefined ? [] : [value];
  });
  const rows = records.flatMap((record) => Object.entries(record.data).flatMap(([step, byName]) => Object.entries(byName).map(([name, stats]) => ({ step, name, stats }))));
  return (
    <section aria-labelledby="metrics-title">
      <h2 id="metrics-title">Metrics</h2>
      <ErrorNote error={error} />
      {rows.length ? (
        <TableWrap label="Metrics">
          <table>
            <thead>
              <tr>
                <th scope="col">Step</th>
                <th scope="col">Metric</th>
                {['count', 'mean', 'p50', 'p90', 'p95', 'p99', 'min', 'max'].map((h) => (
                  <th key={h} scope="col" className="num">
                    {h}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {rows.map(({ step, name, stats }) => (
                <tr key={`${step}/${name}`}>
                  <td className="mono">{step}</td>
                  <th scope="row">{name}</th>
                  {[stats.count, stats.mean, stats.p50, stats.p90, stats.p95, stats.p99, stats.min, stats.max].map((v, i) => (
                    <td key={i} className="num">
                      {formatNumber(v)}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : (
        <p className="muted">No metrics yet.</p>
      )}
      <div className="row">
        <label className="inline">
          Histogram of{' '}
          <select value={metric} onChange={(e) => setMetric(e.target.value as typeof metric)}>
            <option value="duration_ms">duration (ms)</option>
            <option value="tokens">tokens</option>
            <option value="cost">cost</option>
            <option value="score">first evaluator's score</option>
          </select>
        </label>
      </div>
      <Histogram values={values} label={`Histogram of ${metric} over ${values.length} cases`} />
    </section>
  );
}

/** Where the drawer (min(46rem, 100vw) wide) covers the whole page. */
const DRAWER_COVERS_PAGE = '(max-width: 46rem)';

/**
 * A case's whole story, in a dialog drawn as a drawer. Where it covers the whole page (a phone)
 * it is modal: the page beneath is inert and Tab stays in it instead of moving the focus to
 * controls nobody can see. Beside the page (a wider screen) it is not: the page stays usable, and
 * another case can be opened from its row. Escape closes it either way.
 */
function CaseDetail({ result, onClose }: { result: CaseResult; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const closeButton = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (window.matchMedia(DRAWER_COVERS_PAGE).matches) dialog.current?.showModal();
    else dialog.current?.show();
  }, []);
  // Each case opened, from a row beside the open view too, takes the focus into it.
  useEffect(() => closeButton.current?.focus(), [result.id]);
  // Out of the modal state first: the page must be focusable again before the focus goes back to it.
  const shut = () => {
    dialog.current?.close();
    onClose();
  };
  return (
    <dialog
      ref={dialog}
      className="drawer"
      aria-labelledby="case-title"
      onKeyDown={(e) => {
        if (e.key !== 'Escape') return;
        e.preventDefault();
        shut();
      }}
      onCancel={(e) => {
        e.preventDefault();
        shut();
      }}
    >
      <header className="page-head">
        <h2 id="case-title">
          Case <span className="mono">{result.testcase_id}</span>
          {result.repeat_idx ? ` (repeat ${result.repeat_idx})` : ''}
        </h2>
        <button type="button" ref={closeButton} onClick={shut}>
          Close
        </button>
      </header>
      <p>
        <Badge value={result.status} /> {formatMs(result.duration_ms)} · {formatNumber(result.tokens)} tokens · {formatCost(result.cost)}
        {result.trace_id ? <span className="muted mono"> · trace {result.trace_id}</span> : null}
      </p>
      {result.error ? <p className="error-note">{`${result.error.code ?? ''} ${result.error.type ?? 'error'}: ${result.error.message}`.trim()}</p> : null}
      <h3>Test case</h3>
      <Json value={result.testcase?.data ?? {}} label="Test case data" />
      <h3>Scores</h3>
      {(result.scores ?? []).length === 0 ? <p className="muted">No evaluators.</p> : null}
      <ul>
        {(result.scores ?? []).map((s) => (
          <li key={s.name}>
            <strong>{s.name}</strong> ({s.kind}): {s.pass === undefined ? '' : s.pass ? 'pass' : 'fail'} {s.score !== undefined ? formatNumber(s.score) : ''}
            {s.reason ? <span className="muted"> — {s.reason}</span> : null}
            {s.error ? <span className="bad-text"> — {s.error}</span> : null}
          </li>
        ))}
      </ul>
      <h3>The turn</h3>
      {result.outputs ? <NativeMessagesView messages={result.outputs.messages} /> : <p className="muted">No output.</p>}
      <h3>Attempts</h3>
      <ol>
        {result.attempts.map((a) => (
          <li key={a.attempt}>
            <Badge value={a.status} /> {formatMs(a.duration_ms)} <Time iso={a.started_at} />
            {a.error ? <span className="bad-text"> — {a.error.message}</span> : null}
          </li>
        ))}
      </ol>
    </dialog>
  );
}
