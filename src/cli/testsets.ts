import { readFileSync } from 'node:fs';
import path from 'node:path';
import { asText, type AgentdClient } from '../client/index.ts';
import type { FlagValues } from './args.ts';
import { CONNECTION_FLAGS, CONNECTION_HELP, CliError, remoteClient, runSubcommand } from './remote.ts';
import { fitLine, terminalWidth, textTable } from './text-table.ts';

const USAGE = `Usage:
  agentd testsets import FILE [options]
  agentd testsets list [--json]
  agentd testsets show ID [--json]

import  Creates a test set from a CSV or JSONL file (by its extension, or
        --format) and prints its name, id and revision id (what \`agentd eval run
        --testset\` takes). A "messages" column holds a JSON array of messages;
        else the --input column, or an "input" or "question" column, becomes the
        user message.
          --format csv|jsonl   when the extension does not say
          --delimiter D        a CSV's column separator: , ; | or tab (default:
                               the one its header line uses)
          --name NAME          the test set's name (default: the file's name)
          --slug SLUG          its slug
          --input COLUMN       the text column to turn into the user message
          --testset ID         commit the file as a new revision of this test
                               set instead
list    The project's test sets: name (slug), rows, version, revision id.
show    One test set's rows (ID: a test set's id or slug, or a revision id).
  --json  print the server's reply as JSON

${CONNECTION_HELP}`;

const FLAGS = {
  format: { type: 'string' },
  delimiter: { type: 'string' },
  name: { type: 'string' },
  slug: { type: 'string' },
  input: { type: 'string' },
  testset: { type: 'string' },
  json: { type: 'boolean' },
  ...CONNECTION_FLAGS,
} as const;

type Values = FlagValues<typeof FLAGS>;

const DELIMITERS = { ',': ',', ';': ';', '|': '|', tab: 'tab', '\t': 'tab' } as const;

async function importFile(client: AgentdClient, positionals: string[], values: Values): Promise<void> {
  const [file, ...extra] = positionals;
  if (!file || extra.length) throw new CliError('agentd testsets import takes one file: agentd testsets import cases.csv');
  const extension = path.extname(file).slice(1).toLowerCase();
  const format = values.format ?? (extension === 'csv' || extension === 'tsv' ? 'csv' : extension === 'jsonl' || extension === 'ndjson' ? 'jsonl' : undefined);
  if (format !== 'csv' && format !== 'jsonl') throw new CliError(`cannot tell the format of ${file}: name it .csv or .jsonl, or pass --format csv|jsonl`);
  const delimiter = values.delimiter === undefined ? (extension === 'tsv' ? 'tab' : undefined) : DELIMITERS[values.delimiter as keyof typeof DELIMITERS];
  if (values.delimiter !== undefined && !delimiter) throw new CliError(`--delimiter must be one of , ; | tab, got "${values.delimiter}"`);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(readFileSync(file));
  } catch (error) {
    if (error instanceof TypeError) throw new CliError(`${file} is not UTF-8 text: save it as UTF-8 and import it again`);
    throw new CliError(`${file} cannot be read: ${(error as Error).message}`);
  }
  const reply = await client.testsets.import(text, {
    format,
    name: values.name ?? path.basename(file),
    ...(values.slug ? { slug: values.slug } : {}),
    ...(values.input ? { input: values.input } : {}),
    ...(values.testset ? { testset: values.testset } : {}),
    ...(delimiter ? { delimiter } : {}),
  });
  const { testset } = reply;
  process.stdout.write(
    values.json
      ? `${JSON.stringify(reply)}\n`
      : `test set "${testset.name ?? testset.slug}" (${testset.id}), version ${testset.version}: ${testset.data.testcase_ids.length} rows\nrevision id: ${testset.revision_id}\n`,
  );
}

async function list(client: AgentdClient, values: Values): Promise<void> {
  const reply = await client.testsets.list();
  if (values.json) return void process.stdout.write(`${JSON.stringify(reply)}\n`);
  if (!reply.testsets.length) return void process.stdout.write('no test sets; make one with agentd testsets import FILE\n');
  // The revision id is what `eval run --testset` takes: it stays whole, the name gives up room.
  const rows = [['test set', 'rows', 'ver', 'revision id']];
  for (const t of reply.testsets) rows.push([t.name && t.name !== t.slug ? `${t.name} (${t.slug})` : t.slug, String(t.data.testcase_ids.length), String(t.version), t.revision_id]);
  process.stdout.write(textTable(rows, { right: [1, 2], width: terminalWidth(), shrink: [0] }));
}

async function show(client: AgentdClient, id: string | undefined, values: Values): Promise<void> {
  if (!id) throw new CliError('agentd testsets show needs the test set: agentd testsets show <id or slug>');
  const reply = await client.testsets.get(id);
  if (values.json) return void process.stdout.write(`${JSON.stringify(reply)}\n`);
  const { testset } = reply;
  const cases = testset.data.testcases ?? [];
  // The conversation is what a run sends; the other columns are what evaluators read.
  const columns = [...new Set(cases.flatMap((row) => Object.keys(row.data)))].filter((c) => c !== 'messages');
  const width = terminalWidth();
  process.stdout.write(`${fitLine(`test set "${testset.name ?? testset.slug}", version ${testset.version}, ${cases.length} rows`, width)}\n${fitLine(`revision ${testset.revision_id}`, width)}\n\n`);
  const rows = [['#', 'messages', ...columns]];
  cases.forEach((row, i) => rows.push([String(i + 1), asText(row.data.messages), ...columns.map((c) => asText(row.data[c]))]));
  process.stdout.write(textTable(rows, { right: [0], width, shrink: rows[0]!.map((_, i) => i).slice(1) }));
}

export function testsetsCommand(argv: string[]): Promise<number> {
  return runSubcommand('testsets', argv, FLAGS, USAGE, async (sub, values, positionals) => {
    if (sub === 'import') await importFile(remoteClient(values), positionals, values);
    else if (sub === 'list') await list(remoteClient(values), values);
    else if (sub === 'show') await show(remoteClient(values), positionals[0], values);
    else throw new CliError(`unknown testsets command "${sub}"; use import, list or show`);
  });
}
