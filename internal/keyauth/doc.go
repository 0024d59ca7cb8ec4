// Package keyauth authenticates the Service's own API keys: it keeps the
// known keys of the Store in memory, limits the failed authentications of
// clients presenting keys it does not know, and holds the rules of which
// role may grant or revoke which keys. Package lifecycle builds Principals
// from what it returns; this package imports only lifecycletype and leaf
// helpers.
//
// The known keys. The table of API keys is small, so [Keys] keeps it whole
// in memory, by hash: every key of the Store, valid or revoked, read with
// one ListAPIKeys when the copy is older than its TTL (and by
// [Keys.ReadAll], which the Service's revocation watcher calls every
// Config.KeyCacheTTL/2 while the Service runs), and
// kept current at once for the keys created ([Keys.Learn]) and revoked
// ([Keys.Forget]) through this process. A known key is answered from
// memory while its copy is younger than the TTL, and read again by its
// hash otherwise (or always, when the cache is disabled), without the
// limiter: a valid key is never refused for its address's failures.
//
// Only a key the process does not know goes through the [Limiter] of
// failed authentications: it may cost a read by its hash (a key created
// through another process a moment ago is found so) when its client, its
// network (IPv4 /24, IPv6 /48) and the process-wide budget of reads allow;
// otherwise it may ask for the keys to be read whole again, at most once
// a second (reloadSpacing) for the whole process, and is answered 429 if
// that does not find it.
package keyauth
