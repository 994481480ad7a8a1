/**
 * The node's NetworkPolicy enforcer: kube-network-policies (Kubernetes SIG Network), built by
 * build.sh, run as a host process beside the kubelet. It keeps an nftables table
 * (`inet kube-network-policies`) whose forward and postrouting chains hand each new connection
 * of a pod that a policy selects to its netfilter queue, where it decides by the policies. Pods
 * sit on the host bridge and br_netfilter passes bridged packets through these hooks, so gVisor
 * pods are held to it like any other: the policy applies outside the sandbox, on the host side
 * of the pod's veth.
 */
import { spawn, execFile } from 'node:child_process';
import { join } from 'node:path';
import { buildNodeBinaries, NODE_NAME } from './node.js';

export const NETPOL_TABLE = 'kube-network-policies';

export interface NetworkPolicyEnforcer {
  output(): string;
  stop(): Promise<void>;
}

function nft(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile('nft', args, (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr })),
  );
}

/**
 * Starts the enforcer against the cluster of `kubeconfig` for the real node, and resolves once
 * its nftables table exists (it writes it after its informers have synced). Host-wide: one at
 * a time per machine. stop() ends it and removes its table, because a table left behind would
 * queue packets to a queue nobody reads, and those are dropped.
 */
export async function startNetworkPolicyEnforcer(kubeconfig: string): Promise<NetworkPolicyEnforcer> {
  const binaries = await buildNodeBinaries(() => {});
  const child = spawn(
    join(binaries.dir, 'kube-network-policies'),
    [`--kubeconfig=${kubeconfig}`, `--hostname-override=${NODE_NAME}`, '--metrics-bind-address=127.0.0.1:0', '--v=2'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    }
    if ((await nft(['list', 'table', 'inet', NETPOL_TABLE])).code === 0) await nft(['delete', 'table', 'inet', NETPOL_TABLE]);
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop();
      throw new Error(`kube-network-policies exited at start:\n${output.slice(-3000)}`);
    }
    if ((await nft(['list', 'table', 'inet', NETPOL_TABLE])).code === 0) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`kube-network-policies wrote no nftables table within 60 s:\n${output.slice(-3000)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { output: () => output, stop };
}
