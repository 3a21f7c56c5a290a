import { useState, type FormEvent } from 'react';
import { Link } from 'wouter';
import { useAuth } from '../auth.tsx';
import { ErrorNote, Field, Loading, Page, TableWrap, Time, VIEWER_NOTE, useApi } from '../ui.tsx';

/** Test sets: the list, and a new one from a CSV or JSONL file. */
export function TestsetsPage() {
  const { client, canAct } = useAuth();
  const testsets = useApi(['testsets'], () => client.testsets.list());
  return (
    <Page title="Test sets">
      {canAct ? <Upload onDone={() => void testsets.mutate()} /> : <p className="hint">{VIEWER_NOTE}</p>}
      <ErrorNote error={testsets.error} />
      {!testsets.data && !testsets.error ? <Loading /> : null}
      {testsets.data?.testsets.length === 0 ? <p className="muted">No test sets yet.</p> : null}
      {testsets.data?.testsets.length ? (
        <TableWrap label="Test sets">
          <table>
            <caption className="visually-hidden">Test sets</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Slug</th>
                <th scope="col" className="num">
                  Rows
                </th>
                <th scope="col" className="num">
                  Version
                </th>
                <th scope="col">Updated</th>
              </tr>
            </thead>
            <tbody>
              {testsets.data.testsets.map((t) => (
                <tr key={t.id}>
                  <th scope="row" className="wrap">
                    <Link href={`/testsets/${encodeURIComponent(t.id)}`}>{t.name ?? t.slug}</Link>
                  </th>
                  <td className="mono wrap">{t.slug}</td>
                  <td className="num">{t.data.testcase_ids.length}</td>
                  <td className="num">{t.version}</td>
                  <td>
                    <Time iso={t.updated_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
    </Page>
  );
}

function Upload({ onDone }: { onDone: () => void }) {
  const { client } = useAuth();
  const [file, setFile] = useState<File>();
  const [name, setName] = useState('');
  const [input, setInput] = useState('');
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<unknown>();
  const [done, setDone] = useState<{ id: string; rows: number; name: string }>();

  async function submit(event: FormEvent) {
    event.preventDefault();
    if (!file) return;
    const format = /\.csv$/i.test(file.name) ? 'csv' : /\.(jsonl|ndjson)$/i.test(file.name) ? 'jsonl' : undefined;
    if (!format) {
      setFailure(new Error(`cannot tell the format of ${file.name}: name it .csv or .jsonl`));
      return;
    }
    setBusy(true);
    setFailure(undefined);
    try {
      const reply = await client.testsets.import(await file.text(), { format, name: name.trim() || file.name, ...(input.trim() ? { input: input.trim() } : {}) });
      setDone({ id: reply.testset.id, rows: reply.testset.data.testcase_ids.length, name: reply.testset.name ?? reply.testset.slug });
      onDone();
    } catch (e) {
      setFailure(e);
    } finally {
      setBusy(false);
    }
  }

  return (
    <form className="card" onSubmit={submit} aria-labelledby="upload-title">
      <h2 id="upload-title">New test set from a file</h2>
      <p className="hint">
        CSV or JSONL, one test case a row. A <code>messages</code> column holds the conversation as JSON; otherwise the input column (or <code>input</code>, <code>question</code>)
        becomes the user message. Other columns, such as <code>expected</code>, are what evaluators compare with.
      </p>
      <div className="row">
        <Field label="File">{(id) => <input id={id} type="file" accept=".csv,.jsonl,.ndjson" onChange={(e) => setFile(e.target.files?.[0])} required />}</Field>
        <Field label="Name">{(id) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} placeholder="the file's name" />}</Field>
        <Field label="Input column">{(id) => <input id={id} value={input} onChange={(e) => setInput(e.target.value)} placeholder="input" />}</Field>
      </div>
      <button type="submit" className="primary" disabled={!file || busy}>
        {busy ? 'Uploading…' : 'Upload'}
      </button>
      {done ? (
        <p role="status">
          Created <Link href={`/testsets/${encodeURIComponent(done.id)}`}>{done.name}</Link> with {done.rows} rows.
        </p>
      ) : null}
      <ErrorNote error={failure} />
    </form>
  );
}
