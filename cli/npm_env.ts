/**
 * The host variables `isx build` hands to `npm` (the build mode's env grant names them).
 *
 * @module
 */

/**
 * Host variables `isx build` passes to `npm` when set: how this host reaches the registry (a
 * TLS-intercepting egress's CA, a proxy, a mirror). Without the CA npm fails every fetch with
 * SELF_SIGNED_CERT_IN_CHAIN and retries for minutes.
 */
export const NPM_PASS_ENV = [
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "HTTPS_PROXY",
  "HTTP_PROXY",
  "NO_PROXY",
  "https_proxy",
  "http_proxy",
  "no_proxy",
  "npm_config_registry",
  "NPM_CONFIG_REGISTRY",
  "npm_config_cafile",
  "NPM_CONFIG_CAFILE",
  "npm_config_userconfig",
  "NPM_CONFIG_USERCONFIG",
] as const;
