import pkg from '../package.json' with { type: 'json' };

/** agentd's own version (the package's), as distinct from the contract version of spec §9. */
export const VERSION: string = pkg.version;
