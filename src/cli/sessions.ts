import type { AgentdClient } from '../client/index.ts';
import type { FlagValues } from './args.ts';
import { CONNECTION_FLAGS, CONNECTION_HELP, CliError, numberFlag, remoteClient, runSubcommand, sessionIdFlag } from './remote.ts';
import { fitLine, terminalWidth, textTable } from './text-table.ts';

const USAGE = `Usage: agentd sessions list [options]
       agentd sessions show SESSION [options]

list   the project's sessions, newest first: when each was last used, its latest
       turn, whether a turn runs now and how many interactions wait for an
       answer
show   one session: its turns, newest first, with status, stop reason, usage and
       cost, and the interactions waiting for an answer (answer them with the
       interactions API)

  --prefix TEXT   list: only sessions whose id starts with TEXT
  --pending       list: only sessions with an interaction waiting for an answer
  --live          list: only sessions running a turn now
  --limit N       how many sessions (list) or turns (show), newest first
                  (default 20, at most 200)
  --json          print the server's reply as JSON

${CONNECTION_HELP}`;

const FLAGS = {
  prefix: { type: 'string' },
  pending: { type: 'boolean' },
  live: { type: 'boolean' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
  ...CONNECTION_FLAGS,
} as const;

type Usage = { input: number; output: number; total: number; cost?: number | undefined } | undefined;

const usageCell = (usage: Usage) => (usage ? `${usage.total}${usage.cost !== undefined ? ` $${usage.cost.toFixed(4)}` : ''}` : '');
/** Times as the server sends them (UTC), to the minute: a table has no room for more. */
const when = (iso: string | undefined) => (iso ? iso.slice(0, 16).replace('T', ' ') : '');

async function list(client: AgentdClient, values: FlagValues<typeof FLAGS>): Promise<void> {
  if (values.pending && values.live) throw new CliError('--pending and --live each narrow the list; give one');
  const reply = await client.sessions.list({
    limit: numberFlag(values.limit, 'limit', 20, 1, 200),
    ...(values.prefix ? { idPrefix: values.prefix } : {}),
    ...(values.pending ? { status: 'pending' as const } : values.live ? { status: 'live' as const } : {}),
  });
  if (values.json) {
    process.stdout.write(`${JSON.stringify(reply, null, 2)}\n`);
    return;
  }
  if (reply.sessions.length === 0) {
    process.stdout.write('no sessions\n');
    return;
  }
  const rows = [['session', 'last used', 'last turn', 'pending', 'tokens']];
  for (const s of reply.sessions) {
    const turn = s.live_turn ? 'running' : s.last_turn ? [s.last_turn.status, s.last_turn.stop_reason].filter(Boolean).join(' / ') : '';
    rows.push([s.id, when(s.updated_at), turn, s.pending_interactions ? String(s.pending_interactions) : '', usageCell(s.last_turn?.usage)]);
  }
  process.stdout.write(textTable(rows, { right: [3, 4], width: terminalWidth(), shrink: [0, 2] }));
  if (reply.next) process.stdout.write(`more sessions follow; narrow with --prefix, or raise --limit\n`);
}

async function show(client: AgentdClient, sessionId: string, values: FlagValues<typeof FLAGS>): Promise<void> {
  const [session, pending] = await Promise.all([
    client.sessions.get(sessionId, { limit: numberFlag(values.limit, 'limit', 20, 1, 200) }),
    client.interactions.query({ session_id: sessionId, status: 'pending' }),
  ]);
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ ...session, pending_interactions: pending.interactions }, null, 2)}\n`);
    return;
  }
  const out = [`session ${session.session.id}`, `  created ${when(session.session.created_at)} · last used ${when(session.session.updated_at)}`];
  if (session.live_turn) out.push(`  running turn ${session.live_turn.id} since ${when(session.live_turn.started_at)}`);
  process.stdout.write(`${out.map((line) => fitLine(line, terminalWidth())).join('\n')}\n\n`);
  const rows = [['turn', 'started', 'status', 'stop reason', 'tokens']];
  for (const t of session.turns) rows.push([t.id, when(t.started_at), t.status, t.stop_reason ?? '', usageCell(t.usage)]);
  process.stdout.write(session.turns.length ? textTable(rows, { right: [4], width: terminalWidth(), shrink: [0, 3] }) : 'no turns\n');
  if (session.next) process.stdout.write('older turns follow; raise --limit to see them\n');
  if (pending.interactions.length) {
    process.stdout.write('\nwaiting for an answer:\n');
    const waiting = [['interaction', 'kind', 'tool', 'input']];
    for (const i of pending.interactions) waiting.push([i.id, i.kind, i.request.tool, JSON.stringify(i.request.args) ?? '']);
    process.stdout.write(textTable(waiting, { width: terminalWidth(), shrink: [3] }));
  }
}

export function sessionsCommand(argv: string[]): Promise<number> {
  return runSubcommand('sessions', argv, FLAGS, USAGE, async (sub, values, positionals) => {
    if (sub === 'list') {
      if (positionals.length) throw new CliError(`agentd sessions list takes no arguments; filter with --prefix ${positionals[0]}`);
      await list(remoteClient(values), values);
    } else if (sub === 'show') {
      const [sessionId, ...extra] = positionals;
      if (!sessionId || extra.length) throw new CliError('agentd sessions show takes one session id: agentd sessions show chat-42');
      await show(remoteClient(values), sessionIdFlag(sessionId, 'the session id')!, values);
    } else {
      throw new CliError(`unknown sessions command "${sub}"; use list or show`);
    }
  });
}
