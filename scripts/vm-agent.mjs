#!/usr/bin/env node
// The command channel between this machine and the VM node of scripts/vm-node.sh.
// One file, no dependencies, both ends:
//   serve  (inside the VM, started by a systemd unit): runs commands it is sent, streaming
//          their stdout and stderr back and then their exit status; also forwards local
//          TCP ports (the test registries) to addresses qemu relays to this machine.
//   run    (on this machine): sends one command, copies its output to our stdout/stderr
//          and exits with its exit code.
//   ping   (on this machine): exit 0 once the agent answers (prints what it reports).
//   relay  (on this machine, spawned by qemu per guest connection): copies stdin/stdout
//          to and from HOST:PORT.
// Wire format: the client sends one JSON line {token, op, ...}; then both sides send
// frames of [type u8][length u32 BE][payload]: 0 stdin data, 5 stdin end (client);
// 1 stdout, 2 stderr, 3 exit ({code, signal} JSON), 4 agent error (server).

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { timingSafeEqual } from 'node:crypto';

const STDIN = 0, STDOUT = 1, STDERR = 2, EXIT = 3, ERROR = 4, STDIN_END = 5;
const MAX_REQUEST = 1 << 20;

function frame(type, payload) {
  const body = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const head = Buffer.alloc(5);
  head.writeUInt8(type, 0);
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}

/** Splits a byte stream into frames; calls onFrame(type, payload) for each. */
function frameReader(onFrame) {
  let buf = Buffer.alloc(0);
  return (chunk) => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    while (buf.length >= 5) {
      const len = buf.readUInt32BE(1);
      if (buf.length < 5 + len) break;
      onFrame(buf.readUInt8(0), buf.subarray(5, 5 + len));
      buf = buf.subarray(5 + len);
    }
  };
}

function parseArgs(argv) {
  const opts = { env: [], forward: [], rest: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--': opts.rest = argv.slice(i + 1); i = argv.length; break;
      case '--port': opts.port = Number(val()); break;
      case '--host': opts.host = val(); break;
      case '--token-file': opts.tokenFile = val(); break;
      case '--cwd': opts.cwd = val(); break;
      case '--env': case '-e': opts.env.push(val()); break;
      case '--timeout': opts.timeout = Number(val()); break;
      case '--forward': opts.forward.push(val()); break;
      case '--base-env-file': opts.baseEnvFile = val(); break;
      case '-i': case '--stdin': opts.stdin = true; break;
      default:
        if (a.startsWith('-')) fail(`unknown option ${a}`);
        opts.rest = argv.slice(i);
        i = argv.length;
    }
  }
  return opts;
}

function fail(msg, code = 2) {
  process.stderr.write(`vm-agent: ${msg}\n`);
  process.exit(code);
}

function readToken(file) {
  if (!file) fail('--token-file is required');
  const t = readFileSync(file, 'utf8').trim();
  if (t.length < 16) fail(`token in ${file} is too short`);
  return t;
}

// ---- server (in the VM) ------------------------------------------------------------

function readEnvFile(file) {
  const env = {};
  if (!file) return env;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0 && !line.startsWith('#')) env[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return env;
}

function serve(opts) {
  const token = Buffer.from(readToken(opts.tokenFile));
  const baseEnv = {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: '/root',
    LANG: 'C.UTF-8',
    ...readEnvFile(opts.baseEnvFile),
  };
  const server = createServer((sock) => {
    let head = Buffer.alloc(0);
    let child;
    const onFrame = frameReader((type, payload) => {
      if (!child?.stdin) return;
      if (type === STDIN) child.stdin.write(payload);
      else if (type === STDIN_END) child.stdin.end();
    });
    sock.on('error', () => undefined);
    sock.on('data', (chunk) => {
      if (child !== undefined) return onFrame(chunk);
      head = Buffer.concat([head, chunk]);
      const nl = head.indexOf(10);
      if (nl < 0) {
        if (head.length > MAX_REQUEST) sock.destroy();
        return;
      }
      let req;
      try {
        req = JSON.parse(head.subarray(0, nl).toString());
      } catch {
        sock.end(frame(ERROR, 'request is not JSON'));
        return;
      }
      const got = Buffer.from(String(req.token ?? ''));
      if (got.length !== token.length || !timingSafeEqual(got, token)) {
        sock.end(frame(ERROR, 'bad token'));
        return;
      }
      if (req.op === 'ping') {
        child = null;
        const info = { uptime: Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]), pid: process.pid };
        sock.end(frame(EXIT, JSON.stringify({ code: 0, info })));
        return;
      }
      if (req.op !== 'exec' || !Array.isArray(req.argv) || !req.argv.length) {
        sock.end(frame(ERROR, `unknown request op ${JSON.stringify(req.op)}`));
        return;
      }
      child = runChild(sock, req, baseEnv);
      const rest = head.subarray(nl + 1);
      if (rest.length) onFrame(rest);
    });
  });
  server.listen(opts.port ?? 7000, opts.host ?? '0.0.0.0');
  for (const spec of opts.forward) forward(spec);
}

function runChild(sock, req, baseEnv) {
  let child;
  try {
    child = spawn(req.argv[0], req.argv.slice(1), {
      cwd: req.cwd || '/',
      env: { ...baseEnv, ...(req.env ?? {}) },
      stdio: [req.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      detached: true,
    });
  } catch (err) {
    sock.end(frame(ERROR, `cannot run ${req.argv[0]}: ${err.message}`));
    return null;
  }
  let done = false;
  let timedOut = false;
  const killGroup = (sig) => {
    try { process.kill(-child.pid, sig); } catch { /* gone */ }
  };
  const timer = req.timeoutSec > 0 ? setTimeout(() => {
    timedOut = true;
    killGroup('SIGTERM');
    setTimeout(() => killGroup('SIGKILL'), 5000).unref();
  }, req.timeoutSec * 1000) : undefined;
  child.stdout.on('data', (d) => sock.write(frame(STDOUT, d)));
  child.stderr.on('data', (d) => sock.write(frame(STDERR, d)));
  child.stdin?.on('error', () => undefined);
  child.on('error', (err) => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    sock.end(frame(ERROR, `cannot run ${req.argv[0]}: ${err.message}`));
  });
  child.on('close', (code, signal) => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    if (timedOut) sock.write(frame(STDERR, `vm-agent: ${req.argv[0]} killed after ${req.timeoutSec}s\n`));
    sock.end(frame(EXIT, JSON.stringify({ code: timedOut ? 124 : code, signal })));
  });
  // The client went away: the command goes too (its whole process group).
  sock.on('close', () => {
    if (done) return;
    killGroup('SIGTERM');
    setTimeout(() => killGroup('SIGKILL'), 5000).unref();
  });
  return child;
}

/** LISTEN_HOST:PORT=TARGET_HOST:PORT, e.g. 127.0.0.1:5000=10.0.2.100:5000. */
function forward(spec) {
  const m = /^([^:]+):(\d+)=([^:]+):(\d+)$/.exec(spec);
  if (!m) fail(`bad --forward ${spec} (want HOST:PORT=HOST:PORT)`);
  createServer((inSock) => {
    const out = connect(Number(m[4]), m[3]);
    inSock.pipe(out).pipe(inSock);
    inSock.on('error', () => out.destroy());
    out.on('error', () => inSock.destroy());
  }).listen(Number(m[2]), m[1]);
}

// ---- client (on this machine) --------------------------------------------------------

function request(opts, req, { onStdout, onStderr } = {}) {
  return new Promise((resolve) => {
    const sock = connect(opts.port, opts.host ?? '127.0.0.1');
    let result = { code: 255, error: 'connection closed before the command finished' };
    sock.on('connect', () => {
      sock.write(`${JSON.stringify(req)}\n`);
      if (req.stdin) {
        process.stdin.on('data', (d) => sock.write(frame(STDIN, d)));
        process.stdin.on('end', () => sock.write(frame(STDIN_END, Buffer.alloc(0))));
      }
    });
    sock.on('data', frameReader((type, payload) => {
      if (type === STDOUT) onStdout?.(payload);
      else if (type === STDERR) onStderr?.(payload);
      else if (type === EXIT) {
        const r = JSON.parse(payload.toString());
        result = { code: r.code ?? (r.signal ? 128 + signalNumber(r.signal) : 255), signal: r.signal, info: r.info };
      } else if (type === ERROR) result = { code: 255, error: payload.toString() };
    }));
    sock.on('error', (err) => { result = { code: 255, error: err.message }; });
    sock.on('close', () => {
      if (req.stdin) process.stdin.destroy();
      resolve(result);
    });
  });
}

function signalNumber(name) {
  return { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGTERM: 15 }[name] ?? 0;
}

async function runCmd(opts) {
  if (!opts.rest.length) fail('run: no command (run [options] -- CMD [ARG...])');
  if (!opts.port) fail('run: --port is required');
  const env = {};
  for (const kv of opts.env) {
    const eq = kv.indexOf('=');
    if (eq <= 0) fail(`--env ${kv}: want NAME=VALUE`);
    env[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  const r = await request(opts, {
    token: readToken(opts.tokenFile), op: 'exec', argv: opts.rest, cwd: opts.cwd, env,
    timeoutSec: opts.timeout, stdin: !!opts.stdin,
  }, { onStdout: (d) => process.stdout.write(d), onStderr: (d) => process.stderr.write(d) });
  if (r.error) process.stderr.write(`vm-agent: ${r.error}\n`);
  // Let stdout drain before leaving.
  process.stdout.write('', () => process.exit(r.code));
}

async function ping(opts) {
  if (!opts.port) fail('ping: --port is required');
  const r = await request(opts, { token: readToken(opts.tokenFile), op: 'ping' });
  if (r.error || r.code !== 0) {
    process.stderr.write(`vm-agent: no answer: ${r.error ?? `code ${r.code}`}\n`);
    process.exit(1);
  }
  process.stdout.write(`${JSON.stringify(r.info)}\n`);
}

function relay(opts) {
  const [host, port] = opts.rest;
  if (!host || !port) fail('relay HOST PORT');
  const sock = connect(Number(port), host);
  process.stdin.pipe(sock).pipe(process.stdout);
  sock.on('error', () => process.exit(1));
  sock.on('close', () => process.exit(0));
  process.stdin.on('end', () => sock.end());
}

const [cmd, ...argv] = process.argv.slice(2);
const opts = parseArgs(argv);
switch (cmd) {
  case 'serve': serve(opts); break;
  case 'run': await runCmd(opts); break;
  case 'ping': await ping(opts); break;
  case 'relay': relay(opts); break;
  default: fail('usage: vm-agent.mjs serve|run|ping|relay [options]');
}
