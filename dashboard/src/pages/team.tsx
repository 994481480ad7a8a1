import { useState } from 'preact/hooks';
import { api, formatTime, type Me } from '../api.js';
import { Code, ErrorNote, Loading, PageHeader, Table, useLoad, Empty } from '../ui.js';

interface Member {
  id: string;
  userId: string;
  role: 'owner' | 'admin' | 'member' | 'viewer';
  invitedAt: string;
  acceptedAt: string | null;
  pending: boolean;
  expiresAt: string | null;
}

const ASSIGNABLE = ['admin', 'member', 'viewer'] as const;

export function Team(props: { me: Me }) {
  const canManage = props.me.permissions.includes('team.manage');
  const loaded = useLoad(() => api<{ members: Member[]; currentUserId: string; currentRole: string }>('/api/team'), 'team');
  const [error, setError] = useState<Error | undefined>();

  async function act(work: () => Promise<unknown>) {
    setError(undefined);
    try {
      await work();
      loaded.reload();
    } catch (failure) {
      setError(failure as Error);
    }
  }

  function invite(event: Event) {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    void act(async () => {
      await api('/api/team', { method: 'POST', body: { userId: String(data.get('userId')).trim(), role: String(data.get('role')) } });
      form.reset();
    });
  }

  return (
    <>
      <PageHeader
        title="Team and roles"
        intro={
          <>
            Owners and admins manage keys, webhooks, providers and the team; members run agents and set secrets; viewers read. Your user id is{' '}
            <Code>{props.me.user.id}</Code>: share it to be invited elsewhere.
          </>
        }
      />
      {canManage && (
        <form class="inline-form" onSubmit={invite} aria-labelledby="invite-title">
          <h2 id="invite-title">Invite someone</h2>
          <label>
            Their user id <input name="userId" required pattern="usr_[a-z0-9]+" placeholder="usr_…" />
          </label>
          <label>
            Role{' '}
            <select name="role">
              {ASSIGNABLE.map((role) => (
                <option value={role}>{role}</option>
              ))}
            </select>
          </label>
          <button type="submit">Invite</button>
          <p class="hint">They sign in once to get a user id (shown on this page), then accept the invite here.</p>
        </form>
      )}
      <ErrorNote error={error} />
      <Loading loaded={loaded}>
        {() => {
          const { members, currentUserId } = loaded.data!;
          if (members.length <= 1 && !canManage)
            return (
              <Empty title="Just you so far">
                <p>Owners and admins invite people by their user id.</p>
              </Empty>
            );
          return (
            <Table caption="Members and invites" head={['User', 'Role', 'Joined', 'State', ...(canManage ? [''] : [])]}>
              {members.map((member) => (
                <tr>
                  <td>
                    <Code>{member.userId}</Code>
                    {member.userId === currentUserId ? ' (you)' : ''}
                  </td>
                  <td>
                    {canManage && member.role !== 'owner' && !member.pending ? (
                      <select
                        aria-label={`Role of ${member.userId}`}
                        value={member.role}
                        onChange={(event) => void act(() => api(`/api/team/${member.id}`, { method: 'PATCH', body: { role: (event.target as HTMLSelectElement).value } }))}
                      >
                        {ASSIGNABLE.map((role) => (
                          <option value={role}>{role}</option>
                        ))}
                      </select>
                    ) : (
                      member.role
                    )}
                  </td>
                  <td>{formatTime(member.acceptedAt ?? member.invitedAt)}</td>
                  <td>{member.pending ? `invited, expires ${formatTime(member.expiresAt)}` : 'member'}</td>
                  {canManage && (
                    <td>
                      {member.role !== 'owner' && (
                        <button
                          type="button"
                          class="danger"
                          aria-label={`Remove ${member.userId}`}
                          onClick={() => confirm(`Remove ${member.userId} from the organization?`) && void act(() => api(`/api/team/${member.id}`, { method: 'DELETE' }))}
                        >
                          Remove
                        </button>
                      )}
                    </td>
                  )}
                </tr>
              ))}
            </Table>
          );
        }}
      </Loading>
    </>
  );
}
