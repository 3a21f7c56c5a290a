import { describe, expect, it } from 'vitest';
import { applyFact, MAX_FACTS, neverStreams, streamOnly, wayIn } from '../../src/agent/model-facts.ts';
import { makeRoom } from '../../src/bounded.ts';

/**
 * What a process remembers about what requests bring (a model name is part of an endpoint's
 * key) stays bounded: a client that names a new model each turn does not grow the server for
 * the life of the process.
 */
describe('memories keyed by what requests bring', () => {
  it('makeRoom drops the oldest entries until one more fits', () => {
    const map = new Map([['a', 1], ['b', 2], ['c', 3]]);
    makeRoom(map, 3);
    expect([...map.keys()]).toEqual(['b', 'c']);
    makeRoom(map, 1);
    expect(map.size).toBe(0);
    const set = new Set(['x']);
    makeRoom(set, 2);
    expect([...set]).toEqual(['x']);
  });

  it('keeps at most MAX_FACTS facts of each kind about model servers, the newest', () => {
    const many = MAX_FACTS + 50;
    for (let i = 0; i < many; i++) {
      applyFact({ kind: 'stream-only', endpoint: `http://127.0.0.1:1/v1 model-${i}` });
      applyFact({ kind: 'never-streams', endpoint: `http://127.0.0.1:2/v1 model-${i}` });
      applyFact({ kind: 'way-in', base: `http://127.0.0.1:3/${i}`, index: 1 });
    }
    for (const known of [streamOnly, neverStreams, wayIn]) expect(known.size).toBe(MAX_FACTS);
    expect(streamOnly.has(`http://127.0.0.1:1/v1 model-${many - 1}`)).toBe(true);
    expect(streamOnly.has('http://127.0.0.1:1/v1 model-0')).toBe(false);
    // A fact told again changes nothing and pushes nothing out.
    expect(applyFact({ kind: 'way-in', base: `http://127.0.0.1:3/${many - 1}`, index: 1 })).toBe(false);
    expect(wayIn.size).toBe(MAX_FACTS);
  });
});
