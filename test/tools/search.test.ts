import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIND_MAX_RESULTS, findTool } from '../../src/agent/tools/find.ts';
import { globMatcher } from '../../src/agent/tools/glob.ts';
import { GREP_MAX_MATCHES } from '../../src/agent/tools/grep-search.ts';
import { grepTool } from '../../src/agent/tools/grep.ts';
import { run, tempFolder } from './helpers.ts';

async function tree(root: string, files: Record<string, string | Buffer>): Promise<void> {
  for (const [rel, content] of Object.entries(files)) {
    await fs.mkdir(path.dirname(path.join(root, rel)), { recursive: true });
    await fs.writeFile(path.join(root, rel), content);
  }
}

describe('globMatcher', () => {
  it.each([
    ['**/*.ts', 'a.ts', true],
    ['**/*.ts', 'src/deep/a.ts', true],
    ['**/*.ts', 'src/a.tsx', false],
    ['*.ts', 'src/deep/a.ts', true],
    ['src/*.ts', 'src/a.ts', true],
    ['src/*.ts', 'src/deep/a.ts', false],
    ['src/**/test_*.py', 'src/test_x.py', true],
    ['src/**/test_*.py', 'src/a/b/test_x.py', true],
    ['*.{js,json}', 'x/package.json', true],
    ['file?.[ch]', 'file1.c', true],
    ['file?.[!ch]', 'file1.c', false],
    ['a.b', 'axb', false],
  ])('%s vs %s → %s', (pattern, rel, expected) => {
    expect(globMatcher(pattern)(rel)).toBe(expected);
  });
});

describe('find', () => {
  it('finds files by glob, relative to the folder, sorted', async () => {
    const root = await tempFolder();
    await tree(root, { 'b.ts': '', 'src/a.ts': '', 'src/x/c.ts': '', 'src/readme.md': '', 'node_modules/m/i.ts': '' });
    const find = findTool(root);
    expect(await run(find, { pattern: '**/*.ts' })).toBe('b.ts\nsrc/a.ts\nsrc/x/c.ts');
    expect(await run(find, { pattern: '*.ts', path: 'src' })).toBe('src/a.ts\nsrc/x/c.ts');
    expect(await run(find, { pattern: 'x', path: 'src' })).toBe('src/x/');
    expect(await run(find, { pattern: '*.py' })).toBe('no matches');
    await expect(run(find, { pattern: '*', path: '..' })).rejects.toThrow(/outside the session folder/);
  });

  it('does not follow symlinks out of the folder', async () => {
    const root = await tempFolder();
    await tree(root, { 'in.txt': '' });
    await fs.symlink('/etc', path.join(root, 'etc-link'));
    const out = await run(findTool(root), { pattern: '**' });
    expect(out).toBe('etc-link\nin.txt');
    await expect(run(findTool(root), { pattern: '*', path: 'etc-link' })).rejects.toThrow(/symbolic link/);
  });

  it(`stops at ${FIND_MAX_RESULTS} results`, async () => {
    const root = await tempFolder();
    await Promise.all(Array.from({ length: FIND_MAX_RESULTS + 50 }, (_, i) => fs.writeFile(path.join(root, `f${i}.txt`), '')));
    const lines = (await run(findTool(root), { pattern: '*.txt' })).split('\n');
    expect(lines).toHaveLength(FIND_MAX_RESULTS + 1);
    expect(lines.at(-1)).toBe(`[stopped at ${FIND_MAX_RESULTS} results; use a narrower pattern or path]`);
  });
});

describe('grep', () => {
  it('returns file:line:text for matches, filtered by glob', async () => {
    const root = await tempFolder();
    await tree(root, { 'a.ts': 'const x = 1;\nTODO: fix\n', 'src/b.py': 'x = 2\n# todo later\n', 'c.md': 'TODO\n' });
    const grep = grepTool(root);
    expect(await run(grep, { pattern: 'TODO' })).toBe('a.ts:2:TODO: fix\nc.md:1:TODO');
    expect(await run(grep, { pattern: 'todo', ignore_case: true, glob: '*.{ts,py}' })).toBe('a.ts:2:TODO: fix\nsrc/b.py:2:# todo later');
    expect(await run(grep, { pattern: 'x\\s*=', path: 'src' })).toBe('src/b.py:1:x = 2');
    expect(await run(grep, { pattern: 'x', path: 'src/b.py' })).toBe('src/b.py:1:x = 2');
    expect(await run(grep, { pattern: 'nothing here' })).toBe('no matches');
    await expect(run(grep, { pattern: '(' })).rejects.toThrow(/not a valid JavaScript regular expression/);
  });

  it('skips binary and large files and never reads outside', async () => {
    const root = await tempFolder();
    await tree(root, {
      'bin.dat': Buffer.concat([Buffer.from('needle\n'), Buffer.from([0, 1, 2])]),
      'big.txt': `needle\n${'y'.repeat(5 * 1024 * 1024)}`,
      'ok.txt': 'needle\n',
    });
    await fs.symlink('/etc', path.join(root, 'etc-link'));
    await fs.symlink('/etc/passwd', path.join(root, 'passwd-link'));
    const grep = grepTool(root);
    expect(await run(grep, { pattern: 'needle' })).toBe('ok.txt:1:needle');
    expect(await run(grep, { pattern: 'root' })).toBe('no matches');
    await expect(run(grep, { pattern: 'root', path: 'etc-link' })).rejects.toThrow(/symbolic link/);
    await expect(run(grep, { pattern: 'root', path: '/etc/passwd' })).rejects.toThrow(/outside the session folder/);
  });

  it(`stops at ${GREP_MAX_MATCHES} matches`, async () => {
    const root = await tempFolder();
    await tree(root, { 'many.txt': 'hit\n'.repeat(GREP_MAX_MATCHES + 100) });
    const lines = (await run(grepTool(root), { pattern: 'hit' })).split('\n');
    expect(lines).toHaveLength(GREP_MAX_MATCHES + 1);
    expect(lines[GREP_MAX_MATCHES - 1]).toBe(`many.txt:${GREP_MAX_MATCHES}:hit`);
    expect(lines.at(-1)).toBe(`[stopped at ${GREP_MAX_MATCHES} matches; narrow the pattern, path or glob]`);
  });

  it('stops a catastrophically backtracking pattern without blocking the process', async () => {
    const root = await tempFolder();
    await tree(root, { 'a.txt': `${'a'.repeat(40)}b\n` });
    let ticks = 0;
    const ticker = setInterval(() => (ticks += 1), 20);
    try {
      await expect(run(grepTool(root, 500), { pattern: '^(a+)+$' })).rejects.toThrow('grep timed out after 500 ms');
    } finally {
      clearInterval(ticker);
    }
    expect(ticks).toBeGreaterThan(5);
  });
});
