// The prober's vocabulary (upstream: pkg/probe and prober/results): what a probe run answers,
// and the request a probe kind needs once the pod's fields are resolved (host, port, path).

/** upstream probeType: the capitalised form is what events and metric labels carry. */
export type ProbeType = 'Liveness' | 'Readiness' | 'Startup';

/** upstream probe.Result: warning counts as success and raises a ProbeWarning event. */
export type ProbeOutcomeResult = 'success' | 'warning' | 'failure' | 'unknown';

export interface ProbeOutcome {
  result: ProbeOutcomeResult;
  /** What the probe said (body, error, exec output), for the Unhealthy/ProbeWarning event. */
  output: string;
}

/** upstream results.Result: what the results managers hold per container. */
export type ProbeResult = 'Success' | 'Failure' | 'Unknown';

export interface HttpProbeRequest {
  kind: 'http';
  scheme: 'HTTP' | 'HTTPS';
  host: string;
  port: number;
  path: string;
  headers: [string, string][];
  timeoutMs: number;
}

export interface TcpProbeRequest {
  kind: 'tcp';
  host: string;
  port: number;
  timeoutMs: number;
}

export interface GrpcProbeRequest {
  kind: 'grpc';
  host: string;
  port: number;
  service: string;
  timeoutMs: number;
}

export interface ExecProbeRequest {
  kind: 'exec';
  /** CRI container id (no runtime prefix). */
  containerID: string;
  command: string[];
  timeoutMs: number;
}

/** The network kinds run in the worker pool; exec is a CRI call and stays on the main thread. */
export type NetworkProbeRequest = HttpProbeRequest | TcpProbeRequest | GrpcProbeRequest;
export type ProbeRequest = NetworkProbeRequest | ExecProbeRequest;

/** Runs one probe; never rejects (errors come back as `unknown` with the error as output). */
export interface ProbeRunner {
  run(req: ProbeRequest): Promise<ProbeOutcome>;
  close(): Promise<void>;
}
