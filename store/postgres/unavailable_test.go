package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable tells PostgreSQL's failures that may pass from the others,
// without a database: a timeout of the caller's context, or a failure of
// another host's HTTP request that reached the Service beside a Store
// call, is not the database's.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection reset", fmt.Errorf("query: %w", reset), true},
		{"i/o timeout", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("i/o timeout")}, true},
		{"connection refused", syscall.ECONNREFUSED, true},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"disk full", &pgconn.PgError{Code: "53100"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false},
		{"the caller's deadline", fmt.Errorf("list tasks: %w", context.DeadlineExceeded), false},
		{"the caller gave up", context.Canceled, false},
		{"a code host's request", &url.Error{Op: "Get", URL: "https://api.github.com/", Err: errors.New("tls: handshake failure")}, false},
		{"anything else", errors.New("boom"), false},
	}
	var s *Store
	for _, tt := range tests {
		if got := s.Unavailable(tt.err); got != tt.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}
