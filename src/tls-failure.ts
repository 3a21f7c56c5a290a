/** Certificate checks that fail because nothing this process trusts signed the certificate. */
const UNTRUSTED = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
]);
const OUT_OF_DATE = new Set(['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID']);
/** What OpenSSL says when the other end answered a TLS hello with something that is not TLS. */
const NOT_TLS = new Set(['ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG', 'ERR_SSL_HTTP_REQUEST']);

/**
 * A connection's TLS failure, somewhere in `error`'s causes, as what the server did and what to
 * do about it: Node's own words are OpenSSL's (`tls_validate_record_header:wrong version
 * number:../deps/openssl/…`) or name only the check that failed. Undefined when TLS is not what
 * failed. Phrased to follow the server's name: `MCP server "docs" at https://… ` + this.
 */
export function tlsFailure(error: unknown): string | undefined {
  for (let current = error, depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth++) {
    const { code, message } = current as { code?: unknown; message?: unknown };
    if (typeof code === 'string') {
      // Node adds its own advice after a ";" (`--use-system-ca`), which is not how agentd is started.
      const said = `${typeof message === 'string' ? message.split(';')[0]!.trim() : ''}, ${code}`;
      if (NOT_TLS.has(code)) return `does not speak TLS at that address (${code}): if it serves plain HTTP there, use an http:// URL`;
      if (UNTRUSTED.has(code)) return `has a TLS certificate agentd does not trust (${said}): if your own CA signed it, start agentd with NODE_EXTRA_CA_CERTS naming that CA's PEM file`;
      if (OUT_OF_DATE.has(code)) return `has a TLS certificate that is not valid today (${said}): renew it, or check this machine's clock`;
      if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return `has a TLS certificate for another name (${said}): use a URL with a host name the certificate names`;
      if (/^(ERR_SSL_|ERR_TLS_|CERT_)/.test(code)) return `failed the TLS handshake (${said})`;
    }
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
