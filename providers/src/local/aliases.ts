/**
 * The second names of warm sandboxes (ADR 45): an agent whose sandbox came from a warm pool is
 * named by its agent id, which stands for the warm sandbox's id. Kept both ways, so that "which
 * agent holds this sandbox" (asked at every claim) is a lookup rather than a scan of every agent.
 */
export class SandboxAliases {
  private readonly byAgent = new Map<string, string>();
  private readonly bySandbox = new Map<string, Set<string>>();

  /** The warm sandbox the agent's id stands for, if any. */
  sandboxOf(agentId: string): string | undefined {
    return this.byAgent.get(agentId);
  }

  has(agentId: string): boolean {
    return this.byAgent.has(agentId);
  }

  /** An agent, other than `except`, whose id stands for the sandbox. */
  holderOf(sandboxId: string, except?: string): string | undefined {
    for (const agentId of this.bySandbox.get(sandboxId) ?? []) if (agentId !== except) return agentId;
    return undefined;
  }

  set(agentId: string, sandboxId: string): void {
    this.delete(agentId);
    this.byAgent.set(agentId, sandboxId);
    let holders = this.bySandbox.get(sandboxId);
    if (!holders) this.bySandbox.set(sandboxId, (holders = new Set()));
    holders.add(agentId);
  }

  delete(agentId: string): void {
    const sandboxId = this.byAgent.get(agentId);
    if (sandboxId === undefined) return;
    this.byAgent.delete(agentId);
    const holders = this.bySandbox.get(sandboxId)!;
    holders.delete(agentId);
    if (holders.size === 0) this.bySandbox.delete(sandboxId);
  }
}
