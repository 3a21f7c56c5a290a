import { useEffect, useState } from 'react';
import { useAuth } from './auth.tsx';
import { ChoiceField, ErrorNote, Field, Json, errorText, useApi } from './ui.tsx';

/**
 * Which agent a chat talks to: the server's default template, a stored workflow revision, what an
 * environment deploys, or a template edited here. What the choice adds to each invoke body is
 * `bodyOf(choice)`.
 */

export type AgentChoice =
  | { kind: 'default' }
  | { kind: 'inline'; template: Record<string, unknown> }
  | { kind: 'workflow'; workflow: string; variant?: string; version?: number }
  | { kind: 'environment'; environment: string; key?: string };

export function bodyOf(choice: AgentChoice): Record<string, unknown> {
  switch (choice.kind) {
    case 'default':
      return {};
    case 'inline':
      return { data: { parameters: { agent: choice.template } } };
    case 'workflow':
      return {
        references: {
          workflow: { id: choice.workflow },
          ...(choice.variant ? { workflow_variant: { slug: choice.variant } } : {}),
          ...(choice.version !== undefined ? { workflow_revision: { version: String(choice.version) } } : {}),
        },
      };
    case 'environment':
      return { references: { environment: { slug: choice.environment } }, ...(choice.key ? { selector: { key: choice.key } } : {}) };
  }
}

export function describeChoice(choice: AgentChoice): string {
  switch (choice.kind) {
    case 'default':
      return 'the default agent';
    case 'inline':
      return 'a template edited here';
    case 'workflow':
      return `workflow ${choice.workflow}${choice.variant ? ` / ${choice.variant}` : ''}${choice.version !== undefined ? ` v${choice.version}` : ' (newest)'}`;
    case 'environment':
      return `environment ${choice.environment}${choice.key ? ` / ${choice.key}` : ''}`;
  }
}

/** The inline template editor: JSON, checked by the server exactly as invoke would check it. */
function TemplateEditor({ value, onChange }: { value: Record<string, unknown> | undefined; onChange: (template: Record<string, unknown>) => void }) {
  const { client } = useAuth();
  const defaults = useApi(['inspect-defaults'], () => client.inspect({}));
  const [text, setText] = useState(() => (value ? JSON.stringify(value, null, 2) : ''));
  const [problem, setProblem] = useState<string>();
  const [checked, setChecked] = useState(false);

  useEffect(() => {
    const agent = (defaults.data?.revision.data as { parameters?: { agent?: unknown } } | undefined)?.parameters?.agent;
    if (text === '' && agent) setText(JSON.stringify(agent, null, 2));
  }, [defaults.data, text]);

  async function check() {
    setChecked(false);
    const read = templateOf(text);
    if ('problem' in read) {
      setProblem(read.problem);
      return;
    }
    try {
      await client.inspect({ revision: { data: { parameters: { agent: read.template } } } } as never);
      setProblem(undefined);
      setChecked(true);
      onChange(read.template);
    } catch (error) {
      setProblem(errorText(error));
    }
  }

  return (
    <div className="template-editor">
      <Field label="Agent template (JSON)" hint="Every key is optional; the defaults are filled in below. Checked by the server as invoke checks it.">
        {(id) => (
          <textarea
            id={id}
            className="code"
            rows={14}
            spellCheck={false}
            value={text}
            onChange={(e) => {
              setText(e.target.value);
              setChecked(false);
              // What the box holds is what runs, checked or not (invoke checks it as Check does):
              // edits left unchecked must not leave the previous template running in their place.
              const read = templateOf(e.target.value);
              if ('template' in read) onChange(read.template);
            }}
            aria-invalid={problem ? true : undefined}
            aria-describedby={problem ? `${id}-problem` : undefined}
          />
        )}
      </Field>
      <div className="row">
        <button type="button" onClick={check}>
          Check and use
        </button>
        {checked ? <span role="status">Template accepted.</span> : null}
      </div>
      {problem ? (
        <p role="alert" className="error-note">
          {problem}
        </p>
      ) : null}
      <details>
        <summary>Defaults (what an empty template runs)</summary>
        {defaults.data ? <Json value={(defaults.data.revision.data as { parameters?: unknown }).parameters} /> : <ErrorNote error={defaults.error} />}
      </details>
    </div>
  );
}

/** The editor's text as a template, or why it is not one. */
function templateOf(text: string): { template: Record<string, unknown> } | { problem: string } {
  let template: unknown;
  try {
    template = JSON.parse(text);
  } catch (error) {
    return { problem: `not JSON: ${(error as Error).message}` };
  }
  if (typeof template !== 'object' || template === null || Array.isArray(template)) return { problem: 'the template must be a JSON object' };
  return { template: template as Record<string, unknown> };
}

export function AgentPicker({ id, choice, onChange }: { id: string; choice: AgentChoice; onChange: (choice: AgentChoice) => void }) {
  const { client } = useAuth();
  const workflows = useApi(choice.kind === 'workflow' ? ['workflows'] : null, () => client.workflows.list());
  const environments = useApi(choice.kind === 'environment' ? ['environments'] : null, () => client.environments.list());
  const workflow = choice.kind === 'workflow' ? workflows.data?.workflows.find((w) => w.id === choice.workflow) : undefined;
  const environment = useApi(choice.kind === 'environment' && choice.environment ? ['environment', choice.environment] : null, () =>
    client.environments.get(choice.kind === 'environment' ? choice.environment : ''),
  );
  const deployed = Object.keys(((environment.data?.revision?.data as { references?: Record<string, unknown> } | undefined)?.references ?? {}) as object);
  // An environment alone names no workflow, so the entry to run must be named: the first, until another is chosen.
  const firstKey = deployed[0];
  useEffect(() => {
    if (choice.kind === 'environment' && choice.environment && !choice.key && firstKey) onChange({ ...choice, key: firstKey });
  }, [choice, firstKey, onChange]);

  return (
    <fieldset id={id} className="agent-picker">
      <legend>Agent</legend>
      <Field label="Run">
        {(id) => (
          <select
            id={id}
            value={choice.kind}
            onChange={(e) => {
              const kind = e.target.value as AgentChoice['kind'];
              onChange(kind === 'inline' ? { kind, template: {} } : kind === 'workflow' ? { kind, workflow: '' } : kind === 'environment' ? { kind, environment: '' } : { kind });
            }}
          >
            <option value="default">The default agent</option>
            <option value="workflow">A stored workflow</option>
            <option value="environment">What an environment deploys</option>
            <option value="inline">A template edited here</option>
          </select>
        )}
      </Field>
      {choice.kind === 'inline' ? <TemplateEditor value={Object.keys(choice.template).length ? choice.template : undefined} onChange={(template) => onChange({ kind: 'inline', template })} /> : null}
      {choice.kind === 'workflow' ? (
        <>
          <ErrorNote error={workflows.error} />
          <ChoiceField
            label="Workflow"
            value={choice.workflow}
            onChange={(workflow) => onChange({ kind: 'workflow', workflow })}
            options={(workflows.data?.workflows ?? []).map((w) => ({ value: w.id, label: w.name ?? w.slug }))}
          />
          {workflow ? (
            <Field label="Variant and revision">
              {(id) => (
                <select
                  id={id}
                  value={`${choice.variant ?? ''}@${choice.version ?? ''}`}
                  onChange={(e) => {
                    const [variant, version] = e.target.value.split('@');
                    onChange({ kind: 'workflow', workflow: choice.workflow, ...(variant ? { variant } : {}), ...(version ? { version: Number(version) } : {}) });
                  }}
                >
                  <option value="@">First variant, newest revision</option>
                  {workflow.variants.flatMap((v) =>
                    Array.from({ length: v.latest_version ?? 0 }, (_, i) => (v.latest_version ?? 0) - i).map((version, i) => (
                      <option key={`${v.slug}@${version}`} value={`${v.slug}@${i === 0 ? '' : version}`}>
                        {v.slug} v{version}
                        {i === 0 ? ' (newest)' : ''}
                      </option>
                    )),
                  )}
                </select>
              )}
            </Field>
          ) : null}
        </>
      ) : null}
      {choice.kind === 'environment' ? (
        <>
          <ErrorNote error={environments.error ?? environment.error} />
          <ChoiceField
            label="Environment"
            value={choice.environment}
            onChange={(environment) => onChange({ kind: 'environment', environment })}
            options={(environments.data?.environments ?? []).map((env) => ({ value: env.slug, label: env.name ?? env.slug }))}
          />
          {deployed.length > 0 ? (
            <Field label="Deployed key">
              {(id) => (
                <select id={id} value={choice.key ?? ''} onChange={(e) => onChange({ kind: 'environment', environment: choice.environment, ...(e.target.value ? { key: e.target.value } : {}) })}>
                  {deployed.map((key) => (
                    <option key={key} value={key}>
                      {key}
                    </option>
                  ))}
                </select>
              )}
            </Field>
          ) : null}
        </>
      ) : null}
    </fieldset>
  );
}
