import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { AppError } from '../errors.ts';
import { nowIso } from './columns.ts';
import type { Database } from './schema.ts';

export interface Project {
  id: string;
  name: string;
  created_at: string;
}

/** Names show up in logs and CLI flags, so keep them plain and unambiguous. */
const PROJECT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

function checkName(name: string): void {
  if (!PROJECT_NAME_PATTERN.test(name)) {
    throw new AppError(
      'invalid-request',
      `project name "${name}" is invalid: use 1-128 letters, digits, ".", "_" or "-", starting with a letter or digit`,
    );
  }
}

function toProject(row: Project): Project {
  return { id: row.id, name: row.name, created_at: row.created_at };
}

export function createProjectsRepo(db: Kysely<Database>) {
  async function findById(id: string): Promise<Project | undefined> {
    const row = await db.selectFrom('projects').selectAll().where('id', '=', id).executeTakeFirst();
    return row && toProject(row);
  }

  async function findByName(name: string): Promise<Project | undefined> {
    const row = await db.selectFrom('projects').selectAll().where('name', '=', name).executeTakeFirst();
    return row && toProject(row);
  }

  /** Inserts unless the name is taken; undefined then. Never throws on the unique name. */
  async function insert(name: string): Promise<Project | undefined> {
    checkName(name);
    const project: Project = { id: randomUUID(), name, created_at: nowIso() };
    const result = await db
      .insertInto('projects')
      .values(project)
      .onConflict((oc) => oc.column('name').doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0n) === 1 ? project : undefined;
  }

  async function create(name: string): Promise<Project> {
    const project = await insert(name);
    if (!project) throw new AppError('invalid-request', `a project named "${name}" already exists`);
    return project;
  }

  /** Get or create; safe when two processes ensure the same name at once (the loser reads the winner's row). */
  async function ensure(name: string): Promise<Project> {
    const existing = await findByName(name);
    if (existing) return existing;
    const created = await insert(name);
    if (created) return created;
    const raced = await findByName(name);
    if (!raced) throw new Error(`project "${name}" vanished while being created`);
    return raced;
  }

  async function count(): Promise<number> {
    const row = await db
      .selectFrom('projects')
      .select((eb) => eb.fn.countAll<number | string | bigint>().as('n'))
      .executeTakeFirstOrThrow();
    // PostgreSQL returns count(*) as a bigint string.
    return Number(row.n);
  }

  return { create, findById, findByName, count, ensure };
}

export type ProjectsRepo = ReturnType<typeof createProjectsRepo>;
