import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { AGENTD_BIN, agentdCommand } from '../support/child-server.ts';

/**
 * The commands made of subcommands share one way in (`runSubcommand`, src/cli/remote.ts): what
 * each answers before it talks to any server. The address leads nowhere; nothing here connects.
 */
const agentd = (args: string[]) => agentdCommand(args, { AGENTD_URL: 'http://127.0.0.1:9', AGENTD_API_KEY: 'agd_unused', AGENTD_PROJECT_ID: 'p' });

const COMMANDS = [
  { name: 'eval', choices: 'use run, show, compare or stop' },
  { name: 'sessions', choices: 'use list or show' },
  { name: 'testsets', choices: 'use import, list or show' },
  { name: 'workflows', choices: 'use list, create, commit or deploy' },
];

describe.each(COMMANDS)('agentd $name', ({ name, choices }) => {
  it('prints its usage and exits 2 with no subcommand, 0 with --help', async () => {
    const bare = await agentd([name]);
    expect(bare.code).toBe(2);
    expect(bare.stdout).toMatch(new RegExp(`^Usage:\\s+agentd ${name} `));
    const help = await agentd([name, '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toBe(bare.stdout);
    // As `agentd keys help` and `agentd help <command>` read it.
    expect(await agentd([name, 'help'])).toEqual(help);
  });

  it('names the subcommands it has when given another, with exit status 2, before asking for a key', async () => {
    for (const env of [{}, { AGENTD_API_KEY: '', AGENTD_PROJECT_ID: '' }]) {
      const run = await agentdCommand([name, 'frobnicate'], { AGENTD_URL: 'http://127.0.0.1:9', AGENTD_API_KEY: 'agd_unused', AGENTD_PROJECT_ID: 'p', ...env });
      expect(run.code).toBe(2);
      expect(run.stderr).toBe(`agentd ${name}: unknown ${name} command "frobnicate"; ${choices}\n`);
    }
  });

  it('says which flag it does not know, then its usage, with exit status 2', async () => {
    const run = await agentd([name, 'list', '--no-such-flag']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--no-such-flag/);
    expect(run.stderr).toMatch(new RegExp(`Usage:\\s+agentd ${name} `));
  });
});

describe('agentd help', () => {
  it('with a command it does not have, says so and lists the ones it has, with exit status 2', async () => {
    const run = await agentd(['help', 'frobnicate']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^agentd help: unknown command "frobnicate"\n\nagentd — a self-hosted agent invocation service\n/);
    expect(run.stdout).toBe('');
  });
});

describe('a reader that goes away early', () => {
  it('ends the command quietly, as `| head -1` expects, not with a stack trace', async () => {
    const child = spawn(process.execPath, [AGENTD_BIN, 'eval', '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
    // The pipe's reading end is closed before the command writes: its first write fails with EPIPE.
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const [code] = await once(child, 'exit');
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});
