/**
 * `node bench/heap-diff.ts <before.heapsnapshot> <after.heapsnapshot> <items> [rows]`: what the
 * heap holds more in the second snapshot, per item held between the two (bench/memory.ts writes
 * such pairs with BENCH_MEMORY_SNAPSHOTS). Two tables: the difference in bytes and count of objects
 * by V8's type and name (closures, strings, code grouped), and the closures new in the second
 * (ids the first lacks) by the script that made them, which tells whose code holds an item's
 * memory (Node's web streams, a provider, agentd's own files).
 *
 * Hand-written over the snapshot's own format (V8's heap snapshot JSON: flat `nodes`, `edges` and
 * `locations` arrays described by `snapshot.meta`): the tools that read snapshots (DevTools,
 * memlab) compare retained sizes of one snapshot interactively, not per-item deltas in a terminal.
 */
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]]; location_fields: string[] } };
  nodes: number[];
  edges: number[];
  locations: number[];
  strings: string[];
}

const [beforeFile, afterFile, itemsArg, rowsArg] = process.argv.slice(2);
if (!beforeFile || !afterFile || !itemsArg || process.argv.includes('--help')) {
  process.stdout.write('usage: node bench/heap-diff.ts <before.heapsnapshot> <after.heapsnapshot> <items held between them> [rows, default 25]\n');
  process.exit(beforeFile ? 0 : 2);
}
const items = Number(itemsArg);
const rows = Number(rowsArg ?? 25);
const read = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as Snapshot;

/** Own bytes and count of a snapshot's objects by type and name. */
function tally(snapshot: Snapshot): Map<string, { bytes: number; count: number }> {
  const { node_fields: fields, node_types: [types] } = snapshot.snapshot.meta;
  const [TYPE, NAME, SIZE] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [number, number, number];
  const out = new Map<string, { bytes: number; count: number }>();
  for (let at = 0; at < snapshot.nodes.length; at += fields.length) {
    const type = types[snapshot.nodes[at + TYPE]!]!;
    const name = type.includes('string') ? '(strings)' : type === 'closure' ? '(closures)' : type === 'code' ? '(code)' : snapshot.strings[snapshot.nodes[at + NAME]!]!.slice(0, 60);
    const key = `${type} ${name}`;
    const entry = out.get(key) ?? { bytes: 0, count: 0 };
    entry.bytes += snapshot.nodes[at + SIZE]!;
    entry.count++;
    out.set(key, entry);
  }
  return out;
}

const before = read(beforeFile);
const idAt = before.snapshot.meta.node_fields.indexOf('id');
const known = new Set<number>();
for (let i = 0; i < before.nodes.length; i += before.snapshot.meta.node_fields.length) known.add(before.nodes[i + idAt]!);
const held = tally(before);
before.nodes = [];

const after = read(afterFile);
const byKind = tally(after);
for (const [key, { bytes, count }] of held) {
  const entry = byKind.get(key) ?? { bytes: 0, count: 0 };
  byKind.set(key, { bytes: entry.bytes - bytes, count: entry.count - count });
}
const { node_fields: fields, node_types: [types], edge_fields: edgeFields, edge_types: [edgeTypes], location_fields: locationFields } = after.snapshot.meta;
const { nodes, edges, strings, locations } = after;
const width = fields.length;
const [TYPE, NAME, ID, EDGES] = ['type', 'name', 'id', 'edge_count'].map((f) => fields.indexOf(f)) as [number, number, number, number];
const [EDGE_TYPE, EDGE_NAME, EDGE_TO] = ['type', 'name_or_index', 'to_node'].map((f) => edgeFields.indexOf(f)) as [number, number, number];

// Where each node's edges begin, and the script of each closure that has a location.
const firstEdge = new Uint32Array(nodes.length / width + 1);
for (let n = 0; n < nodes.length / width; n++) firstEdge[n + 1] = firstEdge[n]! + nodes[n * width + EDGES]! * edgeFields.length;
const scriptOf = new Map<number, number>();
for (let i = 0; i < locations.length; i += locationFields.length) scriptOf.set(locations[i]! / width, locations[i + 1]!);

/** The node an edge named `name` of node `n` leads to. */
function follow(n: number, name: string): number | undefined {
  for (let e = firstEdge[n]!; e < firstEdge[n + 1]!; e += edgeFields.length) {
    const type = edgeTypes[edges[e + EDGE_TYPE]!];
    if (type !== 'element' && type !== 'hidden' && strings[edges[e + EDGE_NAME]!] === name) return edges[e + EDGE_TO]! / width;
  }
  return undefined;
}

/** A script's name, from any closure of it: closure → shared → script → name. */
const scriptNames = new Map<number, string>();
function scriptName(n: number, script: number): string {
  if (!scriptNames.has(script)) {
    const shared = follow(n, 'shared');
    const source = shared === undefined ? undefined : follow(shared, 'script');
    const name = source === undefined ? undefined : follow(source, 'name');
    if (name !== undefined) scriptNames.set(script, strings[nodes[name * width + NAME]!]!.replace(/^file:\/\/\//, '/'));
  }
  return scriptNames.get(script) ?? `script ${script}`;
}

const byScript = new Map<string, number>();
for (let n = 0; n < nodes.length / width; n++) {
  if (types[nodes[n * width + TYPE]!] !== 'closure' || known.has(nodes[n * width + ID]!)) continue;
  const script = scriptOf.get(n);
  const where = script === undefined ? '(no script: built-ins)' : scriptName(n, script);
  byScript.set(where, (byScript.get(where) ?? 0) + 1);
}
const total = [...byKind.values()].reduce((sum, { bytes }) => sum + bytes, 0);

const per = (value: number) => value / items;
const lines = [
  `${(per(total) / 1024).toFixed(1)} KB more of objects' own size per item (${items} items)`,
  '',
  '| bytes per item | count per item | type and name |',
  '|---|---|---|',
  ...[...byKind]
    .sort((a, b) => b[1].bytes - a[1].bytes)
    .slice(0, rows)
    .map(([key, { bytes, count }]) => `| ${per(bytes).toFixed(0)} | ${per(count).toFixed(1)} | ${key} |`),
  '',
  '| new closures per item | made by |',
  '|---|---|',
  ...[...byScript]
    .sort((a, b) => b[1] - a[1])
    .slice(0, rows)
    .map(([script, count]) => `| ${per(count).toFixed(1)} | ${script} |`),
];
process.stdout.write(`${lines.join('\n')}\n`);
