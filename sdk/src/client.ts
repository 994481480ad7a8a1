import { Agents } from './agents.js';
import { Transport, type BerthOptions } from './http.js';
import { Secrets, Sessions, Snapshots, Tasks, Usage, Webhooks } from './resources.js';

/**
 * The Berth API. `new Berth()` reads BERTH_URL and BERTH_API_KEY; `new Berth({ url, apiKey })`
 * takes them directly.
 */
export class Berth {
  readonly sessions: Sessions;
  readonly agents: Agents;
  readonly tasks: Tasks;
  readonly snapshots: Snapshots;
  readonly secrets: Secrets;
  readonly webhooks: Webhooks;
  readonly usage: Usage;
  /** The transport under the wrappers: retries, timeouts, typed errors (`request` reaches any route). */
  readonly transport: Transport;

  constructor(options: BerthOptions = {}) {
    this.transport = new Transport(options);
    this.sessions = new Sessions(this.transport);
    this.agents = new Agents(this.transport);
    this.tasks = new Tasks(this.transport);
    this.snapshots = new Snapshots(this.transport);
    this.secrets = new Secrets(this.transport);
    this.webhooks = new Webhooks(this.transport);
    this.usage = new Usage(this.transport);
  }
}
