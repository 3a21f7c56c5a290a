import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { editTool } from '../../src/agent/tools/edit.ts';
import { writeRegularFile } from '../../src/agent/tools/files.ts';
import { lsTool } from '../../src/agent/tools/ls.ts';
import { READ_MAX_OUTPUT_BYTES, readTool } from '../../src/agent/tools/read.ts';
import { writeTool } from '../../src/agent/tools/write.ts';
import { run, tempFolder } from './helpers.ts';

async function exists(p: string): Promise<boolean> {
  return fs.lstat(p).then(() => true, () => false);
}

describe('read', () => {
  it('returns the lines, paged by offset and limit', async () => {
    const root = await tempFolder();
    await fs.writeFile(path.join(root, 'f.txt'), 'one\ntwo\nthree\nfour');
    const read = readTool(root);
    expect(await run(read, { path: 'f.txt' })).toBe('one\ntwo\nthree\nfour');
    expect(await run(read, { path: 'f.txt', offset: 2, limit: 2 })).toBe(
      'two\nthree\n\n[showed lines 2-3; more follow, continue with offset=4]',
    );
    expect(await run(read, { path: 'f.txt', offset: 4 })).toBe('four');
    await expect(run(read, { path: 'f.txt', offset: 9 })).rejects.toThrow('offset 9 is past the end of "f.txt", which has 4 line(s)');
  });

  it('caps output at 256 KiB and says so', async () => {
    const root = await tempFolder();
    const line = `${'x'.repeat(1023)}\n`;
    await fs.writeFile(path.join(root, 'big.txt'), line.repeat(1000));
    const out = await run(readTool(root), { path: 'big.txt' });
    expect(out).toContain('[output truncated at 256 KiB after line 256; continue with offset=257]');
    expect(Buffer.byteLength(out)).toBeLessThan(READ_MAX_OUTPUT_BYTES + 200);
    expect(out.startsWith(line.repeat(256))).toBe(true);
  });

  it('reads a file of over 1 MiB, a chunk at a time, to its last lines', async () => {
    const root = await tempFolder();
    const text = Array.from({ length: 100_000 }, (_, i) => `line ${i + 1} é\n`).join('');
    expect(Buffer.byteLength(text)).toBeGreaterThan(1024 * 1024);
    await fs.writeFile(path.join(root, 'log.txt'), text);
    expect(await run(readTool(root), { path: 'log.txt', offset: 99_999 })).toBe('line 99999 é\nline 100000 é\n');
  });

  it('refuses binary files, folders and missing files', async () => {
    const root = await tempFolder();
    await fs.writeFile(path.join(root, 'bin'), Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1, 2]));
    await fs.mkdir(path.join(root, 'dir'));
    const read = readTool(root);
    await expect(run(read, { path: 'bin' })).rejects.toThrow('"bin" is a binary file');
    await expect(run(read, { path: 'dir' })).rejects.toThrow('"dir" is a directory; use ls to list it');
    await expect(run(read, { path: 'nope' })).rejects.toThrow('path "nope" does not exist');
  });

  it('refuses a named pipe at once instead of waiting for a writer', async () => {
    const root = await tempFolder();
    execFileSync('mkfifo', [path.join(root, 'pipe')]);
    await expect(run(readTool(root), { path: 'pipe' })).rejects.toThrow('"pipe" is not a regular file');
  });

  it('refuses names too long for the file system, as write does, without showing the folder’s host path', async () => {
    const root = await tempFolder();
    for (const p of ['n'.repeat(300), `${'d/'.repeat(2100)}f`]) {
      const read = await run(readTool(root), { path: p }).catch((error: Error) => error.message);
      expect(read).toMatch(/^path "[nd].*" (is too long|does not exist)/);
      expect(read).not.toContain(root);
      await expect(run(writeTool(root), { path: p, content: 'x' })).rejects.toThrow(/is too long/);
    }
  });

  it('refuses paths outside the folder, through symlinks too', async () => {
    const root = await tempFolder();
    const outside = await tempFolder('agentd-outside-');
    await fs.writeFile(path.join(outside, 'secret.txt'), 'top secret');
    await fs.symlink('/etc', path.join(root, 'etc-link'));
    await fs.symlink(path.join(outside, 'secret.txt'), path.join(root, 'secret-link'));
    const read = readTool(root);
    await expect(run(read, { path: '../secret.txt' })).rejects.toThrow(/outside the session folder/);
    await expect(run(read, { path: path.join(outside, 'secret.txt') })).rejects.toThrow(/outside the session folder/);
    await expect(run(read, { path: '/etc/passwd' })).rejects.toThrow(/outside the session folder/);
    await expect(run(read, { path: 'etc-link/passwd' })).rejects.toThrow(/symbolic link to a location outside/);
    await expect(run(read, { path: 'secret-link' })).rejects.toThrow(/symbolic link to a location outside/);
  });
});

describe('write', () => {
  it('creates nested folders and reports the bytes written', async () => {
    const root = await tempFolder();
    const out = await run(writeTool(root), { path: 'a/b/c/é.txt', content: 'héllo' });
    expect(out).toBe('wrote 6 bytes to a/b/c/é.txt');
    expect(await fs.readFile(path.join(root, 'a/b/c/é.txt'), 'utf8')).toBe('héllo');
    await run(writeTool(root), { path: 'a/b/c/é.txt', content: 'x' });
    expect(await fs.readFile(path.join(root, 'a/b/c/é.txt'), 'utf8')).toBe('x');
  });

  it('refuses a path that names a folder (a trailing "/"), rather than writing a file of its name', async () => {
    const root = await tempFolder();
    await expect(run(writeTool(root), { path: 'sub/', content: 'x' })).rejects.toThrow('path "sub/" ends with "/", which names a folder; name the file to write');
    expect(await fs.readdir(root)).toEqual([]);
  });

  it('refuses to write outside, through symlinks or not', async () => {
    const root = await tempFolder();
    const outside = await tempFolder('agentd-outside-');
    await fs.writeFile(path.join(outside, 'target.txt'), 'original');
    await fs.symlink('/etc', path.join(root, 'etc-link'));
    await fs.symlink(outside, path.join(root, 'out-dir'));
    await fs.symlink(path.join(outside, 'target.txt'), path.join(root, 'file-link'));
    await fs.symlink(path.join(outside, 'created.txt'), path.join(root, 'dangling'));
    const write = writeTool(root);
    await expect(run(write, { path: '../escape.txt', content: 'x' })).rejects.toThrow(/outside the session folder/);
    await expect(run(write, { path: path.join(outside, 'abs.txt'), content: 'x' })).rejects.toThrow(/outside the session folder/);
    await expect(run(write, { path: 'etc-link/agentd-escape', content: 'x' })).rejects.toThrow(/symbolic link/);
    await expect(run(write, { path: 'out-dir/new/deep.txt', content: 'x' })).rejects.toThrow(/symbolic link/);
    await expect(run(write, { path: 'file-link', content: 'x' })).rejects.toThrow(/symbolic link/);
    await expect(run(write, { path: 'dangling', content: 'x' })).rejects.toThrow(/symbolic link/);
    expect(await exists('/etc/agentd-escape')).toBe(false);
    expect(await fs.readdir(outside)).toEqual(['target.txt']);
    expect(await fs.readFile(path.join(outside, 'target.txt'), 'utf8')).toBe('original');
  });

  it('writes a large file whole, and neither way of writing follows a symbolic link at the last step', async () => {
    const root = await tempFolder();
    const outside = await tempFolder('agentd-outside-');
    const large = 'line of text\n'.repeat(200_000);
    expect(await run(writeTool(root), { path: 'big.txt', content: large })).toBe(`wrote ${large.length} bytes to big.txt`);
    expect(await fs.readFile(path.join(root, 'big.txt'), 'utf8')).toBe(large);
    // Both ways of writing open the final name with O_NOFOLLOW: a link there is refused, not followed.
    await fs.symlink(path.join(outside, 'victim.txt'), path.join(root, 'swapped'));
    for (const content of ['small', large]) {
      await expect(writeRegularFile(root, path.join(root, 'swapped'), 'swapped', content)).rejects.toThrow(/symbolic link/);
    }
    expect(await fs.readdir(outside)).toEqual([]);
  });
});

describe('edit', () => {
  it('replaces a unique occurrence literally', async () => {
    const root = await tempFolder();
    const file = path.join(root, 'f.ts');
    await fs.writeFile(file, 'const a = 1;\nconst b = 2;\n');
    const out = await run(editTool(root), { path: 'f.ts', old_string: 'const b = 2;', new_string: 'const b = "$&$1";' });
    expect(out).toBe('replaced 1 occurrence in f.ts');
    expect(await fs.readFile(file, 'utf8')).toBe('const a = 1;\nconst b = "$&$1";\n');
  });

  it('refuses absent or ambiguous text unless replace_all', async () => {
    const root = await tempFolder();
    const file = path.join(root, 'f.txt');
    await fs.writeFile(file, 'foo bar foo baz foo');
    const edit = editTool(root);
    await expect(run(edit, { path: 'f.txt', old_string: 'qux', new_string: 'y' })).rejects.toThrow(/was not found in "f.txt"/);
    await expect(run(edit, { path: 'f.txt', old_string: 'foo', new_string: 'y' })).rejects.toThrow(
      /occurs 3 times in "f.txt".*replace_all/,
    );
    expect(await fs.readFile(file, 'utf8')).toBe('foo bar foo baz foo');
    expect(await run(edit, { path: 'f.txt', old_string: 'foo', new_string: 'y', replace_all: true })).toBe('replaced 3 occurrences in f.txt');
    expect(await fs.readFile(file, 'utf8')).toBe('y bar y baz y');
    await expect(run(edit, { path: 'f.txt', old_string: '', new_string: 'y' })).rejects.toThrow(/old_string is empty/);
  });

  it('edits a file of over 1 MiB (read through the thread pool) as it edits a small one (read at once)', async () => {
    const root = await tempFolder();
    const big = `${'x'.repeat(1024 * 1024)}\nthe end\n`;
    await fs.writeFile(path.join(root, 'big.txt'), big);
    await fs.writeFile(path.join(root, 'small.txt'), 'the end\n');
    const edit = editTool(root);
    for (const name of ['big.txt', 'small.txt']) expect(await run(edit, { path: name, old_string: 'the end', new_string: 'THE END' })).toBe(`replaced 1 occurrence in ${name}`);
    expect(await fs.readFile(path.join(root, 'big.txt'), 'utf8')).toBe(big.replace('the end', 'THE END'));
    expect(await fs.readFile(path.join(root, 'small.txt'), 'utf8')).toBe('THE END\n');
  });

  it('refuses binary files, named pipes, folders and files over its limit, changing nothing', async () => {
    const root = await tempFolder();
    const binary = Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 0x61]);
    await fs.writeFile(path.join(root, 'bin'), binary);
    execFileSync('mkfifo', [path.join(root, 'pipe')]);
    await fs.mkdir(path.join(root, 'dir'));
    await fs.writeFile(path.join(root, 'huge.txt'), '');
    await fs.truncate(path.join(root, 'huge.txt'), 11 * 1024 * 1024);
    const edit = editTool(root);
    await expect(run(edit, { path: 'bin', old_string: 'a', new_string: 'b' })).rejects.toThrow('"bin" is a binary file');
    await expect(run(edit, { path: 'pipe', old_string: 'a', new_string: 'b' })).rejects.toThrow('"pipe" is not a regular file');
    await expect(run(edit, { path: 'dir', old_string: 'a', new_string: 'b' })).rejects.toThrow('"dir" is a directory');
    await expect(run(edit, { path: 'huge.txt', old_string: 'a', new_string: 'b' })).rejects.toThrow(/is 11534336 bytes, over the 10 MiB edit limit/);
    expect(await fs.readFile(path.join(root, 'bin'))).toEqual(binary);
  });

  it('refuses files outside the folder', async () => {
    const root = await tempFolder();
    const outside = await tempFolder('agentd-outside-');
    await fs.writeFile(path.join(outside, 't.txt'), 'keep');
    await fs.symlink(path.join(outside, 't.txt'), path.join(root, 'link'));
    await expect(run(editTool(root), { path: 'link', old_string: 'keep', new_string: 'x' })).rejects.toThrow(/symbolic link/);
    expect(await fs.readFile(path.join(outside, 't.txt'), 'utf8')).toBe('keep');
  });
});

describe('ls', () => {
  it('lists sorted entries with "/" after folders', async () => {
    const root = await tempFolder();
    await fs.mkdir(path.join(root, 'zdir'));
    await fs.mkdir(path.join(root, 'adir'));
    await fs.writeFile(path.join(root, 'b.txt'), '');
    await fs.writeFile(path.join(root, 'zdir/inner.txt'), '');
    const ls = lsTool(root);
    expect(await run(ls, {})).toBe('adir/\nb.txt\nzdir/');
    expect(await run(ls, { path: 'zdir' })).toBe('inner.txt');
    expect(await run(ls, { path: 'adir' })).toBe('(empty folder)');
    await expect(run(ls, { path: 'b.txt' })).rejects.toThrow(/is a file, not a folder/);
    await expect(run(ls, { path: 'nope' })).rejects.toThrow(/does not exist/);
  });

  it('shows a symlink to /etc without listing /etc', async () => {
    const root = await tempFolder();
    await fs.symlink('/etc', path.join(root, 'etc-link'));
    const ls = lsTool(root);
    expect(await run(ls, {})).toBe('etc-link -> /etc');
    await expect(run(ls, { path: 'etc-link' })).rejects.toThrow(/symbolic link to a location outside/);
    await expect(run(ls, { path: '..' })).rejects.toThrow(/outside the session folder/);
    await expect(run(ls, { path: '/' })).rejects.toThrow(/outside the session folder/);
  });
});
