import { catalogueChannel } from './notify.js';
import { RedisConnection, type Log } from './redis.js';

export interface NotificationHandlers {
  /** A change was announced; `version` is the catalogue version it committed, when given. */
  changed(version: number | undefined): void;
  /** The subscription started (true) or was lost (false): announcements may have been missed in between. */
  subscribed(active: boolean): void;
}

/** How often a subscribed connection is checked with PING (a silent network loss shows no other way). */
const HEARTBEAT_MS = 2000;

/**
 * A serving process's subscription to catalogue changes on Redis. It subscribes on every
 * (re)connection and reports when the subscription is active, so the process knows when
 * it may rely on announcements and when it must fall back to polling the database.
 */
export class CatalogueNotifications {
  private readonly conn: RedisConnection;
  private readonly channel: string;
  private readonly handlers: NotificationHandlers;
  private active = false;
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(url: string, handlers: NotificationHandlers) {
    this.conn = new RedisConnection(url, 'notifications', 'cached answers now follow the database poll (SLEEVE_CHANGE_POLL_MS)');
    this.channel = catalogueChannel(url);
    this.handlers = handlers;
  }

  start(log: Log): void {
    const client = this.conn.client;
    client.on('message', (channel: string, text: string) => {
      if (channel !== this.channel) return;
      const version = /^\d{1,15}$/.test(text) ? Number(text) : undefined;
      this.handlers.changed(version);
    });
    this.conn.onChange((usable) => {
      if (!usable) return this.setActive(false);
      client.subscribe(this.channel).then(
        () => this.setActive(this.conn.usable),
        (err: unknown) => this.conn.failed(err),
      );
    });
    this.heartbeat = setInterval(() => {
      if (!this.active) return;
      // A connection that does not answer is dropped and made again (and subscribed again).
      client.ping().catch(() => client.disconnect(true));
    }, HEARTBEAT_MS);
    this.heartbeat.unref();
    this.conn.start(log);
  }

  /** Whether announcements arrive now. */
  get subscribed(): boolean {
    return this.active;
  }

  private setActive(active: boolean): void {
    if (active === this.active) return;
    this.active = active;
    this.handlers.subscribed(active);
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    await this.conn.close();
  }
}
