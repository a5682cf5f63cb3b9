// Pod DNS (upstream pkg/kubelet/network/dns): the sandbox's resolver config from the pod's
// dnsPolicy and dnsConfig, the kubelet's clusterDNS/clusterDomain and the host's resolv.conf,
// cut to the resolver's limits (3 nameservers, 32 search domains, a 2048-character search line,
// no domain over 253 characters) with the DNSConfigForming warning upstream records.

import { open, stat } from 'node:fs/promises';
import { isIPv6 } from 'node:net';
import type { Pod } from '../api/types.js';
import type { DNSConfig } from '../runtime/cri-types.js';
import { KubeletError } from '../util/errors.js';

export const MAX_DNS_NAMESERVERS = 3;
export const MAX_DNS_SEARCH_PATHS = 32;
export const MAX_DNS_SEARCH_LIST_CHARS = 2048;
const DNS1123_SUBDOMAIN_MAX_LENGTH = 253;
/** upstream maxResolvConfLength: a bigger resolver config is refused, not read. */
export const MAX_RESOLV_CONF_BYTES = 10 * 1024 * 1024;
/** upstream: how often the host resolv.conf is checked against the limits. */
export const CHECK_RESOLV_CONF_PERIOD_MS = 30_000;
const DEFAULT_DNS_OPTIONS = ['ndots:5'];

export class ResolvConfError extends KubeletError {
  constructor(readonly file: string, message: string, options?: { cause?: unknown }) {
    super('ERR_RESOLV_CONF', `${file}: ${message}`, options);
  }
}

export interface HostDNS {
  servers: string[];
  searches: string[];
  options: string[];
}

/** nameserver, search and options lines of a resolv.conf (upstream parseResolvConf). */
export function parseResolvConf(text: string): HostDNS {
  const out: HostDNS = { servers: [], searches: [], options: [] };
  for (let line of text.split('\n')) {
    const hash = line.search(/[#;]/);
    if (hash >= 0) line = line.slice(0, hash);
    const fields = line.trim().split(/\s+/).filter(Boolean);
    if (fields.length === 0) continue;
    if (fields[0] === 'nameserver' && fields.length >= 2) out.servers.push(fields[1]!);
    if (fields[0] === 'search') {
      // the last search line wins; a lone "." means none
      out.searches = fields.slice(1).filter((s) => s !== '.').map((s) => s.replace(/\.$/, ''));
    }
    if (fields[0] === 'options') out.options = mergeOptionStrings(out.options, fields.slice(1));
  }
  return out;
}

function omitDuplicates(list: readonly string[]): string[] {
  return [...new Set(list)];
}

function mergeOptionStrings(existing: readonly string[], more: readonly string[]): string[] {
  const m = new Map<string, string>();
  for (const o of [...existing, ...more]) {
    const i = o.indexOf(':');
    if (i >= 0) m.set(o.slice(0, i), o.slice(i + 1));
    else m.set(o, '');
  }
  return [...m].map(([k, v]) => (v ? `${k}:${v}` : k));
}

export type PodDNSType = 'cluster' | 'host' | 'none';

export interface DNSConfigurerOptions {
  clusterDNS: string[];
  clusterDomain: string;
  /** The resolv.conf host-DNS pods inherit; '' gives them the node's loopback resolver. */
  resolvConf: string;
  nodeIPs: () => string[];
  /** Records a Warning event about the pod (DNSConfigForming, MissingClusterDNS). */
  event?: (pod: Pod, reason: string, message: string) => void;
  readFile?: (path: string) => Promise<string>;
}

export class DNSConfigurer {
  /**
   * The host resolv.conf as last parsed, with the file's identity then (inode, size, mtime,
   * ctime): a sync whose stat matches reuses it instead of reading and parsing the file again
   * (1000 pods: ~17 reads a second). Only for the real file; an injected readFile is always called.
   */
  #hostCache?: { key: string; host: HostDNS };

  constructor(private readonly opts: DNSConfigurerOptions) {}

  /** upstream getPodDNSType. */
  podDNSType(pod: Pod): PodDNSType {
    const policy = pod.spec.dnsPolicy || 'ClusterFirst';
    const wantsCluster = policy === 'ClusterFirstWithHostNet' || (policy === 'ClusterFirst' && !pod.spec.hostNetwork);
    if (policy === 'None') return 'none';
    if (wantsCluster) {
      if (this.opts.clusterDNS.length === 0) {
        this.opts.event?.(pod, 'MissingClusterDNS', `pod: "${pod.metadata.name}_${pod.metadata.namespace}(${pod.metadata.uid})". kubelet does not have ClusterDNS IP configured and cannot create Pod using "${policy}" policy. Falling back to "Default" policy.`);
        return 'host';
      }
      return 'cluster';
    }
    return 'host';
  }

  private async hostDNS(): Promise<HostDNS> {
    if (!this.opts.resolvConf) return { servers: [], searches: [], options: [] };
    if (this.opts.readFile) return parseResolvConf(await this.readResolvConf());
    let key: string | undefined;
    try {
      const st = await stat(this.opts.resolvConf);
      key = `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
    } catch {
      // unreadable: the read below names the error
    }
    let cached = this.#hostCache;
    if (!cached || key === undefined || cached.key !== key) {
      const host = parseResolvConf(await this.readResolvConf());
      cached = { key: key ?? '', host };
      this.#hostCache = key === undefined ? undefined : cached;
    }
    // copies: callers build the pod's config from these lists
    const h = cached.host;
    return { servers: [...h.servers], searches: [...h.searches], options: [...h.options] };
  }

  /** Reads of the resolv.conf file made so far (tests: a stat-validated cache skips them). */
  get resolvConfReads(): number {
    return this.#reads;
  }
  #reads = 0;

  private async readResolvConf(): Promise<string> {
    const file = this.opts.resolvConf;
    const read = this.opts.readFile ?? readResolvConfFile;
    let text: string;
    this.#reads++;
    try {
      text = await read(file);
    } catch (err) {
      throw new ResolvConfError(file, `cannot read the resolver config: ${(err as Error).message}`, { cause: err });
    }
    if (Buffer.byteLength(text) > MAX_RESOLV_CONF_BYTES) throw new ResolvConfError(file, `the resolver config is larger than ${MAX_RESOLV_CONF_BYTES} bytes`);
    return text;
  }

  /**
   * upstream CheckLimitsForResolvConf: the host resolv.conf's search line against what is left
   * for it (3 of the 32 domains go to the cluster's when clusterDomain is set), its domains'
   * and its line's length. Returns the warning upstream records on the node, or undefined.
   */
  async checkLimitsForResolvConf(): Promise<string | undefined> {
    const file = this.opts.resolvConf;
    if (!file) return undefined;
    let searches: string[];
    try {
      searches = parseResolvConf(await this.readResolvConf()).searches;
    } catch (err) {
      return (err as Error).message;
    }
    const domainCountLimit = MAX_DNS_SEARCH_PATHS - (this.opts.clusterDomain ? 3 : 0);
    if (searches.length > domainCountLimit) return `Resolv.conf file '${file}' contains search line consisting of more than ${domainCountLimit} domains!`;
    if (searches.some((s) => s.length > DNS1123_SUBDOMAIN_MAX_LENGTH)) {
      return `Resolv.conf file '${file}' contains a search path which length is more than allowed ${DNS1123_SUBDOMAIN_MAX_LENGTH} chars!`;
    }
    if (searches.join(' ').length > MAX_DNS_SEARCH_LIST_CHARS) {
      return `Resolv.conf file '${file}' contains search line which length is more than allowed ${MAX_DNS_SEARCH_LIST_CHARS} chars!`;
    }
    return undefined;
  }

  /** The sandbox's DNSConfig (upstream GetPodDNS). */
  async podDNS(pod: Pod): Promise<DNSConfig> {
    const type = this.podDNSType(pod);
    const host = await this.hostDNS();
    let cfg: Required<DNSConfig>;
    switch (type) {
      case 'none':
        cfg = { servers: [], searches: [], options: [] };
        break;
      case 'cluster':
        cfg = { servers: [...this.opts.clusterDNS], searches: this.clusterFirstSearches(host.searches, pod), options: [...DEFAULT_DNS_OPTIONS] };
        break;
      default:
        cfg = { servers: host.servers, searches: host.searches, options: host.options };
        if (!this.opts.resolvConf) {
          // no resolv.conf: the node's own resolver, and no search
          const ips = this.opts.nodeIPs();
          cfg.servers = ips.length ? ips.map((ip) => (isIPv6(ip) ? '::1' : '127.0.0.1')) : ['127.0.0.1'];
          cfg.searches = ['.'];
        }
    }
    const extra = pod.spec.dnsConfig;
    if (extra) {
      cfg.servers = omitDuplicates([...cfg.servers, ...(extra.nameservers ?? [])]);
      cfg.searches = omitDuplicates([...cfg.searches, ...(extra.searches ?? [])]);
      cfg.options = mergeOptionStrings(cfg.options, (extra.options ?? []).map((o) => (o.value !== undefined && o.value !== null ? `${o.name}:${o.value}` : o.name)));
    }
    cfg.servers = this.fitNameservers(cfg.servers, pod);
    cfg.searches = this.fitSearches(cfg.searches, pod);
    return cfg;
  }

  private clusterFirstSearches(hostSearches: readonly string[], pod: Pod): string[] {
    const domain = this.opts.clusterDomain;
    if (!domain) return [...hostSearches];
    const ns = pod.metadata.namespace ?? '';
    return omitDuplicates([`${ns}.svc.${domain}`, `svc.${domain}`, domain, ...hostSearches]);
  }

  private fitNameservers(servers: string[], pod: Pod): string[] {
    if (servers.length <= MAX_DNS_NAMESERVERS) return servers;
    const kept = servers.slice(0, MAX_DNS_NAMESERVERS);
    this.opts.event?.(pod, 'DNSConfigForming', `Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: ${kept.join(' ')}`);
    return kept;
  }

  private fitSearches(searches: string[], pod: Pod): string[] {
    const { kept, exceeded } = fitSearchLimits(searches);
    if (exceeded) this.opts.event?.(pod, 'DNSConfigForming', `Search Line limits were exceeded, some search paths have been omitted, the applied search line is: ${kept.join(' ')}`);
    return kept;
  }
}

/** What one read of the resolver config asks for: a resolv.conf is a few hundred bytes. */
const RESOLV_CONF_READ_CHUNK = 4096;

/**
 * Reads at most MAX_RESOLV_CONF_BYTES + 1 bytes, so a huge file is refused without reading it
 * whole; in chunks as the file has them, never the cap up front (a zero-filled 10 MiB buffer
 * per pod sync was most of the kubelet's CPU and memory at rest with 1000 pods).
 */
export async function readResolvConfFile(path: string): Promise<string> {
  const fh = await open(path, 'r');
  try {
    const chunks: Buffer[] = [];
    let n = 0;
    while (n <= MAX_RESOLV_CONF_BYTES) {
      // doubling: a big file costs a few dozen reads on its way to the cap
      const buf = Buffer.allocUnsafe(Math.min(Math.max(RESOLV_CONF_READ_CHUNK, n), MAX_RESOLV_CONF_BYTES + 1 - n));
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      chunks.push(buf.subarray(0, bytesRead));
      n += bytesRead;
    }
    return Buffer.concat(chunks, n).toString('utf8');
  } finally {
    await fh.close();
  }
}

/** upstream formDNSSearchFitsLimits, without the event. */
export function fitSearchLimits(searches: readonly string[]): { kept: string[]; exceeded: boolean } {
  let exceeded = false;
  let kept = [...searches];
  if (kept.length > MAX_DNS_SEARCH_PATHS) {
    kept = kept.slice(0, MAX_DNS_SEARCH_PATHS);
    exceeded = true;
  }
  // glibc aborts on a search domain over 255 characters: drop them
  const short = kept.filter((s) => s.length <= DNS1123_SUBDOMAIN_MAX_LENGTH);
  if (short.length !== kept.length) exceeded = true;
  kept = short;
  const lineLen = kept.join(' ').length;
  if (lineLen > MAX_DNS_SEARCH_LIST_CHARS) {
    let cutNum = 0;
    let cutLen = 0;
    for (let i = kept.length - 1; i >= 0; i--) {
      cutLen += kept[i]!.length + 1;
      cutNum++;
      if (lineLen - cutLen <= MAX_DNS_SEARCH_LIST_CHARS) break;
    }
    kept = kept.slice(0, kept.length - cutNum);
    exceeded = true;
  }
  return { kept, exceeded };
}
