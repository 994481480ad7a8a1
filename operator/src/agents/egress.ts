import { resolveSecrets, type Queryable, type Resource, type ResourceStore, type SandboxEgress, type SecretBox } from '@berth/common';

/** The values of the secrets named `names` (default those the agent names for its environment), of its organization and session. */
export type AgentSecrets = (agent: Resource<'Agent'>, names?: string[]) => Promise<Record<string, string>>;

export function agentSecrets(db: Queryable, box: SecretBox): AgentSecrets {
  return (agent, names = agent.spec.secrets ?? []) =>
    resolveSecrets(db, box, { organizationId: agent.spec.organizationId, mode: agent.spec.mode, sessionId: agent.spec.sessionId }, names);
}

/**
 * The agent's egress policy as its provider enforces it: the credentials with their secrets'
 * values (one deleted since is left out: its requests go without it). The agent must have one.
 */
export async function sandboxEgressOf(agent: Resource<'Agent'>, secrets?: AgentSecrets): Promise<SandboxEgress> {
  const { hosts, cidrs, credentials } = agent.spec.egress!;
  const names = [...new Set(credentials.map((credential) => credential.secret))];
  const values = names.length > 0 && secrets ? await secrets(agent, names) : {};
  return {
    hosts,
    cidrs,
    credentials: credentials.flatMap((credential) => {
      const value = values[credential.secret];
      return value === undefined ? [] : [{ host: credential.host, header: credential.header, value: `${credential.prefix}${value}` }];
    }),
  };
}

/**
 * The egress gateway's source of policies (ADR 52): the Agent's spec as the store has it now, on
 * any replica, leader or not; none for an agent that is gone, ending, or has no policy.
 */
export function egressPolicySource(store: ResourceStore, secrets?: AgentSecrets): (agentName: string) => Promise<SandboxEgress | undefined> {
  return async (agentName) => {
    const agent = await store.get('Agent', agentName);
    if (!agent?.spec.egress || agent.spec.desiredState === 'terminated') return undefined;
    return sandboxEgressOf(agent, secrets);
  };
}
