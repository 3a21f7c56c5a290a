import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseCommand } from './args.ts';
import { CONNECTION_FLAGS, CONNECTION_HELP, CliError, exitWith, remoteClient } from './remote.ts';

const USAGE = `Usage: agentd testsets import FILE [options]

Creates a test set from a CSV or JSONL file (by its extension, or --format) and prints its id and
revision id (what \`agentd eval run --testset\` takes). A "messages" column holds a JSON array of
messages; else the --input column, or an "input" or "question" column, becomes the user message.

  --format csv|jsonl   when the extension does not say
  --name NAME          the test set's name (default: the file's name)
  --slug SLUG          its slug
  --input COLUMN       the text column to turn into the user message
  --testset ID         commit the file as a new revision of this test set instead
  --json               print the whole reply as JSON

${CONNECTION_HELP}`;

export async function testsetsCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h') {
    process.stdout.write(USAGE);
    return sub ? 0 : 2;
  }
  const parsed = parseCommand(
    rest,
    {
      format: { type: 'string' },
      name: { type: 'string' },
      slug: { type: 'string' },
      input: { type: 'string' },
      testset: { type: 'string' },
      json: { type: 'boolean' },
      ...CONNECTION_FLAGS,
    },
    USAGE,
    true,
  );
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  try {
    if (sub !== 'import') throw new CliError(`unknown testsets command "${sub}"; use import`);
    const [file, ...extra] = positionals;
    if (!file || extra.length) throw new CliError('agentd testsets import takes one file: agentd testsets import cases.csv');
    const extension = path.extname(file).slice(1).toLowerCase();
    const format = values.format ?? (extension === 'csv' ? 'csv' : extension === 'jsonl' || extension === 'ndjson' ? 'jsonl' : undefined);
    if (format !== 'csv' && format !== 'jsonl') throw new CliError(`cannot tell the format of ${file}: name it .csv or .jsonl, or pass --format csv|jsonl`);
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      throw new CliError(`${file} cannot be read: ${(error as Error).message}`);
    }
    const client = remoteClient(values);
    const reply = await client.testsets.import(text, {
      format,
      name: values.name ?? path.basename(file),
      ...(values.slug ? { slug: values.slug } : {}),
      ...(values.input ? { input: values.input } : {}),
      ...(values.testset ? { testset: values.testset } : {}),
    });
    const { testset } = reply;
    process.stdout.write(
      values.json ? `${JSON.stringify(reply)}\n` : `test set ${testset.slug} (${testset.id}), version ${testset.version}: ${testset.data.testcase_ids.length} rows\nrevision id: ${testset.revision_id}\n`,
    );
    return 0;
  } catch (error) {
    return exitWith('testsets', error);
  }
}
