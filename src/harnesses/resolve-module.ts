import { fileURLToPath } from 'node:url';

/**
 * A module's file, resolved from agentd's own node_modules as an import would (harness packages
 * export some of their files only to imports). Throws when the package is not installed.
 */
export function resolveModule(specifier: string): string {
  return fileURLToPath(import.meta.resolve(specifier));
}
