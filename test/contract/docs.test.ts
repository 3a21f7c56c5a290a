import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_TYPES } from '../../src/contract/errors.ts';

/**
 * What a user reads about the server's names must match what the server has: clients branch on
 * error types, and operators set the variables the docs name.
 */

const root = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');
const docs = ['README.md', ...readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)].map(read).join('\n');

function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const file = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return sourceFiles(file);
    return entry.name.endsWith('.ts') ? [file] : [];
  });
}

describe('docs/errors.md', () => {
  it('lists every error type with its status, and no other', () => {
    const rows = [...read('docs/errors.md').matchAll(/^\| `([a-z-]+)` \| (\d{3}) \|/gm)].map((m) => [m[1], Number(m[2])]);
    expect(Object.fromEntries(rows)).toEqual(ERROR_TYPES);
    expect(rows).toHaveLength(Object.keys(ERROR_TYPES).length);
  });
});

describe('environment variables', () => {
  it('every one the server reads is named in README.md or docs/', () => {
    const named = new Set<string>();
    for (const file of sourceFiles('src')) {
      for (const m of read(file).matchAll(/(?:['"`]|env\.)((?:AGENTD|OTEL|OPENAI|ANTHROPIC|OLLAMA)_[A-Z0-9_]+)\b/g)) named.add(m[1]!);
    }
    // The docs give each OTLP exporter variable once and say every one also has its `_TRACES_` form.
    const missing = [...named].filter((name) => !docs.includes(name.replace('OTEL_EXPORTER_OTLP_TRACES_', 'OTEL_EXPORTER_OTLP_')));
    expect(named.size).toBeGreaterThan(40);
    expect(missing).toEqual([]);
  });
});
