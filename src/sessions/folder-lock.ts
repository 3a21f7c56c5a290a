/**
 * Turns between the requests that use a session folder and the one that deletes it. Uploads,
 * listings and downloads share the folder; a delete has it alone, so it never removes a folder
 * while an upload recreates part of it, and a listing never meets it half gone. Kept per process
 * and per folder on disk: the folder is this machine's (design.md §5 routes a session to one
 * replica, or shares one volume, where the session lease keeps a delete from meeting a turn).
 */

interface FolderState {
  /** Requests sharing the folder now. */
  sharing: number;
  /** Set while a delete waits for the folder or holds it; settles when it is done. */
  deleting: Promise<void> | undefined;
  /** Wakes the waiting delete once the last sharer is done. */
  idle: (() => void) | undefined;
}

const folders = new Map<string, FolderState>();

function stateOf(folder: string): FolderState {
  let state = folders.get(folder);
  if (!state) folders.set(folder, (state = { sharing: 0, deleting: undefined, idle: undefined }));
  return state;
}

function forget(folder: string, state: FolderState): void {
  if (state.sharing === 0 && !state.deleting) folders.delete(folder);
}

/** Runs `work` while no delete of `folder` runs; other sharers run alongside. */
export async function sharingFolder<T>(folder: string, work: () => Promise<T>): Promise<T> {
  let state = stateOf(folder);
  // Read anew after each wait (a finished delete forgets the state), and taken in the same tick as the last look.
  while (state.deleting) {
    await state.deleting;
    state = stateOf(folder);
  }
  state.sharing++;
  try {
    return await work();
  } finally {
    state.sharing--;
    if (state.sharing === 0) state.idle?.();
    forget(folder, state);
  }
}

/** Runs `work` with `folder` to itself: after the requests using it, before any that come later. */
export async function deletingFolder<T>(folder: string, work: () => Promise<T>): Promise<T> {
  let state = stateOf(folder);
  while (state.deleting) {
    await state.deleting;
    state = stateOf(folder);
  }
  let done!: () => void;
  state.deleting = new Promise((resolve) => (done = resolve));
  try {
    if (state.sharing > 0) await new Promise<void>((resolve) => (state.idle = resolve));
    state.idle = undefined;
    return await work();
  } finally {
    state.deleting = undefined;
    done();
    forget(folder, state);
  }
}
