/**
 * Running several sleeve processes side by side: the rate limit shared through Redis,
 * catalogue changes announced through Redis, and the watch that keeps each process's
 * response cache in step (the database poll being the safety net).
 */
export { CatalogueWatch, type CatalogueWatchOptions, type ChangeFollower } from './catalogue-watch.js';
export { ServingRegistration } from './registry.js';
export { CatalogueNotifications, type NotificationHandlers } from './notifications.js';
export { RedisConnection, describeRedis, type Log } from './redis.js';
export { SharedRateLimiter } from './shared-rate-limit.js';
