import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.ts';
import { invokeBody, readJson, startHarness, template, type Harness } from '../support/harness.ts';

/** The ids the server makes for sessions and turns are UUIDv7, ordered by time (src/ids.ts). */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

/** The time a UUIDv7 was made, and its version digit. */
function v7(id: string): { ms: number; version: string } {
  const hex = id.replaceAll('-', '');
  expect(hex).toMatch(/^[0-9a-f]{32}$/);
  return { ms: parseInt(hex.slice(0, 12), 16), version: hex[12]! };
}

describe('ids the server makes', () => {
  it('begin with the time they were made, so each turn and minted session sorts after the ones before', async () => {
    const before = Date.now();
    const replies = [];
    for (let i = 0; i < 3; i++) {
      h.model.script({ text: `answer ${i}` });
      replies.push(await readJson(await h.invoke(invokeBody([{ role: 'user', content: `question ${i}` }], template()))));
    }
    const after = Date.now();
    for (const ids of [replies.map((r) => r.session_id as string), replies.map((r) => r.turn_id as string)]) {
      expect(ids.map((id) => v7(id).version)).toEqual(['7', '7', '7']);
      for (const id of ids) expect(v7(id).ms).toBeGreaterThanOrEqual(before);
      for (const id of ids) expect(v7(id).ms).toBeLessThanOrEqual(after);
      expect([...ids].sort()).toEqual(ids);
    }
    expect(replies[0].session_id).toMatch(/^[0-9a-f]{32}$/);
  });

  it('sort in the order they were made, thousands to a millisecond, each a valid UUIDv7 of its own', () => {
    const before = Date.now();
    const ids = Array.from({ length: 20_000 }, newId);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of [ids[0]!, ids.at(-1)!]) {
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(v7(id).ms).toBeGreaterThanOrEqual(before);
    }
  });
});
