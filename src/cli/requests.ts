import { readFileSync } from 'node:fs';
import type { InvokeBody } from '../client/index.ts';
import { CliError } from './remote.ts';

/** Reading the request pieces the client commands take from files. */

export function readJsonFile(file: string, flag: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new CliError(`${flag} ${file} cannot be read: ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new CliError(`${flag} ${file} is not JSON: ${(error as Error).message}`);
  }
}

/**
 * Gives an input the agent to run when it names none: `--template` (an agent template, or
 * `{agent: …}` parameters) or `--revision` (a stored workflow revision's id).
 */
export function withConfiguration(input: InvokeBody, template: unknown, revision: string | undefined): InvokeBody {
  if (input.data?.parameters || input.references) return input;
  if (revision) return { ...input, references: { workflow_revision: { id: revision } } };
  if (template === undefined) return input;
  const agent = template !== null && typeof template === 'object' && 'agent' in template ? (template as { agent: unknown }).agent : template;
  return { ...input, data: { ...input.data, parameters: { agent: agent as never } } };
}
