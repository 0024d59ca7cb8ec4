package lifecycle

import "time"

// IdempotencyScope identifies an idempotency key: the same key sent by
// another principal, to another route or about another resource is
// another key.
type IdempotencyScope struct {
	// PrincipalID is the caller's Principal.ID.
	PrincipalID string
	// Method and Route are the HTTP method and route pattern.
	Method string
	Route  string
	// ResourceID is the task or resource the request is about, or "".
	ResourceID string
	// Key is the Idempotency-Key header.
	Key string
}

// IdempotencyRecord is the Store's record of an idempotent request: first
// a reservation while the request runs, then its response.
type IdempotencyRecord struct {
	IdempotencyScope
	// Fingerprint is the SHA-256 of the request's method, route and
	// canonical body.
	Fingerprint []byte
	// Done says the request finished and StatusCode and Body hold its response.
	Done       bool
	StatusCode int
	Body       []byte
	// CreatedAt is when the key was first seen; ExpiresAt when the record
	// may be forgotten.
	CreatedAt time.Time
	ExpiresAt time.Time
	// LockedUntil is when a reservation that has not finished may be taken
	// over (its process is presumed dead).
	LockedUntil time.Time
}
