import { describe, expect, it } from 'vitest';
import { cutToWidth, displayWidth, fitLine, textTable, wrapWords } from '../../src/cli/text-table.ts';

/**
 * Tables and fitted lines measured as a terminal shows them: Chinese and Japanese characters and
 * emoji take two columns, a combining accent none, and nothing is cut inside a character.
 */

const family = '👨‍👩‍👧'; // three people joined into one picture: 8 UTF-16 code units, 2 columns
const accented = 'e\u0301'; // "é" as an e and a combining acute accent: 1 column

/** Each column's starting column on the terminal, found where its cell's text begins. */
const columnStarts = (line: string, cells: string[]) => cells.map((cell) => displayWidth(line.slice(0, line.indexOf(cell))));

describe('displayWidth', () => {
  it('counts the columns a terminal gives, not UTF-16 code units', () => {
    expect(displayWidth('abc')).toBe(3);
    expect(displayWidth('中文答案')).toBe(8);
    expect(displayWidth('日本語')).toBe(6);
    expect(displayWidth('😀')).toBe(2);
    expect(displayWidth(family)).toBe(2);
    expect(displayWidth(`caf${accented}`)).toBe(4);
  });
});

describe('fitLine', () => {
  it('cuts wide text to the columns given, "…" included', () => {
    const line = fitLine('会话的名字很长很长很长', 10);
    expect(line).toBe('会话的名…');
    expect(displayWidth(line)).toBeLessThanOrEqual(10);
  });

  it('never splits an emoji, a surrogate pair or a letter from its accent', () => {
    expect(fitLine(`ab${family}cd`, 4)).toBe('ab…');
    expect(fitLine(`ab${family}cd`, 5)).toBe(`ab${family}…`);
    expect(fitLine('a😀😀😀', 4)).toBe('a😀…');
    expect(fitLine(`ab${accented}cdef`, 4)).toBe(`ab${accented}…`);
    for (let width = 1; width < 12; width++) {
      const line = fitLine(`x😀${family}中${accented}😀z`, width);
      expect(line, `width ${width}`).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/);
      expect(displayWidth(line), `width ${width}`).toBeLessThanOrEqual(width);
    }
  });

  it('leaves a line that fits as it is', () => {
    expect(fitLine('中文😀', 6)).toBe('中文😀');
    expect(fitLine('中文😀', undefined)).toBe('中文😀');
  });
});

describe('cutToWidth', () => {
  it('stops before a wide character that would not fit', () => {
    expect(cutToWidth('a中b', 2)).toBe('a');
    expect(cutToWidth('a中b', 3)).toBe('a中');
    expect(cutToWidth('中', 0)).toBe('');
  });
});

describe('textTable', () => {
  it('lines up columns holding Chinese, Japanese and emoji', () => {
    const rows = [
      ['session', 'status', 'tokens'],
      ['会话-中文', 'ok', '12'],
      [`chat-${family}😀`, '完了', '345'],
      [`caf${accented}`, 'ok', '6'],
    ];
    const lines = textTable(rows, { right: [2] }).trimEnd().split('\n');
    expect(columnStarts(lines[0]!, rows[0]!)).toEqual([0, 11, 19]);
    expect(columnStarts(lines[1]!, ['会话-中文', 'ok'])).toEqual([0, 11]);
    expect(columnStarts(lines[2]!, [`chat-${family}`, '完了'])).toEqual([0, 11]);
    expect(columnStarts(lines[3]!, [`caf${accented}`, 'ok'])).toEqual([0, 11]);
    // Right-aligned: each row ends in the same column.
    expect(new Set(lines.map(displayWidth))).toEqual(new Set([25]));
  });

  it('shrinks wide cells to the width given, padding a cut that stopped short', () => {
    const rows = [
      ['name', 'id'],
      ['一个很长很长很长的测试集名称', 'rev-1'],
      ['😀😀😀😀😀😀😀😀', 'rev-2'],
    ];
    const lines = textTable(rows, { width: 20, shrink: [0] }).trimEnd().split('\n');
    for (const line of lines) expect(displayWidth(line), line).toBeLessThanOrEqual(20);
    expect(lines.map((line, i) => displayWidth(line.slice(0, line.indexOf(i ? 'rev' : 'id'))))).toEqual([15, 15, 15]);
    expect(lines[1]).toContain('…');
  });
});

describe('wrapWords', () => {
  it('wraps by columns, so wide words start a line sooner', () => {
    const out = wrapWords(['答案一', '答案二', '答案三'], 14);
    expect(out).toBe('答案一 答案二\n  答案三\n');
    for (const line of out.trimEnd().split('\n')) expect(displayWidth(line)).toBeLessThanOrEqual(14);
  });
});
