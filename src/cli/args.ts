import { parseArgs, type ParseArgsConfig } from 'node:util';

type Options = NonNullable<ParseArgsConfig['options']>;

/**
 * Parses a command's flags; a mistake prints what was wrong followed by the usage, so the user
 * sees what to type next. Returns undefined when the command should exit with status 2.
 */
export function parseFlags<O extends Options>(argv: string[], options: O, usage: string): ReturnType<typeof parseArgs<{ args: string[]; options: O }>>['values'] | undefined {
  try {
    return parseArgs({ args: argv, options }).values;
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${usage}`);
    return undefined;
  }
}

/** As parseFlags, for commands that also take positional arguments (a file, a run id). */
export function parseCommand<O extends Options>(argv: string[], options: O, usage: string): { values: ReturnType<typeof parseArgs<{ args: string[]; options: O }>>['values']; positionals: string[] } | undefined {
  try {
    const { values, positionals } = parseArgs({ args: argv, options, allowPositionals: true });
    return { values, positionals };
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${usage}`);
    return undefined;
  }
}
