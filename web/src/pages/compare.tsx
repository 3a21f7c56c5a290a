import { useMemo, useState } from 'react';
import { Link } from 'wouter';
import { useAuth } from '../auth.tsx';
import { allResults, caseKey, failed, inputText, meanScore, outputText, testcasesOf, type Result } from '../evaluation-data.ts';
import { ErrorNote, Loading, Page, formatMs, formatNumber, useApi } from '../ui.tsx';

type Change = 'better' | 'worse' | 'same' | 'only in A' | 'only in B';

interface Row {
  key: string;
  a: Result | undefined;
  b: Result | undefined;
  change: Change;
  scoreDelta: number | undefined;
  durationDelta: number | undefined;
}

/** A case got better when it stopped failing or scored higher; worse the other way round. */
function compare(a: Result | undefined, b: Result | undefined): Change {
  if (!a) return 'only in B';
  if (!b) return 'only in A';
  if (failed(a) !== failed(b)) return failed(b) ? 'worse' : 'better';
  const delta = (meanScore(b) ?? 0) - (meanScore(a) ?? 0);
  return delta > 1e-9 ? 'better' : delta < -1e-9 ? 'worse' : 'same';
}

const signed = (n: number | undefined, format: (n: number) => string) => (n === undefined ? '–' : `${n > 0 ? '+' : ''}${format(n)}`);

/** Two runs of the same test set, case by case: what got better, what got worse, and by how much. */
export function ComparePage({ a, b }: { a: string; b: string }) {
  const { client } = useAuth();
  const runs = useApi(['compare-runs', a, b], async () => Promise.all([client.evaluations.get(a), client.evaluations.get(b)]));
  const results = useApi(['compare-results', a, b], async () => Promise.all([allResults(client, a), allResults(client, b)]));
  const cases = useApi(runs.data ? ['testcases', a] : null, () => testcasesOf(client, runs.data![0].evaluation));
  const [changedOnly, setChangedOnly] = useState(false);

  const rows = useMemo<Row[]>(() => {
    if (!results.data) return [];
    const [ra, rb] = results.data.map((list) => new Map(list.map((r) => [caseKey(r), r])));
    const keys = [...new Set([...ra!.keys(), ...rb!.keys()])];
    return keys.map((key) => {
      const x = ra!.get(key);
      const y = rb!.get(key);
      const sa = x && meanScore(x);
      const sb = y && meanScore(y);
      return {
        key,
        a: x,
        b: y,
        change: compare(x, y),
        scoreDelta: sa !== undefined && sb !== undefined ? sb - sa : undefined,
        durationDelta: x?.duration_ms !== undefined && y?.duration_ms !== undefined ? y.duration_ms - x.duration_ms : undefined,
      };
    });
  }, [results.data]);

  const count = (change: Change) => rows.filter((r) => r.change === change).length;
  const [runA, runB] = runs.data?.map((r) => r.evaluation) ?? [];
  const sameTestset = runA && runB && Object.keys(runA.data.testset_steps).join() === Object.keys(runB.data.testset_steps).join();
  const shown = changedOnly ? rows.filter((r) => r.change !== 'same') : rows;

  return (
    <Page title="Compare two runs">
      <ErrorNote error={runs.error ?? results.error ?? cases.error} />
      {!results.data && !results.error ? <Loading /> : null}
      {runA && runB ? (
        <p>
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
          <div className="table-wrap">
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
                    <td className="cell">{inputText(cases.data?.get((row.a ?? row.b)!.testcase_id))}</td>
                    <td className="cell">{row.a ? (row.a.error?.message ?? outputText(row.a)) : '–'}</td>
                    <td className="cell">{row.b ? (row.b.error?.message ?? outputText(row.b)) : '–'}</td>
                    <td className="num">
                      {formatNumber(row.a && meanScore(row.a))} → {formatNumber(row.b && meanScore(row.b))}
                    </td>
                    <td className="num">{signed(row.scoreDelta, (n) => n.toFixed(2))}</td>
                    <td className="num">{signed(row.durationDelta, formatMs)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      ) : null}
    </Page>
  );
}
