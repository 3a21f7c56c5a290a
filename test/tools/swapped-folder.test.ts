import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, invokeBody, readFrames, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * What the agent's own bash can do to the server's path checks. The checks look at a path, the
 * open walks it again: a folder on the way exchanged for a symlink in between (renameat2 with
 * RENAME_EXCHANGE, looped by perl inside the sandbox, which need not see the link's target) led
 * the file tools and the files API outside the session folder; O_NOFOLLOW guards only a path's
 * last part. Every open is now checked where the kernel says it is. And a FIFO made by bash froze
 * the server's thread when written to (a blocking open for writing waits for a reader).
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

// renameat2 is syscall 316 on x86-64; the exchange needs perl, as Debian has it.
const canSwap = process.arch === 'x64' && spawnSync('perl', ['-v']).status === 0;
// Its names in variables: perl passes a constant string to syscall as a number.
const swapping = (seconds: number) => `perl -e 'my $e=time+${seconds}; my ($x,$y)=("d","l"); open(F,">running"); close F; while(time<$e){ syscall(316,-100,$x,-100,$y,2) }'`;

async function hostFolder(): Promise<string> {
  const victim = `${h.dataDir}/victim-${Math.random().toString(36).slice(2)}`;
  await mkdir(victim, { recursive: true });
  await writeFile(`${victim}/secret.txt`, 'TOPSECRET-HOST-FILE\n');
  await writeFile(`${victim}/edit-me.txt`, 'host content, must not change\n');
  await writeFile(`${victim}/only-on-host.txt`, '');
  return victim;
}

describe.runIf(canSwap)('a folder swapped for a symlink while the server looks', () => {
  it('no tool of the same step reads, lists, searches or writes outside the session folder', async () => {
    const victim = await hostFolder();
    const command = `mkdir -p d && echo decoy > d/secret.txt && echo "decoy AAA" > d/edit-me.txt && ln -sfn ${victim} l && ${swapping(5)}; echo done`;
    const calls: Array<{ id: string; name: string; input: unknown }> = [{ id: 'c0', name: 'bash', input: { command } }];
    for (let i = 0; i < 40; i++) {
      calls.push({ id: `r${i}`, name: 'read', input: { path: 'd/secret.txt' } });
      calls.push({ id: `l${i}`, name: 'ls', input: { path: 'd' } });
      calls.push({ id: `w${i}`, name: 'write', input: { path: `d/pwned-${i}.txt`, content: 'PWNED' } });
      if (i % 4 === 0) calls.push({ id: `e${i}`, name: 'edit', input: { path: 'd/edit-me.txt', old_string: 'content', new_string: 'PWNED' } });
      if (i % 4 === 1) calls.push({ id: `g${i}`, name: 'grep', input: { pattern: 'TOPSECRET', path: 'd' } });
      if (i % 4 === 3) calls.push({ id: `f${i}`, name: 'find', input: { pattern: '*', path: 'd' } });
    }
    const agent = template({ tools: ['bash', 'read', 'ls', 'grep', 'find', 'write', 'edit'].map((name) => builtin(name)), mode: 'allow' });
    // Streamed slowly, so the later calls start while the loop runs.
    h.model.script([{ toolCalls: calls, chunkDelayMs: 8 }, { text: 'done' }]);
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent, { session_id: sid('swap-tools'), flags: { stream: true } }));
    const { frames } = await readFrames(res);
    const results = frames.filter((f) => f.type === 'tool_result');
    expect(results.length).toBe(calls.length);
    const leaked = results.filter((r) => /TOPSECRET|only-on-host/.test(JSON.stringify(r.data.output)));
    expect(leaked.map((r) => r.data.id)).toEqual([]);
    expect(Array.from({ length: 40 }, (_, i) => `${victim}/pwned-${i}.txt`).filter((p) => existsSync(p))).toEqual([]);
    expect(await readFile(`${victim}/edit-me.txt`, 'utf8')).toBe('host content, must not change\n');
  }, 60_000);

  it('the files API never serves or lists what is outside', async () => {
    const victim = await hostFolder();
    const session = sid('swap-files');
    const command = `mkdir d && echo decoy > d/secret.txt && ln -s ${victim} l && ${swapping(5)}; echo done`;
    h.model.script([{ toolCalls: [{ id: 'c1', name: 'bash', input: { command } }] }, { text: 'done' }]);
    const agent = template({ tools: [builtin('bash')], mode: 'allow' });
    const turn = h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent, { session_id: session }));
    const folder = h.sessionDir(session);
    for (let i = 0; i < 200 && !existsSync(`${folder}/running`); i++) await sleep(50);
    expect(existsSync(`${folder}/running`)).toBe(true);
    const get = async (p: string) => (await fetch(`${h.url}/api/sessions/${session}/files?project_id=${h.projectId}&path=${p}`, { headers: { authorization: `ApiKey ${h.apiKey}` } })).text();
    let leaked = 0;
    let decoys = 0;
    for (const started = Date.now(); Date.now() - started < 3_000; ) {
      const file = await get('d/secret.txt');
      if (file.includes('TOPSECRET')) leaked++;
      if (file.includes('decoy')) decoys++;
      // The host's secret.txt is 20 bytes, the decoy 6.
      if ((await get('d')).includes('"size":20')) leaked++;
    }
    await readJson(await turn);
    expect(decoys).toBeGreaterThan(0);
    expect(leaked).toBe(0);
  }, 60_000);
});

describe('a FIFO made by bash', () => {
  const agent = template({ tools: [builtin('bash'), builtin('write')], mode: 'allow' });

  /** Opens the FIFO for reading after a while: were the server's open to wait for a reader, it would not wait for good. */
  const unblockLater = (fifo: string) => spawn('sh', ['-c', 'sleep 3; timeout 5 cat "$0" > /dev/null', fifo], { stdio: 'ignore' }).unref();

  it('is refused by the files API as not a regular file', async () => {
    const session = sid('fifo-put');
    h.model.script([{ toolCalls: [{ id: 'c1', name: 'bash', input: { command: 'mkfifo pipe' } }] }, { text: 'done' }]);
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent, { session_id: session })));
    unblockLater(`${h.sessionDir(session)}/pipe`);
    const res = await fetch(`${h.url}/api/sessions/${session}/files?project_id=${h.projectId}&path=pipe`, {
      method: 'PUT',
      headers: { authorization: `ApiKey ${h.apiKey}`, 'content-type': 'application/octet-stream' },
      body: 'x',
    });
    expect(res.status).toBe(400);
    expect((await res.json()).status.message).toMatch(/not a regular file/);
  });

  it('is an error result of the write tool', async () => {
    const session = sid('fifo-write');
    h.model.script([{ toolCalls: [{ id: 'c1', name: 'bash', input: { command: 'mkfifo pipe' } }] }, { text: 'made' }]);
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'make a pipe' }], agent, { session_id: session })));
    unblockLater(`${h.sessionDir(session)}/pipe`);
    h.model.script([{ toolCalls: [{ id: 'c2', name: 'write', input: { path: 'pipe', content: 'x' } }] }, { text: 'done' }]);
    const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write to it' }], agent, { session_id: session })));
    expect(body.data.outputs.messages[1]).toMatchObject({ role: 'tool', tool_call_id: 'c2', is_error: true, content: expect.stringMatching(/not a regular file/) });
  });
});
