import type { Config } from '../config.ts';
import type { ProjectConnection } from '../contract/connections.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import type { EngineSetup, Placement, PreparedTurn, TurnEngine } from './engine.ts';
import { connectMcpServers, type McpTools } from './mcp.ts';
import { McpAddresses } from './mcp-address.ts';
import { resolveModel } from './model.ts';
import type { Pricing } from './pricing.ts';
import { ServerLoad } from './server-load.ts';
import type { RunnableTemplate } from './template.ts';
import { runTurn } from './turn.ts';
import { TurnPool } from './turn-pool.ts';

type BuiltinConfig = Pick<
  Config,
  'env' | 'openaiCompatible' | 'connections' | 'prices' | 'maxSteps' | 'modelTimeoutMs' | 'modelMaxRetries' | 'bash' | 'turnWorkers' | 'turnWorkersLoad' | 'allowStdioMcp' | 'mcp'
>;

/**
 * agentd's own loop (turn.ts) as a turn engine: a turn runs on the server's thread, or, as the
 * thread's load shares them out, on a turn thread (turn-pool.ts). It connects the template's MCP
 * servers itself.
 */
export class BuiltinEngine {
  private readonly config: BuiltinConfig;
  private readonly mcpAddresses: McpAddresses;
  private readonly pricing: Pricing | undefined;
  private readonly placement: Placement;
  private readonly pool: TurnPool | undefined;
  /** Which turns go to the pool, from how busy the server's thread is. */
  private readonly load: ServerLoad | undefined;

  constructor(config: BuiltinConfig, pricing: Pricing | undefined, placement: Placement) {
    this.config = config;
    this.mcpAddresses = new McpAddresses(config.mcp.allowedHosts);
    this.pricing = pricing;
    this.placement = placement;
    const { env, openaiCompatible, connections, prices, maxSteps, modelTimeoutMs, modelMaxRetries, bash, turnWorkers } = config;
    // At a load line of 1 no turn would ever go to a thread: none is started.
    this.pool = turnWorkers > 0 && config.turnWorkersLoad < 1 ? new TurnPool(turnWorkers, { env: { ...env }, openaiCompatible, connections, prices, maxSteps, modelTimeoutMs, modelMaxRetries, bash }) : undefined;
    this.load = this.pool && new ServerLoad(config.turnWorkersLoad, { rising: () => this.pool?.warm() });
  }

  /** Turn threads started now. */
  get threadsRunning(): number {
    return this.pool?.running ?? 0;
  }

  /**
   * The template's turn on this loop. Its model is resolved here even for a turn a thread runs
   * (which resolves it again there): a missing key or an unknown provider fails the request before
   * the turn starts.
   */
  for(template: RunnableTemplate, connection: ProjectConnection | undefined, secrets: Record<string, string>): TurnEngine {
    const model = resolveModel(template.llm, this.config, secrets, connection);
    // Stdio MCP servers run in the session folder; nothing else of this loop needs it before its first tool.
    const stdio = template.mcps.some((server) => server.connection.type === 'stdio');
    const prepare = async ({ workdir, makeFolder, credentials, signal }: EngineSetup): Promise<PreparedTurn> => {
      const mcp = await this.connect(template, secrets, credentials, stdio ? await makeFolder() : workdir, signal);
      return {
        start: (input, signal) => {
          // MCP tools hold their connections here, so a turn that has them runs on this thread.
          const pool = !mcp && this.load?.sendsTurn() ? this.pool : undefined;
          this.placement[pool ? 'threads' : 'server']++;
          const turn = { ...input, template, workdir };
          if (pool) return pool.run({ ...turn, secrets, connection }, signal);
          return runTurn({ ...turn, mcp, model, config: this.config, pricing: this.pricing, signal, newInteractionId: newId });
        },
        release: async () => {
          await mcp?.close();
        },
      };
    };
    return { kind: 'agentd', template, needsFolder: false, skillsDir: undefined, prepare };
  }

  /**
   * The template's MCP servers, connected before any answer is claimed: an unreachable server
   * fails the request (424) without consuming the caller's decisions.
   */
  private async connect(template: RunnableTemplate, secrets: Record<string, string>, credentials: string | undefined, workdir: string, signal: AbortSignal): Promise<McpTools | undefined> {
    if (!template.mcps.length) return undefined;
    const mcp = await connectMcpServers(template.mcps, {
      credentials,
      secrets,
      allowStdio: this.config.allowStdioMcp,
      addresses: this.mcpAddresses,
      timeoutMs: this.config.mcp.connectTimeoutMs,
      callTimeoutMs: this.config.mcp.callTimeoutMs,
      cwd: workdir,
      signal,
    });
    try {
      checkToolNames(template, Object.keys(mcp.tools));
    } catch (error) {
      await mcp.close();
      throw error;
    }
    return mcp;
  }

  /** Turn threads end once their turns have; no turn goes to one after this. Says where this process's turns ran. */
  close(log: { info(obj: object, msg: string): void }): void {
    this.load?.stop();
    this.pool?.close();
    if (this.pool) log.info({ turns: this.placement }, 'where turns ran: on the server thread, or on turn threads while it was busy');
  }
}

/** An MCP tool may not shadow a tool the template names itself. */
function checkToolNames(template: RunnableTemplate, mcpNames: string[]): void {
  const own = new Set(template.tools.map((t) => t.name));
  const clash = mcpNames.filter((name) => own.has(name));
  if (clash.length) {
    throw new AppError('invalid-request', `MCP tools ${clash.map((n) => `"${n}"`).join(', ')} have the name of a tool in data.parameters.agent.tools; rename the server or the tool`);
  }
}
