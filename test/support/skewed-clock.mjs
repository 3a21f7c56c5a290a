// Loaded with `node --import` into a replica under test: its clock runs AGENTD_TEST_CLOCK_SKEW_MS
// off the machine's, as a replica's clock may in a deployment (Date.now and new Date() alike).
const skew = Number(process.env.AGENTD_TEST_CLOCK_SKEW_MS ?? 0);
const RealDate = Date;
class SkewedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(RealDate.now() + skew);
    else super(...args);
  }
  static now() {
    return RealDate.now() + skew;
  }
}
globalThis.Date = SkewedDate;
