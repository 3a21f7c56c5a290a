import { loadConfig } from '../config.ts';
import { keysCommand } from './keys.ts';
import { serveCommand } from './serve.ts';
import { demoModelCommand } from './demo-model.ts';
import { runManyCommand } from './run-many.ts';
import { evalCommand } from './eval.ts';
import { testsetsCommand } from './testsets.ts';
import { invokeCommand } from './invoke.ts';

const USAGE = `agentd — a self-hosted agent invocation service

Usage: agentd <command> [options]

Commands:
  serve        start the server (npm start)
  keys         create, list and revoke API keys
  demo-model   run a loopback demo model, for trying agentd without a provider account
  invoke       chat with an agent in the terminal: streams its answer, asks you about approvals
  run-many     run one turn per input line of a file, N at a time, results to a file
  testsets     import a test set from a CSV or JSONL file
  eval         run an evaluation with a live progress bar and a metrics table; show a run

The client commands (invoke, run-many, testsets, eval) reach the server at AGENTD_URL with
AGENTD_API_KEY and AGENTD_PROJECT_ID (or --url, --api-key, --project).

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
    case 'invoke':
      return invokeCommand(rest);
    case 'testsets':
      return testsetsCommand(rest);
    case 'eval':
      return evalCommand(rest);
    default:
      process.stderr.write(`agentd: unknown command "${command}"\n\n${USAGE}`);
      return 2;
  }
}

process.exitCode = await main(process.argv.slice(2));
