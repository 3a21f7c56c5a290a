import { describe, expect, it } from 'vitest';
import { fromColumns, toColumns } from '../../src/agent/turn-wire.ts';

/** A history crosses to a turn thread as columns (turn-wire.ts): what arrives is what was sent. */
const crossed = (rows: object[]) => fromColumns(structuredClone(toColumns(rows)));

describe('rows as columns', () => {
  it('arrive as they were sent: keys some rows lack, undefined values, nested objects', () => {
    const rows = [{ role: 'user', content: 'a' }, { role: 'tool', content: '', input: { deep: [1, { x: null }] }, is_error: undefined }, {}, { content: 'b', role: 'assistant' }];
    const back = crossed(rows);
    expect(back).toStrictEqual(rows);
    expect(Object.keys(back[1]!)).toEqual(['role', 'content', 'input', 'is_error']);
    expect(crossed([])).toEqual([]);
  });

  it('keep a key named __proto__ as a key, not as the prototype', () => {
    const [row] = crossed([JSON.parse('{"role": "user", "__proto__": {"polluted": true}}')]) as Array<Record<string, unknown>>;
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(Object.hasOwn(row!, '__proto__')).toBe(true);
    expect(row!.polluted).toBeUndefined();
  });
});
