import { loadConfig } from '../config.ts';
import { fitUsage } from './usage.ts';
import { VERSION } from '../version.ts';

/**
 * Each command is loaded when it runs: the server's dependencies (Fastify, the AI SDK, the
 * database drivers) would otherwise load for `agentd run-many` too, which only needs the client.
 */
const COMMANDS: Record<string, (argv: string[]) => Promise<number>> = {
  serve: async (argv) => (await import('./serve.ts')).serveCommand(argv, serverConfig()),
  keys: async (argv) => (await import('./keys.ts')).keysCommand(argv, serverConfig()),
  'demo-model': async (argv) => (await import('./demo-model.ts')).demoModelCommand(argv),
  'run-many': async (argv) => (await import('./run-many.ts')).runManyCommand(argv),
  invoke: async (argv) => (await import('./invoke.ts')).invokeCommand(argv),
  testsets: async (argv) => (await import('./testsets.ts')).testsetsCommand(argv),
  eval: async (argv) => (await import('./eval.ts')).evalCommand(argv),
  sessions: async (argv) => (await import('./sessions.ts')).sessionsCommand(argv),
  workflows: async (argv) => (await import('./workflows.ts')).workflowsCommand(argv),
};

class ConfigError extends Error {}

function serverConfig(): ReturnType<typeof loadConfig> {
  try {
    return loadConfig();
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
}

const USAGE = `agentd — a self-hosted agent invocation service

Usage: agentd <command> [options]

Commands:
  serve        start the server (npm start)
  keys         create, list and revoke API keys
  demo-model   run a loopback demo model: try agentd without a provider account
  invoke       chat with an agent: streams its answer, asks you about approvals
  run-many     run a turn per input line, N at a time, results to a file
  testsets     import test sets from CSV or JSONL files; list and show them
  eval         run an evaluation; show its cases; compare two runs; stop one
  workflows    list, create and commit workflows; deploy one to an environment
  sessions     list sessions; show one: its turns, what waits for an answer

The client commands (invoke, run-many, testsets, eval, workflows, sessions)
reach the server at AGENTD_URL with AGENTD_API_KEY and AGENTD_PROJECT_ID, or
with the flags --url, --api-key and --project.

Run "agentd <command> --help" for a command's options, and "agentd --version"
for agentd's version.
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  // `agentd help eval` is `agentd eval --help`, as git and npm read it.
  if (command === 'help' && rest[0] !== undefined && Object.hasOwn(COMMANDS, rest[0])) return await COMMANDS[rest[0]]!(['--help']);
  if (command === 'help' && rest[0] !== undefined) {
    process.stderr.write(`agentd help: unknown command "${rest[0]}"\n\n${fitUsage(USAGE)}`);
    return 2;
  }
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(fitUsage(USAGE));
    return command ? 0 : 2;
  }
  if (command === '--version' || command === '-V' || command === 'version') {
    process.stdout.write(`agentd ${VERSION}\n`);
    return 0;
  }
  const run = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (!run) {
    process.stderr.write(`agentd: unknown command "${command}"\n\n${fitUsage(USAGE)}`);
    return 2;
  }
  try {
    return await run(rest);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`agentd: ${error.message}\n`);
    return 2;
  }
}

// A reader that goes away early (`agentd eval compare A B | head -1`) is no failure of the command:
// the rest of its output has nowhere to go, so it ends there, as Unix tools do.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  process.exit(process.exitCode ?? 0);
});

process.exitCode = await main(process.argv.slice(2));
