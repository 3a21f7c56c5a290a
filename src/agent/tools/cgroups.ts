import { mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { newId } from '../../ids.ts';

/**
 * How much one `bash` call may take besides time and output: its processes, and its memory (the
 * files it writes to its private /tmp included). As root, RLIMIT_NPROC is not enforced, so a
 * fork bomb would take every process the host has: a control group per call is the bound the
 * kernel keeps. It needs a cgroup hierarchy this process may write to (cgroup v1's `pids` and
 * `memory`, or v2 with both delegated to its own group); without one, calls run unbounded and
 * `limitsAvailable` says so.
 */
export interface CallLimits {
  processes: number;
  memoryBytes: number;
}

/** One controller's place: the group this process is in, and the file that sets a child's limit. */
interface Place {
  dir: string;
  file: string;
  limit: keyof CallLimits;
}

/** A call's groups, made before it starts: its process joins them before it execs anything. */
export interface CallGroups {
  procs: string[];
  remove(): Promise<void>;
}

let found: Promise<Place[] | undefined> | undefined;

/** Whether calls are bounded here (probed once: a group is made and removed). */
export async function limitsAvailable(): Promise<boolean> {
  return (await (found ??= findPlaces())) !== undefined;
}

/** Makes a call's groups with these limits; undefined where the host has none to offer. */
export async function callGroups(limits: CallLimits): Promise<CallGroups | undefined> {
  const places = await (found ??= findPlaces());
  return places && makeGroups(places, limits);
}

async function makeGroups(places: Place[], limits: CallLimits): Promise<CallGroups> {
  const name = `agentd-bash-${newId()}`;
  const made: string[] = [];
  try {
    for (const place of places) {
      const dir = path.join(place.dir, name);
      if (!made.includes(dir)) {
        await mkdir(dir);
        made.push(dir);
      }
      await writeFile(path.join(dir, place.file), String(limits[place.limit]));
    }
  } catch (error) {
    await removeGroups(made);
    throw error;
  }
  return { procs: made.map((dir) => path.join(dir, 'cgroup.procs')), remove: () => removeGroups(made) };
}

/**
 * The shell that puts itself in the call's groups, then becomes the program: every process the
 * program starts is born inside them. Its arguments: the groups' `cgroup.procs`, `--`, the program.
 */
export const ENTER_GROUPS = 'for f in "$@"; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; shift; done; shift; exec "$@"';

/** A group can be removed once its last process has gone, which may trail the call's end by a moment. */
async function removeGroups(dirs: string[]): Promise<void> {
  for (const dir of dirs) {
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        await rmdir(dir);
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') break;
        await sleep(25);
      }
    }
  }
}

/** How old a group must be before a sweep may take it for a leftover (a live one is never empty that long). */
const LEFTOVER_AGE_MS = 60_000;

/**
 * The groups of calls cut off with their server (SIGKILL, a crash): no one was left to remove them,
 * and each crash left two more. Their names carry their creation time (a UUIDv7); one made a minute
 * ago or more is no longer being set up, and the kernel refuses to remove one a process is still in,
 * so another server's live call on this host keeps its groups.
 */
async function removeLeftovers(places: Place[]): Promise<void> {
  for (const dir of new Set(places.map((place) => place.dir))) {
    for (const name of await readdir(dir).catch(() => [])) {
      const hex = /^agentd-bash-([0-9a-f]{8})-([0-9a-f]{4})-7/.exec(name);
      if (hex && Date.now() - parseInt(hex[1]! + hex[2]!, 16) >= LEFTOVER_AGE_MS) await rmdir(path.join(dir, name)).catch(() => undefined);
    }
  }
}

/** Where the `pids` and `memory` groups are made (the same folder on cgroup v2). */
async function findPlaces(): Promise<Place[] | undefined> {
  try {
    const [mountinfo, own] = await Promise.all([readFile('/proc/self/mountinfo', 'utf8'), readFile('/proc/self/cgroup', 'utf8')]);
    const mounts = mountinfo.split('\n').flatMap((line) => {
      const [before, after] = line.split(' - ');
      if (!after) return [];
      const fields = before!.split(' ');
      const [type, , options = ''] = after.split(' ');
      return [{ root: fields[3]!, point: fields[4]!, type: type!, options: options.split(',') }];
    });
    const groups = own.split('\n').flatMap((line) => {
      const match = /^\d+:([^:]*):(.*)$/.exec(line);
      return match ? [{ controllers: match[1]!.split(','), path: match[2]! }] : [];
    });
    const within = (mount: { root: string; point: string }, group: string) => {
      const relative = path.relative(mount.root, group);
      return relative.startsWith('..') ? undefined : path.join(mount.point, relative);
    };
    const v1 = (controller: string) => {
      const mount = mounts.find((m) => m.type === 'cgroup' && m.options.includes(controller));
      const group = groups.find((g) => g.controllers.includes(controller));
      return mount && group ? within(mount, group.path) : undefined;
    };
    let places: Place[] | undefined;
    const pids = v1('pids');
    const memory = v1('memory');
    if (pids && memory) {
      places = [
        { dir: pids, file: 'pids.max', limit: 'processes' },
        { dir: memory, file: 'memory.limit_in_bytes', limit: 'memoryBytes' },
      ];
    } else {
      const mount = mounts.find((m) => m.type === 'cgroup2');
      const group = groups.find((g) => g.controllers.length === 1 && g.controllers[0] === '');
      const dir = mount && group ? within(mount, group.path) : undefined;
      const delegated = dir ? (await readFile(path.join(dir, 'cgroup.subtree_control'), 'utf8')).split(/\s+/) : [];
      if (dir && delegated.includes('pids') && delegated.includes('memory')) {
        places = [
          { dir, file: 'pids.max', limit: 'processes' },
          { dir, file: 'memory.max', limit: 'memoryBytes' },
        ];
      }
    }
    if (!places) return undefined;
    await (await makeGroups(places, { processes: 1, memoryBytes: 1 << 20 })).remove();
    await removeLeftovers(places);
    return places;
  } catch {
    return undefined;
  }
}
