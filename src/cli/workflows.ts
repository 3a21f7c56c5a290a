import { AgentdError, type AgentdClient } from '../client/index.ts';
import type { FlagValues } from './args.ts';
import { CONNECTION_FLAGS, CONNECTION_HELP, CliError, numberFlag, remoteClient, runSubcommand } from './remote.ts';
import { readJsonFile } from './requests.ts';
import { terminalWidth, textTable } from './text-table.ts';

const USAGE = `Usage:
  agentd workflows list [--json]
  agentd workflows create SLUG [--template FILE] [--name NAME] [--family F]
                          [--message TEXT]
  agentd workflows commit SLUG --template FILE [--variant V] [--message TEXT]
  agentd workflows deploy SLUG --env NAME [--variant V] [--version N] [--key K]

list    Workflows with their variants and newest versions, and what each
        environment deploys.
create  A new workflow (--family application, workflow or evaluator; default
        workflow), with --template's agent template as its first revision.
commit  A new revision of a variant (default "default"; a new name starts a
        branch) from --template: an agent template, or {"agent": …} parameters.
deploy  Deploys a revision to environment NAME (made on first use): the
        variant's newest, or --version N of it. --key names the entry (default
        the workflow's slug).
  --json  print the server's reply as JSON

${CONNECTION_HELP}`;

const FLAGS = {
  template: { type: 'string' },
  name: { type: 'string' },
  family: { type: 'string' },
  message: { type: 'string' },
  variant: { type: 'string' },
  env: { type: 'string' },
  version: { type: 'string' },
  key: { type: 'string' },
  json: { type: 'boolean' },
  ...CONNECTION_FLAGS,
} as const;

type Values = FlagValues<typeof FLAGS>;

/** `--template`'s file as revision data: an agent template, or parameters that hold one. */
function revisionData(file: string): { parameters: Record<string, unknown> } {
  const template = readJsonFile(file, '--template');
  if (template === null || typeof template !== 'object' || Array.isArray(template)) throw new CliError(`--template ${file} must hold a JSON object: an agent template`);
  return { parameters: 'agent' in template ? (template as Record<string, unknown>) : { agent: template } };
}

async function list(client: AgentdClient, values: Values): Promise<void> {
  const [workflows, environments] = await Promise.all([client.workflows.list(), client.environments.list()]);
  if (values.json) return void process.stdout.write(`${JSON.stringify({ workflows: workflows.workflows, environments: environments.environments })}\n`);
  if (!workflows.workflows.length) process.stdout.write('no workflows; make one with agentd workflows create SLUG --template FILE\n');
  else {
    const rows = [['workflow', 'name', 'family', 'variants']];
    for (const w of workflows.workflows) rows.push([w.slug, w.name ?? '', w.family, w.variants.map((v) => `${v.slug} v${v.latest_version ?? 0}`).join(', ')]);
    process.stdout.write(textTable(rows, { width: terminalWidth(), shrink: [1, 3] }));
  }
  if (!environments.environments.length) return;
  const rows = [['environment', 'key', 'deploys']];
  for (const env of environments.environments) {
    const deployed = Object.entries(((env.revision?.data as { references?: Record<string, Record<string, { slug?: string; version?: number }>> } | undefined)?.references ?? {}) as Record<string, Record<string, { slug?: string; version?: number }>>);
    if (!deployed.length) rows.push([env.slug, '', 'nothing']);
    for (const [key, refs] of deployed) rows.push([env.slug, key, `${refs.workflow?.slug ?? ''} / ${refs.workflow_variant?.slug ?? ''} v${refs.workflow_revision?.version ?? '?'}`]);
  }
  process.stdout.write(`\n${textTable(rows, { width: terminalWidth(), shrink: [2] })}`);
}

async function deploy(client: AgentdClient, slug: string, values: Values): Promise<void> {
  if (!values.env) throw new CliError('agentd workflows deploy needs the environment: --env NAME');
  const version = values.version === undefined ? undefined : numberFlag(values.version, 'version', 1, 1);
  const body = {
    references: {
      workflow: { slug },
      ...(values.variant ? { workflow_variant: { slug: values.variant } } : {}),
      ...(version !== undefined ? { workflow_revision: { version: String(version) } } : {}),
    },
    ...(values.key ? { key: values.key } : {}),
    ...(values.message ? { message: values.message } : {}),
  };
  let env;
  try {
    env = await client.environments.deploy(values.env, body);
  } catch (error) {
    if (!(error instanceof AgentdError) || error.status.code !== 404 || !error.status.message.includes('environment')) throw error;
    await client.environments.create({ slug: values.env });
    process.stderr.write(`created environment ${values.env}\n`);
    env = await client.environments.deploy(values.env, body);
  }
  if (values.json) return void process.stdout.write(`${JSON.stringify(env)}\n`);
  const entry = (env.revision?.data as { references?: Record<string, { workflow_variant?: { slug?: string }; workflow_revision?: { version?: number } }> } | undefined)?.references?.[values.key ?? slug];
  process.stdout.write(`deployed ${slug} / ${entry?.workflow_variant?.slug ?? '?'} v${entry?.workflow_revision?.version ?? '?'} to ${env.slug} (its revision ${env.revision?.version ?? '?'})\n`);
}

export function workflowsCommand(argv: string[]): Promise<number> {
  return runSubcommand('workflows', argv, FLAGS, USAGE, async (sub, values, positionals) => {
    if (sub === 'list') return list(remoteClient(values), values);
    const [slug, ...extra] = positionals;
    if (!['create', 'commit', 'deploy'].includes(sub)) throw new CliError(`unknown workflows command "${sub}"; use list, create, commit or deploy`);
    if (!slug || extra.length) throw new CliError(`agentd workflows ${sub} takes the workflow's slug: agentd workflows ${sub} support-bot`);
    const client = remoteClient(values);
    if (sub === 'create') {
      const family = values.family ?? 'workflow';
      if (!['workflow', 'application', 'evaluator'].includes(family)) throw new CliError(`--family must be workflow, application or evaluator, got "${family}"`);
      const created = await client.workflows.create({
        slug,
        family: family as 'workflow',
        ...(values.name ? { name: values.name } : {}),
        ...(values.template ? { data: revisionData(values.template) } : {}),
        ...(values.message ? { message: values.message } : {}),
      });
      process.stdout.write(values.json ? `${JSON.stringify(created)}\n` : `created workflow ${created.workflow.slug} (${created.workflow.id})${created.revision ? `, revision ${created.revision.id} (v${created.revision.version})` : ''}\n`);
    } else if (sub === 'commit') {
      if (!values.template) throw new CliError('agentd workflows commit needs the new configuration: --template FILE');
      const revision = await client.workflows.commit(slug, { data: revisionData(values.template), ...(values.variant ? { variant: values.variant } : {}), ...(values.message ? { message: values.message } : {}) });
      process.stdout.write(values.json ? `${JSON.stringify(revision)}\n` : `committed ${slug} / ${revision.variant.slug} v${revision.version}: revision ${revision.id}\n`);
    } else {
      await deploy(client, slug, values);
    }
  });
}
