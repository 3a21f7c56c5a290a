import { getErrorMessage, type JSONSchema7, type LanguageModelV4FunctionTool, type LanguageModelV4ToolCall, type LanguageModelV4ToolResultOutput } from '@ai-sdk/provider';
import { asSchema, safeParseJSON, safeValidateTypes } from '@ai-sdk/provider-utils';
import type { Tool, ToolSet } from 'ai';

/**
 * A tool's input schema as JSON Schema, kept per schema object: the built-in tools' zod schemas are
 * the same objects in every turn, and converting one costs more than the rest of a step's setup.
 */
const jsonSchemas = new WeakMap<object, JSONSchema7>();

async function jsonSchemaOf(tool: Tool): Promise<JSONSchema7> {
  const key = tool.inputSchema as object | undefined;
  const known = key && jsonSchemas.get(key);
  if (known) return known;
  const schema = await asSchema(tool.inputSchema).jsonSchema;
  if (key) jsonSchemas.set(key, schema);
  return schema;
}

/** The tools as the provider's model interface takes them, in the order they were given. */
export async function modelTools(tools: ToolSet): Promise<LanguageModelV4FunctionTool[]> {
  return Promise.all(
    Object.entries(tools).map(async ([name, tool]): Promise<LanguageModelV4FunctionTool> => {
      const description = typeof tool.description === 'string' ? tool.description : undefined;
      return { type: 'function', name, inputSchema: await jsonSchemaOf(tool), ...(description !== undefined ? { description } : {}) };
    }),
  );
}

/** A call the model made, its input read against the tool's schema. */
export type ParsedCall =
  | { toolCallId: string; toolName: string; input: unknown; invalid?: undefined }
  /** Unknown tool, or input that is not JSON or not what the schema says: the model is told so. */
  | { toolCallId: string; toolName: string; input: unknown; invalid: Error };

export async function parseCall(call: Pick<LanguageModelV4ToolCall, 'toolCallId' | 'toolName' | 'input'>, tools: ToolSet): Promise<ParsedCall> {
  const { toolCallId, toolName } = call;
  const tool = Object.hasOwn(tools, toolName) ? tools[toolName] : undefined;
  if (!tool) return { toolCallId, toolName, input: await looseInput(call.input), invalid: noSuchTool(toolName, Object.keys(tools)) };
  const schema = asSchema(tool.inputSchema);
  const parsed = call.input.trim() === '' ? await safeValidateTypes({ value: {}, schema }) : await safeParseJSON({ text: call.input, schema });
  if (parsed.success) return { toolCallId, toolName, input: parsed.value };
  return { toolCallId, toolName, input: await looseInput(call.input), invalid: invalidInput(toolName, parsed.error) };
}

/** Input the caller approved, read against the tool's schema again before it runs. */
export async function validateInput(tool: Tool, toolName: string, input: unknown): Promise<{ input: unknown } | { invalid: Error }> {
  const checked = await safeValidateTypes({ value: structuredClone(input), schema: asSchema(tool.inputSchema) });
  if (checked.success) return { input: checked.value };
  return { invalid: invalidInput(toolName, checked.error) };
}

/*
 * What the model is told of a call it got wrong, in the AI SDK's own words (its `NoSuchToolError` and
 * `InvalidToolInputError`, which live in the `ai` package the serving path does not load).
 */
function noSuchTool(toolName: string, available: string[]): Error {
  return new Error(`Model tried to call unavailable tool '${toolName}'. ${available.length === 0 ? 'No tools are available.' : `Available tools: ${available.join(', ')}.`}`);
}

function invalidInput(toolName: string, cause: unknown): Error {
  return new Error(`Invalid input for tool ${toolName}: ${getErrorMessage(cause)}`, { cause });
}

async function looseInput(text: string): Promise<unknown> {
  const parsed = await safeParseJSON({ text });
  return parsed.success ? parsed.value : text;
}

/** What running a call came to: its output, or the error it threw. */
export type ToolOutcome = { ok: true; output: unknown } | { ok: false; error: unknown };

/**
 * Runs one call. Every tool agentd gives a model (built-in, MCP, the template's) answers with one
 * value, so `execute` is awaited rather than read as a stream of preliminary results.
 */
export async function runTool(tool: Tool, call: { toolCallId: string; input: unknown }, abortSignal: AbortSignal): Promise<ToolOutcome> {
  try {
    return { ok: true, output: await tool.execute!(call.input, { toolCallId: call.toolCallId, messages: [], abortSignal, context: undefined }) };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * A failed call's message, as the turn's output and the model both read it. Not the AI SDK's
 * `getErrorMessage`: that puts the error's class in front ("ToolError: …"), which tells the
 * model nothing and would differ from what the caller reads.
 */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return typeof error === 'string' ? error : JSON.stringify(error);
}

/** An outcome as the model reads it in the next step, as the AI SDK renders one. */
export function modelOutput(outcome: ToolOutcome): LanguageModelV4ToolResultOutput {
  if (!outcome.ok) return { type: 'error-text', value: errorMessage(outcome.error) };
  const output = outcome.output;
  return typeof output === 'string' ? { type: 'text', value: output } : { type: 'json', value: JSON.parse(JSON.stringify(output ?? null)) };
}
