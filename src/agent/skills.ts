import { chmod, lstat, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Skill } from '../contract/template.ts';
import { AppError } from '../errors.ts';
import { resolveInside } from './tools/confine.ts';
import { removeWritten, writeInside } from './tools/files.ts';
import { ToolError } from './tools/tool-error.ts';

/** Where skills live in a session folder, as the agent sees it. */
const SKILLS_DIR = '.agents/skills';

function skillMarkdown(skill: Skill): string {
  return `---\nname: ${skill.name}\ndescription: ${JSON.stringify(skill.description)}\n---\n\n${skill.body}\n`;
}

/** What installing a template's skills gave the turn, and how to take it back. */
export interface InstalledSkills {
  /** The lines the instructions carry; undefined without skills. */
  notes: string | undefined;
  /**
   * Removes the skills this install added to the folder, for a turn refused before it starts. One
   * it replaced stays replaced: its earlier files were the same skill's, from an earlier turn.
   */
  undo(): Promise<void>;
}

const NO_SKILLS: InstalledSkills = { notes: undefined, undo: async () => {} };

/**
 * Writes the template's skills into the session folder — `SKILL.md` and its files under
 * `<dir>/<name>/` (`.agents/skills` for agentd's loop; a harness reads its own place), replacing what an earlier turn left there — and returns the lines the
 * instructions carry, so the agent knows what each skill is for and reads it when it needs it.
 * Everything goes through the tools' confinement: a skill can never write outside the folder.
 * A skill that cannot be written takes back the ones written before it.
 */
export async function installSkills(workdir: string, skills: readonly Skill[], dir = SKILLS_DIR): Promise<InstalledSkills> {
  if (skills.length === 0) return NO_SKILLS;
  const added = { files: [] as string[], folders: [] as string[] };
  const undo = () => removeWritten(workdir, added.files, added.folders);
  for (const [i, skill] of skills.entries()) {
    try {
      await installSkill(workdir, skill, dir, added);
    } catch (error) {
      await undo();
      if (!(error instanceof ToolError)) throw error;
      throw new AppError('invalid-request', `skill "${skill.name}" (data.parameters.agent.skills[${i}]) cannot be written into the session folder: ${error.message}`);
    }
  }
  const list = skills.map((s) => `- ${s.name}: ${s.description} (read ${dir}/${s.name}/SKILL.md)`);
  return { notes: ['Skills are available in this folder. Before doing what a skill describes, read its SKILL.md and follow it:', ...list].join('\n'), undo };
}

/** Writes one skill; when its folder is new, notes in `added` what it made, so that it can be taken back. */
async function installSkill(workdir: string, skill: Skill, skillsDir: string, added: { files: string[]; folders: string[] }): Promise<void> {
  const dir = `${skillsDir}/${skill.name}`;
  const made = await firstMissing(workdir, dir);
  const wrote = (userPath: string) => {
    if (made === undefined) return;
    added.files.push(userPath);
    // Every folder from the file's up to the first one this skill made.
    for (let at = path.posix.dirname(userPath); !added.folders.includes(at); at = path.posix.dirname(at)) {
      added.folders.push(at);
      if (at === made || at === '.') break;
    }
  };
  await rm(resolveInside(workdir, dir), { recursive: true, force: true });
  await writeInside(workdir, `${dir}/SKILL.md`, skillMarkdown(skill));
  wrote(`${dir}/SKILL.md`);
  for (const file of skill.files ?? []) {
    const { real } = await writeInside(workdir, `${dir}/${file.path}`, file.content);
    wrote(`${dir}/${file.path}`);
    if (file.executable) await chmod(real, 0o755);
  }
}

/**
 * The first folder on the way to `userPath` (itself included) that is not in `workdir`; undefined
 * when `userPath` is there. One look when it is, as it is from a session's second turn on.
 */
async function firstMissing(workdir: string, userPath: string): Promise<string | undefined> {
  const there = (at: string) => lstat(path.join(workdir, at)).then(() => true, () => false);
  if (await there(userPath)) return undefined;
  let missing = userPath;
  for (let up = path.posix.dirname(missing); up !== '.' && !(await there(up)); up = path.posix.dirname(up)) missing = up;
  return missing;
}
