import { parseArgs, type ParseArgsConfig } from 'node:util';
import { fitUsage } from './usage.ts';

export type Options = NonNullable<ParseArgsConfig['options']>;

const HELP = { help: { type: 'boolean', short: 'h' } } as const;

/**
 * Parses a command's flags, with `--help` handled: the flags and positional arguments (a file, a
 * run id) when there is something to run, else the exit status (0 after printing the usage for
 * --help, 2 after a mistake, printed followed by the usage so the user sees what to type next).
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

/** `--port`'s number, else `fallback`; undefined, after saying why, when it is not a port number. */
export function portFlag(command: string, raw: string | undefined, fallback: number): number | undefined {
  const port = raw !== undefined ? Number(raw) : fallback;
  if (Number.isInteger(port) && port >= 0 && port <= 65535) return port;
  process.stderr.write(`agentd ${command}: --port must be a port number from 0 to 65535 (0: any free port), got "${raw}"\n`);
  return undefined;
}

/** A command's flags as its functions take them, from its table of options. */
export type FlagValues<O extends Options> = { [K in keyof O]?: O[K]['type'] extends 'boolean' ? boolean : string };
