import { createInterface } from 'node:readline';
import type { InvokeBody, NativeFrame } from '../client/index.ts';
import type { Message } from '../contract/messages.ts';
import { TurnFolder, type FoldedTurn } from '../stream/fold.ts';
import { parseCommand } from './args.ts';
import { CONNECTION_FLAGS, CONNECTION_HELP, CliError, exitWith, remoteClient, sessionIdFlag } from './remote.ts';
import { readJsonFile, withConfiguration } from './requests.ts';
import { cutToWidth, displayWidth, printable, printableFlow } from './text-table.ts';

const USAGE = `Usage: agentd invoke [--message TEXT | --file request.json] [options]

Runs the agent from the terminal. Its answer streams in as it is written; tool
calls and their results are shown as they happen; when a tool needs your
approval you are asked (y to approve, n or "n <reason>" to deny) and the turn
goes on. Without --message or --file it is a chat: type a message after "you>",
an empty line or Ctrl-D ends it.

  --message TEXT       one message, one turn (plus what approvals continue),
                       then exit
  --file FILE          a whole invoke body (JSON) to send as the first turn
  --template FILE      the agent template (JSON) to run, when the request names
                       none
  --revision ID        run this stored workflow revision instead
  --session ID         run in this session (its working folder); default: a new
                       one. The server keeps no conversation: earlier turns
                       reach the model only when sent again, e.g. in a --file
                       body
  --approve            approve every tool call without asking
  --deny               deny every tool call without asking
  --stream             stream each turn's text as it is written (the default)
  --json               print each turn's reply as JSON instead of streaming its
                       text
  -h, --help           this help

${CONNECTION_HELP}`;

type Answer = (prompt: string) => Promise<string | undefined>;

/** Lines from stdin, one per question: a terminal or a pipe alike. */
function lineReader(): { ask: Answer; close(): void } {
  const rl = createInterface({ input: process.stdin, terminal: false });
  const lines = rl[Symbol.asyncIterator]();
  return {
    ask: async (prompt) => {
      process.stderr.write(prompt);
      const next = await lines.next();
      if (next.done) process.stderr.write('\n');
      return next.done ? undefined : next.value;
    },
    close: () => rl.close(),
  };
}

/** A value on one line of the terminal, cut at `max` columns between characters; what the model or a tool wrote cannot steer the terminal. */
const short = (value: unknown, max = 200) => {
  const text = printable(typeof value === 'string' ? value : JSON.stringify(value));
  return displayWidth(text) > max ? `${cutToWidth(text, max)}…` : text;
};

/**
 * Shows a frame as it arrives: text to stdout, tool activity to stderr. On a terminal the model's
 * text keeps its lines but not its escape sequences; piped, it is written as the model wrote it.
 */
function render(frame: NativeFrame): void {
  switch (frame.type) {
    case 'message_delta':
      process.stdout.write(process.stdout.isTTY ? printableFlow(frame.data.delta) : frame.data.delta);
      break;
    case 'message_end':
      process.stdout.write('\n');
      break;
    case 'tool_call':
      process.stderr.write(`  ↳ ${short(frame.data.name)} ${short(frame.data.input)}\n`);
      break;
    case 'tool_result':
      process.stderr.write(`  ← ${frame.data.denied ? 'denied: ' : frame.data.is_error ? 'error: ' : ''}${short(frame.data.output)}\n`);
      break;
    case 'error':
      process.stderr.write(`error: ${printable(frame.data.message)}\n`);
      break;
    default:
      break;
  }
}

/**
 * Stdin ran out at a question (a pipe, a script): the turn stays paused on the server, which a
 * bare exit would not tell, so say so and how to answer without stdin.
 */
function unanswered(question: 'approval' | 'result', interactionId: string | undefined): Error {
  const instead = question === 'approval' ? 'pass --approve or --deny to answer without asking' : 'give the result on stdin';
  const respond = interactionId ? `POST /api/sessions/interactions/${interactionId}/respond` : 'POST /api/sessions/interactions/{id}/respond';
  return new Error(`stdin ended before the ${question} was given; the turn stays paused. Next time ${instead}, or answer it now with ${respond}`);
}

/**
 * The decisions the paused output waits for, asked one by one: approvals on tool-call messages
 * (in band, design.md §4), and results for client tools the caller runs.
 */
async function answerPause(output: Message[], ask: Answer, auto: boolean | undefined): Promise<Message[]> {
  const answered: Message[] = [];
  const resulted = new Set(output.filter((m) => m.role === 'tool').map((m) => m.tool_call_id));
  for (const message of output) {
    if (message.approval && message.approval.approved === undefined) {
      let approved = auto;
      let reason: string | undefined;
      if (approved === undefined) {
        const line = await ask(`allow ${short(message.tool_name)} ${short(message.input)}? [y/N] `);
        if (line === undefined) throw unanswered('approval', message.approval.id);
        approved = /^y(es)?$/i.test(line.trim());
        reason = approved ? undefined : line.trim().replace(/^no?\b\s*/i, '') || undefined;
      }
      answered.push({ ...message, approval: { id: message.approval.id, approved, ...(reason ? { reason } : {}) } });
      continue;
    }
    answered.push(message);
    if (message.tool_name !== undefined && !message.approval && !resulted.has(message.tool_call_id)) {
      const line = await ask(`result of ${short(message.tool_name)} ${short(message.input)}> `);
      if (line === undefined) throw unanswered('result', undefined);
      answered.push({ role: 'tool', tool_call_id: message.tool_call_id!, content: line });
    }
  }
  return answered;
}

export async function invokeCommand(argv: string[]): Promise<number> {
  const parsed = parseCommand(
    argv,
    {
      message: { type: 'string' },
      file: { type: 'string' },
      template: { type: 'string' },
      revision: { type: 'string' },
      session: { type: 'string' },
      approve: { type: 'boolean' },
      deny: { type: 'boolean' },
      // Streaming is the default; the flag is accepted because the API's own switch has this name.
      stream: { type: 'boolean' },
      json: { type: 'boolean' },
      ...CONNECTION_FLAGS,
    },
    USAGE,
  );
  if (typeof parsed === 'number') return parsed;
  const { values } = parsed;
  const reader = lineReader();
  try {
    if (values.message !== undefined && values.file) throw new CliError('give --message or --file, not both');
    if (values.approve && values.deny) throw new CliError('give --approve or --deny, not both');
    if (values.stream && values.json) throw new CliError('give --stream or --json, not both');
    const client = remoteClient(values);
    const template = values.template ? readJsonFile(values.template, '--template') : undefined;
    const base = withConfiguration((values.file ? readJsonFile(values.file, '--file') : {}) as InvokeBody, template, values.revision);
    const auto = values.approve ? true : values.deny ? false : undefined;
    const oneShot = values.message !== undefined || values.file !== undefined;
    let sessionId = sessionIdFlag(values.session, '--session') ?? base.session_id ?? undefined;
    let history = (base.data?.inputs?.messages ?? []) as Message[];

    let next = values.message ?? (values.file ? undefined : await reader.ask('you> '));
    for (;;) {
      let messages = next === undefined ? history : [...history, { role: 'user' as const, content: next }];
      if (messages.length === 0) {
        if (oneShot) throw new CliError(`--file ${values.file} has no conversation: put it in data.inputs.messages, or use --message "…" instead`);
        break;
      }
      for (;;) {
        const body: InvokeBody = { ...base, ...(sessionId ? { session_id: sessionId } : {}), data: { ...base.data, inputs: { messages } } };
        let turn: FoldedTurn;
        if (values.json) {
          const reply = await client.invoke(body);
          sessionId = reply.session_id;
          process.stdout.write(`${JSON.stringify(reply)}\n`);
          const outputs = reply.data?.outputs;
          turn = { messages: (outputs?.messages ?? []) as Message[], ...(outputs?.stop_reason ? { stop_reason: outputs.stop_reason } : {}) };
        } else {
          const folder = new TurnFolder();
          for await (const frame of client.stream(body)) {
            if (frame.type === 'turn_start' && !sessionId) {
              sessionId = frame.data.session_id;
              process.stderr.write(`session ${sessionId}\n`);
            }
            folder.push(frame);
            render(frame);
          }
          turn = folder.result();
          if (turn.error) {
            if (oneShot) return 1;
            // The failed turn never happened: the chat goes on from before its message.
            messages = history;
            break;
          }
        }
        messages = [...messages, ...turn.messages];
        if (turn.stop_reason !== 'paused') break;
        const answered = await answerPause(turn.messages, reader.ask, auto);
        messages = [...messages.slice(0, messages.length - turn.messages.length), ...answered];
      }
      history = messages;
      if (oneShot) return 0;
      next = await reader.ask('you> ');
      if (!next?.trim()) return 0;
    }
    return 0;
  } catch (error) {
    return exitWith('invoke', error);
  } finally {
    reader.close();
  }
}
