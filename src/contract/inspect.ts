import { z } from 'zod';
import { withExample } from './example.ts';
import { InvokeRequest } from './invoke.ts';
import { EXAMPLE_TEMPLATE } from './template.ts';

/** Inspect (spec §1.3, §4.3; reference §5): the resolved revision plus a ready-made invoke request. */

const record = z.record(z.string(), z.unknown());

/** The run-describing fields of an invoke request, plus an inline `revision`, and nothing to run. */
export const InspectRequest = withExample(
  InvokeRequest.pick({ version: true, session_id: true, flags: true, tags: true, meta: true, references: true, selector: true }).extend({
    revision: record.nullish(),
  }),
  { session_id: 'chat-42', revision: { data: { parameters: { agent: EXAMPLE_TEMPLATE } } } },
);
export type InspectRequest = z.infer<typeof InspectRequest>;

const WorkflowRevision = z.object({
  id: z.string().optional(),
  slug: z.string().optional(),
  /** As the workflows API numbers revisions: 1, 2, 3… per variant; 0 for the built-in workflow. */
  version: z.number().int().optional(),
  name: z.string().optional(),
  description: z.string().optional(),
  data: z.object({
    uri: z.string(),
    schemas: z.object({ inputs: record, parameters: record, outputs: record }),
    parameters: record.optional(),
  }),
});

export const InspectResponse = z.object({
  version: z.string(),
  session_id: z.string().optional(),
  flags: record.optional(),
  tags: record.optional(),
  meta: record.optional(),
  revision: WorkflowRevision,
  request: InvokeRequest,
});
export type InspectResponse = z.infer<typeof InspectResponse>;
