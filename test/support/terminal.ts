import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { AGENTD_BIN } from './child-server.ts';

/**
 * `agentd` in a real pseudo-terminal of a given size: a tmux session of its own (on a socket of
 * its own, so nothing touches the user's tmux), read back as the screen shows it.
 */

const run = promisify(execFile);

/** Whether tmux is here (`.ci/run` installs it); the tests that need it are skipped without it. */
export function hasTmux(): boolean {
  try {
    execFileSync('tmux', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
let count = 0;

export interface Terminal {
  /** Keys as tmux names them: text, `Enter`, `C-c`. */
  send(...keys: string[]): Promise<void>;
  /** Everything the program wrote, each wrapped line joined back into the one it wrote. */
  screen(): Promise<string>;
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  close(): Promise<void>;
}

export async function agentdInTerminal(args: string[], env: Record<string, string>, columns: number, rows = 40): Promise<Terminal> {
  const socket = `agentd-test-${process.pid}-${++count}`;
  const tmux = (...a: string[]) => run('tmux', ['-L', socket, ...a]);
  const vars = Object.entries(env).flatMap(([name, value]) => ['-e', `${name}=${value}`]);
  // One tmux command line, so the pane stays after a quick command ends: its output is the point.
  await tmux('-f', '/dev/null', 'start-server', ';', 'set-option', '-g', 'remain-on-exit', 'on', ';', 'new-session', '-d', '-s', 'main', '-x', String(columns), '-y', String(rows), ...vars, '--', process.execPath, AGENTD_BIN, ...args);
  // From the start of the history: the first lines may have scrolled up while the pane took its size.
  const screen = async () => (await tmux('capture-pane', '-p', '-J', '-S', '-', '-t', 'main')).stdout;
  return {
    send: async (...keys) => void (await tmux('send-keys', '-t', 'main', ...keys)),
    screen,
    async waitFor(pattern, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const text = await screen();
        if (pattern.test(text)) return text;
        if (Date.now() > deadline) throw new Error(`${pattern} never showed; the screen:\n${text}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    close: async () => void (await tmux('kill-server').catch(() => undefined)),
  };
}
