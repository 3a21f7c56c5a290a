import { useMemo, useState } from 'react';
import { Link } from 'wouter';
import { useAuth } from '../auth.tsx';
import { AgentdError, allResults, caseInput, caseOutput, compareRuns, meanScore, type CaseChange } from '../../../src/client/index.ts';
import { ErrorNote, Loading, Page, TableWrap, formatMs, formatNumber, useApi } from '../ui.tsx';

const signed = (n: number | undefined, format: (n: number) => string) => (n === undefined ? '–' : `${n > 0 ? '+' : ''}${format(n)}`);

/** Two runs of the same test set, case by case: what got better, what got worse, and by how much. */
export function ComparePage({ a, b }: { a: string; b: string }) {
  const { client } = useAuth();
  // A run the link names but the project does not hold (deleted, or a made-up id) is told apart
  // from a failed read, so the page can say which one it is, and compares nothing.
  const readRun = (id: string) =>
    client.evaluations.get(id).then(
      (reply) => reply.evaluation,
      (error: unknown) => {
        if (error instanceof AgentdError && error.status.code === 404) return null;
        throw error;
      },
    );
  const runs = useApi(['compare-runs', a, b], () => Promise.all([readRun(a), readRun(b)]));
  const [runA, runB] = runs.data ?? [];
  const results = useApi(runA && runB ? ['compare-results', a, b] : null, () => Promise.all([allResults(client, a), allResults(client, b)]));
  const missing = runs.data?.flatMap((run, i) => (run ? [] : [i ? `B (${b})` : `A (${a})`])) ?? [];
  const [changedOnly, setChangedOnly] = useState(false);

  const rows = useMemo(() => (results.data ? compareRuns(results.data[0], results.data[1]) : []), [results.data]);

  const count = (change: CaseChange) => rows.filter((r) => r.change === change).length;
  const sameTestset = runA && runB && Object.keys(runA.data.testset_steps).join() === Object.keys(runB.data.testset_steps).join();
  const shown = changedOnly ? rows.filter((r) => r.change !== 'same') : rows;

  return (
    <Page title="Compare two runs">
      <ErrorNote error={runs.error ?? results.error} />
      {missing.length ? (
        <p role="alert" className="error-note">
          {missing.length === 1 ? `Run ${missing[0]} was not found` : `Runs ${missing.join(' and ')} were not found`}: deleted, or the link names no run of this project.{' '}
          <Link href="/evaluations">Back to the evaluation runs</Link>
        </p>
      ) : null}
      {(!runs.data && !runs.error) || (runA && runB && !results.data && !results.error) ? <Loading /> : null}
      {runA && runB ? (
        <p className="wrap">
          A: <Link href={`/evaluations/${encodeURIComponent(runA.id)}`}>{runA.name ?? runA.id}</Link> · B:{' '}
          <Link href={`/evaluations/${encodeURIComponent(runB.id)}`}>{runB.name ?? runB.id}</Link>
        </p>
      ) : null}
      {runA && runB && !sameTestset ? (
        <p role="alert" className="error-note">
          These runs used different test sets (or revisions of one): cases are matched by id, so only rows both have compare.
        </p>
      ) : null}
      {results.data ? (
        <>
          <ul className="summary" aria-label="Summary">
            <li>
              <strong className="good-text">{count('better')}</strong> better
            </li>
            <li>
              <strong className="bad-text">{count('worse')}</strong> worse
            </li>
            <li>
              <strong>{count('same')}</strong> the same
            </li>
            {count('only in A') + count('only in B') ? (
              <li>
                {count('only in A')} only in A, {count('only in B')} only in B
              </li>
            ) : null}
          </ul>
          <label className="inline">
            <input type="checkbox" checked={changedOnly} onChange={(e) => setChangedOnly(e.target.checked)} /> Changed cases only
          </label>
          <TableWrap label="Cases of both runs">
            <table>
              <caption className="visually-hidden">Cases of both runs</caption>
              <thead>
                <tr>
                  <th scope="col">Change</th>
                  <th scope="col">Input</th>
                  <th scope="col">A output</th>
                  <th scope="col">B output</th>
                  <th scope="col" className="num">
                    Score A → B
                  </th>
                  <th scope="col" className="num">
                    Score Δ
                  </th>
                  <th scope="col" className="num">
                    Duration Δ
                  </th>
                </tr>
              </thead>
              <tbody>
                {shown.map((row) => (
                  <tr key={row.key} className={`change-${row.change.replace(/ /g, '-')}`}>
                    <th scope="row">{row.change}</th>
                    <td className="cell">{caseInput((row.a ?? row.b)!)}</td>
                    <td className="cell">{row.a ? caseOutput(row.a) : '–'}</td>
                    <td className="cell">{row.b ? caseOutput(row.b) : '–'}</td>
                    <td className="num">
                      {formatNumber(row.a && meanScore(row.a))} → {formatNumber(row.b && meanScore(row.b))}
                    </td>
                    <td className="num">{signed(row.scoreDelta, (n) => n.toFixed(2))}</td>
                    <td className="num">{signed(row.durationDelta, formatMs)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        </>
      ) : null}
    </Page>
  );
}
