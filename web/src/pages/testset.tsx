import { useAuth } from '../auth.tsx';
import { asText } from '../../../src/client/index.ts';
import { ErrorNote, Loading, Page, TableWrap, Time, useApi } from '../ui.tsx';

/** One test set (its newest revision, or the revision the id names) and its rows. */
export function TestsetPage({ id }: { id: string }) {
  const { client } = useAuth();
  const testset = useApi(['testset', id], () => client.testsets.get(id));
  const view = testset.data?.testset;
  const rows = view?.data.testcases ?? [];
  const columns = [...new Set(rows.flatMap((row) => Object.keys(row.data)))];

  return (
    <Page title={view ? (view.name ?? view.slug) : 'Test set'}>
      <ErrorNote error={testset.error} />
      {!view && !testset.error ? <Loading /> : null}
      {view ? (
        <>
          <p className="muted wrap">
            <span className="mono">{view.slug}</span> · version {view.version} · {rows.length} rows · revision <span className="mono">{view.revision_id}</span> · updated <Time iso={view.updated_at} />
          </p>
          <TableWrap label="Rows of the test set">
            <table>
              <caption className="visually-hidden">Rows of the test set</caption>
              <thead>
                <tr>
                  <th scope="col" className="num">
                    #
                  </th>
                  {columns.map((column) => (
                    <th key={column} scope="col">
                      {column}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {rows.map((row, index) => (
                  <tr key={row.id}>
                    <td className="num" title={row.id}>
                      {index + 1}
                    </td>
                    {columns.map((column) => (
                      <td key={column} className="cell">
                        {asText(row.data[column])}
                      </td>
                    ))}
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
