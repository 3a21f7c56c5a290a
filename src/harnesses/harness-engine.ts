import type { Config } from '../config.ts';
import type { ProjectConnection } from '../contract/connections.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import type { EngineSetup, Placement, PreparedTurn, TurnEngine } from '../agent/engine.ts';
import { withMcpSecrets } from '../agent/mcp-secrets.ts';
import { connectionAddresses } from '../agent/connection-address.ts';
import { McpAddresses, refuseMcpAddresses } from '../agent/mcp-address.ts';
import { harnessEndpoint } from '../agent/model.ts';
import type { Pricing } from '../agent/pricing.ts';
import type { RunnableTemplate } from '../agent/template.ts';
import type { Harness } from './harness.ts';
import { harnessEntry, runHarnessTurn } from './harness-turn.ts';
import { endParked } from './parked.ts';

type HarnessConfig = Pick<Config, 'env' | 'openaiCompatible' | 'connections' | 'bash' | 'modelTimeoutMs' | 'harnessMaxProcesses' | 'harnessParkMs' | 'harnesses' | 'mcp'>;

/**
 * The coding-agent harnesses as a turn engine: each turn a harness process in the session folder
 * (harness-turn.ts), at most AGENTD_HARNESS_MAX_PROCESSES at once. A harness connects to the
 * template's MCP servers itself.
 */
export class HarnessEngine {
  private readonly config: HarnessConfig;
  private readonly mcpAddresses: McpAddresses;
  private readonly pricing: Pricing | undefined;
  private readonly placement: Placement;
  /** Harness processes running now, against AGENTD_HARNESS_MAX_PROCESSES. */
  private running = 0;

  constructor(config: HarnessConfig, pricing: Pricing | undefined, placement: Placement) {
    this.config = config;
    this.mcpAddresses = new McpAddresses(config.mcp.allowedHosts);
    this.pricing = pricing;
    this.placement = placement;
  }

  /** The template's turn on `harness`: refused now if this server does not run it (AGENTD_HARNESSES), the model is not one it calls, or it is not installed. */
  for(harness: Harness, template: RunnableTemplate, connection: ProjectConnection | undefined, secrets: Record<string, string>): TurnEngine {
    offered(harness, this.config.harnesses);
    const endpoint = harnessEndpoint(template.llm, harness.providers, this.config, secrets, connection);
    const modelLookup = connection?.base_url ? connectionAddresses(this.config.connections.allowedHosts).lookupFor() : undefined;
    harnessEntry(harness);
    const { bash, modelTimeoutMs, harnessParkMs, harnessMaxProcesses } = this.config;
    const prepare = async (setup: EngineSetup): Promise<PreparedTurn> => {
      const { workdir, stateDir, privateSession } = setup;
      const lastWords = await setup.lastWords();
      // Filled in now: a secret the request lacks refuses the turn before any answer is claimed.
      const mcps = withMcpSecrets(template.mcps, secrets);
      refuseMcpAddresses(mcps, template.mcps, this.mcpAddresses);
      // Taken from here to the turn's end; nothing is awaited before the caller can give it back.
      this.takeSeat();
      return {
        start: (input, signal) => {
          // Driven from the server's thread, where the metrics count it.
          this.placement.server++;
          return runHarnessTurn(harness, {
            ...input,
            template,
            workdir,
            pricing: this.pricing,
            signal,
            newInteractionId: newId,
            lastWords,
            mcps,
            mcpLookup: this.mcpAddresses.lookupFor(),
            modelLookup,
            endpoint,
            stateDir,
            unsafeHost: bash.unsafeHost,
            modelTimeoutMs,
            parking: { ttlMs: privateSession ? 0 : harnessParkMs, max: harnessMaxProcesses },
          });
        },
        release: async () => {
          this.running--;
        },
      };
    };
    return { kind: harness.kind, template, needsFolder: true, skillsDir: harness.skillsDir, prepare };
  }

  /** A seat for one harness process, or a 503 when every one is taken: never unbounded memory. */
  private takeSeat(): void {
    const max = this.config.harnessMaxProcesses;
    if (this.running >= max) {
      throw new AppError('unavailable', `all ${max} harness processes this server runs at once are busy (AGENTD_HARNESS_MAX_PROCESSES); try again shortly`, {
        headers: { 'retry-after': '5' },
      });
    }
    this.running++;
  }

  /** Parked harness processes write their sessions down and end. */
  close(): Promise<void> {
    return endParked();
  }
}

/** Refuses a harness the operator left out of AGENTD_HARNESSES, as one this server lacks. */
function offered(harness: Harness, harnesses: HarnessConfig['harnesses']): void {
  if (harnesses.includes(harness.kind)) return;
  throw new AppError(
    'harness-unavailable',
    `harness "${harness.kind}" is turned off on this server (AGENTD_HARNESSES: ${harnesses.join(', ') || 'none'}); run the template on a server that offers it, or with harness.kind "agentd"`,
  );
}
