import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * design.md §3: dependencies point one way, `http` → domain modules → `store`; the turn engines
 * know nothing of HTTP or of how turns are kept; `contract/` and `store/` import nothing from the
 * domain. Read from the sources' own import statements, so a new file is held to it too.
 */

const SRC = path.resolve(import.meta.dirname, '../../src');

/** Each source file's part of src (its top folder, or the file at the top) and the parts it imports. */
function imports(): Array<{ file: string; from: string; to: string }> {
  const out: Array<{ file: string; from: string; to: string }> = [];
  for (const entry of fs.readdirSync(SRC, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const file = path.join(entry.parentPath, entry.name);
    const from = partOf(file);
    const text = fs.readFileSync(file, 'utf8');
    for (const match of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g)) {
      const target = path.resolve(path.dirname(file), (match[1] ?? match[2])!);
      out.push({ file: path.relative(SRC, file), from, to: partOf(target) });
    }
  }
  return out;
}

function partOf(file: string): string {
  const [first, ...rest] = path.relative(SRC, file).split(path.sep);
  return rest.length ? first! : first!.replace(/\.ts$/, '');
}

const DOMAIN = ['agent', 'harnesses', 'stream', 'sessions', 'interactions', 'configs', 'evaluation', 'telemetry'];

const RULES: Array<{ parts: string[]; never: string[]; why: string }> = [
  { parts: ['contract', 'store'], never: [...DOMAIN, 'http', 'cli', 'client'], why: 'types flow down: contract/ and store/ import nothing from the domain' },
  { parts: ['agent', 'harnesses', 'stream'], never: ['http', 'cli', 'sessions', 'interactions', 'configs', 'evaluation', 'store'], why: 'a turn engine and its projections know nothing of HTTP or of how turns are kept' },
  { parts: [...DOMAIN, 'client'], never: ['http', 'cli'], why: 'dependencies point one way: http → domain modules → store' },
];

describe('the layers of src (design.md §3)', () => {
  const all = imports();

  it('finds the imports it checks', () => {
    expect(all.some((i) => i.from === 'http' && i.to === 'sessions')).toBe(true);
    expect(all.some((i) => i.from === 'sessions' && i.to === 'store')).toBe(true);
  });

  for (const rule of RULES) {
    it(`${rule.parts.join(', ')}: ${rule.why}`, () => {
      const wrong = all.filter((i) => rule.parts.includes(i.from) && rule.never.includes(i.to)).map((i) => `${i.file} imports from ${i.to}/`);
      expect(wrong).toEqual([]);
    });
  }
});
