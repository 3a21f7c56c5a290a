import { chmod, rm } from 'node:fs/promises';
import type { Skill } from '../contract/template.ts';
import { AppError } from '../errors.ts';
import { resolveInside } from './tools/confine.ts';
import { writeInside } from './tools/files.ts';
import { ToolError } from './tools/tool-error.ts';

/** Where skills live in a session folder, as the agent sees it. */
const SKILLS_DIR = '.agents/skills';

function skillMarkdown(skill: Skill): string {
  return `---\nname: ${skill.name}\ndescription: ${JSON.stringify(skill.description)}\n---\n\n${skill.body}\n`;
}

/**
 * Writes the template's skills into the session folder — `SKILL.md` and its files under
 * `<dir>/<name>/` (`.agents/skills` for agentd's loop; a harness reads its own place), replacing what an earlier turn left there — and returns the lines the
 * instructions carry, so the agent knows what each skill is for and reads it when it needs it.
 * Everything goes through the tools' confinement: a skill can never write outside the folder.
 */
export async function installSkills(workdir: string, skills: readonly Skill[], dir = SKILLS_DIR): Promise<string | undefined> {
  if (skills.length === 0) return undefined;
  for (const [i, skill] of skills.entries()) {
    try {
      await installSkill(workdir, skill, dir);
    } catch (error) {
      if (!(error instanceof ToolError)) throw error;
      throw new AppError('invalid-request', `skill "${skill.name}" (data.parameters.agent.skills[${i}]) cannot be written into the session folder: ${error.message}`);
    }
  }
  const list = skills.map((s) => `- ${s.name}: ${s.description} (read ${dir}/${s.name}/SKILL.md)`);
  return ['Skills are available in this folder. Before doing what a skill describes, read its SKILL.md and follow it:', ...list].join('\n');
}

async function installSkill(workdir: string, skill: Skill, skillsDir: string): Promise<void> {
  const dir = `${skillsDir}/${skill.name}`;
  await rm(resolveInside(workdir, dir), { recursive: true, force: true });
  await writeInside(workdir, `${dir}/SKILL.md`, skillMarkdown(skill));
  for (const file of skill.files ?? []) {
    const { real } = await writeInside(workdir, `${dir}/${file.path}`, file.content);
    if (file.executable) await chmod(real, 0o755);
  }
}
