import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { builtin, expectError, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/** Template `skills[]` (issue 4): written into the session folder and listed in the instructions. */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());
beforeEach(() => h.model.reset());

const release = {
  name: 'release-notes',
  description: 'How to write release notes for this project',
  body: 'Write release notes as a bulleted list, newest first. Use templates/notes.md.',
  files: [
    { path: 'templates/notes.md', content: '# Release notes\n' },
    { path: 'bin/check.sh', content: '#!/bin/sh\necho ok\n', executable: true },
  ],
};
const agentWith = (skills: unknown[]) => ({ ...template({ tools: [builtin('read')], mode: 'allow' }), skills });
const turn = (session: string, skills: unknown[]) => h.invoke(invokeBody([{ role: 'user', content: 'write the notes' }], agentWith(skills), { session_id: session }));

describe('skills', () => {
  it('are written into .agents/skills/<name>/, listed in the instructions, and read by the agent', async () => {
    const session = sid('skill');
    h.model.script([{ toolCalls: [{ name: 'read', input: { path: '.agents/skills/release-notes/SKILL.md' } }] }, { text: 'following the skill' }]);
    const body = await readJson(await turn(session, [release]));
    expect(body.data.outputs.messages.at(-1).content).toBe('following the skill');
    const dir = path.join(h.sessionDir(session), '.agents/skills/release-notes');
    expect(readFileSync(path.join(dir, 'SKILL.md'), 'utf8')).toContain(release.body);
    expect(readFileSync(path.join(dir, 'SKILL.md'), 'utf8')).toMatch(/^---\nname: release-notes\n/);
    expect(readFileSync(path.join(dir, 'templates/notes.md'), 'utf8')).toBe('# Release notes\n');
    expect(statSync(path.join(dir, 'bin/check.sh')).mode & 0o111).not.toBe(0);
    const [first, second] = h.model.requests;
    const system = first!.messages.find((m) => m.role === 'system')!.content;
    expect(system).toContain('release-notes: How to write release notes for this project');
    expect(JSON.stringify(second!.messages.at(-1))).toContain('bulleted list');
  });

  it('are replaced, not merged, on the next turn', async () => {
    const session = sid('skill-again');
    h.model.script({ text: 'ok' });
    await readJson(await turn(session, [release]));
    await readJson(await turn(session, [{ ...release, files: [] }]));
    expect(readdirSync(path.join(h.sessionDir(session), '.agents/skills/release-notes'))).toEqual(['SKILL.md']);
  });

  it.each([
    ['a path that climbs out', { path: '../../escape.txt', content: 'x' }, /skills\[0\]\.files\[0\]\.path/],
    ['an absolute path', { path: '/etc/escape', content: 'x' }, /relative/],
    ['a file named like the skill body', { path: 'SKILL.md', content: 'x' }, /SKILL\.md/],
  ])('refuse %s with a 400 naming the path', async (_what, file, message) => {
    await expectError(await turn(sid('bad'), [{ ...release, files: [file] }]), 400, 'invalid-request', message);
    expect(h.model.requests).toHaveLength(0);
  });

  it('refuse bad names and duplicates', async () => {
    await expectError(await turn(sid('bad'), [{ ...release, name: 'Release Notes' }]), 400, 'invalid-request', /skills\[0\]\.name/);
    await expectError(await turn(sid('bad'), [release, release]), 400, 'invalid-request', /duplicate skill name/);
  });

  it('never write outside the folder, even through a symlink the agent left there', async () => {
    const session = sid('skill-link');
    const outside = mkdtempSync(path.join(os.tmpdir(), 'agentd-outside-'));
    mkdirSync(h.sessionDir(session), { recursive: true });
    symlinkSync(outside, path.join(h.sessionDir(session), '.agents'));
    await expectError(await turn(session, [release]), 400, 'invalid-request', /outside the session folder/);
    expect(readdirSync(outside)).toEqual([]);
  });
});
