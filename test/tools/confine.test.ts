import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveInside } from '../../src/agent/tools/confine.ts';
import { ToolError } from '../../src/agent/tools/tool-error.ts';
import { tempFolder } from './helpers.ts';

describe('resolveInside', () => {
  it('resolves relative and inside-absolute paths to real paths', async () => {
    const root = await tempFolder();
    await fs.mkdir(path.join(root, 'sub'));
    await fs.writeFile(path.join(root, 'sub/f.txt'), 'x');
    expect(resolveInside(root, 'sub/f.txt')).toBe(path.join(root, 'sub/f.txt'));
    expect(resolveInside(root, '.')).toBe(root);
    expect(resolveInside(root, path.join(root, 'sub/f.txt'))).toBe(path.join(root, 'sub/f.txt'));
    expect(resolveInside(root, 'sub/../sub/f.txt')).toBe(path.join(root, 'sub/f.txt'));
  });

  it('refuses to go through a file as if it were a folder, as the filesystem would', async () => {
    const root = await tempFolder();
    await fs.mkdir(path.join(root, 'sub'));
    await fs.writeFile(path.join(root, 'a.txt'), 'x');
    for (const through of ['a.txt/..', 'a.txt/../sub', './a.txt/../a.txt', `${root}/a.txt/..`]) {
      expect(() => resolveInside(root, through), through).toThrow(`path "${through}" goes through a file as if it were a folder`);
    }
    expect(resolveInside(root, 'sub/..')).toBe(root);
    expect(resolveInside(root, 'missing/../a.txt')).toBe(path.join(root, 'a.txt'));
  });

  it('realpaths the root itself', async () => {
    const base = await tempFolder();
    await fs.mkdir(path.join(base, 'real'));
    await fs.symlink(path.join(base, 'real'), path.join(base, 'alias'));
    expect(resolveInside(path.join(base, 'alias'), 'new.txt')).toBe(path.join(base, 'real/new.txt'));
    // Reaching the folder through the alias is still inside.
    expect(resolveInside(path.join(base, 'real'), path.join(base, 'alias/new.txt'))).toBe(path.join(base, 'real/new.txt'));
  });

  it('refuses .. escapes and absolute paths outside', async () => {
    const root = await tempFolder();
    expect(() => resolveInside(root, '../x')).toThrow(ToolError);
    expect(() => resolveInside(root, '../x')).toThrow('path "../x" is outside the session folder; use a path relative to the folder');
    expect(() => resolveInside(root, 'a/../../x')).toThrow(/outside the session folder/);
    expect(() => resolveInside(root, '/etc/passwd')).toThrow(/outside the session folder/);
    expect(() => resolveInside(root, '/nonexistent/dir/file')).toThrow(/outside the session folder/);
    expect(() => resolveInside(root, `${root}-sibling/x`)).toThrow(/outside the session folder/);
  });

  it('refuses symlinks whose real target is outside, existing or not', async () => {
    const root = await tempFolder();
    const outside = await tempFolder('agentd-outside-');
    await fs.writeFile(path.join(outside, 'secret'), 's');
    await fs.symlink('/etc', path.join(root, 'etc-link'));
    await fs.symlink(path.join(outside, 'secret'), path.join(root, 'file-link'));
    await fs.symlink(path.join(outside, 'not-yet'), path.join(root, 'dangling'));
    await fs.symlink(path.join(outside, 'no-dir'), path.join(root, 'dangling-dir'));
    for (const p of ['etc-link', 'etc-link/passwd', 'etc-link/new', 'file-link', 'dangling', 'dangling-dir/a/b']) {
      expect(() => resolveInside(root, p), p).toThrow(/symbolic link to a location outside/);
    }
    expect(() => resolveInside(root, 'dangling', { mustExist: true })).toThrow(/symbolic link to a location outside/);
  });

  it('follows symlinks that stay inside, including dangling ones', async () => {
    const root = await tempFolder();
    await fs.mkdir(path.join(root, 'dir'));
    await fs.symlink('dir', path.join(root, 'dir-link'));
    await fs.symlink('dir/later.txt', path.join(root, 'later-link'));
    expect(resolveInside(root, 'dir-link/x.txt')).toBe(path.join(root, 'dir/x.txt'));
    expect(resolveInside(root, 'later-link')).toBe(path.join(root, 'dir/later.txt'));
  });

  it('handles missing paths', async () => {
    const root = await tempFolder();
    await fs.writeFile(path.join(root, 'file'), 'x');
    expect(resolveInside(root, 'a/b/c.txt')).toBe(path.join(root, 'a/b/c.txt'));
    expect(() => resolveInside(root, 'a/b/c.txt', { mustExist: true })).toThrow('path "a/b/c.txt" does not exist');
    expect(() => resolveInside(root, 'file/below')).toThrow(/goes through a file/);
    expect(() => resolveInside(root, 'bad\0name')).toThrow(/NUL/);
  });

  it('tells a file, a link to a file and a loop of links from a folder, however deep the missing part', async () => {
    const root = await tempFolder();
    await fs.writeFile(path.join(root, 'file'), 'x');
    await fs.mkdir(path.join(root, 'dir'));
    await fs.symlink('file', path.join(root, 'file-link'));
    await fs.symlink('dir', path.join(root, 'dir-link'));
    await fs.symlink('loop-b', path.join(root, 'loop-a'));
    await fs.symlink('loop-a', path.join(root, 'loop-b'));
    for (const p of ['file/below', 'file/below/deeper.txt', 'file-link/below', 'file-link/below/deeper.txt']) {
      expect(() => resolveInside(root, p), p).toThrow(/goes through a file/);
    }
    for (const p of ['loop-a', 'loop-a/x.txt']) expect(() => resolveInside(root, p), p).toThrow(/too many levels of symbolic links/);
    expect(resolveInside(root, 'dir-link/a/b.txt')).toBe(path.join(root, 'dir/a/b.txt'));
    expect(resolveInside(root, 'dir/new.txt')).toBe(path.join(root, 'dir/new.txt'));
    expect(resolveInside(root, 'file-link')).toBe(path.join(root, 'file'));
  });
});
