// Node status fields of recent upstream releases that kubelet-ts's base setters do not cover:
//   - status.features (upstream NodeFeatures setter, SupplementalGroupsPolicy gate, beta and on
//     in 1.33): set from the runtime's CRI RuntimeStatus features; a runtime that sends none
//     (containerd 1.6) leaves the field out, as upstream.
//   - status.nodeInfo.swap (upstream MachineInfo setter, NodeSwap gate): {capacity: SwapTotal of
//     /proc/meminfo in bytes}, 0 on a node without swap.
//   - --cloud-provider=external (upstream NodeAddress setter, 1.29+): the node IPs given with
//     --node-ip go to the alpha.kubernetes.io/provided-node-ip annotation for the cloud
//     controller; addresses the cloud controller set are left alone; without --node-ip no
//     address is set at all (the cloud controller sets them). The registration taint
//     node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule is added in registration.ts.

import type { NodeAddress } from './types.js';
import type { Node } from './types.js';

export const TAINT_EXTERNAL_CLOUD_PROVIDER = 'node.cloudprovider.kubernetes.io/uninitialized';
export const ANNOTATION_PROVIDED_NODE_IP = 'alpha.kubernetes.io/provided-node-ip';

/**
 * Whether kubelet-ts hands a pod's supplementalGroupsPolicy to the runtime. It does not: its CRI
 * messages carry no supplemental_groups_policy field, and admission refuses a pod asking for
 * Strict. So even a runtime that supports the policy makes a node that does not: reporting true
 * would bring the scheduler Strict pods this node refuses.
 */
export const PASSES_SUPPLEMENTAL_GROUPS_POLICY = false;

/** status.features from the runtime's features (undefined/null: the runtime sent none; the field is left out). */
export function setNodeFeatures(node: Node, runtime: { supplementalGroupsPolicy: boolean } | null | undefined, gateEnabled = true): void {
  if (!gateEnabled) return;
  const status = (node.status ??= {});
  if (!runtime) {
    delete status.features;
    return;
  }
  status.features = { supplementalGroupsPolicy: runtime.supplementalGroupsPolicy && PASSES_SUPPLEMENTAL_GROUPS_POLICY };
}

/** status.nodeInfo.swap: the machine's swap capacity in bytes (NodeSwap gate). */
export function setSwapStatus(node: Node, swapCapacityBytes: number | undefined, gateEnabled = true): void {
  if (!gateEnabled || swapCapacityBytes === undefined) return;
  const info = ((node.status ??= {}).nodeInfo ??= {});
  (info as Record<string, unknown>).swap = { capacity: swapCapacityBytes };
}

/** SwapTotal of /proc/meminfo in bytes (0 when the line is missing, as cadvisor). */
export function swapTotalFromMeminfo(text: string | undefined): number {
  const m = /^SwapTotal:\s+(\d+)\s*kB/m.exec(text ?? '');
  return m ? Number(m[1]) * 1024 : 0;
}

const specified = (ip: string | undefined): ip is string => ip !== undefined && ip !== '' && ip !== '0.0.0.0' && ip !== '::';

/**
 * The external cloud provider's part of upstream's NodeAddress setter, run before the addresses
 * are computed: the provided-node-ip annotation is set from --node-ip (or removed when it no
 * longer applies). Returns true when the kubelet must leave status.addresses as they are.
 */
export function externalCloudProviderAddresses(node: Node, o: { externalCloudProvider: boolean; nodeIPs: readonly string[] }): boolean {
  const [primary, secondary] = o.nodeIPs;
  const nodeIPSpecified = specified(primary);
  if (o.externalCloudProvider && nodeIPSpecified) {
    const annotations = (node.metadata.annotations ??= {});
    annotations[ANNOTATION_PROVIDED_NODE_IP] = specified(secondary) ? `${primary},${secondary}` : primary;
  } else if (node.metadata.annotations) {
    delete node.metadata.annotations[ANNOTATION_PROVIDED_NODE_IP];
  }
  if (!o.externalCloudProvider) return false;
  // the cloud controller's addresses win; without --node-ip the kubelet sets none and waits for them
  const existing: NodeAddress[] = node.status?.addresses ?? [];
  return existing.length > 0 || !nodeIPSpecified;
}
