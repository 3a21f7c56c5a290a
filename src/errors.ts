import { ERROR_TYPES, type ErrorType } from './contract/errors.ts';

/**
 * The one error class the domain throws. It carries everything the HTTP layer needs to answer
 * with the envelope, so no domain module knows about HTTP.
 */
export class AppError extends Error {
  readonly type: ErrorType;
  readonly status: number;
  readonly headers: Record<string, string> | undefined;

  constructor(type: ErrorType, message: string, options?: { status?: number; headers?: Record<string, string>; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.type = type;
    this.status = options?.status ?? ERROR_TYPES[type];
    this.headers = options?.headers;
  }
}

export function isAppError(error: unknown): error is AppError {
  return error instanceof AppError;
}
