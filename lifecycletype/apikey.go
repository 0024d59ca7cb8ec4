package lifecycletype

import (
	"slices"
)

// Scope is a permission an API key grants.
type Scope string

// The scopes; docs/api.md lists what each grants.
const (
	ScopeTasksRead     Scope = "tasks:read"     // read tasks, CI status, review feedback, ship operations
	ScopeTasksWrite    Scope = "tasks:write"    // submit, start, record and resolve blockers
	ScopeShipWrite     Scope = "ship:write"     // ship a task
	ScopeEventsRead    Scope = "events:read"    // open the event stream
	ScopeWebhooksRead  Scope = "webhooks:read"  // list subscriptions and deliveries
	ScopeWebhooksWrite Scope = "webhooks:write" // create, delete, replay, retry and enable subscriptions
	ScopeTasksAdmin    Scope = "tasks:admin"    // create and cancel tasks
	ScopeReviewsWrite  Scope = "reviews:write"  // post reviews
	ScopeCIWrite       Scope = "ci:write"       // report CI checks
	ScopeKeysAdmin     Scope = "keys:admin"     // manage API keys
)

// Scopes returns every scope.
func Scopes() []Scope { return slices.Clone(allScopes) }

var allScopes = []Scope{
	ScopeTasksRead, ScopeTasksWrite, ScopeShipWrite, ScopeEventsRead,
	ScopeWebhooksRead, ScopeWebhooksWrite, ScopeTasksAdmin, ScopeReviewsWrite,
	ScopeCIWrite, ScopeKeysAdmin,
}

// Valid reports whether s is one of the scopes.
func (s Scope) Valid() bool { return slices.Contains(allScopes, s) }

// APIKey is an API key record. The plaintext key is shown once, when the
// key is created; the Store keeps only its SHA-256 hash.
type APIKey struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Scopes    []Scope    `json:"scopes"`
	Actor     Actor      `json:"actor"`
	CreatedAt Timestamp  `json:"createdAt"`
	RevokedAt *Timestamp `json:"revokedAt"`

	// Hash is the SHA-256 of the plaintext key.
	Hash []byte `json:"-"`
}
