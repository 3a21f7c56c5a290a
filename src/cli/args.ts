import { parseArgs, type ParseArgsConfig } from 'node:util';
import { fitUsage } from './usage.ts';

export type Options = NonNullable<ParseArgsConfig['options']>;

/**
 * Parses a command's flags; a mistake prints what was wrong followed by the usage, so the user
 * sees what to type next. Returns undefined when the command should exit with status 2.
 */
export function parseFlags<O extends Options>(argv: string[], options: O, usage: string): ReturnType<typeof parseArgs<{ args: string[]; options: O }>>['values'] | undefined {
  try {
    return parseArgs({ args: argv, options }).values;
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${fitUsage(usage)}`);
    return undefined;
  }
}

const HELP = { help: { type: 'boolean', short: 'h' } } as const;

/**
 * As parseFlags, with `--help` handled: the flags and positional arguments (a file, a run id) when
 * there is something to run, else the exit status (0 after printing the usage for --help, 2 after a
 * mistake).
 */
export function parseCommand<O extends Options>(
  argv: string[],
  options: O,
  usage: string,
  allowPositionals = false,
): { values: ReturnType<typeof parseArgs<{ args: string[]; options: O & typeof HELP }>>['values']; positionals: string[] } | number {
  try {
    const { values, positionals } = parseArgs({ args: argv, options: { ...options, ...HELP }, allowPositionals });
    if ((values as { help?: boolean }).help) {
      process.stdout.write(fitUsage(usage));
      return 0;
    }
    return { values, positionals };
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${fitUsage(usage)}`);
    return 2;
  }
}

/** A command's flags as its functions take them, from its table of options. */
export type FlagValues<O extends Options> = { [K in keyof O]?: O[K]['type'] extends 'boolean' ? boolean : string };
