package lifecycle

// ConsoleSession is a sign-in to the operator console (see
// [Service.Console]): the browser holds a random token in an HttpOnly
// cookie, and the Store keeps only the token's hash. The session acts with
// the API key it was opened with, under that key's scopes, until it
// expires or the key is revoked.
type ConsoleSession struct {
	// Hash is the SHA-256 of the session token.
	Hash []byte
	// KeyID is the ID of the API key the session was opened with.
	KeyID string
	// KeyHash is that key's hash, by which every request of the session
	// finds the key again (and finds it revoked).
	KeyHash []byte
	// CreatedAt is when the session was opened.
	CreatedAt Timestamp
	// ExpiresAt is when the session ends, whatever happens to its key.
	ExpiresAt Timestamp
}
