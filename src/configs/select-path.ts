import { AppError } from '../errors.ts';

/**
 * Picks a value out of a revision's data by a dotted path such as `parameters.agent.tools.0`
 * (numbers index arrays), the form the reference's `@ag.selector.path` takes.
 */
export function selectPath(data: unknown, path: string, where: string): unknown {
  let value = data;
  let walked = '';
  for (const segment of path.split('.')) {
    const container = value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
    if (segment === '' || !container || !Object.hasOwn(container, segment)) {
      const keys = container ? Object.keys(container) : [];
      throw new AppError(
        'invalid-request',
        `${where} "${path}" does not exist in the revision: ${walked || 'its data'} has ${keys.length ? `keys ${keys.slice(0, 20).join(', ')}` : 'no keys'}`,
      );
    }
    value = container[segment];
    walked = walked ? `${walked}.${segment}` : segment;
  }
  return value;
}
