// Package httpapi holds the HTTP plumbing of the lifecycle's API that is
// not about any one command: the one table that maps errors to statuses
// and codes, and the error envelope it writes (ErrorBody); writing JSON
// answers; reading and strictly decoding request bodies within their
// limits, into *lifecycletype.ValidationError listing every invalid
// field; the trace ID a request carries in its context; and the hint a
// request no route matched gets when the API is mounted under a prefix
// that was not stripped (MountHint, UnmountedPath).
//
// The routes, the authentication of requests and each command's handler
// stay in package lifecycle, which imports this package; this package
// imports lifecycletype and never the root.
package httpapi
