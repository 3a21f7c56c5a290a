/**
 * The reasons a turn's controller is aborted with, each saying how the turn is recorded: shared by
 * whatever stops a turn (a stop, a takeover, a lost lease, shutdown) and the drive that records it.
 */

/** The abort reason that marks a turn cut short by the server stopping, as opposed to cancelled. */
export const INTERRUPTED = new Error('the server is shutting down; the turn was interrupted');
/** The abort reason of a turn whose lease another process took: it is recorded as interrupted. */
export const LEASE_LOST = new Error('the session lease expired and was taken over; the turn was interrupted');
/** The abort reason of a turn taken over by a newer one (`force`). */
export const CANCELLED = new Error('a newer turn took over the session; this turn was cancelled');
/** The abort reason of a turn stopped on request (`POST /api/sessions/{id}/stop`). */
export const STOPPED = new Error('the turn was stopped on request');

export const isCancel = (reason: unknown): boolean => reason === CANCELLED || reason === STOPPED;
