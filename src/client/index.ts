// The API server client, for the kubelet parts that talk to a cluster (not wired in yet:
// --kubeconfig is still reported as not implemented at start-up).

export { ApiStatusError, ApiTransportError, ExecCredentialError, KubeconfigError, isAlreadyExists, isApiStatus, isConflict, isGone, isNotFound, type ApiStatus } from './errors.js';
export { ExecCredentialProvider, type ExecCredential } from './exec-credential.js';
export { loadKubeconfig, parseKubeconfig, type ExecConfig, type RestConfig } from './kubeconfig.js';
export { DEFAULT_BURST, DEFAULT_QPS, TokenBucket } from './rate-limiter.js';
export { Reflector, type KubeObject, type ReflectorEvent, type ReflectorOptions } from './reflector.js';
export { RestClient, patchContentType, type PatchType, type RequestOptions, type RestClientOptions } from './rest.js';
