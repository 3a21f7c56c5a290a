import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';

/**
 * README's configuration table: each setting is read with its documented default, and a value
 * the server cannot honour stops the start with a message naming the setting (`agentd serve`
 * prints it as `agentd: …` and exits 2), not a server that misbehaves later.
 */
describe('the settings agentd serve reads', () => {
  it('listens on 127.0.0.1:8787 unless told otherwise; an empty HOST is unset, not every interface', () => {
    expect(loadConfig({})).toMatchObject({ host: '127.0.0.1', port: 8787 });
    expect(loadConfig({ HOST: '' }).host).toBe('127.0.0.1');
    expect(loadConfig({ HOST: '0.0.0.0', PORT: '0' })).toMatchObject({ host: '0.0.0.0', port: 0 });
    for (const bad of ['65536', '70000', '-1', '80.5', 'http']) {
      expect(() => loadConfig({ PORT: bad })).toThrow(`PORT must be a port number from 0 to 65535, got "${bad}"`);
    }
  });
});
