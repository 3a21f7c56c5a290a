import type { Usage } from '../contract/events.ts';
import { own } from '../objects.ts';

/** Returns the cost of a turn's usage in US dollars, or undefined when the model has no known price. */
export type Pricing = (provider: string, model: string, usage: Usage) => number | undefined;

/** Prices per million tokens, keyed `provider/model` or `model`, from AGENTD_PRICES. */
export type PriceTable = Record<string, { input: number; output: number }>;

export function pricingFrom(table: PriceTable): Pricing | undefined {
  if (Object.keys(table).length === 0) return undefined;
  return (provider, model, usage) => {
    const price = own(table, `${provider}/${model}`) ?? own(table, model);
    if (!price) return undefined;
    return (usage.input * price.input + usage.output * price.output) / 1_000_000;
  };
}
