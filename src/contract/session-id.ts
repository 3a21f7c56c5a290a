/**
 * What a session id may be (spec §2.1), apart from the zod schemas so the command line checks its
 * flags by it without loading zod.
 */
export const SESSION_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
