import type { Config } from '../config.ts';
import type { ProjectConnection } from '../contract/connections.ts';
import { BuiltinEngine } from '../agent/builtin-engine.ts';
import type { Placement, TurnEngine } from '../agent/engine.ts';
import { withMcpSecrets } from '../agent/mcp-secrets.ts';
import { settleLlm } from '../agent/model.ts';
import { pricingFrom } from '../agent/pricing.ts';
import type { EffectiveTemplate, RunnableTemplate } from '../agent/template.ts';
import { HarnessEngine } from '../harnesses/harness-engine.ts';
import { harnessFor } from '../harnesses/harness-turn.ts';

/** Every engine this process runs turns on, and which one a template names (`harness.kind`). */
export class TurnEngines {
  readonly placement: Placement = { server: 0, threads: 0 };
  private readonly allowStdioMcp: boolean;
  private readonly builtin: BuiltinEngine;
  private readonly harnesses: HarnessEngine;

  constructor(config: Config) {
    const pricing = pricingFrom(config.prices);
    this.allowStdioMcp = config.allowStdioMcp;
    this.builtin = new BuiltinEngine(config, pricing, this.placement);
    this.harnesses = new HarnessEngine(config, pricing, this.placement);
  }

  /** Turn threads started now. */
  get threadsRunning(): number {
    return this.builtin.threadsRunning;
  }

  /**
   * The engine a turn of `template` runs on, its model settled. A project connection supplies
   * provider, base URL, key and default model. Throws what refuses the template before anything
   * runs: an unknown provider, a missing key, a harness this server does not run or lacks.
   */
  for(template: EffectiveTemplate, connection: ProjectConnection | undefined, secrets: Record<string, string>): TurnEngine {
    const runnable: RunnableTemplate = { ...template, llm: settleLlm(template.llm, connection) };
    const harness = harnessFor(runnable, this.allowStdioMcp);
    return harness ? this.harnesses.for(harness, runnable, connection, secrets) : this.builtin.for(runnable, connection, secrets);
  }

  /** Throws what a turn of `template` would throw before it starts, without a request's secrets. */
  checkRunsWithoutSecrets(template: EffectiveTemplate, connection: ProjectConnection | undefined): void {
    this.for(template, connection, {});
    withMcpSecrets(template.mcps, {});
  }

  /** No turn starts after this. */
  async close(log: { info(obj: object, msg: string): void }): Promise<void> {
    this.builtin.close(log);
    await this.harnesses.close();
  }
}
