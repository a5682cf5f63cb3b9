// kubelet command-line flags, and loading the whole configuration (file + flags).
//
// As upstream: flags that map to KubeletConfiguration fields override the file, but
// only when given on the command line (their defaults never override the file);
// feature gates from flags are merged over the file's; without --config the built-in
// defaults plus upstream's legacy command-line defaults apply (see applyLegacyDefaults).
// Syntax follows pflag: --flag=value, --flag value, booleans as --flag or --flag=false
// (a bare boolean never consumes the next argument), shorthands -v 4, -v=4, -v4, -h.

import { isIP } from 'node:net';

import { DurationError, parseDuration } from './duration.js';
import { ConfigError } from './errors.js';
import { KNOWN_FEATURE_GATES, unrecognizedFeatureGate } from './feature-gates.js';
import type { KubeletConfig } from './kubelet-config.js';
import { FIELD_SUPPORT, FLAG_SUPPORT, notImplementedMessage } from './schema.js';
import { CIPHER_SUITES, INSECURE_CIPHER_SUITE_NAMES, SECURE_CIPHER_SUITE_NAMES } from './tls-names.js';
import { CONFIG_FLAG_DEPRECATION, parseFlagValue, UPSTREAM_FLAG_SPECS } from './upstream-flags.js';
import { parseVersionFlag } from '../version.js';

/** Settings that only exist as flags (not KubeletConfiguration fields). */
export interface KubeletFlags {
  /** --config: path of the KubeletConfiguration file, undefined = built-in defaults. */
  configFile?: string;
  /** --kubeconfig: API server credentials; undefined = standalone mode (no API server). */
  kubeconfig?: string;
  /** --bootstrap-kubeconfig: credentials to get a client certificate with when --kubeconfig is missing or unusable. */
  bootstrapKubeconfig?: string;
  /** --root-dir. Default /var/lib/kubelet. */
  rootDir: string;
  /** --cert-dir: where the self-signed serving certificate goes; undefined = <rootDir>/pki. */
  certDirectory?: string;
  /** --hostname-override; undefined = the machine's hostname. */
  hostnameOverride?: string;
  /** --node-ip: one IP, or two (IPv4 and IPv6) for dual-stack; [] = auto-detect. */
  nodeIP: string[];
  /** --cloud-provider: '' (none) or 'external' (a cloud controller manager owns addresses and initializes the node). */
  cloudProvider?: string;
  /** --node-labels: labels to add when registering the node. */
  nodeLabels?: Record<string, string>;
  /** --image-credential-provider-config: the CredentialProviderConfig file; undefined = no plugins. */
  imageCredentialProviderConfig?: string;
  /** --image-credential-provider-bin-dir: where the credential-provider plugins' executables are. */
  imageCredentialProviderBinDir?: string;
  /** -v / --v: log verbosity. Default 0. */
  verbosity: number;
  /** -h / --help was given: print usage() and exit. */
  help: boolean;
  /** --version (`true` or `raw`): print the version and exit; --version=vX.Y.Z sets the reported version. */
  version?: string;
  /**
   * upstream's deprecated container GC flags (--minimum-container-ttl-duration,
   * --maximum-dead-containers-per-container, --maximum-dead-containers); undefined = defaults.
   */
  containerGCPolicy?: { minAgeMs: number; maxPerPodContainer: number; maxContainers: number };
  /** --pod-infra-container-image (deprecated): an image image GC keeps; undefined = the runtime's sandbox image. */
  podInfraContainerImage?: string;
}

export type FlagKind =
  | 'string' | 'strings' | 'bool' | 'int' | 'int64' | 'duration' | 'featureGates'
  // key=value pairs (pflag mapStringString: the first use replaces the default, repeats merge)
  | 'map'
  // key<value pairs (upstream's LangleSeparatedMapStringString, for eviction thresholds)
  | 'langleMap'
  // key=value:Effect,... (upstream's RegisterWithTaintsVar)
  | 'taints'
  // name:value,... (upstream's ColonSeparatedMultimapStringString)
  | 'headers'
  // an optional value: --version, --version=raw, --version=v1.34.0
  | 'version';

/** A KubeletConfig field, or a dotted path into one of its structs (authentication, authorization). */
export type ConfigPath =
  | keyof KubeletConfig
  | 'authentication.anonymous.enabled'
  | 'authentication.webhook.enabled'
  | 'authentication.webhook.cacheTTL'
  | 'authentication.x509.clientCAFile'
  | 'authorization.mode'
  | 'authorization.webhook.cacheAuthorizedTTL'
  | 'authorization.webhook.cacheUnauthorizedTTL';

/**
 * Config-field values given on the command line, by field (dotted for a nested one:
 * `authentication.anonymous.enabled`); feature gates as a map.
 */
export type FlagOverrides = Partial<KubeletConfig> & { [path: string]: unknown };

export interface FlagSpec {
  name: string;
  short?: string;
  kind: FlagKind;
  /** The KubeletConfig field the flag overrides, or a KubeletFlags field. */
  configField?: ConfigPath;
  /**
   * An upstream KubeletConfiguration field kubelet-ts does not model (nor act on): the flag is
   * accepted and, when given with `warnUnless` other than its value, reported as not implemented.
   */
  unmodeledField?: string;
  warnUnless?: boolean;
  flagField?: keyof KubeletFlags;
  /** Shown in usage(). */
  defaultText?: string;
  help: string;
  /** kubelet-ts's own flags and the few upstream keeps undeprecated. */
  notDeprecated?: boolean;
  /** upstream's own deprecation message (pflag MarkDeprecated), instead of the config-file one. */
  deprecated?: string;
  /**
   * Accepted and not acted on: reported at start-up as not implemented when given with a value
   * other than this (upstream's default, as the flag prints it).
   */
  notImplementedUnless?: string;
  /** The value a bare flag takes (pflag NoOptDefVal), for kinds that are not bool. */
  noOptValue?: string;
}

const KUBELET_TS_FLAG_SPECS: readonly FlagSpec[] = [
  { name: 'config', kind: 'string', flagField: 'configFile', notDeprecated: true,
    help: 'The kubelet loads its initial configuration from this file (a KubeletConfiguration, kubelet.config.k8s.io/v1beta1). Relative paths start at the current directory. Omit it to use the built-in defaults. Flags override the file.' },
  { name: 'kubeconfig', kind: 'string', flagField: 'kubeconfig', notDeprecated: true,
    help: 'Path to a kubeconfig file, specifying how to connect to the API server. Providing --kubeconfig enables API server mode (node registration, lease, node status, events); omitting it runs standalone (static pods only).' },
  { name: 'bootstrap-kubeconfig', kind: 'string', flagField: 'bootstrapKubeconfig', notDeprecated: true,
    help: 'Path to a kubeconfig file that will be used to get client certificate for kubelet. If the file specified by --kubeconfig does not exist, the bootstrap kubeconfig is used to request a client certificate from the API server. On success, a kubeconfig file referencing the generated client certificate and key is written to the path specified by --kubeconfig. The client certificate and key file will be stored in the directory pointed by --cert-dir.' },
  { name: 'node-labels', kind: 'string', flagField: 'nodeLabels', notDeprecated: true,
    help: 'Labels to add when registering the node in the cluster. Labels must be key=value pairs separated by \',\'.' },
  { name: 'root-dir', kind: 'string', flagField: 'rootDir', defaultText: '/var/lib/kubelet', notDeprecated: true,
    help: 'Directory path for managing kubelet files (volume mounts, etc).' },
  { name: 'cert-dir', kind: 'string', flagField: 'certDirectory', defaultText: '/var/lib/kubelet/pki', notDeprecated: true,
    help: 'The directory where the TLS certs are located. If --tls-cert-file and --tls-private-key-file are provided, this flag will be ignored.' },
  { name: 'hostname-override', kind: 'string', flagField: 'hostnameOverride', notDeprecated: true,
    help: 'If non-empty, use this string as identification instead of the actual hostname.' },
  { name: 'node-ip', kind: 'string', flagField: 'nodeIP', notDeprecated: true,
    help: 'IP address (or comma-separated dual-stack IP addresses) of the node. If unset, the node\'s default IPv4 address is used, or its default IPv6 address if it has none.' },
  { name: 'cloud-provider', kind: 'string', flagField: 'cloudProvider', notDeprecated: true,
    help: 'The provider for cloud services. Set to empty string for running with no cloud provider. Set to \'external\' for running with an external cloud provider (the only one there is: in-tree providers were removed).' },
  { name: 'image-credential-provider-config', kind: 'string', flagField: 'imageCredentialProviderConfig', notDeprecated: true,
    help: 'The path to the credential provider plugin config file (a CredentialProviderConfig, kubelet.config.k8s.io/v1).' },
  { name: 'image-credential-provider-bin-dir', kind: 'string', flagField: 'imageCredentialProviderBinDir', notDeprecated: true,
    help: 'The path to the directory where credential provider plugin binaries are located.' },
  { name: 'v', short: 'v', kind: 'int', flagField: 'verbosity', defaultText: '0', notDeprecated: true,
    help: 'Number for the log level verbosity.' },
  { name: 'help', short: 'h', kind: 'bool', flagField: 'help', notDeprecated: true, help: 'Help for kubelet-ts.' },
  { name: 'container-runtime-endpoint', kind: 'string', configField: 'containerRuntimeEndpoint',
    defaultText: 'unix:///run/containerd/containerd.sock', help: 'The endpoint of the remote runtime service (CRI).' },
  { name: 'image-service-endpoint', kind: 'string', configField: 'imageServiceEndpoint',
    help: 'The endpoint of the remote image service. If not specified, the same as --container-runtime-endpoint.' },
  { name: 'pod-manifest-path', kind: 'string', configField: 'staticPodPath',
    help: 'Path to the directory containing static pod files to run, or the path to a single static pod file. Files starting with dots are ignored.' },
  { name: 'manifest-url', kind: 'string', configField: 'staticPodURL', help: 'URL for accessing additional Pod specifications to run.' },
  { name: 'address', kind: 'string', configField: 'address', defaultText: '0.0.0.0',
    help: 'The IP address for the Kubelet to serve on (set to \'0.0.0.0\' or \'::\' for listening on all interfaces and IP families).' },
  { name: 'anonymous-auth', kind: 'bool', configField: 'authentication.anonymous.enabled', defaultText: 'true without --config, else false',
    help: 'Enables anonymous requests to the Kubelet server. Requests that are not rejected by another authentication method are treated as anonymous requests. Anonymous requests have a username of system:anonymous, and a group name of system:unauthenticated.' },
  { name: 'authentication-token-webhook', kind: 'bool', configField: 'authentication.webhook.enabled', defaultText: 'false without --config, else true',
    help: 'Use the TokenReview API to determine authentication for bearer tokens.' },
  { name: 'authentication-token-webhook-cache-ttl', kind: 'duration', configField: 'authentication.webhook.cacheTTL', defaultText: '2m0s',
    help: 'The duration to cache responses from the webhook token authenticator.' },
  { name: 'authorization-mode', kind: 'string', configField: 'authorization.mode', defaultText: '"AlwaysAllow" without --config, else "Webhook"',
    help: 'Authorization mode for Kubelet server. Valid options are AlwaysAllow or Webhook. Webhook mode uses the SubjectAccessReview API to determine authorization.' },
  { name: 'authorization-webhook-cache-authorized-ttl', kind: 'duration', configField: 'authorization.webhook.cacheAuthorizedTTL', defaultText: '5m0s',
    help: 'The duration to cache \'authorized\' responses from the webhook authorizer.' },
  { name: 'authorization-webhook-cache-unauthorized-ttl', kind: 'duration', configField: 'authorization.webhook.cacheUnauthorizedTTL', defaultText: '30s',
    help: 'The duration to cache \'unauthorized\' responses from the webhook authorizer.' },
  { name: 'client-ca-file', kind: 'string', configField: 'authentication.x509.clientCAFile',
    help: 'If set, any request presenting a client certificate signed by one of the authorities in the client-ca-file is authenticated with an identity corresponding to the CommonName of the client certificate.' },
  { name: 'tls-cipher-suites', kind: 'strings', configField: 'tlsCipherSuites',
    help: `Comma-separated list of cipher suites for the server. If omitted, the default Go cipher suites will be used.\nPreferred values: ${SECURE_CIPHER_SUITE_NAMES.join(', ')}.\nInsecure values: ${INSECURE_CIPHER_SUITE_NAMES.join(', ')}.` },
  { name: 'streaming-connection-idle-timeout', kind: 'duration', configField: 'streamingConnectionIdleTimeout', defaultText: '4h0m0s',
    help: 'Maximum time a streaming connection can be idle before the connection is automatically closed. 0 indicates no timeout. Example: \'5m\'.' },
  { name: 'event-qps', kind: 'int', configField: 'eventRecordQPS', defaultText: '50',
    help: 'QPS to limit event creations. The number must be >= 0. If 0, event creations are not limited.' },
  { name: 'event-burst', kind: 'int', configField: 'eventBurst', defaultText: '100',
    help: 'Maximum size of a bursty event records, temporarily allows event records to burst to this number, while still not exceeding event-qps. The number must be >= 0. If 0 will use default burst (100).' },
  { name: 'pod-max-pids', kind: 'int64', configField: 'podPidsLimit', defaultText: '-1',
    help: 'Set the maximum number of processes per pod. If -1, the kubelet defaults to the node allocatable pid capacity.' },
  { name: 'protect-kernel-defaults', kind: 'bool', configField: 'protectKernelDefaults',
    help: 'Default kubelet behaviour for kernel tuning. If set, kubelet errors if any of kernel tunables is different than kubelet defaults.' },
  { name: 'rotate-certificates', kind: 'bool', configField: 'rotateCertificates', deprecated: CONFIG_FLAG_DEPRECATION,
    help: 'Auto rotate the kubelet client certificates by requesting new certificates from the kube-apiserver when the certificate expiration approaches.' },
  { name: 'make-iptables-util-chains', kind: 'bool', unmodeledField: 'makeIPTablesUtilChains', notImplementedUnless: 'false', deprecated: CONFIG_FLAG_DEPRECATION, defaultText: 'true',
    help: 'If true, kubelet will ensure iptables utility rules are present on host. (NOT IMPLEMENTED by kubelet-ts: it makes no iptables utility chains; true is reported at start-up and ignored)' },
  { name: 'tls-cert-file', kind: 'string', configField: 'tlsCertFile',
    help: 'File containing x509 Certificate used for serving HTTPS (with intermediate certs, if any, concatenated after server cert). If not given, a self-signed certificate and key are generated in --cert-dir.' },
  { name: 'tls-private-key-file', kind: 'string', configField: 'tlsPrivateKeyFile', help: 'File containing x509 private key matching --tls-cert-file.' },
  { name: 'tls-min-version', kind: 'string', configField: 'tlsMinVersion',
    help: 'Minimum TLS version supported. Possible values: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13.' },
  { name: 'port', kind: 'int', configField: 'port', defaultText: '10250', help: 'The port for the Kubelet to serve on.' },
  { name: 'read-only-port', kind: 'int', configField: 'readOnlyPort', defaultText: '10255 without --config, else 0',
    help: 'The read-only port for the kubelet to serve on with no authentication/authorization (set to 0 to disable).' },
  { name: 'healthz-port', kind: 'int', configField: 'healthzPort', defaultText: '10248',
    help: 'The port of the localhost healthz endpoint (set to 0 to disable).' },
  { name: 'healthz-bind-address', kind: 'string', configField: 'healthzBindAddress', defaultText: '127.0.0.1',
    help: 'The IP address for the healthz server to serve on (set to 0.0.0.0 or :: for listening on all interfaces and IP families).' },
  { name: 'cgroup-root', kind: 'string', configField: 'cgroupRoot',
    help: 'Optional root cgroup to use for pods. This is handled by the container runtime on a best effort basis.' },
  { name: 'cgroup-driver', kind: 'string', configField: 'cgroupDriver', defaultText: 'cgroupfs',
    help: 'Driver that the kubelet uses to manipulate cgroups on the host. Possible values: \'cgroupfs\', \'systemd\'' },
  { name: 'max-pods', kind: 'int', configField: 'maxPods', defaultText: '110', help: 'Number of Pods that can run on this kubelet.' },
  { name: 'sync-frequency', kind: 'duration', configField: 'syncFrequency', defaultText: '1m0s',
    help: 'Max period between synchronizing running containers and config.' },
  { name: 'file-check-frequency', kind: 'duration', configField: 'fileCheckFrequency', defaultText: '20s',
    help: 'Duration between checking config files for new data.' },
  { name: 'http-check-frequency', kind: 'duration', configField: 'httpCheckFrequency', defaultText: '20s',
    help: 'Duration between checking http for new data.' },
  { name: 'runtime-request-timeout', kind: 'duration', configField: 'runtimeRequestTimeout', defaultText: '2m0s',
    help: 'Timeout of all runtime requests except long running requests - pull, logs, exec and attach.' },
  { name: 'fail-swap-on', kind: 'bool', configField: 'failSwapOn', defaultText: 'true',
    help: 'Makes the kubelet fail to start if swap is enabled on the node.' },
  { name: 'feature-gates', kind: 'featureGates', configField: 'featureGates',
    help: 'A set of key=value pairs that describe feature gates for alpha/experimental features, e.g. EventedPLEG=true. kubelet-ts acts on EventedPLEG; other upstream gates are reported as not implemented; an unknown gate is an error.' },
  { name: 'allowed-unsafe-sysctls', kind: 'strings', configField: 'allowedUnsafeSysctls',
    help: "Comma-separated allowlist of unsafe sysctls or unsafe sysctl patterns (ending in *). Use these at your own risk." },
  { name: 'seccomp-default', kind: 'bool', configField: 'seccompDefault', defaultText: 'false', notDeprecated: true,
    help: 'Enable the use of `RuntimeDefault` as the default seccomp profile for all workloads.' },
  { name: 'stats-backend', kind: 'string', configField: 'statsBackend', defaultText: 'native', notDeprecated: true,
    help: 'kubelet-ts: where cgroup statistics come from: native (C++ addon), fs (pure TypeScript), cri (the runtime).' },
  { name: 'oom-watcher', kind: 'string', configField: 'oomWatcher', defaultText: 'auto', notDeprecated: true,
    help: 'kubelet-ts: how OOM kills are observed: auto, ebpf, cgroup (inotify/eventfd), kmsg, off.' },
];

const FLAG_SPECS: readonly FlagSpec[] = [...KUBELET_TS_FLAG_SPECS, ...UPSTREAM_FLAG_SPECS];

const BY_NAME: ReadonlyMap<string, FlagSpec> = new Map(FLAG_SPECS.map((s) => [s.name, s]));
const BY_SHORT: ReadonlyMap<string, FlagSpec> = new Map(
  FLAG_SPECS.filter((s) => s.short !== undefined).map((s) => [s.short!, s]),
);

// Upstream marks every flag that maps to a KubeletConfiguration field deprecated.
const DEPRECATION = CONFIG_FLAG_DEPRECATION;

/** Flag values as given on the command line, by flag name (last one wins, gates merge). */
export interface ParsedFlags {
  flags: KubeletFlags;
  /** Config-field overrides given on the command line. */
  overrides: FlagOverrides;
  warnings: string[];
}

function flagError(name: string, detail: string): ConfigError {
  return new ConfigError(name, detail);
}

const LABEL_NAME = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

/** --node-labels: `k=v,k2=v2`, each a valid label key and value. */
function parseNodeLabels(display: string, value: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of value.split(',')) {
    const item = raw.trim();
    if (item === '') continue;
    const eq = item.indexOf('=');
    if (eq <= 0) throw flagError(display, `invalid argument ${JSON.stringify(value)}: ${JSON.stringify(item)} is not key=value`);
    const k = item.slice(0, eq).trim();
    const v = item.slice(eq + 1).trim();
    if (!LABEL_NAME.test(k) || k.length > 316) throw flagError(display, `invalid argument ${JSON.stringify(value)}: ${JSON.stringify(k)} is not a valid label key`);
    if (!LABEL_VALUE.test(v)) throw flagError(display, `invalid argument ${JSON.stringify(value)}: ${JSON.stringify(v)} is not a valid label value`);
    Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** Go's strconv.ParseBool. */
function parseGoBool(s: string): boolean | undefined {
  if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(s)) return true;
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(s)) return false;
  return undefined;
}

function parseIntFlag(display: string, value: string, bits: 32 | 64 = 32): number {
  if (!/^[+-]?\d+$/.test(value)) {
    throw flagError(display, `invalid argument ${JSON.stringify(value)}: expected an integer`);
  }
  const n = Number(value);
  if (bits === 32 && (n < -(2 ** 31) || n >= 2 ** 31)) throw flagError(display, `invalid argument ${JSON.stringify(value)}: out of range for int32`);
  if (bits === 64 && !Number.isSafeInteger(n)) throw flagError(display, `invalid argument ${JSON.stringify(value)}: out of range`);
  return n;
}

function parseFeatureGates(display: string, value: string, into: Record<string, boolean>): void {
  for (const raw of value.split(',')) {
    const item = raw.trim();
    if (item === '') continue;
    const eq = item.indexOf('=');
    if (eq <= 0) throw flagError(display, `missing bool value for ${JSON.stringify(item)} (expected key=value)`);
    const key = item.slice(0, eq).trim();
    if (!KNOWN_FEATURE_GATES.has(key)) {
      throw flagError(display, `invalid argument ${JSON.stringify(value)}: ${unrecognizedFeatureGate(key)}`);
    }
    const b = parseGoBool(item.slice(eq + 1).trim());
    if (b === undefined) throw flagError(display, `invalid value of ${item}: expected true or false`);
    into[key] = b;
  }
}

/**
 * Parses the command line (without node and the script: pass process.argv.slice(2)).
 * Throws ConfigError naming the flag on an unknown flag, a missing or bad value, or a
 * positional argument.
 */
export function parseKubeletFlags(argv: readonly string[]): ParsedFlags {
  const flags: KubeletFlags = { rootDir: '/var/lib/kubelet', nodeIP: [], verbosity: 0, help: false };
  const overrides: FlagOverrides = {};
  const warnings: string[] = [];
  const deprecatedSeen = new Set<string>();
  const unmodeled = new Map<FlagSpec, boolean>();
  const notImplemented = new Map<FlagSpec, string>();
  const mapsSeen = new Map<string, unknown>();

  const apply = (spec: FlagSpec, display: string, value: string): void => {
    // pflag prints a deprecated flag's warning once, when it is given
    const deprecation = spec.deprecated ?? (spec.configField !== undefined && !spec.notDeprecated ? DEPRECATION : undefined);
    if (deprecation !== undefined && !deprecatedSeen.has(spec.name)) {
      deprecatedSeen.add(spec.name);
      warnings.push(`Flag --${spec.name} has been deprecated, ${deprecation}`);
    }
    let v: unknown;
    switch (spec.kind) {
      case 'map':
      case 'langleMap':
      case 'taints':
      case 'headers': {
        const key = spec.configField ?? spec.name;
        v = parseFlagValue(spec.kind, display, value, (overrides as Record<string, unknown>)[key] ?? mapsSeen.get(spec.name));
        mapsSeen.set(spec.name, v);
        if (spec.kind === 'map' && spec.configField === 'evictionSoftGracePeriod') {
          const periods: Record<string, number> = {};
          for (const [k, d] of Object.entries(v as Record<string, string>)) {
            try {
              periods[k] = parseDuration(d);
            } catch (err) {
              if (err instanceof DurationError) throw flagError(display, `invalid argument ${JSON.stringify(value)}: ${k}: ${err.message}`);
              throw err;
            }
          }
          v = periods;
        }
        break;
      }
      case 'version':
        try {
          parseVersionFlag(value);
        } catch (err) {
          throw flagError(display, (err as Error).message);
        }
        v = value;
        break;
      case 'string':
        v = value;
        break;
      case 'strings': {
        // pflag's stringSlice: comma-separated, repeated flags append.
        const items = value.split(',').map((x) => x.trim()).filter((x) => x !== '');
        if (spec.configField === 'tlsCipherSuites') {
          for (const name of items) {
            if (!Object.hasOwn(CIPHER_SUITES, name)) throw flagError(display, `invalid argument ${JSON.stringify(value)}: cipher suite ${name} not supported or doesn't exist`);
          }
        }
        const prev = spec.configField !== undefined ? (overrides as Record<string, unknown>)[spec.configField] : undefined;
        v = [...(Array.isArray(prev) ? (prev as string[]) : []), ...items];
        break;
      }
      case 'bool': {
        const b = parseGoBool(value);
        if (b === undefined) throw flagError(display, `invalid argument ${JSON.stringify(value)}: expected true or false`);
        v = b;
        break;
      }
      case 'int':
        v = parseIntFlag(display, value);
        break;
      case 'int64':
        v = parseIntFlag(display, value, 64);
        break;
      case 'duration':
        try {
          v = parseDuration(value);
        } catch (err) {
          if (err instanceof DurationError) throw flagError(display, `invalid argument ${JSON.stringify(value)}: ${err.message}`);
          throw err;
        }
        break;
      case 'featureGates': {
        const gates = (overrides.featureGates ??= {});
        parseFeatureGates(display, value, gates);
        return;
      }
    }
    if (spec.notImplementedUnless !== undefined) {
      // accepted, its value checked, not acted on: named at start-up unless at upstream's default
      notImplemented.set(spec, value);
      return;
    }
    if (spec.unmodeledField !== undefined) {
      unmodeled.set(spec, v as boolean);
      return;
    }
    if (spec.flagField === 'containerGCPolicy') {
      const p = (flags.containerGCPolicy ??= { minAgeMs: 0, maxPerPodContainer: 1, maxContainers: -1 });
      if (spec.name === 'minimum-container-ttl-duration') p.minAgeMs = v as number;
      else if (spec.name === 'maximum-dead-containers-per-container') p.maxPerPodContainer = v as number;
      else p.maxContainers = v as number;
      return;
    }
    if (spec.configField !== undefined) {
      (overrides as Record<string, unknown>)[spec.configField] = v;
    } else if (spec.flagField === 'nodeIP') {
      const ips = String(v).split(',').map((s) => s.trim()).filter((s) => s !== '');
      for (const ip of ips) {
        if (isIP(ip) === 0) throw flagError(display, `invalid argument ${JSON.stringify(value)}: ${JSON.stringify(ip)} is not an IP address`);
      }
      if (ips.length > 2) throw flagError(display, `invalid argument ${JSON.stringify(value)}: at most two IPs (dual-stack) may be given`);
      flags.nodeIP = ips;
    } else if (spec.flagField === 'cloudProvider') {
      if (v !== '' && v !== 'external') throw flagError(display, `invalid argument ${JSON.stringify(value)}: only "external" (or "" for none) is supported; the in-tree cloud providers were removed`);
      flags.cloudProvider = String(v);
    } else if (spec.flagField === 'nodeLabels') {
      flags.nodeLabels = { ...flags.nodeLabels, ...parseNodeLabels(display, String(v)) };
    } else if (spec.flagField !== undefined) {
      (flags as unknown as Record<string, unknown>)[spec.flagField] = v;
    }
  };

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      if (i + 1 < argv.length) throw flagError('', `unknown command ${JSON.stringify(argv[i + 1])}`);
      break;
    }
    let spec: FlagSpec | undefined;
    let display: string;
    let inline: string | undefined;
    if (arg.startsWith('--')) {
      const body = arg.slice(2);
      const eq = body.indexOf('=');
      const name = eq === -1 ? body : body.slice(0, eq);
      inline = eq === -1 ? undefined : body.slice(eq + 1);
      display = `--${name}`;
      spec = BY_NAME.get(name);
      if (spec === undefined || name === '') throw flagError(display, 'unknown flag');
    } else if (arg.startsWith('-') && arg.length > 1) {
      const short = arg[1]!;
      display = `-${short}`;
      spec = BY_SHORT.get(short);
      if (spec === undefined) throw flagError(arg, `unknown shorthand flag ${JSON.stringify(short)} in ${arg}`);
      const rest = arg.slice(2);
      if (rest.startsWith('=')) inline = rest.slice(1);
      else if (rest !== '') {
        // pflag reads -v4 as -v 4; a boolean shorthand takes no glued value here.
        if (spec.kind === 'bool') throw flagError(arg, `unknown shorthand flag ${JSON.stringify(rest[0])} in ${arg}`);
        inline = rest;
      }
    } else {
      // The kubelet takes no positional arguments.
      throw flagError('', `unknown command ${JSON.stringify(arg)}`);
    }

    let value: string;
    if (inline !== undefined) value = inline;
    else if (spec.kind === 'bool') value = 'true';
    else if (spec.noOptValue !== undefined) value = spec.noOptValue;
    else {
      if (i + 1 >= argv.length) throw flagError(display, 'flag needs an argument');
      value = argv[++i]!;
    }
    apply(spec, display, value);
  }
  for (const [spec, v] of notImplemented) {
    if (v !== spec.notImplementedUnless) {
      warnings.push(notImplementedMessage(`flag --${spec.name}=${v}${spec.unmodeledField !== undefined ? ` (field ${spec.unmodeledField})` : ''}`));
    }
  }
  for (const [spec, v] of unmodeled) {
    if (spec.warnUnless === undefined || v !== spec.warnUnless) {
      warnings.push(notImplementedMessage(`flag --${spec.name}=${String(v)} (field ${spec.unmodeledField})`));
    }
  }
  return { flags, overrides, warnings };
}

/** Applies command-line overrides to a config: flags win, feature gates merge. */
export function applyFlagOverrides(c: KubeletConfig, overrides: FlagOverrides): void {
  for (const [key, value] of Object.entries(overrides)) {
    if (key === 'featureGates') {
      c.featureGates = { ...c.featureGates, ...(value as Record<string, boolean>) };
      continue;
    }
    const parts = key.split('.');
    let obj = c as unknown as Record<string, unknown>;
    for (const part of parts.slice(0, -1)) obj = obj[part] as Record<string, unknown>;
    obj[parts[parts.length - 1]!] = value;
  }
}

/** The --help text. */
export function usage(): string {
  const lines = ['Usage:', '  kubelet-ts [flags]', '', 'Flags:'];
  const heads = FLAG_SPECS.map((s) => {
    const type = s.kind === 'bool' ? '' : s.kind === 'featureGates' ? ' mapStringBool' : s.kind === 'map' || s.kind === 'langleMap' ? ' mapStringString' : s.kind === 'version' ? ' version[=true]' : ` ${s.kind}`;
    return `${s.short !== undefined ? `-${s.short}, ` : '    '}--${s.name}${type}`;
  });
  const width = Math.max(...heads.map((h) => h.length)) + 2;
  FLAG_SPECS.forEach((s, i) => {
    let text = s.help;
    if (s.defaultText !== undefined) text += ` (default ${s.defaultText})`;
    if (s.deprecated !== undefined) text += ` (DEPRECATED: ${s.deprecated})`;
    else if (s.configField !== undefined && !s.notDeprecated) text += ` (DEPRECATED: set ${String(s.configField)} in the --config file)`;
    if (s.notImplementedUnless !== undefined) text += ' (NOT IMPLEMENTED by kubelet-ts: a value other than the default is reported at start-up and ignored)';
    const notImplemented =
      (s.configField !== undefined && FIELD_SUPPORT[s.configField.split('.')[0] as keyof KubeletConfig] === 'not-implemented') ||
      (s.flagField !== undefined && FLAG_SUPPORT[s.flagField] === 'not-implemented');
    if (notImplemented && !text.includes('NOT IMPLEMENTED')) text += ' (NOT IMPLEMENTED by kubelet-ts yet: reported at start-up and ignored)';
    lines.push(`  ${heads[i]!.padEnd(width)}${text.replace(/\n/g, `\n${' '.repeat(width + 2)}`)}`);
  });
  lines.push('', 'The --config file is a KubeletConfiguration (kubelet.config.k8s.io/v1beta1) in YAML or JSON.');
  return `${lines.join('\n')}\n`;
}

/**
 * How kubelet-ts treats a command-line flag (without dashes), or undefined for one it does not
 * know: `deprecated` when it prints upstream's deprecation warning; `implemented` when kubelet-ts
 * acts on it (else it is reported at start-up as not implemented when set).
 */
export function classifyFlag(name: string): { deprecated: boolean; implemented: boolean } | undefined {
  const s = BY_NAME.get(name);
  if (s === undefined) return undefined;
  const deprecated = s.deprecated !== undefined || (s.configField !== undefined && !s.notDeprecated);
  const implemented =
    s.notImplementedUnless === undefined &&
    s.unmodeledField === undefined &&
    (s.configField === undefined || FIELD_SUPPORT[s.configField.split('.')[0] as keyof KubeletConfig] === 'implemented') &&
    (s.flagField === undefined || FLAG_SUPPORT[s.flagField] !== 'not-implemented');
  return { deprecated, implemented };
}

/** The long names of every flag kubelet-ts accepts. */
export function flagNames(): string[] {
  return FLAG_SPECS.map((s) => s.name);
}
