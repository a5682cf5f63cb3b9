// The credentials for one pull (upstream: the kubelet's getPullSecretsForPod, MakeDockerKeyring
// and the plugin keyring): the pod's imagePullSecrets first, then the credential-provider
// plugins, each matched to the image repository. The kubelet does not read the pod's service
// account: the ServiceAccount admission plugin copies its imagePullSecrets into the pod spec.

import type { Pod } from '../api/types.js';
import type { Logger } from '../util/log.js';
import { errorMessage } from '../util/errors.js';
import { addPullSecret, CredentialError, DockerKeyring, type PullSecret, type TrackedAuth } from './keyring.js';
import type { PluginProvider } from './plugin.js';

export { CredentialError, DockerKeyring, addPullSecret, urlsMatch, type TrackedAuth } from './keyring.js';
export { PluginProvider, execPlugin, loadCredentialProviderConfig } from './plugin.js';

/** Where pull secrets are read (the kubelet's object source: API server, or standalone's refusal). */
export interface PullSecretSource {
  getSecret(namespace: string, name: string): Promise<PullSecret>;
}

/** What a pull gets: the credentials to try in order, and what went wrong finding them. */
export interface PullCredentialsResult {
  creds: TrackedAuth[];
  /** Plugin failures and unreadable secrets (each names the plugin or secret). */
  problems: string[];
}

/**
 * The repository an image pulls from, normalized as docker's reference parser does
 * (`busybox:1` → `docker.io/library/busybox`), without tag or digest.
 */
export function normalizeRepository(image: string): string {
  let name = image;
  const at = name.indexOf('@');
  if (at !== -1) name = name.slice(0, at);
  const lastSlash = name.lastIndexOf('/');
  const colon = name.lastIndexOf(':');
  if (colon > lastSlash) name = name.slice(0, colon);
  const slash = name.indexOf('/');
  const first = slash === -1 ? '' : name.slice(0, slash);
  let domain: string;
  let path: string;
  if (slash === -1 || (!/[.:]/.test(first) && first !== 'localhost' && first.toLowerCase() === first)) {
    domain = 'docker.io';
    path = name;
  } else {
    domain = first;
    path = name.slice(slash + 1);
  }
  if (domain === 'index.docker.io') domain = 'docker.io';
  if (domain === 'docker.io' && !path.includes('/')) path = `library/${path}`;
  return `${domain}/${path}`;
}

export interface PullCredentialsOptions {
  /** Undefined: no pull secrets are read (none named ever match). */
  secrets?: PullSecretSource;
  providers?: PluginProvider[];
  log: Logger;
  /** upstream's FailedToRetrieveImagePullSecret Warning event. */
  onSecretsMissing?: (pod: Pod, message: string) => void;
}

export class PullCredentials {
  constructor(private readonly o: PullCredentialsOptions) {}

  /** Where FailedToRetrieveImagePullSecret goes (the kubelet's event recorder, known after construction). */
  onSecretsMissing(fn: (pod: Pod, message: string) => void): void {
    this.o.onSecretsMissing = fn;
  }

  get hasProviders(): boolean {
    return (this.o.providers?.length ?? 0) > 0;
  }

  /** The pod's pull secrets that could be read (an unreadable one is logged and skipped, as upstream). */
  async podSecrets(pod: Pod): Promise<{ secrets: PullSecret[]; failed: string[] }> {
    const refs = ((pod.spec as { imagePullSecrets?: { name?: string }[] }).imagePullSecrets ?? []);
    const ns = pod.metadata.namespace ?? 'default';
    const secrets: PullSecret[] = [];
    const failed: string[] = [];
    for (const ref of refs) {
      const name = ref?.name;
      if (!name) continue;
      try {
        if (!this.o.secrets) throw new CredentialError('no secret source (standalone: pull secrets cannot be read)');
        secrets.push(await this.o.secrets.getSecret(ns, name));
      } catch (err) {
        this.o.log.info('Unable to retrieve pull secret, the image pull may not succeed.', { pod: `${ns}/${pod.metadata.name}`, secret: `${ns}/${name}`, err: errorMessage(err) });
        failed.push(name);
      }
    }
    if (failed.length > 0) {
      this.o.onSecretsMissing?.(pod, `Unable to retrieve some image pull secrets (${failed.join(', ')}); attempting to pull the image may not succeed.`);
    }
    return { secrets, failed };
  }

  /** The credentials to try for the pod's image, secrets first then plugins. Throws CredentialError for a secret that does not decode. */
  async lookup(pod: Pod, image: string): Promise<PullCredentialsResult> {
    const repo = normalizeRepository(image);
    const problems: string[] = [];
    const fromSecrets = new DockerKeyring();
    const { secrets, failed } = await this.podSecrets(pod);
    for (const name of failed) problems.push(`image pull secret "${name}" could not be read`);
    for (const s of secrets) addPullSecret(fromSecrets, s);
    const fromPlugins = new DockerKeyring();
    for (const p of this.o.providers ?? []) {
      try {
        fromPlugins.add(await p.provide(repo), `plugin ${p.provider.name}`);
      } catch (err) {
        const msg = errorMessage(err);
        this.o.log.error('Failed getting credential from external registry credential provider', { plugin: p.provider.name, image: repo, err: msg });
        problems.push(msg);
      }
    }
    return { creds: [...fromSecrets.lookup(repo), ...fromPlugins.lookup(repo)], problems };
  }
}
