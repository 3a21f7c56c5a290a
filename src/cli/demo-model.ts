import { parseCommand, portFlag } from './args.ts';
import { echoScript, startFakeModel } from '../testing/fake-model.ts';

const USAGE = `Usage: agentd demo-model [--port N]

Runs a loopback model server that speaks the OpenAI chat-completions and
Responses protocols, so agentd can be tried with no provider account and no
network. It echoes what you say; a message "/tool <name> <json>" makes it call
that tool (e.g. /tool write {"path":"a.txt","content":"hi"}).

It listens on 127.0.0.1, port 11434 by default — Ollama's — so a template with
{"llm": {"provider": "ollama", "model": "demo"}} reaches it with no further
configuration.
`;

export async function demoModelCommand(argv: string[]): Promise<number> {
  const parsed = parseCommand(argv, { port: { type: 'string' } }, USAGE);
  if (typeof parsed === 'number') return parsed;
  const port = portFlag('demo-model', parsed.values.port, 11434);
  if (port === undefined) return 2;
  let server;
  try {
    server = await startFakeModel({ port, script: echoScript, record: false });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    process.stderr.write(`agentd demo-model: port ${port} is in use (Ollama, or another demo model?); start on another with --port N and point OLLAMA_BASE_URL at it\n`);
    return 1;
  }
  process.stdout.write(`demo model listening at ${server.url} (OpenAI-compatible); stop with Ctrl-C\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  return 0;
}
