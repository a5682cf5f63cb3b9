// The field types of core/v1 Pod (k8s.io/api/core/v1 types.go), for the decode-time type check:
// every field kubelet-ts reads, and the neighbours a manifest commonly sets. Ranges here are
// the ones upstream's validation puts on the field (UIDs and GIDs, modes, probe counts);
// fields not listed pass through unchecked, as upstream's non-strict decoding ignores them.

import type { Fields, FieldType } from './typecheck.js';

const str = 'string' as const;
const bool = 'boolean' as const;
const int32 = 'int32' as const;
const int64 = 'int64' as const;
const nonNegative32: FieldType = { int: 'int32', min: 0 };
const nonNegative64: FieldType = { int: 'int64', min: 0 };
/** Linux user and group IDs (upstream IsValidUserID/IsValidGroupID). */
const unixID: FieldType = { int: 'int64', min: 0, max: 2147483647 };
/** File modes of projected files: 0..0777 (upstream validates the range). */
const fileMode: FieldType = { int: 'int32', min: 0, max: 0o777 };
const strings: FieldType = { list: str };
const stringMap: FieldType = { map: str };
const struct = (f: Fields): FieldType => ({ struct: f });
const list = (t: FieldType): FieldType => ({ list: t });

const localObjectReference = struct({ name: str });
const seLinuxOptions = struct({ user: str, role: str, type: str, level: str });
const windowsOptions = struct({ gmsaCredentialSpecName: str, gmsaCredentialSpec: str, runAsUserName: str, hostProcess: bool });
const profile = struct({ type: str, localhostProfile: str });
const keyToPath = struct({ key: str, path: str, mode: fileMode });
const objectFieldSelector = struct({ apiVersion: str, fieldPath: str });
const resourceFieldSelector = struct({ containerName: str, resource: str, divisor: 'quantity' });
const keySelector = struct({ name: str, key: str, optional: bool });
const downwardAPIFile = struct({ path: str, fieldRef: objectFieldSelector, resourceFieldRef: resourceFieldSelector, mode: fileMode });

export const ObjectMetaFields: Fields = {
  name: str,
  generateName: str,
  namespace: str,
  uid: str,
  resourceVersion: str,
  generation: int64,
  creationTimestamp: str,
  deletionTimestamp: str,
  deletionGracePeriodSeconds: nonNegative64,
  labels: stringMap,
  annotations: stringMap,
  ownerReferences: list(struct({ apiVersion: str, kind: str, name: str, uid: str, controller: bool, blockOwnerDeletion: bool })),
  finalizers: strings,
};

const resourceRequirements = struct({
  limits: { map: 'quantity' },
  requests: { map: 'quantity' },
  claims: list(struct({ name: str, request: str })),
});

const execAction = struct({ command: strings });
const httpGetAction = struct({
  path: str,
  port: 'intOrString',
  host: str,
  scheme: str,
  httpHeaders: list(struct({ name: str, value: str })),
});
const tcpSocketAction = struct({ port: 'intOrString', host: str });

const probe = struct({
  exec: execAction,
  httpGet: httpGetAction,
  tcpSocket: tcpSocketAction,
  grpc: struct({ port: int32, service: str }),
  initialDelaySeconds: nonNegative32,
  timeoutSeconds: nonNegative32,
  periodSeconds: nonNegative32,
  successThreshold: nonNegative32,
  failureThreshold: nonNegative32,
  terminationGracePeriodSeconds: int64,
});

const lifecycleHandler = struct({
  exec: execAction,
  httpGet: httpGetAction,
  tcpSocket: tcpSocketAction,
  sleep: struct({ seconds: nonNegative64 }),
});

export const SecurityContextFields: Fields = {
  capabilities: struct({ add: strings, drop: strings }),
  privileged: bool,
  seLinuxOptions,
  windowsOptions,
  runAsUser: unixID,
  runAsGroup: unixID,
  runAsNonRoot: bool,
  readOnlyRootFilesystem: bool,
  allowPrivilegeEscalation: bool,
  procMount: str,
  seccompProfile: profile,
  appArmorProfile: profile,
};

export const ContainerFields: Fields = {
  name: str,
  image: str,
  command: strings,
  args: strings,
  workingDir: str,
  ports: list(struct({ name: str, hostPort: int32, containerPort: int32, protocol: str, hostIP: str })),
  envFrom: list(struct({ prefix: str, configMapRef: struct({ name: str, optional: bool }), secretRef: struct({ name: str, optional: bool }) })),
  env: list(struct({
    name: str,
    value: str,
    valueFrom: struct({
      fieldRef: objectFieldSelector,
      resourceFieldRef: resourceFieldSelector,
      configMapKeyRef: keySelector,
      secretKeyRef: keySelector,
    }),
  })),
  resources: resourceRequirements,
  resizePolicy: list(struct({ resourceName: str, restartPolicy: str })),
  restartPolicy: str,
  volumeMounts: list(struct({
    name: str,
    readOnly: bool,
    recursiveReadOnly: str,
    mountPath: str,
    subPath: str,
    mountPropagation: str,
    subPathExpr: str,
  })),
  volumeDevices: list(struct({ name: str, devicePath: str })),
  livenessProbe: probe,
  readinessProbe: probe,
  startupProbe: probe,
  lifecycle: struct({ postStart: lifecycleHandler, preStop: lifecycleHandler, stopSignal: str }),
  terminationMessagePath: str,
  terminationMessagePolicy: str,
  imagePullPolicy: str,
  securityContext: struct(SecurityContextFields),
  stdin: bool,
  stdinOnce: bool,
  tty: bool,
};

const volume = struct({
  name: str,
  hostPath: struct({ path: str, type: str }),
  emptyDir: struct({ medium: str, sizeLimit: 'quantity' }),
  secret: struct({ secretName: str, items: list(keyToPath), defaultMode: fileMode, optional: bool }),
  configMap: struct({ name: str, items: list(keyToPath), defaultMode: fileMode, optional: bool }),
  downwardAPI: struct({ items: list(downwardAPIFile), defaultMode: fileMode }),
  projected: struct({
    sources: list(struct({
      secret: struct({ name: str, items: list(keyToPath), optional: bool }),
      configMap: struct({ name: str, items: list(keyToPath), optional: bool }),
      downwardAPI: struct({ items: list(downwardAPIFile) }),
      serviceAccountToken: struct({ audience: str, expirationSeconds: int64, path: str }),
    })),
    defaultMode: fileMode,
  }),
  persistentVolumeClaim: struct({ claimName: str, readOnly: bool }),
  nfs: struct({ server: str, path: str, readOnly: bool }),
  image: struct({ reference: str, pullPolicy: str }),
});

export const PodSecurityContextFields: Fields = {
  seLinuxOptions,
  windowsOptions,
  runAsUser: unixID,
  runAsGroup: unixID,
  runAsNonRoot: bool,
  supplementalGroups: list(unixID),
  supplementalGroupsPolicy: str,
  fsGroup: unixID,
  sysctls: list(struct({ name: str, value: str })),
  fsGroupChangePolicy: str,
  seccompProfile: profile,
  appArmorProfile: profile,
  seLinuxChangePolicy: str,
};

export const PodSpecFields: Fields = {
  volumes: list(volume),
  initContainers: list(struct(ContainerFields)),
  containers: list(struct(ContainerFields)),
  ephemeralContainers: list('object'),
  restartPolicy: str,
  terminationGracePeriodSeconds: nonNegative64,
  activeDeadlineSeconds: int64,
  dnsPolicy: str,
  nodeSelector: stringMap,
  serviceAccountName: str,
  serviceAccount: str,
  automountServiceAccountToken: bool,
  nodeName: str,
  hostNetwork: bool,
  hostPID: bool,
  hostIPC: bool,
  shareProcessNamespace: bool,
  securityContext: struct(PodSecurityContextFields),
  imagePullSecrets: list(localObjectReference),
  hostname: str,
  subdomain: str,
  affinity: 'object',
  schedulerName: str,
  tolerations: list(struct({ key: str, operator: str, value: str, effect: str, tolerationSeconds: int64 })),
  hostAliases: list(struct({ ip: str, hostnames: strings })),
  priorityClassName: str,
  priority: int32,
  dnsConfig: struct({ nameservers: strings, searches: strings, options: list(struct({ name: str, value: str })) }),
  readinessGates: list(struct({ conditionType: str })),
  runtimeClassName: str,
  enableServiceLinks: bool,
  preemptionPolicy: str,
  overhead: { map: 'quantity' },
  topologySpreadConstraints: list('object'),
  setHostnameAsFQDN: bool,
  os: struct({ name: str }),
  hostUsers: bool,
  schedulingGates: list(struct({ name: str })),
  resourceClaims: list('object'),
  resources: resourceRequirements,
};

export const PodFields: Fields = {
  apiVersion: str,
  kind: str,
  metadata: struct(ObjectMetaFields),
  spec: struct(PodSpecFields),
  // the kubelet writes status itself; a manifest's is replaced
  status: 'object',
};
