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
  return `${issue.message} at ${where}`;
}
