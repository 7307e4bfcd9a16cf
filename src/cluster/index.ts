/**
 * Running several sleeve processes side by side: the rate limit shared through Redis,
 * catalogue changes announced through Redis, the watch that keeps each process's caches in
 * step (the database poll being the safety net), and the registry through which catalogue
 * commands wait until every serving process shows their change (freshness.ts).
 */
export { CacheFreshness, type FollowingCache, type Freshness, type FreshnessEvent } from './cache-freshness.js';
export { CatalogueWatch, type CatalogueWatchOptions } from './catalogue-watch.js';
export { ServingRegistration } from './registry.js';
export { CatalogueNotifications, type NotificationHandlers } from './notifications.js';
export { RedisConnection, describeRedis, type Log } from './redis.js';
export { SharedRateLimiter } from './shared-rate-limit.js';
export { SharedClaims } from './shared-claims.js';
