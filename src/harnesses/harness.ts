import type { BuiltinToolName } from '../contract/template.ts';
import type { ModelEndpoint } from '../agent/model.ts';
import type { Provider } from '../contract/providers.ts';
import type { HarnessExtras, RunnableTemplate } from '../agent/template.ts';
import type { HarnessDialect } from './update-teller.ts';

/** A file a harness reads its settings from, in the session's state folder (never a credential: its relay token goes in the environment). */
interface StateFile {
  path: string;
  /** Undefined: the file must not be there (an earlier start's is removed). */
  content: string | undefined;
}

/** Which of a harness's calls must reach agentd's gate, from the template's permissions. */
export interface Gating {
  /** Every call, reads included (`ask`, `deny`, or a tool entry that asks or denies). */
  gateAll: boolean;
  /** Any call at all: under `allow` with no tool entry of its own, nothing is asked. */
  gateAny: boolean;
}

export function gatingOf(template: RunnableTemplate): Gating {
  const mode = template.runner.permissions.default;
  return {
    gateAll: mode === 'ask' || mode === 'deny' || template.tools.some((t) => t.permission === 'ask' || t.permission === 'deny'),
    gateAny: mode !== 'allow' || template.tools.some((t) => t.permission !== undefined && t.permission !== 'allow'),
  };
}

/** What a harness start depends on besides its template: the model, and which calls are gated. */
export interface HarnessSetup extends Gating {
  /** Its model as the harness reaches it: at its relay (relay.ts), the relay's token as its key. */
  endpoint: ModelEndpoint;
  /** The session folder, its working folder. */
  folder: string;
  stateDir: string;
  /** `harness.extras`: its own system prompt replaced (`system`), or added to (`append_system`). */
  extras: HarnessExtras;
}

/**
 * One coding agent agentd drives over ACP: where its program is, how it is configured so that
 * agentd's permission modes mean the same on it as on the others, and what it adds to ACP.
 */
export interface Harness {
  kind: 'claude' | 'codex' | 'pi';
  /** The npm package to install for it, named in the error when it is missing. */
  package: string;
  /** Its program, resolved from agentd's node_modules (with the other modules it needs); run on agentd's own Node unless native. */
  program: { module: string; native: boolean; requires?: readonly string[] };
  /** How long after a session is closed it may still be writing it down, so its process is not ended sooner. */
  writeBehindMs?: number;
  /** Where `instructions.agents_md` goes, in the session folder. */
  instructionsFile: string;
  /** Where it finds a project's skills, in its working folder. */
  skillsDir: string;
  /** The providers whose API it speaks. */
  providers: readonly Provider[];
  /** Its tools that agentd's built-in names stand for, so a tool entry's `permission` reaches them. */
  toolNames: Partial<Record<BuiltinToolName, string>>;
  /** Template keys it has no place for, beyond what no harness takes. */
  refuses?(template: RunnableTemplate): string[];
  env(setup: HarnessSetup): Record<string, string>;
  /** Its settings files, rewritten before every start. */
  settings(setup: HarnessSetup): StateFile[];
  /**
   * Settings the harness must take over anything in its working folder (which the agent, and
   * uploads, can write): a file outside every writable place, mounted read-only at `at` inside.
   */
  lockedSettings?(setup: HarnessSetup): { at: string; content: string };
  /** What its ACP sessions are opened (and loaded) with, beyond the folder and MCP servers. */
  sessionMeta?(setup: HarnessSetup): Record<string, unknown> | undefined;
  dialect: HarnessDialect;
}
