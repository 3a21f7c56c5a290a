import type { z } from 'zod';

/** Renders a zod issue path as the JSON path a caller sees, e.g. `data.inputs.messages[2].role`. */
export function jsonPath(base: string, path: ReadonlyArray<PropertyKey>): string {
  let out = base;
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out ? `.${String(key)}` : String(key);
  }
  return out || '(body)';
}

export function describeIssue(base: string, issue: z.core.$ZodIssue): string {
  const where = jsonPath(base, issue.path);
  if (issue.code === 'unrecognized_keys') {
    return `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')} at ${where}`;
  }
  // The path ends with the refused key; zod's own message says only "Invalid key in record".
  if (issue.code === 'invalid_key') {
    const why = issue.issues[0]?.message;
    return `the key ${JSON.stringify(String(issue.path.at(-1)))} is not allowed${why ? ` (${why})` : ''} at ${jsonPath(base, issue.path.slice(0, -1))}`;
  }
  return `${issue.message} at ${where}`;
}
