import { doneEvent, pendingInteraction, type AgentEvent, type PendingInteraction } from '../../src/contract/events.ts';

/** Realistic native event sequences, as the turn engine emits them. */

const turnStart = (turn: string): AgentEvent => ({
  type: 'turn_start',
  data: { turn_id: turn, session_id: 'sess_1', trace_id: 'trace_1' },
});

function text(id: string, ...deltas: string[]): AgentEvent[] {
  return [
    { type: 'message_start', data: { id } },
    ...deltas.map((delta): AgentEvent => ({ type: 'message_delta', data: { id, delta } })),
    { type: 'message_end', data: { id } },
  ];
}

function thought(id: string, delta: string): AgentEvent[] {
  return [
    { type: 'thought_start', data: { id } },
    { type: 'thought_delta', data: { id, delta } },
    { type: 'thought_end', data: { id } },
  ];
}

const usage = (input: number, output: number, cost?: number): AgentEvent => ({
  type: 'usage',
  data: cost === undefined ? { input, output, total: input + output } : { input, output, total: input + output, cost },
});

export const textOnly: AgentEvent[] = [
  turnStart('turn_1'),
  ...text('m1', 'Hello', ', world.'),
  usage(12, 4, 0.001),
  doneEvent('end_turn'),
];

export const toolThenText: AgentEvent[] = [
  turnStart('turn_1'),
  ...thought('r1', 'I should read the file.'),
  ...text('m1', 'Let me look.'),
  { type: 'tool_call', data: { id: 'call_1', name: 'read', input: { path: 'notes.txt' } } },
  { type: 'tool_result', data: { id: 'call_1', output: { lines: 3, text: 'a\nb\nc' }, is_error: false } },
  usage(100, 20, 0.002),
  ...text('m2', 'The file has ', '3 lines.'),
  usage(130, 8, 0.001),
  doneEvent('end_turn'),
];

export const approval: PendingInteraction = pendingInteraction('int_1', 'user_approval', { toolCallId: 'call_1', toolName: 'bash', input: { command: 'rm -rf build' } });

export const paused: AgentEvent[] = [
  turnStart('turn_1'),
  ...text('m1', 'I will clean the build folder.'),
  { type: 'tool_call', data: { id: 'call_1', name: 'bash', input: { command: 'rm -rf build' } } },
  { type: 'interaction_request', data: approval },
  usage(50, 10),
  doneEvent('paused', approval),
];

/** The turn that continues `paused` after the caller approved call_1 in band. */
export const continuedApproved: AgentEvent[] = [
  turnStart('turn_2'),
  { type: 'tool_result', data: { id: 'call_1', output: 'removed 12 files', is_error: false } },
  ...text('m2', 'Done: the build folder is gone.'),
  usage(70, 9),
  doneEvent('end_turn'),
];

/** The turn that continues `paused` after the caller denied call_1 in band. */
export const continuedDenied: AgentEvent[] = [
  turnStart('turn_2'),
  { type: 'tool_result', data: { id: 'call_1', output: 'Tool call denied: keep it', is_error: true, denied: true } },
  ...text('m2', 'Understood, I left the build folder alone.'),
  doneEvent('end_turn'),
];

/** A call the permission policy refused without asking anyone. */
export const policyDenied: AgentEvent[] = [
  turnStart('turn_1'),
  { type: 'tool_call', data: { id: 'call_9', name: 'write', input: { path: 'x', content: 'y' } } },
  { type: 'tool_result', data: { id: 'call_9', output: 'writes are not allowed in this mode', is_error: true, denied: true } },
  ...text('m2', 'I am not allowed to write files here.'),
  doneEvent('end_turn'),
];

export const toolError: AgentEvent[] = [
  turnStart('turn_1'),
  { type: 'tool_call', data: { id: 'call_2', name: 'read', input: { path: 'missing.txt' } } },
  { type: 'tool_result', data: { id: 'call_2', output: 'ENOENT: no such file', is_error: true } },
  ...text('m2', 'That file does not exist.'),
  doneEvent('end_turn'),
];

export const clientToolRequest: PendingInteraction = pendingInteraction('int_2', 'client_tool', { toolCallId: 'call_3', toolName: 'pick_color', input: { palette: 'warm' } });

export const clientTool: AgentEvent[] = [
  turnStart('turn_1'),
  { type: 'tool_call', data: { id: 'call_3', name: 'pick_color', input: { palette: 'warm' } } },
  { type: 'interaction_request', data: clientToolRequest },
  doneEvent('paused', clientToolRequest),
];

/** Two model steps with tools, then the answer. */
export const twoToolSteps: AgentEvent[] = [
  turnStart('turn_1'),
  { type: 'tool_call', data: { id: 'call_a', name: 'ls', input: {} } },
  { type: 'tool_call', data: { id: 'call_b', name: 'grep', input: { pattern: 'TODO' } } },
  { type: 'tool_result', data: { id: 'call_a', output: 'a.ts\nb.ts', is_error: false } },
  { type: 'tool_result', data: { id: 'call_b', output: 'a.ts:3: TODO', is_error: false } },
  { type: 'tool_call', data: { id: 'call_c', name: 'read', input: { path: 'a.ts' } } },
  { type: 'tool_result', data: { id: 'call_c', output: 'const x = 1; // TODO', is_error: false } },
  ...text('m3', 'One TODO, in a.ts.'),
  doneEvent('end_turn'),
];

export const errorMidStream: AgentEvent[] = [
  turnStart('turn_1'),
  { type: 'message_start', data: { id: 'm1' } },
  { type: 'message_delta', data: { id: 'm1', delta: 'Partial ans' } },
  { type: 'error', data: { code: 502, type: 'upstream-error', message: 'model connection reset' } },
  doneEvent('error'),
];
