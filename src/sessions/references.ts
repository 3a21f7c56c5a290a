import { REFERENCE_FAMILIES, type InvokeRequest } from '../contract/invoke.ts';
import { AppError } from '../errors.ts';

const EXECUTION_FAMILIES = ['workflow', 'application', 'evaluator'] as const;

/** Which execution family the request's references point at (spec §2.4: at most one). */
export function referencedFamily(references: InvokeRequest['references']): string | undefined {
  if (!references) return undefined;
  const populated = EXECUTION_FAMILIES.filter((family) => REFERENCE_FAMILIES[family].some((key) => references[key] != null));
  if (populated.length > 1) {
    throw new AppError(
      'conflicting-references',
      `references name ${populated.join(' and ')} at once; populate exactly one of workflow, application or evaluator (environment keys may accompany it)`,
    );
  }
  return populated[0];
}
