import { loadConfig } from '../config.ts';
import { keysCommand } from './keys.ts';
import { serveCommand } from './serve.ts';
import { demoModelCommand } from './demo-model.ts';
import { runManyCommand } from './run-many.ts';

const USAGE = `agentd — a self-hosted agent invocation service

Usage: agentd <command> [options]

Commands:
  serve        start the server (npm start)
  keys         create, list and revoke API keys
  demo-model   run a loopback demo model, for trying agentd without a provider account
  run-many     run one turn per input line of a file, N at a time, results to a file

Run "agentd <command> --help" for a command's options.
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE);
    return command ? 0 : 2;
  }
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    process.stderr.write(`agentd: ${(error as Error).message}\n`);
    return 2;
  }
  switch (command) {
    case 'serve':
      return serveCommand(rest, config);
    case 'keys':
      return keysCommand(rest, config);
    case 'demo-model':
      return demoModelCommand(rest);
    case 'run-many':
      return runManyCommand(rest);
    default:
      process.stderr.write(`agentd: unknown command "${command}"\n\n${USAGE}`);
      return 2;
  }
}

process.exitCode = await main(process.argv.slice(2));
