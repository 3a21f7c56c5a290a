import type { PermissionMode, ToolEntry } from '../contract/template.ts';

export type Gate = 'allow' | 'ask' | 'deny';

/**
 * What happens to one call of a tool (design.md §4): the tool's own `permission` wins over the
 * template's default mode; under `allow_reads` only read-only tools run without asking.
 */
export function gateFor(tool: Pick<ToolEntry, 'permission'> | undefined, mode: PermissionMode, isRead: boolean): Gate {
  if (tool?.permission) return tool.permission;
  switch (mode) {
    case 'allow':
      return 'allow';
    case 'ask':
      return 'ask';
    case 'deny':
      return 'deny';
    case 'allow_reads':
      return isRead ? 'allow' : 'ask';
  }
}
