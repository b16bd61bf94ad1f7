/**
 * The Lua scripts of the Redis backend. Each change of a cluster is one
 * script, so it is atomic: it checks every limit before it writes anything,
 * applies the merge rules of PROTOCOL.md §2.3 (the same as the memory
 * backend's `Affiliate.merge`), gives the change the next revision of its
 * cluster and appends it to the cluster's change log (a stream whose entry
 * IDs are `0-<revision>`). Only Redis 7.0 commands, so Valkey runs them too.
 *
 * Keys of one cluster share the hash tag `{<clusterId>}` (see `keys.ts`).
 * Every script takes the same keys: the affiliates (a hash of records), their
 * next due times (a sorted set), the cluster's meta (a hash: revision, epoch
 * and the incarnation of Redis that started the epoch) and its change log; on
 * a single Redis also the instance-wide index of clusters by next due time
 * and the counts of affiliates and endpoints (see `bookkeeping.ts` for Redis
 * Cluster).
 *
 * An epoch is issued revisions by one incarnation of Redis only: a process
 * (its `run_id`, which every start from any file changes) serving one line
 * of data (its replication ID, which every promotion of a replica and every
 * full resync of a replica from another primary changes). A slot moved to
 * another node brings metas that name the node it left. A script that finds
 * the cluster's epoch started by another incarnation starts a new epoch
 * before it issues a revision, so revisions issued again after a loss of
 * writes never reuse the epoch of the ones lost. A Redis restart therefore
 * starts a new epoch for every cluster it changes, whether or not it lost
 * anything. Data loaded into a running process by hand (RESTORE, DEBUG
 * RELOAD) is not seen: restart Redis after a restore.
 *
 * Each log entry also holds its cause (`c`, see `ChangeCause`) and the facts
 * that explain it (`f`, JSON: `at`, `ttl`, `exp`, `left`, `n` endpoints, `ip`
 * the client's address in hex, `i` the instance that applied it).
 *
 * A record is `>dHH` (expiry, data length, endpoint count), the data, then
 * for each endpoint `>dH` (expiry, length) and its bytes; times are
 * milliseconds since the epoch, as the core's clock gives them.
 *
 * @since 0.1.0
 */

/** Redis's clock and identity, as every script that needs them reads them. */
const clockAndIdentity = `
-- Redis's clock, in milliseconds: the one every instance's holds are measured on.
local function nowMillis()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Drops the holds of the held set 'key' that have lapsed, and counts the rest.
local function heldNow(key)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', nowMillis())
  return redis.call('ZCARD', key)
end

-- This incarnation of Redis: its run_id (every start changes it) and its
-- replication ID (every promotion and every full resync changes it), 80
-- characters.
local function readIncarnation()
  local info = redis.call('INFO', 'server', 'replication')
  local run = string.find(info, 'run_id:', 1, true)
  local line = string.find(info, 'master_replid:', 1, true)
  return string.sub(info, run + 7, run + 46) .. string.sub(info, line + 14, line + 53)
end
`

/** Decoding and encoding of records, and the bookkeeping every change shares. */
const prelude = `${clockAndIdentity}
local A, X, M, S = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
-- The instance-wide index of clusters and the counts, given when they live on
-- the script's node (a single Redis). Under Redis Cluster they live in other
-- slots: the script reports what changed (see settled) and the instance
-- applies it.
local INDEX, COUNTS = KEYS[5], KEYS[6]
-- The clusters held without affiliates because some instance watches them,
-- by when their hold ends (Redis's clock, ms); they count toward the cap on
-- clusters as the index's do. Given on a single Redis, with the index.
local HELD = KEYS[7]
-- Where instances hear of each change of the cluster (sharded pub/sub, same slot).
local N = string.sub(A, 1, -2) .. 'n'
local counted = { affiliates = 0, endpoints = 0 }

local function decode(record)
  local exp, dlen, n, pos = struct.unpack('>dHH', record)
  local data = string.sub(record, pos, pos + dlen - 1)
  pos = pos + dlen
  local eps = {}
  for i = 1, n do
    local e, len, p = struct.unpack('>dH', record, pos)
    eps[i] = { d = string.sub(record, p, p + len - 1), e = e }
    pos = p + len
  end
  return { exp = exp, data = data, eps = eps }
end

local function encode(aff)
  local parts = { struct.pack('>dHH', aff.exp, #aff.data, #aff.eps), aff.data }
  for i, ep in ipairs(aff.eps) do
    parts[#parts + 1] = struct.pack('>dH', ep.e, #ep.d)
    parts[#parts + 1] = ep.d
  end
  return table.concat(parts)
end

-- When the sweeper must look at the affiliate again: the first millisecond
-- strictly past its own expiry (it goes then), or its earliest endpoint expiry
-- (an endpoint goes once that is reached). Never "now" for what stays, so a
-- sweep never finds the same affiliates due again.
local function due(aff)
  local at = math.floor(aff.exp) + 1
  for _, ep in ipairs(aff.eps) do if ep.e < at then at = ep.e end end
  return at
end

-- Scores keep every digit (Lua would print 14), counts skip zero (Lua prints -0).
local function score(x) return string.format('%.17g', x) end

-- Under Redis Cluster the cluster's meta also counts its endpoints (field
-- 'e', in the script's slot), so the instance-wide counts can be summed again
-- from the clusters' own keys when they drift.
local function count(field, n)
  if n ~= 0 then
    counted[field] = counted[field] + n
    if COUNTS then
      redis.call('HINCRBY', COUNTS, field, n)
    elseif field == 'endpoints' then
      redis.call('HINCRBY', M, 'e', n)
    end
  end
end

-- Whether an instance watches the cluster: its mirror listens to the channel.
local function watched()
  return redis.call('PUBSUB', 'SHARDNUMSUB', N)[2] > 0
end

-- Holds an empty cluster for 'lease' more milliseconds (at least); under
-- Redis Cluster the instance does it, told by the script's reply ('held': 1
-- to hold it, -1 when reindex let go of one that has affiliates again).
local held = 0
local function hold(cid, lease)
  held = 1
  if HELD then redis.call('ZADD', HELD, 'GT', nowMillis() + tonumber(lease), cid) end
end

-- The cluster's next due time in the index ('-1': no affiliates, not indexed).
-- A cluster with affiliates is in the index (one that was empty before,
-- 'wasEmpty', leaves the held set); one just emptied (when 'lease' is given)
-- is held while an instance watches it, so its watchers keep its place under
-- the cap, as in memory.
local function reindex(cid, lease, wasEmpty)
  local first = redis.call('ZRANGE', X, 0, 0, 'WITHSCORES')
  if INDEX then
    if first[2] then redis.call('ZADD', INDEX, first[2], cid) else redis.call('ZREM', INDEX, cid) end
  end
  if first[2] and wasEmpty then
    held = -1
    if HELD then redis.call('ZREM', HELD, cid) end
  end
  if lease and not first[2] and watched() then hold(cid, lease) end
  return first[2] or '-1'
end

-- Why one more cluster may not be made, or nil: on a single Redis the script
-- counts the clusters with affiliates and those held without, so watches and
-- changes arriving together cannot pass the cap ('LIMIT clusters'). Under
-- Redis Cluster they live in other slots: the instance reserves a place there
-- first (see reserve) and calls again with 'reserved' -1; until then the
-- answer is 'RESERVE place', having written nothing.
local function capRefusal(cid, maxClusters, reserved)
  if reserved == -1 then return nil end
  if not INDEX then return 'RESERVE place' end
  if redis.call('ZSCORE', INDEX, cid) or redis.call('ZSCORE', HELD, cid) then return nil end
  if redis.call('ZCARD', INDEX) + heldNow(HELD) >= maxClusters then return 'LIMIT clusters' end
  return nil
end

-- Every script that changes a cluster returns its result with what the
-- instance applies to the index, the held set and the counts under Redis
-- Cluster.
local function settled(result, due)
  return { result, counted.affiliates, counted.endpoints, due, held }
end

-- The incarnation of Redis an epoch's revisions come from, read once a script.
local incarnationOf
local function incarnation()
  incarnationOf = incarnationOf or readIncarnation()
  return incarnationOf
end

-- Starts a new epoch and log unless the cluster's epoch was started by this
-- incarnation. A cluster whose meta is gone (never made, expired, flushed or
-- lost with Redis's data) counts its revisions from 1 again; one whose epoch
-- another incarnation started (a restart from any file, a failover, a slot
-- moved here) keeps counting, under the new epoch. The epoch is the
-- instance's, with Redis's clock to the microsecond, so a cluster made again
-- by the same instance never reuses an epoch. Returns true for a new meta.
-- The epoch, once checked, is 'epochOf' for the rest of the script.
local epochOf
local function startEpoch(base)
  if epochOf then return false end
  local meta = redis.call('HMGET', M, 'epoch', 'inc')
  if meta[1] and meta[2] == incarnation() then
    epochOf = meta[1]
    return false
  end
  local now = redis.call('TIME')
  epochOf = base .. '.' .. string.format('%x%05x', tonumber(now[1]), tonumber(now[2]))
  redis.call('HSET', M, 'epoch', epochOf, 'inc', incarnation())
  redis.call('DEL', S)
  return not meta[1]
end

local function revision(epoch)
  startEpoch(epoch)
  return redis.call('HINCRBY', M, 'rev', 1)
end

-- Appends change 'rev' of affiliate 'aid' (its record, or nil when removed)
-- with its cause and facts (a table, see the header).
local function log(rev, maxlen, aid, record, cause, facts)
  local f = cjson.encode(facts)
  if record then
    redis.call('XADD', S, 'MAXLEN', '~', maxlen, '0-' .. rev, 'a', aid, 'r', record, 'c', cause, 'f', f)
  else
    redis.call('XADD', S, 'MAXLEN', '~', maxlen, '0-' .. rev, 'a', aid, 'c', cause, 'f', f)
  end
  redis.call('SPUBLISH', N, rev .. ' ' .. epochOf)
end

-- The facts of a change a call made: when, from which client, on which instance.
local function callFacts(at, ip, instance)
  local facts = { at = at, i = instance }
  if ip ~= '' then facts.ip = ip end
  return facts
end

-- A cluster without affiliates keeps its meta and log for a while (its
-- watchers' revisions stay valid); one with affiliates keeps them for good.
local function retain(retention)
  if redis.call('HLEN', A) == 0 then
    redis.call('PEXPIRE', M, retention)
    redis.call('PEXPIRE', S, retention)
  else
    redis.call('PERSIST', M)
    redis.call('PERSIST', S)
  end
end
`

/**
 * AffiliateUpdate. ARGV: cluster ID, affiliate ID, expiry, 1 when data is
 * given (non-empty), data, max affiliates, max endpoints, max clusters,
 * epoch for a new cluster, log length, retention of an empty cluster (ms),
 * -1 when a place under the cap was reserved (see capRefusal), the client's
 * address (hex, or empty), this instance, now (ms), then the endpoints.
 * Its result is the new revision (0 when nothing a watcher can see changed),
 * the cause, how long the previous expiry still had to run, the endpoints
 * added and the affiliate's expiry; or an error reply `LIMIT <which>` having
 * written nothing.
 *
 * @category models
 * @since 0.1.0
 */
export const update = `${prelude}
local cid, aid, exp = ARGV[1], ARGV[2], tonumber(ARGV[3])
local hasData, data = ARGV[4] == '1', ARGV[5]
local maxAffiliates, maxEndpoints, maxClusters = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local epoch, maxlen, retention, outside = ARGV[9], ARGV[10], ARGV[11], tonumber(ARGV[12])
local ip, instance, now = ARGV[13], ARGV[14], tonumber(ARGV[15])
local first = 16

local record = redis.call('HGET', A, aid)
local aff
local created, wasEmpty = false, false
if record then
  aff = decode(record)
else
  local count = redis.call('HLEN', A)
  wasEmpty = count == 0
  local refused = wasEmpty and capRefusal(cid, maxClusters, outside)
  if refused then return redis.error_reply(refused) end
  if count >= maxAffiliates then return redis.error_reply('LIMIT affiliates') end
  aff = { exp = -math.huge, data = '', eps = {} }
  created = true
end

local stored = {}
for i, ep in ipairs(aff.eps) do stored[ep.d] = i end
local added, seen = {}, {}
for i = first, #ARGV do
  local blob = ARGV[i]
  if not stored[blob] and not seen[blob] then
    seen[blob] = true
    added[#added + 1] = blob
  end
end
if #aff.eps + #added > maxEndpoints then return redis.error_reply('LIMIT endpoints') end

local changed = created
local left = aff.exp - now
local dataChanged = false
if hasData then
  if data ~= aff.data then
    aff.data = data
    changed = true
    dataChanged = true
  end
  aff.exp = exp
end
for i = first, #ARGV do
  local at = stored[ARGV[i]]
  if at and aff.eps[at].e < exp then aff.eps[at].e = exp end
end
for _, blob in ipairs(added) do
  aff.eps[#aff.eps + 1] = { d = blob, e = exp }
  changed = true
end
if aff.exp < exp then aff.exp = exp end

record = encode(aff)
redis.call('HSET', A, aid, record)
redis.call('ZADD', X, score(due(aff)), aid)
local nextDue = reindex(cid, nil, wasEmpty)
if created then count('affiliates', 1) end
count('endpoints', #added)
local cause = created and 'created' or dataChanged and 'data_changed' or changed and 'endpoints_added' or 'ttl_refreshed'
if created then left = 0 end
if not changed then return settled({ 0, cause, left, 0, aff.exp }, nextDue) end
local rev = revision(epoch)
local facts = callFacts(now, ip, instance)
facts.ttl = exp - now
facts.exp = aff.exp
if not created then facts.left = left end
if #added > 0 then facts.n = #added end
log(rev, maxlen, aid, record, cause, facts)
-- a cluster with affiliates before keeps its meta and log for good already
if wasEmpty then retain(retention) end
return settled({ rev, cause, left, #added, aff.exp }, nextDue)
`

/**
 * AffiliateDelete. ARGV: cluster ID, affiliate ID, epoch for a new cluster,
 * log length, retention of an empty cluster (ms), lease of a watched empty
 * cluster (ms), the client's address (hex, or empty), this instance, now
 * (ms). Its result is the new revision (0 when the affiliate did not exist),
 * the affiliate's expiry, and 1 when the cluster is left with no affiliate
 * and no watcher.
 *
 * @category models
 * @since 0.1.0
 */
export const remove = `${prelude}
local cid, aid, epoch, maxlen, retention, lease = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local ip, instance, now = ARGV[7], ARGV[8], tonumber(ARGV[9])
local record = redis.call('HGET', A, aid)
if not record then return settled({ 0, 0, 0 }, reindex(cid)) end
local aff = decode(record)
redis.call('HDEL', A, aid)
redis.call('ZREM', X, aid)
local nextDue = reindex(cid, lease)
count('affiliates', -1)
count('endpoints', -#aff.eps)
local rev = revision(epoch)
local facts = callFacts(now, ip, instance)
facts.exp = aff.exp
facts.left = aff.exp - now
log(rev, maxlen, aid, nil, 'deleted', facts)
retain(retention)
local dropped = (redis.call('HLEN', A) == 0 and not watched()) and 1 or 0
return settled({ rev, aff.exp, dropped }, nextDue)
`

/**
 * The snapshot a watch starts from, in one step: revision, epoch, then the
 * affiliates as ID and record pairs. A cluster without meta gets it (revision
 * 0, this epoch), so the revisions its watchers count from stay valid; while
 * it has no affiliates its meta and log live for the lease, which the
 * instances that watch it renew (see `renewHeld`), so watches alone leave
 * nothing behind. Watching a cluster that does not exist fails as creating
 * one would when the cap on clusters is reached. ARGV: epoch for a new
 * cluster, lease of a watched empty cluster (ms), cluster ID, max clusters,
 * -1 when a place under the cap was reserved (see capRefusal).
 *
 * @category models
 * @since 0.1.0
 */
export const snapshot = `${prelude}
local cid, lease, maxClusters, outside = ARGV[3], ARGV[2], tonumber(ARGV[4]), tonumber(ARGV[5])
local empty = redis.call('HLEN', A) == 0
local refused = empty and capRefusal(cid, maxClusters, outside)
if refused then return redis.error_reply(refused) end
local created = startEpoch(ARGV[1])
redis.call('HSETNX', M, 'rev', 0)
if empty then
  redis.call('PEXPIRE', M, lease, created and 'NX' or 'GT')
  redis.call('PEXPIRE', S, lease, 'GT')
  hold(cid, lease)
end
local meta = redis.call('HMGET', M, 'rev', 'epoch')
return { meta[1], meta[2], redis.call('HGETALL', A) }
`

/**
 * One sweep of a cluster at `now`: removes the affiliates whose expiry is
 * strictly past and the endpoints whose expiry is reached, at most `limit`
 * affiliates, each change logged once. Several instances may sweep the same
 * cluster at once: each looks again inside the script, so an expiry is
 * applied and announced exactly once. ARGV: cluster ID, now, limit, epoch
 * for a new cluster, log length, retention of an empty cluster (ms), lease
 * of a watched empty cluster (ms), this instance.
 * Its result is removed and trimmed affiliates, 1 when more may be due,
 * 1 when the sweep removed the cluster's last affiliate and no instance
 * watches it, and each change as
 * affiliate ID, cause, revision, the expiry reached and the endpoints removed.
 *
 * @category models
 * @since 0.1.0
 */
export const sweep = `${prelude}
local cid, now, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local epoch, maxlen, retention, lease, instance = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local ids = redis.call('ZRANGE', X, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
local removed, trimmed = 0, 0
local changes = {}
local function expired(aid, cause, exp, n)
  local rev = revision(epoch)
  local facts = { at = now, i = instance, exp = exp }
  if n > 0 then facts.n = n end
  changes[#changes + 1] = aid
  changes[#changes + 1] = cause
  changes[#changes + 1] = rev
  changes[#changes + 1] = exp
  changes[#changes + 1] = n
  return rev, facts
end
for _, aid in ipairs(ids) do
  local record = redis.call('HGET', A, aid)
  if not record then
    redis.call('ZREM', X, aid)
  else
    local aff = decode(record)
    if aff.exp < now then
      redis.call('HDEL', A, aid)
      redis.call('ZREM', X, aid)
      count('affiliates', -1)
      count('endpoints', -#aff.eps)
      local rev, facts = expired(aid, 'affiliate_expired', aff.exp, #aff.eps)
      log(rev, maxlen, aid, nil, 'affiliate_expired', facts)
      removed = removed + 1
    else
      local kept = {}
      local last = 0
      for _, ep in ipairs(aff.eps) do
        if ep.e > now then kept[#kept + 1] = ep elseif ep.e > last then last = ep.e end
      end
      if #kept < #aff.eps then
        local gone = #aff.eps - #kept
        count('endpoints', -gone)
        aff.eps = kept
        record = encode(aff)
        redis.call('HSET', A, aid, record)
        local rev, facts = expired(aid, 'endpoint_expired', last, gone)
        log(rev, maxlen, aid, record, 'endpoint_expired', facts)
        trimmed = trimmed + 1
      end
      redis.call('ZADD', X, score(due(aff)), aid)
    end
  end
end
local nextDue = reindex(cid, removed > 0 and lease or nil)
if removed + trimmed > 0 then retain(retention) end
-- an emptied cluster some instance still watches stays held: it is dropped when its last watcher leaves
local emptied = (removed > 0 and redis.call('HLEN', A) == 0 and not watched()) and 1 or 0
return settled({ removed, trimmed, #ids == limit and 1 or 0, emptied, changes }, nextDue)
`

/**
 * Puts a cluster read from a snapshot file into Redis, unless Redis already
 * holds affiliates of it (then it returns -1 and writes nothing, as the
 * memory backend skips a cluster it holds). Each affiliate is one logged
 * change, so a watcher of the empty cluster sees them arrive. ARGV: cluster
 * ID, epoch for a new cluster, log length, retention of an empty cluster
 * (ms), max clusters, -1 when a place under the cap was reserved (see capRefusal),
 * then affiliate ID and record pairs. Its result is the affiliates restored.
 *
 * @category models
 * @since 0.1.0
 */
export const restore = `${prelude}
local cid, epoch, maxlen, retention = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local maxClusters, outside = tonumber(ARGV[5]), tonumber(ARGV[6])
if redis.call('HLEN', A) > 0 then return settled(-1, reindex(cid)) end
local refused = capRefusal(cid, maxClusters, outside)
if refused then return redis.error_reply(refused) end
local restored = 0
for i = 7, #ARGV - 1, 2 do
  local aid, record = ARGV[i], ARGV[i + 1]
  local aff = decode(record)
  redis.call('HSET', A, aid, record)
  redis.call('ZADD', X, score(due(aff)), aid)
  count('affiliates', 1)
  count('endpoints', #aff.eps)
  local facts = { at = nowMillis(), exp = aff.exp }
  if #aff.eps > 0 then facts.n = #aff.eps end
  log(revision(epoch), maxlen, aid, record, 'created', facts)
  restored = restored + 1
end
local nextDue = reindex(cid, nil, true)
retain(retention)
return settled(restored, nextDue)
`

/**
 * Reads a cluster's change log with the epoch it belongs to, in one step, so
 * a reader never takes changes of a new sequence for its own. KEYS: the
 * cluster's meta and log. ARGV: first and last entry IDs, most entries. Its
 * result is the epoch and the entries; the epoch is empty when the meta is
 * gone, or when another incarnation of Redis started it (the next change
 * starts a new epoch: whoever follows the cluster starts again from a
 * snapshot).
 *
 * @category models
 * @since 0.1.0
 */
export const readLog = `${clockAndIdentity}
local meta = redis.call('HMGET', KEYS[1], 'epoch', 'inc')
if not meta[1] or meta[2] ~= readIncarnation() then return { '', {} } end
return { meta[1], redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[2], 'COUNT', ARGV[3]) }
`

/**
 * A cluster's last changes, newest first, with the epoch they belong to, in
 * one step (as `readLog`). KEYS: the cluster's meta and log. ARGV: most
 * entries. Its result is the epoch (empty when the meta is gone or another
 * incarnation of Redis started it) and the entries.
 *
 * @category models
 * @since 0.1.0
 */
export const readHistory = `${clockAndIdentity}
local meta = redis.call('HMGET', KEYS[1], 'epoch', 'inc')
if not meta[1] or meta[2] ~= readIncarnation() then return { '', {} } end
return { meta[1], redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', ARGV[1]) }
`

/**
 * Holds a watched cluster that has no affiliates for `lease` more
 * milliseconds: its meta and log live at least that long, and it counts
 * toward the cap on clusters (in the held set, on a single Redis); a cluster
 * that has affiliates is left alone (it is in the index, and its meta has no
 * expiry). KEYS: the cluster's keys (with the index, counts and held set on a
 * single Redis). ARGV: cluster ID, the lease (ms). Its result is 1 when the
 * cluster was held.
 *
 * @category models
 * @since 0.1.0
 */
export const renewHeld = `${prelude}
if redis.call('HLEN', A) > 0 then return 0 end
redis.call('PEXPIRE', M, ARGV[2], 'GT')
redis.call('PEXPIRE', S, ARGV[2], 'GT')
hold(ARGV[1], ARGV[2])
return 1
`

/**
 * Under Redis Cluster, reserves a place under the cap on clusters for a
 * cluster about to be made or watched empty, where the index and the held set
 * live (one slot: the held set's key carries the index's name as its hash
 * tag): a cluster already indexed or held has one; another is held for the
 * lease when fewer than the cap are counted. KEYS: the index and the held
 * set. ARGV: cluster ID, max clusters, lease (ms). Its result is 1 when the
 * cluster has its place, 0 when the cap is reached.
 *
 * @category models
 * @since 0.1.0
 */
export const reserve = `${clockAndIdentity}
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 1 end
if redis.call('ZCARD', KEYS[1]) + heldNow(KEYS[2]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[2], nowMillis() + tonumber(ARGV[3]), ARGV[1])
return 1
`

/**
 * Lets go of a cluster this instance stopped watching: when it has no
 * affiliates and no instance listens to its channel any more, it leaves the
 * held set (its meta and log stay for the rest of their lease, so watchers
 * that come back soon resume). KEYS: the cluster's keys (with the index,
 * counts and held set on a single Redis). ARGV: cluster ID. Its result is 1
 * when the cluster is no longer held.
 *
 * @category models
 * @since 0.1.0
 */
export const release = `${prelude}
if redis.call('HLEN', A) > 0 or watched() then return 0 end
if HELD then redis.call('ZREM', HELD, ARGV[1]) end
return 1
`

/**
 * The clusters held now: those with affiliates (the index) and those held
 * without (the held set, once what has lapsed is dropped). KEYS: the index
 * and the held set.
 *
 * @category models
 * @since 0.1.0
 */
export const countClusters = `${clockAndIdentity}
return redis.call('ZCARD', KEYS[1]) + heldNow(KEYS[2])
`

/**
 * What an instance checks every second, in one step: the incarnation of
 * Redis (run_id and replication ID) and the dataset's marker, a random value
 * written when missing, so a restart, a failover and a flush each show as a
 * change; with
 * the index, counts and held set on this node, also the clusters held (with
 * affiliates, and without them once what has lapsed is dropped) and the
 * counts of affiliates and endpoints. KEYS: the marker, then (a single Redis)
 * the index, the counts and the held set. ARGV: a value for the marker if it
 * is missing.
 *
 * @category models
 * @since 0.1.0
 */
export const probe = `${clockAndIdentity}
local marker = redis.call('GET', KEYS[1])
if not marker then
  redis.call('SET', KEYS[1], ARGV[1])
  marker = ARGV[1]
end
local incarnation = readIncarnation()
if not KEYS[2] then return { incarnation, marker } end
local counts = redis.call('HMGET', KEYS[3], 'affiliates', 'endpoints')
local clusters = redis.call('ZCARD', KEYS[2]) + heldNow(KEYS[4])
return { incarnation, marker, clusters, counts[1] or '0', counts[2] or '0' }
`
